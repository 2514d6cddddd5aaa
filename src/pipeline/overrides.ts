/**
 * Parameter overrides: `<template>.sidecar-injector.io/<parameter>: value` on the namespace sets
 * the namespace's default, the same annotation on the pod sets the pod's; precedence pod >
 * namespace > template. Each value is read against the parameter's declaration
 * (templates/parameters.ts). A pod's bad override denies the pod, naming the annotation, the
 * value and the rule; a namespace's bad override is a warning, and the default applies. A
 * value that failed its declaration is never injected. Pure.
 */
import type { ParamValue } from '../templates/placeholders.js';
import { checkValue, type ParamDeclaration } from '../templates/parameters.js';
import type { Template } from '../templates/template.js';
import { quote } from '../quote.js';

/** The domain of override annotations: `<template>` + this + `<parameter>`. */
export const overrideDomain = '.sidecar-injector.io/';

/** The annotation key overriding `parameter` of `template`. */
export function overrideKey(template: string, parameter: string): string {
  return `${template}${overrideDomain}${parameter}`;
}

/** Where a parameter's value came from. */
export type ParamSource = 'template' | 'namespace' | 'pod';

/** A template's parameters for one pod. */
export interface ResolvedParameters {
  /** The values that differ from the template's (what render needs); undefined when none. */
  readonly overrides?: Readonly<Record<string, ParamValue>>;
  /** Every declared parameter with its value and source, for --explain. */
  readonly explained: readonly { readonly name: string; readonly value: ParamValue; readonly source: ParamSource }[];
  readonly warnings: readonly string[];
  /** Set when the pod's own annotation is refused: the sentence of the denial. */
  readonly denial?: string;
}

const rule = (declaration: ParamDeclaration) =>
  declaration.override === 'none'
    ? 'it cannot be overridden'
    : `only a ${declaration.override === 'namespace' ? 'namespace' : 'pod or namespace'} may override it`;

/**
 * The override annotations among `annotations` (keys with the override domain), by template
 * name: one pass over the map, and nothing at all for a pod without any.
 */
export function overridesByTemplate(annotations: Readonly<Record<string, string>>): Map<string, Map<string, string>> {
  const out = new Map<string, Map<string, string>>();
  for (const key in annotations) {
    const at = key.indexOf(overrideDomain);
    if (at <= 0) continue;
    const template = key.slice(0, at);
    let params = out.get(template);
    if (!params) out.set(template, (params = new Map()));
    params.set(key.slice(at + overrideDomain.length), annotations[key]!);
  }
  return out;
}

/** Resolves `template`'s parameters from the namespace's and the pod's override annotations. */
export function resolveParameters(
  template: Template,
  fromNamespace: ReadonlyMap<string, string> | undefined,
  fromPod: ReadonlyMap<string, string> | undefined,
): ResolvedParameters {
  if (template.declarations.size === 0 && !fromPod?.size && !fromNamespace?.size) return { explained: [], warnings: [] };
  const warnings: string[] = [];
  const overrides: Record<string, ParamValue> = Object.create(null);
  const sources = new Map<string, ParamSource>();
  // The pod first: any problem there refuses the pod before anything is decided.
  for (const [name, text] of fromPod ?? []) {
    const key = overrideKey(template.name, name);
    const declaration = template.declarations.get(name);
    if (!declaration) {
      const fixed = Object.hasOwn(template.params, name);
      return {
        explained: [],
        warnings,
        denial: `annotation ${quote(key, 120)}: template ${template.name} has ${fixed ? `parameter ${quote(name)} fixed; it cannot be overridden` : `no parameter ${quote(name, 60)}`} (overridable: ${[...template.overridable].filter((p) => template.declarations.get(p)!.override === 'pod').join(', ') || 'none'})`,
      };
    }
    if (declaration.override !== 'pod') return { explained: [], warnings, denial: `annotation ${quote(key)}: ${rule(declaration)}, not a pod` };
    const checked = checkValue(declaration, text);
    if ('problem' in checked) return { explained: [], warnings, denial: `annotation ${quote(key)}: value ${quote(text, 60)} ${checked.problem}` };
    overrides[name] = checked.value;
    sources.set(name, 'pod');
  }
  for (const [name, text] of fromNamespace ?? []) {
    if (sources.has(name)) continue;
    const key = overrideKey(template.name, name);
    const declaration = template.declarations.get(name);
    // kubectl cuts warnings at 120 characters: the annotation and the rule first.
    const refuse = (why: string) => warnings.push(`${key} on the namespace ignored: ${why}`);
    if (!declaration) refuse(`template ${template.name} has no overridable parameter ${quote(name, 60)}`);
    else if (declaration.override === 'none') refuse(rule(declaration));
    else {
      const checked = checkValue(declaration, text);
      if ('problem' in checked) refuse(`value ${quote(text, 60)} ${checked.problem}`);
      else {
        overrides[name] = checked.value;
        sources.set(name, 'namespace');
      }
    }
  }
  const explained = [...template.declarations.values()].map((d) => ({
    name: d.name,
    value: Object.hasOwn(overrides, d.name) ? overrides[d.name]! : d.default,
    source: sources.get(d.name) ?? ('template' as const),
  }));
  // Only values that differ from the template's: the same value renders the same pod.
  for (const name of Object.keys(overrides)) if (overrides[name] === template.params[name]) delete overrides[name];
  return { ...(Object.keys(overrides).length > 0 ? { overrides } : {}), explained, warnings };
}

/**
 * Where namespace labels come from. An AdmissionReview does not carry them, so the
 * injector asks a source. This module holds the interface and the local source (a file
 * and/or flags); the cluster source lives beside it when configured.
 */
import type { Labels } from '../k8s/selector.js';
import { isDns1123Label, labelKeyProblem, labelValueProblem } from '../k8s/label-syntax.js';
import { quote } from '../quote.js';

/** The label every namespace carries since Kubernetes 1.21; sources add it themselves. */
export const metadataNameLabel = 'kubernetes.io/metadata.name';

/** A source of namespace labels. */
export interface NamespaceLabelSource {
  /** Short name for logs and `serve`'s start-up line, e.g. `local`. */
  readonly kind: string;
  /** The labels of `namespace`; rejects only when they cannot be known. */
  labelsOf(namespace: string): Promise<Labels>;
  /** False until the source can answer (a cluster source before its first list). */
  isReady(): boolean;
  /** What /status shows about the source. */
  status(): object;
  /**
   * The namespace's parameter-override annotations (`<template>.sidecar-injector.io/<name>`),
   * and only those; a source without annotations has none. Called after `labelsOf` resolved.
   */
  overridesOf?(namespace: string): Readonly<Record<string, string>>;
  /**
   * True when the source knows `namespace` to exist (listed, watched or looked up); a source
   * that cannot tell has no such method. Review data names namespaces: only real ones may cost
   * the cluster a write (events).
   */
  exists?(namespace: string): boolean;
  /**
   * A number that changes whenever the namespace's labels or overrides do, for as long as the
   * source holds them (undefined when it does not: not yet looked up, or gone). What remembers
   * answers keys on it; a source without it has no answers remembered.
   */
  generationOf?(namespace: string): number | undefined;
}

/** True for an annotation key that overrides a template parameter (`<template>.sidecar-injector.io/<name>`). */
export function isOverrideAnnotation(key: string): boolean {
  return key.indexOf('.sidecar-injector.io/') > 0;
}

/** A namespace's override annotations, bounded: at most this many are kept, each value cut. */
export const maxNamespaceOverrides = 1000;

/** The override annotations among `annotations`, bounded in count and value length; null prototype. */
export function overrideAnnotations(annotations: unknown): Readonly<Record<string, string>> {
  const out: Record<string, string> = Object.create(null);
  if (annotations === null || typeof annotations !== 'object') return out;
  let count = 0;
  for (const [key, value] of Object.entries(annotations as Record<string, unknown>)) {
    if (!isOverrideAnnotation(key) || typeof value !== 'string') continue;
    if (++count > maxNamespaceOverrides) break;
    // Longer than any declaration accepts (1,024): kept recognisably too long, never whole.
    out[key] = value.length > 1025 ? value.slice(0, 1025) : value;
  }
  return out;
}

/** Namespace name → its labels, as written in a local namespace-labels file. */
export type NamespaceLabelMap = Readonly<Record<string, Labels>>;

/**
 * A fixed map of namespace labels, for local runs and offline previews, with the namespaces'
 * override annotations when given. A namespace not in the map has only
 * `kubernetes.io/metadata.name`, as a fresh namespace in a cluster does.
 */
export function createLocalNamespaceSource(
  map: NamespaceLabelMap,
  annotations: Readonly<Record<string, Readonly<Record<string, string>>>> = {},
): NamespaceLabelSource {
  const resolved = new Map<string, Labels>();
  for (const [namespace, labels] of Object.entries(map)) {
    resolved.set(namespace, Object.freeze({ ...labels, [metadataNameLabel]: namespace }));
  }
  const overrides = new Map<string, Readonly<Record<string, string>>>();
  for (const [namespace, map] of Object.entries(annotations)) overrides.set(namespace, overrideAnnotations(map));
  const none: Readonly<Record<string, string>> = Object.freeze(Object.create(null));
  return {
    kind: 'local',
    labelsOf: async (namespace) => resolved.get(namespace) ?? Object.freeze({ [metadataNameLabel]: namespace }),
    overridesOf: (namespace) => overrides.get(namespace) ?? none,
    // Fixed for the source's life.
    generationOf: () => 0,
    isReady: () => true,
    status: () => ({ source: 'local', ready: true, namespaces: resolved.size }),
  };
}

/**
 * Validates a parsed namespace-labels document (`{ namespace: { key: value } }`) and returns
 * it typed, or the list of problems found. Values must be strings, keys and values valid labels.
 */
export function parseNamespaceLabelMap(
  doc: unknown,
  origin: string,
): { map: Record<string, Record<string, string>>; annotations: Record<string, Record<string, string>>; problems: string[] } {
  // Null-prototype maps: names come from a file.
  const map: Record<string, Record<string, string>> = Object.create(null);
  const annotations: Record<string, Record<string, string>> = Object.create(null);
  const problems: string[] = [];
  if (doc === null || doc === undefined) return { map, annotations, problems };
  if (typeof doc !== 'object' || Array.isArray(doc)) {
    return { map, annotations, problems: [`${origin}: must be a map of namespace names to label maps`] };
  }
  for (const [namespace, entry] of Object.entries(doc as Record<string, unknown>)) {
    if (!isDns1123Label(namespace)) {
      problems.push(`${origin}: namespace ${quote(namespace)} is not a DNS-1123 label`);
      continue;
    }
    if (entry === null || typeof entry !== 'object' || Array.isArray(entry)) {
      problems.push(`${origin}: ${namespace}: must be a map of label keys to string values`);
      continue;
    }
    // Two forms: `{ key: value }` (labels only), or `{ labels: {…}, annotations: {…} }` (a label's value is never a map).
    const sections = entry as Record<string, unknown>;
    const structured = Object.values(sections).some((v) => v !== null && typeof v === 'object');
    let labels: unknown = entry;
    if (structured) {
      const extra = Object.keys(sections).filter((k) => k !== 'labels' && k !== 'annotations');
      if (extra.length > 0) problems.push(`${origin}: ${namespace}: expected labels and annotations (got ${quote(extra[0])})`);
      labels = sections.labels ?? {};
      const given = sections.annotations ?? {};
      if (given === null || typeof given !== 'object' || Array.isArray(given)) problems.push(`${origin}: ${namespace}: annotations must be a map`);
      else {
        const kept: Record<string, string> = Object.create(null);
        for (const [key, value] of Object.entries(given as Record<string, unknown>)) {
          const problem =
            labelKeyProblem(key) ?? (typeof value !== 'string' ? `annotation ${quote(key)} must have a string value (quote it in YAML)` : undefined);
          if (problem) problems.push(`${origin}: ${namespace}: ${problem}`);
          else kept[key] = value as string;
        }
        annotations[namespace] = kept;
      }
      if (labels === null || typeof labels !== 'object' || Array.isArray(labels)) {
        problems.push(`${origin}: ${namespace}: labels must be a map of label keys to string values`);
        continue;
      }
    }
    const labelsOut: Record<string, string> = Object.create(null);
    for (const [key, value] of Object.entries(labels as Record<string, unknown>)) {
      const problem =
        labelKeyProblem(key) ?? (typeof value !== 'string' ? `label ${quote(key)} must have a string value (quote it in YAML)` : labelValueProblem(value));
      if (problem) problems.push(`${origin}: ${namespace}: ${problem}`);
      else labelsOut[key] = value as string;
    }
    map[namespace] = labelsOut;
  }
  return { map, annotations, problems };
}

/**
 * Parses one `--namespace-label NAMESPACE:KEY=VALUE` flag. Returns the triple or a problem.
 */
export function parseNamespaceLabelFlag(flag: string): { namespace: string; key: string; value: string } | string {
  const colon = flag.indexOf(':');
  const eq = flag.indexOf('=', colon + 1);
  if (colon <= 0 || eq === -1) return `--namespace-label ${quote(flag)}: expected NAMESPACE:KEY=VALUE`;
  const namespace = flag.slice(0, colon);
  const key = flag.slice(colon + 1, eq);
  const value = flag.slice(eq + 1);
  const problem =
    (isDns1123Label(namespace) ? undefined : `namespace ${quote(namespace)} is not a DNS-1123 label`) ?? labelKeyProblem(key) ?? labelValueProblem(value);
  if (problem) return `--namespace-label ${quote(flag)}: ${problem}`;
  return { namespace, key, value };
}

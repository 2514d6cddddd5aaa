/** The set of templates in force: pure, built once per load or reload. */
import { TemplateError, type TemplateProblem } from '../errors.js';
import type { Template } from './template.js';
import type { Rollout } from './rollout.js';
import type { Selector } from '../k8s/selector.js';

/** A required template that is not served because its object fails a check, with what can be read of its scope. */
export interface RefusedRequired {
  /** The SidecarTemplate's name, and the template's. */
  readonly object: string;
  readonly template: string;
  /** On request only: it applies to the pods that name it. */
  readonly onRequest: boolean;
  /** Its selectors, when they can be read; undefined: unknown, so every pod in scope. */
  readonly namespaceSelector?: Selector;
  readonly objectSelector?: Selector;
  /** Its first problem, as `check` prints it. */
  readonly problem: string;
  /** What it says of a pod's opt-out label when it says warn or deny; absent: allow (the default, or unreadable). */
  readonly optOut?: 'warn' | 'deny';
}

/** The validated templates in force, sorted by name; immutable. */
export interface TemplateSet {
  readonly templates: readonly Template[];
  readonly byName: ReadonlyMap<string, Template>;
  /** Templates with a candidate or a previous revision (templates/rollout.ts), by name; absent when none has. */
  readonly rollouts?: ReadonlyMap<string, Rollout>;
  /**
   * Set while the templates in force cannot be known (the SidecarTemplates not yet read from the
   * API server), with why: admission refuses on the required webhook rather than guess.
   */
  readonly unavailable?: string;
  /**
   * Required templates whose SidecarTemplate the source refuses (it fails a check): admission
   * refuses the pods such a template may apply to, naming it, rather than admit them without it.
   */
  readonly refusedRequired?: readonly RefusedRequired[];
  /** The namespace of preflight probe pods, which get the candidate they name (templates/rollout.ts). */
  readonly probeNamespace?: string;
}

/** Builds a set from compiled templates; throws TemplateError when two share a name. */
export function createTemplateSet(templates: readonly Template[]): TemplateSet {
  const byName = new Map<string, Template>();
  const problems: TemplateProblem[] = [];
  for (const template of templates) {
    const other = byName.get(template.name);
    if (other) problems.push({ file: template.file, field: 'name', message: `template name ${JSON.stringify(template.name)} is also used by ${other.file}` });
    else byName.set(template.name, template);
  }
  if (problems.length > 0) throw new TemplateError(problems);
  const sorted = [...byName.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return Object.freeze({ templates: Object.freeze(sorted), byName });
}

/**
 * For a replica's /status: the templates of `set` the exported MutatingAdmissionPolicy delivers
 * (`delivery: policy`), when there are any. A template's revision does not say who delivers it.
 */
export function deliveredByPolicy(set: TemplateSet): { deliveredByPolicy?: readonly string[] } {
  const names = set.templates.filter((t) => t.delivery === 'policy').map((t) => t.name);
  return names.length > 0 ? { deliveredByPolicy: names } : {};
}

/**
 * Safe rollout of a template change: per template, the stable revision in force, a candidate
 * that a share of workloads gets, and the previous stable kept for a one-edit rollback. All
 * three are files of the templates directory; a candidate or a previous revision carries a
 * `rollout:` stanza, which is not part of its content (its hash, the revision, is that of the
 * template without it). Pure: which revision a pod gets depends only on its namespace, its
 * labels, its name (or generateName) and its controlling owner.
 */
import { createHash } from 'node:crypto';
import type { TemplateProblem } from '../errors.js';
import { SelectorError } from '../errors.js';
import { isJsonObject } from '../k8s/json.js';
import { isDns1123Label } from '../k8s/label-syntax.js';
import { matches, parseSelector, type Labels, type Selector } from '../k8s/selector.js';
import { controllingOwner } from '../k8s/object-reference.js';
import { labelsLookup, podTemplateHashLabel, workloadOfOwner } from '../k8s/owners.js';
import { quote } from '../quote.js';
import { createTemplateSet, type TemplateSet } from './set.js';
import type { Template } from './template.js';

/** `candidate`: in force for its share of workloads; `previous`: the stable revision before, not in force. */
export type RolloutRole = 'candidate' | 'previous';

/** A file's `rollout:` stanza, validated. */
export interface RolloutStanza {
  readonly role: RolloutRole;
  /** Percent of the eligible workloads that get the candidate, 0 to 100, in steps of 0.01. */
  readonly share: number;
  /** Only pods in these namespaces are eligible; undefined: every namespace. */
  readonly namespaces?: ReadonlySet<string>;
  /** Only pods whose labels match are eligible. @default everything */
  readonly podSelector: Selector;
}

/** One template's revisions: what `rollout status` shows and admission chooses from. */
export interface Rollout {
  readonly name: string;
  readonly stable: Template;
  readonly candidate?: Template;
  readonly previous?: Template;
  /** The candidate's stanza (share, selectors); undefined without a candidate. */
  readonly stanza?: RolloutStanza;
  /** Why the candidate takes no pod although its share says so (a failed preflight, a halt); undefined while it does. */
  readonly stopped?: string;
}

const stanzaFields = new Set(['role', 'share', 'namespaces', 'podSelector']);
const roles: readonly RolloutRole[] = ['candidate', 'previous'];
/** Buckets per workload: a share has two decimals. */
const buckets = 10_000;

/**
 * Takes the `rollout:` stanza off a template document: the rest is compiled as any template
 * (so the revision hash is the content's alone). Problems name `rollout.<field>`.
 */
export function splitRollout(doc: unknown, file: string): { doc: unknown; stanza?: RolloutStanza; problems: TemplateProblem[] } {
  if (!isJsonObject(doc) || !Object.hasOwn(doc, 'rollout')) return { doc, problems: [] };
  const { rollout: raw, ...rest } = doc;
  const problems: TemplateProblem[] = [];
  const problem = (field: string, message: string) => problems.push({ file, field: field ? `rollout.${field}` : 'rollout', message });
  if (!isJsonObject(raw)) {
    problem('', 'must be a map with role (candidate or previous) and, for a candidate, share');
    return { doc: rest, problems };
  }
  for (const key of Object.keys(raw)) if (!stanzaFields.has(key)) problem(key, `unknown field ${quote(key)} (expected ${[...stanzaFields].join(', ')})`);
  const role = raw.role;
  if (typeof role !== 'string' || !(roles as readonly string[]).includes(role)) problem('role', `must be one of ${roles.join(', ')}`);
  let share = 0;
  if (role === 'candidate') {
    if (typeof raw.share !== 'number' || !Number.isFinite(raw.share) || raw.share < 0 || raw.share > 100)
      problem('share', 'a candidate needs share: a percentage of workloads from 0 to 100');
    else if (Math.round(raw.share * 100) !== raw.share * 100) problem('share', 'at most two decimals (workloads are bucketed in hundredths of a percent)');
    else share = raw.share;
  } else if (raw.share !== undefined || raw.namespaces !== undefined || raw.podSelector !== undefined) {
    problem('', 'share, namespaces and podSelector belong to a candidate; a previous revision takes no pod');
  }
  let namespaces: Set<string> | undefined;
  if (raw.namespaces !== undefined) {
    if (!Array.isArray(raw.namespaces) || raw.namespaces.length === 0) problem('namespaces', 'must be a non-empty list of namespace names');
    else {
      namespaces = new Set();
      raw.namespaces.forEach((ns, i) => {
        if (typeof ns === 'string' && isDns1123Label(ns)) namespaces!.add(ns);
        else problem(`namespaces[${i}]`, 'must be a namespace name (a DNS-1123 label)');
      });
    }
  }
  let podSelector: Selector = parseSelector(undefined);
  try {
    podSelector = parseSelector(raw.podSelector);
  } catch (err) {
    if (!(err instanceof SelectorError)) throw err;
    problem(err.field ? `podSelector.${err.field}` : 'podSelector', err.message);
  }
  if (problems.length > 0) return { doc: rest, problems };
  return { doc: rest, stanza: { role: role as RolloutRole, share, ...(namespaces ? { namespaces } : {}), podSelector }, problems };
}

/** A compiled template file with its stanza, if any. */
export interface RevisionFile {
  readonly template: Template;
  readonly stanza?: RolloutStanza;
}

/**
 * The set in force for pods outside every candidate (the stable revisions), with each
 * template's revisions. Throws TemplateError (as createTemplateSet) on two files of one role
 * for one name, or a candidate or previous revision without a stable one.
 */
export function createRevisionSet(files: readonly RevisionFile[]): { set: TemplateSet; problems: TemplateProblem[] } {
  const stable: Template[] = [];
  const others = new Map<string, { candidate?: RevisionFile; previous?: RevisionFile }>();
  const problems: TemplateProblem[] = [];
  for (const file of files) {
    if (!file.stanza) {
      stable.push(file.template);
      continue;
    }
    const entry = others.get(file.template.name) ?? others.set(file.template.name, {}).get(file.template.name)!;
    const other = entry[file.stanza.role];
    if (other)
      problems.push({
        file: file.template.file,
        field: 'rollout.role',
        message: `template ${quote(file.template.name)} has a ${file.stanza.role} revision already, in ${other.template.file}`,
      });
    else entry[file.stanza.role] = file;
  }
  const set = createTemplateSet(stable);
  const rollouts = new Map<string, Rollout>();
  for (const [name, { candidate, previous }] of others) {
    const inForce = set.byName.get(name);
    const file = (candidate ?? previous)!.template.file;
    if (!inForce) {
      problems.push({
        file,
        field: 'rollout',
        message: `template ${quote(name)} has no stable revision (a file without rollout:); a new template needs no candidate: its selectors scope it`,
      });
      continue;
    }
    for (const revision of [candidate, previous])
      if (revision && revision.template.hash === inForce.hash)
        problems.push({
          file: revision.template.file,
          field: 'rollout',
          message: `the same content as the stable revision in ${inForce.file} (revision ${inForce.hash})`,
        });
    rollouts.set(name, {
      name,
      stable: inForce,
      ...(candidate ? { candidate: candidate.template, stanza: candidate.stanza! } : {}),
      ...(previous ? { previous: previous.template } : {}),
    });
  }
  return { set: rollouts.size > 0 ? Object.freeze({ ...set, rollouts }) : set, problems };
}

/** What the revision choice reads of a pod: nothing else, so the answer cache (which keys on all of it) stays exact. */
export interface RolloutSubject {
  readonly namespace: string;
  /** The pod's generateName when it has one, else its name: a bare pod's bucket. */
  readonly name: string;
  readonly labels: Labels;
  /** The controlling owner. */
  readonly owner?: { readonly kind: string; readonly name: string };
  /**
   * A preflight probe's `template@revision` (its annotation), read only from a dry run and
   * honoured only in the set's probe namespace: a real pod that carries it is stored, and a
   * probe's candidate may be one no real pod is to get (share 0, stopped, failed).
   */
  readonly probe?: string;
}

/** The annotation of a preflight's probe pod: `template@revision`, the candidate it tries. */
export const probeAnnotation = 'sidecar-injector.io/rollout-probe';

/**
 * The subject of a pod's metadata (`name`, `generateName`, `ownerReferences`) and labels, as
 * admission reads a new pod and the auditor a running one: a bare pod is named by its
 * generateName when it has one (the name the API server makes from it is not known at admission).
 */
export function rolloutSubject(
  metadata: { readonly name?: unknown; readonly generateName?: unknown; readonly ownerReferences?: unknown; readonly annotations?: unknown },
  namespace: string,
  labels: Labels,
  requestName = '',
  dryRun = false,
): RolloutSubject {
  const owner = controllingOwner(metadata.ownerReferences, namespace);
  const text = (value: unknown) => (typeof value === 'string' ? value.slice(0, 253) : '');
  const name = text(metadata.generateName) || text(metadata.name) || requestName.slice(0, 253);
  const annotations = isJsonObject(metadata.annotations) ? metadata.annotations : {};
  const probe = dryRun && Object.hasOwn(annotations, probeAnnotation) ? text(annotations[probeAnnotation]) : '';
  return { namespace, name, labels, ...(owner ? { owner: { kind: owner.kind, name: owner.name } } : {}), ...(probe ? { probe } : {}) };
}

/** Label keys the choice reads beyond the stanzas' podSelectors: what names a Deployment's ReplicaSet. */
export const rolloutLabelKeys: readonly string[] = [podTemplateHashLabel];

/**
 * The workload a pod is bucketed by (resolveWorkload, from the pod's labels alone: admission
 * reads nothing else): a Deployment's pods by the Deployment (its ReplicaSet's name without
 * `-<pod-template-hash>`), so that a restart keeps its revision; other owned pods by their
 * controlling owner; a bare pod by its name.
 */
export function bucketKey(subject: RolloutSubject): string {
  const workload = subject.owner && workloadOfOwner({ ...subject.owner, namespace: subject.namespace }, labelsLookup(subject.labels));
  return workload ? `${subject.namespace}/${workload.kind}/${workload.name}` : `${subject.namespace}/Pod/${subject.name}`;
}

/**
 * The workload's bucket for a template, 0 to 9,999: the same for every pod of the workload and
 * every candidate of the template, so that raising a share only adds workloads.
 */
export function bucketOf(template: string, workload: string): number {
  return createHash('sha256').update(template).update('\0').update(workload).digest().readUInt32BE(0) % buckets;
}

/** True when the pod gets the candidate of `rollout`. */
export function takesCandidate(rollout: Rollout, subject: RolloutSubject): boolean {
  const { stanza } = rollout;
  if (!rollout.candidate || !stanza || rollout.stopped !== undefined || stanza.share === 0) return false;
  if (stanza.namespaces && !stanza.namespaces.has(subject.namespace)) return false;
  if (!matches(stanza.podSelector, subject.labels)) return false;
  return bucketOf(rollout.name, bucketKey(subject)) < Math.round(stanza.share * (buckets / 100));
}

/** Every revision of `set`: each template's stable one, and the candidate and previous revisions of its rollout. */
export function everyRevision(set: TemplateSet): Template[] {
  const out = [...set.templates];
  for (const rollout of set.rollouts?.values() ?? []) for (const revision of [rollout.candidate, rollout.previous]) if (revision) out.push(revision);
  return out;
}

/**
 * The templates in force for one pod: the stable set, with the candidate of each template
 * whose share takes the pod in place of its stable revision. One consistent set per pod,
 * chosen before selection; the set itself when no candidate takes the pod.
 */
export function revisionsFor(set: TemplateSet, subject: RolloutSubject): TemplateSet {
  if (!set.rollouts) return set;
  // A preflight's probe pod gets the candidate it names, whatever its share or state, and only in the probe namespace.
  const probe = subject.probe !== undefined && set.probeNamespace !== undefined && subject.namespace === set.probeNamespace ? subject.probe : undefined;
  let swapped: Template[] | undefined;
  for (const rollout of set.rollouts.values()) {
    if (probe !== undefined ? probe !== `${rollout.name}@${rollout.candidate?.hash}` : !takesCandidate(rollout, subject)) continue;
    swapped ??= [...set.templates];
    const at = swapped.findIndex((t) => t.name === rollout.name);
    swapped[at] = rollout.candidate!;
  }
  if (!swapped) return set;
  return Object.freeze({ ...set, templates: Object.freeze(swapped), byName: new Map(swapped.map((t) => [t.name, t])) });
}

/**
 * The set with candidates stopped (a failed preflight, a halt), by template name and why, and
 * the namespace whose probe pods get the candidate they name; `set` itself when nothing changes.
 */
export function stopCandidates(set: TemplateSet, stopped: ReadonlyMap<string, string>, probeNamespace?: string): TemplateSet {
  if (!set.rollouts) return set;
  let changed = probeNamespace !== set.probeNamespace;
  const rollouts = new Map<string, Rollout>();
  for (const [name, rollout] of set.rollouts) {
    const why = stopped.get(name);
    if (why !== rollout.stopped) changed = true;
    const { stopped: _was, ...rest } = rollout;
    rollouts.set(name, why === undefined ? rest : { ...rest, stopped: why });
  }
  if (!changed) return set;
  const { probeNamespace: _old, ...rest } = set;
  return Object.freeze({ ...rest, rollouts, ...(probeNamespace !== undefined ? { probeNamespace } : {}) });
}

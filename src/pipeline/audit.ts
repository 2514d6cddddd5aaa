/**
 * Which sidecars a running pod should carry, and which it does: the auditor's judgement, from
 * a pod's metadata alone (labels, annotations, ownerReferences: a metadata-only list keeps a
 * large cluster cheap). Decided with the very selection code admission uses; compared with the
 * pod's ledger. Pure.
 *
 * Without the pod's spec the ledger cannot be checked against the containers (trust.ts): here
 * it is read as written. The auditor reports and, only when asked, restarts workloads, whose
 * new pods are then injected and checked as at any creation.
 */
import { AnnotationKeys, LabelKeys, LabelValues } from '../k8s/keys.js';
import { workloadKinds } from '../k8s/workloads.js';
import { ownerKey, resolveWorkload, type OwnerLookup } from '../k8s/owners.js';
import { indexLedger, parseLedger } from '../inject/ledger.js';
import { select } from '../selection/select.js';
import type { TemplateSet } from '../templates/set.js';
import { revisionsFor, rolloutLabelKeys, rolloutSubject, type RolloutSubject } from '../templates/rollout.js';
import type { Labels } from '../k8s/selector.js';
import type { LeftOutRule, TemplateDecision } from './decision.js';

/**
 * `current`: the hash in force; `stale`: another hash; `missing`: a new pod would carry it and this
 * one does not; `left-out`: it applies but a rule keeps it out of new pods too (pipeline/decision.ts);
 * `orphaned`: in the ledger, but the template no longer exists or no longer selects the pod.
 */
export type TemplateState = 'current' | 'stale' | 'missing' | 'left-out' | 'orphaned';
export type PodState = 'missing' | 'stale' | 'orphaned' | 'left-out' | 'current' | 'not-selected' | 'opted-out';
/** Pod states, worst first: a pod's state is the first any of its templates has. */
export const podStates: readonly PodState[] = ['missing', 'stale', 'orphaned', 'left-out', 'current', 'not-selected', 'opted-out'];

/** One template's verdict for a pod: the hash it should carry (`want`) and the one its ledger records (`have`). */
export interface TemplateVerdict {
  readonly name: string;
  readonly state: TemplateState;
  readonly want: string | null;
  readonly have: string | null;
  /** With `left-out`: the rule that keeps it out. */
  readonly rule?: LeftOutRule;
}

export interface PodVerdict {
  readonly state: PodState;
  readonly templates: readonly TemplateVerdict[];
}

/** What the auditor reads of a pod: its metadata, as a metadata-only list returns it. */
export interface PodMetadata {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  /** What a bare pod was created with; it buckets the pod for a candidate's share. */
  readonly generateName?: string;
  /** The controlling owner buckets its pods for a candidate's share (templates/rollout.ts). */
  readonly ownerReferences?: unknown;
}

/** A pod's metadata as a metadata-only list returns it: each field unchecked. */
export interface ListedMetadata {
  name?: string;
  generateName?: string;
  namespace?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: unknown;
  creationTimestamp?: unknown;
}

/**
 * What judging a pod needs, once its ledger is read: its own labels (without those its ledger
 * says we added), whether it asks for templates (`sidecar-injector.io/templates`), whether it is
 * a mirror pod, and the hash its ledger records per template.
 */
export interface PodFacts {
  readonly namespace: string;
  readonly ownLabels: Readonly<Record<string, string>>;
  readonly requested: string | undefined;
  readonly mirror: boolean;
  readonly ledgerHashes: ReadonlyMap<string, string>;
  /** What buckets the pod for a candidate's share: its name (or generateName) and controlling owner. */
  readonly workload?: Pick<RolloutSubject, 'name' | 'owner'>;
}

/** Reads a pod's metadata into the facts judging needs (the ledger parsed, as written: without the spec it cannot be checked). */
export function podFacts(pod: PodMetadata): PodFacts {
  const { ledger } = parseLedger(Object.hasOwn(pod.annotations, AnnotationKeys.status) ? pod.annotations[AnnotationKeys.status] : undefined);
  const owner = indexLedger(ledger);
  // Null-prototype maps: keys come from the cluster's objects.
  const ownLabels: Record<string, string> = Object.create(null);
  for (const key in pod.labels) if (!owner.pod('labels', key)) ownLabels[key] = pod.labels[key]!;
  const requestIsOurs = owner.pod('annotations', AnnotationKeys.request) !== undefined;
  return {
    namespace: pod.namespace,
    ownLabels,
    requested: !requestIsOurs && Object.hasOwn(pod.annotations, AnnotationKeys.request) ? pod.annotations[AnnotationKeys.request] : undefined,
    mirror: Object.hasOwn(pod.annotations, AnnotationKeys.mirror),
    ledgerHashes: new Map(Object.entries(ledger.templates).map(([name, entry]) => [name, entry.hash])),
    workload: workloadOfPod(pod),
  };
}

/** What buckets a pod for a candidate's share, from its metadata. */
export function workloadOfPod(pod: PodMetadata): Pick<RolloutSubject, 'name' | 'owner'> {
  const { name, owner } = rolloutSubject(pod, pod.namespace, pod.labels);
  return { name, ...(owner ? { owner } : {}) };
}

/**
 * Judges one pod: the templates selection gives it today (from its own labels and annotations,
 * minus those its ledger says we added, and its namespace's labels) against what its ledger
 * records. `current`: the same hash; `stale`: another hash; `missing`: selected, not in the
 * ledger; `orphaned`: in the ledger, but the template no longer exists or no longer selects it.
 */
export function auditPod(pod: PodMetadata, namespaceLabels: Labels, set: TemplateSet): PodVerdict {
  return judgePod(podFacts(pod), namespaceLabels, set);
}

/** Judges a pod from its facts (podFacts). */
export function judgePod(pod: PodFacts, namespaceLabels: Labels, loaded: TemplateSet): PodVerdict {
  // The revisions in force for this pod, as admission chooses them: a pod of a workload in a
  // candidate's share wants the candidate, every other the stable revision.
  const set = revisionsFor(loaded, {
    namespace: pod.namespace,
    labels: pod.ownLabels,
    name: pod.workload?.name ?? '',
    ...(pod.workload?.owner ? { owner: pod.workload.owner } : {}),
  });
  const annotations: Record<string, string> = Object.create(null);
  if (pod.requested !== undefined) annotations[AnnotationKeys.request] = pod.requested;
  const optedOut = pod.ownLabels[LabelKeys.podOptOut] === LabelValues.disabled;
  const selection =
    optedOut || pod.mirror ? undefined : select({ namespace: pod.namespace, namespaceLabels, podLabels: pod.ownLabels, podAnnotations: annotations }, set);
  const wanted = new Map((selection?.templates ?? []).map((t) => [t.name, t.hash]));
  const templates: TemplateVerdict[] = [];
  for (const [name, hash] of wanted) {
    const have = pod.ledgerHashes.get(name) ?? null;
    templates.push({ name, state: have === null ? 'missing' : have === hash ? 'current' : 'stale', want: hash, have });
  }
  for (const [name, have] of pod.ledgerHashes) {
    if (!wanted.has(name)) templates.push({ name, state: 'orphaned', want: null, have });
  }
  templates.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return verdictOf(templates, optedOut);
}

/** The pod's state from its templates' (the worst), or why it has none. */
function verdictOf(templates: readonly TemplateVerdict[], optedOut: boolean): PodVerdict {
  if (optedOut && templates.length === 0) return { state: 'opted-out', templates };
  for (const state of ['missing', 'stale', 'orphaned', 'left-out'] as const) if (templates.some((t) => t.state === state)) return { state, templates };
  return { state: templates.length > 0 ? 'current' : optedOut ? 'opted-out' : 'not-selected', templates };
}

/**
 * Whether judging from metadata alone left a template `missing` or `stale`: those a restart
 * would act on, so they need the decision on the pod template first.
 */
export const lacksTemplates = (verdict: PodVerdict): boolean => verdict.templates.some((t) => t.state === 'missing' || t.state === 'stale');

/**
 * The verdict once the decision on the workload's pod template is known (admission's own, for a
 * new pod of that workload): a template the metadata says is missing or stale stays so only
 * where a new pod would carry it; one a rule leaves out of new pods is `left-out` with the rule
 * (a restart would lose a stale sidecar, or have the new pods refused); a missing one that does
 * not apply (what metadata cannot show: the pod's operating system) is dropped, a stale one is
 * `orphaned`.
 */
export function refineVerdict(verdict: PodVerdict, decisions: ReadonlyMap<string, TemplateDecision>): PodVerdict {
  if (!lacksTemplates(verdict)) return verdict;
  const templates: TemplateVerdict[] = [];
  for (const t of verdict.templates) {
    const decision = t.state === 'missing' || t.state === 'stale' ? decisions.get(t.name) : undefined;
    if (!decision || decision.kind === 'inject' || decision.kind === 'present') templates.push(t);
    else if (decision.kind === 'left-out' || decision.kind === 'cannot') templates.push({ ...t, state: 'left-out', rule: decision.rule });
    else if (t.state === 'stale') templates.push({ ...t, state: 'orphaned', want: null });
  }
  return verdictOf(templates, verdict.state === 'opted-out');
}

/** The label keys judging can read: every key a template's objectSelector or a candidate's podSelector names, the pod opt-out, and what buckets a Deployment's pods. */
export function judgedLabelKeys(set: TemplateSet): ReadonlySet<string> {
  const keys = new Set<string>([LabelKeys.podOptOut]);
  for (const template of set.templates) for (const requirement of template.objectSelector.requirements) keys.add(requirement.key);
  for (const rollout of set.rollouts?.values() ?? []) {
    for (const key of rolloutLabelKeys) keys.add(key);
    for (const requirement of rollout.stanza?.podSelector.requirements ?? []) keys.add(requirement.key);
    for (const requirement of rollout.candidate?.objectSelector.requirements ?? []) keys.add(requirement.key);
  }
  return keys;
}

/** The workload a pod belongs to: a Deployment, StatefulSet, DaemonSet, CronJob, Job, ReplicaSet, … or the pod itself. */
export interface Owner {
  readonly kind: string;
  readonly name: string;
}

/**
 * The workload that owns a pod in the report (resolveWorkload over what the audit's lists read):
 * pod → ReplicaSet → Deployment, Job → CronJob, StatefulSet and DaemonSet directly; a pod with no
 * owner it can be believed to have (none, or one no listed object backs by uid) is its own.
 * Kinds the auditor does not list (a custom controller) are taken as named, and never restarted.
 */
export function reportOwner(pod: { readonly namespace: string; readonly name: string; readonly ownerReferences?: unknown }, owners: OwnerLookup): Owner {
  const workload = resolveWorkload(pod, pod.namespace, owners);
  return workload ? { kind: workload.kind, name: workload.name } : { kind: 'Pod', name: pod.name };
}

/** The command that gives a workload's pods their sidecars again (a new rollout), or what to do instead. */
export function fixFor(namespace: string, owner: Owner): string {
  switch (owner.kind) {
    case 'Deployment':
    case 'StatefulSet':
    case 'DaemonSet':
      return `kubectl -n ${namespace} rollout restart ${owner.kind.toLowerCase()}/${owner.name}`;
    case 'Pod':
      return `recreate pod ${owner.name} (a bare pod: delete it and create it again)`;
    case 'CronJob':
    case 'Job':
      return `the next run of ${owner.kind.toLowerCase()}/${owner.name} gets them`;
    default:
      return `restart ${owner.kind}/${owner.name} as its controller allows`;
  }
}

/** One pod's line of the report. */
export interface AuditedPod extends PodVerdict {
  readonly namespace: string;
  readonly name: string;
  readonly owner: Owner;
}

/** One workload's line: its pods counted per state. */
export interface AuditedOwner {
  readonly namespace: string;
  readonly kind: string;
  readonly name: string;
  readonly pods: number;
  readonly states: Readonly<Partial<Record<PodState, number>>>;
  /**
   * What a restart of it is for, sorted: `template@revision` of every template its pods lack or
   * run stale (the revision in force), or carry orphaned (the revision they carry).
   */
  readonly restartFor: readonly string[];
}

/** Groups pods by workload, in namespace, kind and name order. */
export function groupByOwner(pods: readonly AuditedPod[]): AuditedOwner[] {
  const groups = new Map<
    string,
    { namespace: string; kind: string; name: string; pods: number; states: Partial<Record<PodState, number>>; restartFor: Set<string> }
  >();
  for (const pod of pods) {
    const key = `${pod.namespace}\0${pod.owner.kind}\0${pod.owner.name}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { namespace: pod.namespace, kind: pod.owner.kind, name: pod.owner.name, pods: 0, states: {}, restartFor: new Set() }));
    group.pods++;
    group.states[pod.state] = (group.states[pod.state] ?? 0) + 1;
    for (const t of pod.templates) {
      if ((t.state === 'missing' || t.state === 'stale') && t.want) group.restartFor.add(`${t.name}@${t.want}`);
      else if (t.state === 'orphaned' && t.have) group.restartFor.add(`${t.name}@${t.have}`);
    }
  }
  const order = (a: AuditedOwner, b: AuditedOwner) => (a.namespace + '\0' + a.kind + '\0' + a.name < b.namespace + '\0' + b.kind + '\0' + b.name ? -1 : 1);
  return [...groups.values()].map((g) => ({ ...g, restartFor: [...g.restartFor].sort() })).sort(order);
}

/** What `audit --restart` does: the workloads it restarts, and those it only lists, with why. */
export interface RestartPlan {
  readonly restart: readonly AuditedOwner[];
  readonly untouched: readonly { readonly owner: AuditedOwner; readonly why: string }[];
}

/**
 * The workload annotation that records what `audit --restart` restarted it for: `template@revision`,
 * comma-separated. A second restart for the same revisions would not help where the first did not.
 */
export const restartedForAnnotation = 'sidecar-injector.io/restarted-for';

/**
 * The record a restart writes: what it is for, with what earlier restarts were for that still
 * concerns the same templates; bounded, so that alternating revisions are each restarted once.
 */
export function restartRecord(owner: AuditedOwner, previous: string | undefined): string {
  const now = new Set(owner.restartFor);
  const names = new Set(owner.restartFor.map((t) => t.slice(0, t.lastIndexOf('@'))));
  const kept = (previous ?? '').split(',').filter((t) => t && !now.has(t) && names.has(t.slice(0, t.lastIndexOf('@'))));
  return [...owner.restartFor, ...kept].slice(0, 64).join(',');
}

/**
 * The workloads with pods in `states`: Deployments, StatefulSets and DaemonSets are restarted
 * (their own rollout strategy and PodDisruptionBudgets apply), once per template revision:
 * a workload whose pods still lack what it was restarted for (`restartedFor`, by
 * `kind/namespace/name`) is listed with why instead. `left-out` pods are never restarted (a new
 * pod would be left out, or refused, again). Bare pods, Jobs, CronJobs and anything else are
 * listed, never touched.
 */
export function restartPlan(owners: readonly AuditedOwner[], states: readonly PodState[], restartedFor: ReadonlyMap<string, string> = new Map()): RestartPlan {
  const restart: AuditedOwner[] = [];
  const untouched: { owner: AuditedOwner; why: string }[] = [];
  for (const owner of owners) {
    if (!states.some((s) => s !== 'left-out' && (owner.states[s] ?? 0) > 0)) continue;
    const before = new Set((restartedFor.get(ownerKey(owner)) ?? '').split(','));
    if (owner.restartFor.length > 0 && owner.restartFor.every((t) => before.has(t))) {
      untouched.push({
        owner,
        why: `restarted once already for ${owner.restartFor.join(', ')} and its pods are still as they were: the injector is not reached for these pods, another webhook changes them, or the workload's own pod template carries what the audit reports; check the webhooks' namespaceSelector and matchConditions, and the injector's log for this namespace`,
      });
    } else if (workloadKinds.get(owner.kind)?.restartable) restart.push(owner);
    else
      untouched.push({
        owner,
        why: owner.kind === 'Pod' ? 'a bare pod: recreate it yourself' : `a ${owner.kind} is never restarted: ${fixFor(owner.namespace, owner)}`,
      });
  }
  return { restart, untouched };
}

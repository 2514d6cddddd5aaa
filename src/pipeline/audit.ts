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
import { indexLedger, parseLedger } from '../inject/ledger.js';
import { select } from '../selection/select.js';
import type { TemplateSet } from '../templates/set.js';
import type { Labels } from '../k8s/selector.js';

export type TemplateState = 'current' | 'stale' | 'missing' | 'orphaned';
export type PodState = 'missing' | 'stale' | 'orphaned' | 'current' | 'not-selected' | 'opted-out';
/** Pod states, worst first: a pod's state is the first any of its templates has. */
export const podStates: readonly PodState[] = ['missing', 'stale', 'orphaned', 'current', 'not-selected', 'opted-out'];

/** One template's verdict for a pod: the hash it should carry (`want`) and the one its ledger records (`have`). */
export interface TemplateVerdict {
  readonly name: string;
  readonly state: TemplateState;
  readonly want: string | null;
  readonly have: string | null;
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
}

/**
 * Judges one pod: the templates selection gives it today (from its own labels and annotations,
 * minus those its ledger says we added, and its namespace's labels) against what its ledger
 * records. `current`: the same hash; `stale`: another hash; `missing`: selected, not in the
 * ledger; `orphaned`: in the ledger, but the template no longer exists or no longer selects it.
 */
export function auditPod(pod: PodMetadata, namespaceLabels: Labels, set: TemplateSet): PodVerdict {
  const { ledger } = parseLedger(Object.hasOwn(pod.annotations, AnnotationKeys.status) ? pod.annotations[AnnotationKeys.status] : undefined);
  const owner = indexLedger(ledger);
  // Null-prototype maps: keys come from the cluster's objects.
  const labels: Record<string, string> = Object.create(null);
  for (const key in pod.labels) if (!owner.pod('labels', key)) labels[key] = pod.labels[key]!;
  const annotations: Record<string, string> = Object.create(null);
  for (const key in pod.annotations) if (key !== AnnotationKeys.status && !owner.pod('annotations', key)) annotations[key] = pod.annotations[key]!;
  const optedOut = labels[LabelKeys.podOptOut] === LabelValues.disabled;
  const mirror = Object.hasOwn(pod.annotations, AnnotationKeys.mirror);
  const selection = optedOut || mirror ? undefined : select({ namespace: pod.namespace, namespaceLabels, podLabels: labels, podAnnotations: annotations }, set);
  const wanted = new Map((selection?.templates ?? []).map((t) => [t.name, t.hash]));
  const templates: TemplateVerdict[] = [];
  for (const [name, hash] of wanted) {
    const have = Object.hasOwn(ledger.templates, name) ? ledger.templates[name]!.hash : null;
    templates.push({ name, state: have === null ? 'missing' : have === hash ? 'current' : 'stale', want: hash, have });
  }
  for (const [name, entry] of Object.entries(ledger.templates)) {
    if (!wanted.has(name)) templates.push({ name, state: 'orphaned', want: null, have: entry.hash });
  }
  templates.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  if (optedOut && templates.length === 0) return { state: 'opted-out', templates };
  for (const state of ['missing', 'stale', 'orphaned'] as const) if (templates.some((t) => t.state === state)) return { state, templates };
  return { state: templates.length > 0 ? 'current' : optedOut ? 'opted-out' : 'not-selected', templates };
}

/** The workload a pod belongs to: a Deployment, StatefulSet, DaemonSet, CronJob, Job, ReplicaSet, … or the pod itself. */
export interface Owner {
  readonly kind: string;
  readonly name: string;
}

/** An ownerReference as metadata carries it. */
interface OwnerReference {
  readonly kind?: unknown;
  readonly name?: unknown;
  readonly controller?: unknown;
}

/** The controlling owner among `references`, if any. */
export function controllerOf(references: unknown): Owner | undefined {
  if (!Array.isArray(references)) return undefined;
  for (const ref of references as OwnerReference[]) {
    if (ref && ref.controller === true && typeof ref.kind === 'string' && typeof ref.name === 'string') return { kind: ref.kind, name: ref.name };
  }
  return undefined;
}

/**
 * The workload that owns a pod: pod → ReplicaSet → Deployment, Job → CronJob, StatefulSet and
 * DaemonSet directly; a pod without a controlling owner is its own. `parents` gives the
 * controlling owner of a ReplicaSet or Job (`kind/namespace/name` → owner), read with metadata-only lists.
 */
export function workloadOf(
  pod: { readonly namespace: string; readonly name: string; readonly ownerReferences?: unknown },
  parents: ReadonlyMap<string, Owner>,
): Owner {
  const owner = controllerOf(pod.ownerReferences);
  if (!owner) return { kind: 'Pod', name: pod.name };
  if (owner.kind === 'ReplicaSet' || owner.kind === 'Job') return parents.get(`${owner.kind}/${pod.namespace}/${owner.name}`) ?? owner;
  return owner;
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
}

/** Groups pods by workload, in namespace, kind and name order. */
export function groupByOwner(pods: readonly AuditedPod[]): AuditedOwner[] {
  const groups = new Map<string, { namespace: string; kind: string; name: string; pods: number; states: Partial<Record<PodState, number>> }>();
  for (const pod of pods) {
    const key = `${pod.namespace}\0${pod.owner.kind}\0${pod.owner.name}`;
    let group = groups.get(key);
    if (!group) groups.set(key, (group = { namespace: pod.namespace, kind: pod.owner.kind, name: pod.owner.name, pods: 0, states: {} }));
    group.pods++;
    group.states[pod.state] = (group.states[pod.state] ?? 0) + 1;
  }
  const order = (a: AuditedOwner, b: AuditedOwner) => (a.namespace + '\0' + a.kind + '\0' + a.name < b.namespace + '\0' + b.kind + '\0' + b.name ? -1 : 1);
  return [...groups.values()].sort(order);
}

/** Workload kinds a restart (`kubectl rollout restart`) applies to, with their API paths. */
export const restartable: Readonly<Record<string, string>> = { Deployment: 'deployments', StatefulSet: 'statefulsets', DaemonSet: 'daemonsets' };

/** What `audit --restart` does: the workloads it restarts, and those it only lists, with why. */
export interface RestartPlan {
  readonly restart: readonly AuditedOwner[];
  readonly untouched: readonly { readonly owner: AuditedOwner; readonly why: string }[];
}

/**
 * The workloads with pods in `states`: Deployments, StatefulSets and DaemonSets are restarted
 * (their own rollout strategy and PodDisruptionBudgets apply); bare pods, Jobs, CronJobs and
 * anything else are listed, never touched.
 */
export function restartPlan(owners: readonly AuditedOwner[], states: readonly PodState[]): RestartPlan {
  const restart: AuditedOwner[] = [];
  const untouched: { owner: AuditedOwner; why: string }[] = [];
  for (const owner of owners) {
    if (!states.some((s) => (owner.states[s] ?? 0) > 0)) continue;
    if (Object.hasOwn(restartable, owner.kind)) restart.push(owner);
    else
      untouched.push({
        owner,
        why: owner.kind === 'Pod' ? 'a bare pod: recreate it yourself' : `a ${owner.kind} is never restarted: ${fixFor(owner.namespace, owner)}`,
      });
  }
  return { restart, untouched };
}

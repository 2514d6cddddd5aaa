/**
 * The workload a pod belongs to, in one resolver for every reader: admission's rollout buckets,
 * the audit's report and restarts, and the Events about missing sidecars. A pod names its
 * controlling owner; a ReplicaSet or a Job is in turn owned by a Deployment or a CronJob (the
 * workload table's `ownedBy`). What each reader knows of the owners differs (nothing but the
 * pod's own labels at admission, metadata-only lists in the audit, a GET per owner for an
 * Event): each gives a lookup, and the one walk below decides.
 */
import { controllingOwner, type ObjectReference } from './object-reference.js';
import { workloadKinds } from './workloads.js';

/** What a reader knows of an owner object: its uid (when read from the cluster) and its own controlling owner. */
export interface OwnerFacts {
  readonly uid?: string;
  readonly owner?: ObjectReference;
}

/**
 * What a reader knows of `owner`: its facts; `null` when the reader knows it does not exist
 * (listed, and not there); `undefined` when the reader cannot tell (the owner is taken as named).
 */
export type OwnerLookup = (owner: OwnerRef) => OwnerFacts | null | undefined;

/** An owner as a lookup needs it: what an ownerReference names, in the pod's namespace. */
export type OwnerRef = Pick<ObjectReference, 'kind' | 'namespace' | 'name' | 'uid'>;

/**
 * Whether a reference is believed: an ownerReference is its writer's claim, so one to an object
 * the reader knows is absent, or whose uid is not the one the reader read, is not.
 */
function believed(reference: OwnerRef, facts: OwnerFacts | null | undefined): boolean {
  if (facts === null) return false;
  return facts?.uid === undefined || facts.uid === reference.uid;
}

/**
 * The workload of a pod's metadata: its controlling owner, or that owner's own controlling owner
 * when the owner's kind is one a controller makes (a ReplicaSet, a Job: its Deployment, its
 * CronJob, or a custom controller's object) and the lookup knows of it; undefined when the pod
 * has no owner it can be believed to have (a bare pod).
 */
export function resolveWorkload(metadata: { readonly ownerReferences?: unknown }, namespace: string, lookup: OwnerLookup): ObjectReference | undefined {
  const owner = controllingOwner(metadata.ownerReferences, namespace);
  return owner && workloadOfOwner(owner, lookup);
}

/** The workload of a pod whose controlling owner is `owner` (resolveWorkload). */
export function workloadOfOwner<Owner extends OwnerRef>(owner: Owner, lookup: OwnerLookup): Owner | ObjectReference | undefined {
  const facts = lookup(owner);
  if (!believed(owner, facts)) return undefined;
  const parent = facts?.owner;
  if (!parent || !workloadKinds.get(owner.kind)?.ownedBy) return owner;
  return believed(parent, lookup(parent)) ? parent : owner;
}

/** The label a Deployment's ReplicaSet and its pods carry: the ReplicaSet's name is the Deployment's plus `-<hash>`. */
export const podTemplateHashLabel = 'pod-template-hash';

/**
 * What a pod's own labels say of its owner, where nothing else can be read (admission decides
 * from the pod alone, the same on every replica): a ReplicaSet named `<deployment>-<hash>` with
 * the pod's `pod-template-hash` is the Deployment's. Nothing is known of any other owner.
 */
export function labelsLookup(labels: Readonly<Record<string, string>>): OwnerLookup {
  const hash = Object.hasOwn(labels, podTemplateHashLabel) ? labels[podTemplateHashLabel]! : '';
  return (owner) => {
    if (owner.kind !== 'ReplicaSet' || !hash || !owner.name.endsWith(`-${hash}`)) return undefined;
    return { owner: { apiVersion: 'apps/v1', kind: 'Deployment', namespace: owner.namespace, name: owner.name.slice(0, -hash.length - 1) } };
  };
}

/** An owner's key in the maps below: `kind/namespace/name`. */
export const ownerKey = (w: { readonly kind: string; readonly namespace: string; readonly name: string }): string => `${w.kind}/${w.namespace}/${w.name}`;

/**
 * The owners a reader read from the cluster (metadata-only lists, or GETs), by `ownerKey`, and
 * which kinds it read in full: an owner of such a kind that is not among them does not exist.
 */
export function readOwnersLookup(read: ReadonlyMap<string, OwnerFacts>, listedKinds: ReadonlySet<string>): OwnerLookup {
  return (owner) => read.get(ownerKey(owner)) ?? (listedKinds.has(owner.kind) ? null : undefined);
}

/** The facts of an owner object as the API server returns its metadata. */
export function ownerFactsOf(metadata: { readonly uid?: unknown; readonly ownerReferences?: unknown }, namespace: string): OwnerFacts {
  const owner = controllingOwner(metadata.ownerReferences, namespace);
  return { ...(typeof metadata.uid === 'string' ? { uid: metadata.uid } : {}), ...(owner ? { owner } : {}) };
}

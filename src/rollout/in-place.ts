/**
 * In-place updates of running pods: which pods may get a new revision of a template without
 * being recreated, and the pod objects that give it to them. A revision qualifies when the
 * template says `updateStrategy: inPlace` and it differs from the pod's recorded revision only
 * in its sidecars' images and resources (templates/template.ts InPlaceFacts): Kubernetes lets an
 * update change a container's `image` (the kubelet restarts just that container) and the
 * `pods/resize` subresource its resources (the kubelet changes its cgroups). New resources go
 * first, by a resize; once the kubelet runs them, one update sets the images and the ledger's
 * revision, nothing else — so the ledger never names a revision whose resources the pod does not
 * run. A sidecar whose image or resources are neither the recorded revision's nor the target's
 * (the author, a person or a vertical autoscaler changed them) is left alone. Which
 * revision a pod should carry is the audit's answer (audit/…, pipeline/audit.ts): a candidate's
 * share, its preflight and its halt decide it, so a halted candidate is rolled back in place by
 * the same rule. Pure.
 */
import { AnnotationKeys, LabelKeys, LabelValues } from '../k8s/keys.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { resourceClaims, sameContainerResources } from '../k8s/container-resources.js';
import { guaranteedContainer, podLevelResources, qosClass } from '../k8s/qos.js';
import { parseLedger, serializeLedger } from '../inject/ledger.js';
// Beside the app: an ordinary container or a native sidecar, which the kubelet restarts with a new image.
import { runsBesideApp } from '../inject/pod-resources.js';
import { judgePod, podFacts, type ListedMetadata, type PodMetadata } from '../pipeline/audit.js';
import { bucketKey, everyRevision, rolloutSubject } from '../templates/rollout.js';
import type { Labels } from '../k8s/selector.js';
import type { TemplateSet } from '../templates/set.js';
import { resolveMaxUnavailable, type Template } from '../templates/template.js';

/** Why a template a pod runs stale is not updated in place (stable ids: logs, /status). */
export type InPlaceSkip =
  /** The pod's namespace does not say `sidecar-injector.io/in-place-updates: enabled`. */
  | 'namespace-not-opted-in'
  /** The revision the pod should carry says `updateStrategy: recreate`. */
  | 'recreate-strategy'
  /** The pod's revision is none the injector still knows (stable, candidate, previous). */
  | 'unknown-revision'
  /** The revisions differ in more than their sidecars' images and resources. */
  | 'not-images-or-resources'
  /** A sidecar's image depends on the pod (an overridable parameter, a pod field). */
  | 'image-varies'
  /** A sidecar's resources depend on the pod (an overridable parameter, a pod field). */
  | 'resources-vary'
  /** A sidecar's image is not the one its recorded revision set, or it is gone. */
  | 'altered'
  /** A sidecar's resources are neither its recorded revision's nor the target's: resized by someone else (a vertical autoscaler, a person). */
  | 'altered-by-resize'
  /** New resources, and the cluster does not serve `pods/resize`. */
  | 'resize-unserved'
  /** New resources in a pod with pod-level resources, which a container's resize cannot pass. */
  | 'pod-level-resources'
  /** New resources would change the pod's QoS class (the API server refuses that resize), or a Guaranteed pod's sidecar could not keep it. */
  | 'qos-class'
  /** The kubelet cannot give the new resources on its node (PodResizePending, Infeasible). */
  | 'resize-infeasible'
  /** The image of an init container that ran once changes: the new image would never run in this pod. */
  | 'runs-once'
  /**
   * The sidecar's pull policy was defaulted for its image (Always for `:latest` or no tag, else
   * IfNotPresent) and the new image would be defaulted otherwise: an update cannot change it.
   */
  | 'pull-policy';

/** One container an update changes. */
export interface ImageChange {
  readonly container: string;
  readonly list: 'containers' | 'initContainers';
  readonly from: string;
  readonly to: string;
  /** Its containerID in the pod's status when the plan was made: once the kubelet has restarted it, another one. */
  readonly containerID?: string;
}

/** One container a resize changes. */
export interface ResourceChange {
  readonly container: string;
  readonly list: 'containers' | 'initContainers';
  readonly from: JsonObject;
  readonly to: JsonObject;
}

/**
 * One template's move to another revision in a pod (`from` equals `to` when a resize of ours is
 * taken back: a candidate stopped between its resize and its update).
 */
export interface TemplateMove {
  readonly template: string;
  readonly from: string;
  readonly to: string;
  readonly images: readonly ImageChange[];
  /** Sidecars whose resources the kubelet does not yet run at the target's. */
  readonly resources: readonly ResourceChange[];
}

export interface InPlacePlan {
  /**
   * The pod with the moves applied (for an update with its resourceVersion): the new images and
   * the ledger's revisions. Undefined when nothing moves, or while a resize comes first.
   */
  readonly updated?: JsonObject;
  /** The pod with the sidecars' new resources (for `pods/resize`, with its resourceVersion): what goes before `updated`. */
  readonly resize?: JsonObject;
  /** A resize of ours the kubelet has not finished: the update waits for it. */
  readonly resizing?: boolean;
  readonly moves: readonly TemplateMove[];
  /** Templates that stay stale until the pod is recreated: toward revision `to`, and why. */
  readonly skipped: readonly { readonly template: string; readonly to: string; readonly why: InPlaceSkip }[];
  /** The workload the pod is bucketed by (templates/rollout.ts bucketKey): updates go one pod of a workload at a time. */
  readonly workload: string;
}

const podLists = ['containers', 'initContainers'] as const;

function stringMap(value: unknown): Record<string, string> {
  const out: Record<string, string> = Object.create(null);
  if (isJsonObject(value)) for (const [k, v] of Object.entries(value)) if (typeof v === 'string') out[k] = v;
  return out;
}

/** The pod's metadata as the audit reads it. */
export function metadataOf(pod: JsonObject): PodMetadata | undefined {
  const metadata = (isJsonObject(pod.metadata) ? pod.metadata : {}) as ListedMetadata;
  if (typeof metadata.name !== 'string' || typeof metadata.namespace !== 'string') return undefined;
  return {
    namespace: metadata.namespace,
    name: metadata.name,
    labels: stringMap(metadata.labels),
    annotations: stringMap(metadata.annotations),
    ...(typeof metadata.generateName === 'string' ? { generateName: metadata.generateName } : {}),
    ...(metadata.ownerReferences !== undefined ? { ownerReferences: metadata.ownerReferences } : {}),
  };
}

/** A pod that is ending (being deleted, or its containers all done) is never updated. */
function ending(pod: JsonObject): boolean {
  const metadata = isJsonObject(pod.metadata) ? pod.metadata : {};
  const phase = isJsonObject(pod.status) ? pod.status.phase : undefined;
  return metadata.deletionTimestamp !== undefined || phase === 'Succeeded' || phase === 'Failed';
}

function findContainer(spec: JsonObject, name: string): { list: 'containers' | 'initContainers'; container: JsonObject } | undefined {
  for (const list of podLists) {
    const items = spec[list];
    if (!Array.isArray(items)) continue;
    const container = items.find((c) => isJsonObject(c) && c.name === name);
    if (container) return { list, container: container as JsonObject };
  }
  return undefined;
}

/**
 * True when `to` is given in place: it says `updateStrategy: inPlace`, or it is the stable revision
 * a stopped candidate that says so falls back to (the candidate went in place; so does its rollback).
 */
function inPlaceTo(from: Template, to: Template, set: TemplateSet): boolean {
  if (to.updateStrategy === 'inPlace') return true;
  const rollout = set.rollouts?.get(to.name);
  return from.updateStrategy === 'inPlace' && rollout?.candidate?.hash === from.hash && rollout.stable.hash === to.hash;
}

/** The pull policy the API server defaults for an image: Always for `:latest` or no tag (and no digest), else IfNotPresent. */
function defaultPullPolicy(image: string): 'Always' | 'IfNotPresent' {
  if (image.includes('@')) return 'IfNotPresent';
  const tag = /:([^/:]+)$/.exec(image)?.[1];
  return tag === undefined || tag === 'latest' ? 'Always' : 'IfNotPresent';
}

/** The status of the container `name` (containers or init containers), when the pod reports one. */
function statusOf(pod: JsonObject, name: string): JsonObject | undefined {
  const status = isJsonObject(pod.status) ? pod.status : {};
  for (const list of [status.containerStatuses, status.initContainerStatuses])
    if (Array.isArray(list)) for (const c of list) if (isJsonObject(c) && c.name === name) return c;
  return undefined;
}

/** What the in-place plan needs to know of the cluster. */
export interface InPlaceCluster {
  /** Whether the API server serves `pods/resize` (its discovery lists it). @default true */
  readonly resize?: boolean;
}

/** The resources `stated` as the pod holds them: a Guaranteed pod's sidecars request what they limit (inject.ts); undefined when they cannot. */
function asHeld(stated: JsonObject, template: Template, guaranteed: boolean): JsonObject | undefined {
  if (!guaranteed) return stated;
  const kept = guaranteedContainer({ resources: stated }, template.guaranteedPods);
  return kept && isJsonObject(kept.resources) ? kept.resources : undefined;
}

/** `resources` without cpu and memory: what no resize changes. */
function beyondResizable(resources: JsonObject): JsonObject {
  const out: JsonObject = {};
  for (const list of ['requests', 'limits'] as const) {
    const values = resources[list];
    if (isJsonObject(values)) out[list] = Object.fromEntries(Object.entries(values).filter(([name]) => name !== 'cpu' && name !== 'memory'));
  }
  return out;
}

/** The pod's condition of `type`, when it reports one. */
function conditionOf(pod: JsonObject, type: string): JsonObject | undefined {
  const conditions = isJsonObject(pod.status) ? pod.status.conditions : undefined;
  return Array.isArray(conditions) ? (conditions.find((c) => isJsonObject(c) && c.type === type) as JsonObject | undefined) : undefined;
}

/**
 * Whether the kubelet runs the sidecar `name` with the resources its spec asks for: the resources
 * its status reports (where it reports them) are those. Per container: a resize of another
 * container (the app's, by someone else) holds nothing of ours up.
 */
function resourcesTakenUp(pod: JsonObject, container: JsonObject, name: string): boolean {
  const reported = statusOf(pod, name)?.resources;
  return reported === undefined || sameContainerResources(reported, container.resources);
}

/** Whether the kubelet said it cannot give the pod's resize on its node (PodResizePending, Infeasible): it will not try again. */
function resizeInfeasible(pod: JsonObject): boolean {
  const pending = conditionOf(pod, 'PodResizePending');
  return pending?.status === 'True' && pending.reason === 'Infeasible';
}

/** True when `to` is the stable revision a candidate `from` falls back to (a halt, a stop, a share taken back). */
function fallsBack(from: Template, to: Template, set: TemplateSet): boolean {
  const rollout = set.rollouts?.get(to.name);
  return rollout?.candidate?.hash === from.hash && rollout.stable.hash === to.hash;
}

interface Move {
  images: ImageChange[];
  resources: ResourceChange[];
  /** A resize toward the target that the kubelet has not finished. */
  resizing: boolean;
}

/**
 * Whether `to` may replace `from` in place in `pod`, whose sidecars of the template are `names`:
 * the images to set, the resources to resize — or why not.
 */
function moveOf(
  from: Template,
  to: Template,
  names: readonly string[],
  pod: JsonObject,
  set: TemplateSet,
  cluster: InPlaceCluster,
  takeBack = false,
): { move?: Move; why?: InPlaceSkip } {
  const spec = isJsonObject(pod.spec) ? pod.spec : {};
  if (from.hash !== to.hash && !inPlaceTo(from, to, set)) return { why: 'recreate-strategy' };
  if (from.inPlaceFacts.shape !== to.inPlaceFacts.shape) return { why: 'not-images-or-resources' };
  const guaranteed = qosClass(spec) === 'Guaranteed';
  const move: Move = { images: [], resources: [], resizing: false };
  for (const name of names) {
    const was = from.inPlaceFacts.images.get(name);
    const next = to.inPlaceFacts.images.get(name);
    if (was === undefined || next === undefined) return { why: 'image-varies' };
    const found = findContainer(spec, name);
    // The target's image already (a move taken back after its resize, before its update) needs no change.
    if (!found || (found.container.image !== was && found.container.image !== next)) return { why: 'altered' };
    const image = found.container.image as string;
    const statedFrom = from.inPlaceFacts.resources.get(name);
    const statedTo = to.inPlaceFacts.resources.get(name);
    // Resources someone else sets (resourcesManagedElsewhere) are never compared nor resized.
    if (from.resourcesManagedElsewhere || to.resourcesManagedElsewhere || statedFrom === undefined || statedTo === undefined) {
      // Resources that vary per pod (an overridable limit) move in place only where both revisions write them alike.
      const managed = from.resourcesManagedElsewhere || to.resourcesManagedElsewhere;
      if (!managed && from.inPlaceFacts.resourcesText.get(name) !== to.inPlaceFacts.resourcesText.get(name)) return { why: 'resources-vary' };
      if (image !== next && !runsBesideApp(found.container, found.list)) return { why: 'runs-once' };
      if (!addImage(move, pod, found, image, next)) return { why: 'pull-policy' };
      continue;
    }
    // A resize changes cpu and memory only: other resources (ephemeral-storage, extended ones) and claims need a new pod.
    if (resourceClaims(statedFrom) !== resourceClaims(statedTo) || !sameContainerResources(beyondResizable(statedFrom), beyondResizable(statedTo)))
      return { why: 'not-images-or-resources' };
    const heldFrom = asHeld(statedFrom, from, guaranteed);
    const heldTo = asHeld(statedTo, to, guaranteed);
    if (!heldFrom || !heldTo) return { why: 'qos-class' };
    const have = found.container.resources;
    // The same resources in both revisions: resources are no part of the move (whoever resized the sidecar since).
    if (sameContainerResources(heldFrom, heldTo)) {
      if (image !== next && !runsBesideApp(found.container, found.list)) return { why: 'runs-once' };
      if (!addImage(move, pod, found, image, next)) return { why: 'pull-policy' };
      continue;
    }
    const atTarget = sameContainerResources(have, heldTo);
    // Neither revision's resources: someone else resized it, and it is theirs now.
    if (!atTarget && !sameContainerResources(have, heldFrom)) return { why: 'altered-by-resize' };
    if ((image !== next || !atTarget) && !runsBesideApp(found.container, found.list)) return { why: 'runs-once' };
    // A fall back goes images first: a broken image must not wait on a resize (one the API server may
    // refuse, a memory limit lowered); the sidecars are resized back after it (planInPlace's take-back).
    if (!atTarget && !takeBack && fallsBack(from, to, set)) {
      // Nothing to resize now.
    } else if (!atTarget) {
      if (cluster.resize === false) return { why: 'resize-unserved' };
      if (podLevelResources(spec)) return { why: 'pod-level-resources' };
      move.resources.push({ container: name, list: found.list, from: isJsonObject(have) ? have : {}, to: heldTo });
    } else if (!resourcesTakenUp(pod, found.container, name)) {
      if (resizeInfeasible(pod)) return { why: 'resize-infeasible' };
      move.resizing = true;
    }
    if (!addImage(move, pod, found, image, next)) return { why: 'pull-policy' };
  }
  return { move };
}

/**
 * Adds the change of the sidecar `found` from `image` to `next` (none when they are equal); false
 * when its pull policy was defaulted for `image` and would be defaulted otherwise for `next`.
 */
function addImage(move: Move, pod: JsonObject, found: { list: 'containers' | 'initContainers'; container: JsonObject }, image: string, next: string): boolean {
  if (image === next) return true;
  const policy = found.container.imagePullPolicy;
  if (policy === defaultPullPolicy(image) && policy !== defaultPullPolicy(next)) return false;
  const name = found.container.name as string;
  const containerID = statusOf(pod, name)?.containerID;
  move.images.push({ container: name, list: found.list, from: image, to: next, ...(typeof containerID === 'string' ? { containerID } : {}) });
  return true;
}

/** `spec` with the resources of `changes` set, by container name. */
function resized(spec: JsonObject, changes: readonly ResourceChange[]): JsonObject {
  const out = structuredClone(spec);
  for (const change of changes) findContainer(out, change.container)!.container.resources = structuredClone(change.to);
  return out;
}

/**
 * The in-place plan for one running pod (as a full list returns it): each template it runs at a
 * revision other than the one it should carry, moved where the rules allow, and why not where they
 * do not; and each template it runs at the right revision whose sidecars a resize of ours left at
 * another revision's resources (a candidate stopped between its resize and its update), taken
 * back. `set` is the set in force, candidates gated (what admission serves); `namespaceLabels`
 * the pod's namespace's labels.
 */
export function planInPlace(pod: JsonObject, namespaceLabels: Labels, set: TemplateSet, cluster: InPlaceCluster = {}): InPlacePlan | undefined {
  const metadata = metadataOf(pod);
  if (!metadata || !Object.hasOwn(metadata.annotations, AnnotationKeys.status) || ending(pod)) return undefined;
  const facts = podFacts(metadata);
  const verdict = judgePod(facts, namespaceLabels, set);
  const workload = bucketKey(rolloutSubject(metadata, metadata.namespace, metadata.labels));
  const stale = verdict.templates.filter((t) => t.state === 'stale' && t.want !== null && t.have !== null);
  const optedIn = namespaceLabels[LabelKeys.namespaceInPlace] === LabelValues.enabled;
  const { ledger } = parseLedger(metadata.annotations[AnnotationKeys.status]);
  const revisions = everyRevision(set);
  const sidecarsOf = (template: string) => {
    const entry = ledger.templates[template];
    return entry ? [...(entry.initContainers ?? []), ...(entry.containers ?? [])] : [];
  };
  const moves: TemplateMove[] = [];
  const skipped: { template: string; to: string; why: InPlaceSkip }[] = [];
  let resizing = false;
  for (const t of stale) {
    const to = revisions.find((r) => r.name === t.name && r.hash === t.want);
    const from = revisions.find((r) => r.name === t.name && r.hash === t.have);
    if (!to || !from || !ledger.templates[t.name]) {
      skipped.push({ template: t.name, to: t.want!, why: 'unknown-revision' });
      continue;
    }
    const { move, why } = optedIn ? moveOf(from, to, sidecarsOf(t.name), pod, set, cluster) : { move: undefined, why: 'namespace-not-opted-in' as const };
    if (!move) skipped.push({ template: t.name, to: t.want!, why: why! });
    else {
      moves.push({ template: t.name, from: from.hash, to: to.hash, images: move.images, resources: move.resources });
      resizing ||= move.resizing;
    }
  }
  // Taken back: a template the pod runs at its stable revision whose sidecars run the resources of
  // that template's candidate (a resize toward it whose update never came, or a fall back that set
  // the images first). Resources no such pair states are someone else's, and stay.
  if (optedIn)
    for (const t of verdict.templates) {
      const rollout = set.rollouts?.get(t.name);
      const candidate = rollout?.candidate;
      if (t.state !== 'current' || !candidate || t.have !== rollout.stable.hash || !ledger.templates[t.name]) continue;
      const at = rollout.stable;
      if (candidate.inPlaceFacts.shape !== at.inPlaceFacts.shape || (candidate.updateStrategy !== 'inPlace' && at.updateStrategy !== 'inPlace')) continue;
      const back = moveOf(candidate, at, sidecarsOf(t.name), pod, set, cluster, true).move;
      if (back && back.resources.length > 0 && back.images.length === 0)
        moves.push({ template: t.name, from: at.hash, to: at.hash, images: [], resources: back.resources });
    }
  if (moves.length === 0) return { moves, skipped, workload };
  const spec = isJsonObject(pod.spec) ? pod.spec : {};
  const changes = moves.flatMap((m) => m.resources);
  if (changes.length > 0) {
    // Resources first: a resize the API server refuses when it would change the pod's QoS class.
    const next = resized(spec, changes);
    if (qosClass(next) !== qosClass(spec)) {
      for (const move of moves) skipped.push({ template: move.template, to: move.to, why: 'qos-class' });
      return { moves: [], skipped, workload };
    }
    return { resize: { apiVersion: 'v1', kind: 'Pod', ...pod, spec: next }, moves, skipped, workload };
  }
  if (resizing) return { resizing, moves, skipped, workload };
  // The pod as listed, with the new images set by container name and the ledger's revisions moved.
  const updated = structuredClone(pod);
  const updatedSpec = updated.spec as JsonObject;
  for (const move of moves) {
    const entry = ledger.templates[move.template]!;
    entry.hash = move.to;
    for (const change of move.images) {
      findContainer(updatedSpec, change.container)!.container.image = change.to;
      // The kubelet restarts the container once for its new image: that restart is ours, not the sidecar's.
      const count = statusOf(pod, change.container)?.restartCount;
      const restarts: Record<string, number> = Object.assign(Object.create(null), entry.restarts);
      restarts[change.container] = (typeof count === 'number' && Number.isSafeInteger(count) && count >= 0 ? count : 0) + 1;
      entry.restarts = restarts;
    }
  }
  ((updated.metadata as JsonObject).annotations as JsonObject)[AnnotationKeys.status] = serializeLedger(ledger);
  return { updated: { apiVersion: 'v1', kind: 'Pod', ...updated }, moves, skipped, workload };
}

/**
 * The strictest `inPlaceMaxUnavailable` of the revisions the plan's moves give, as a number of
 * pods and as a share (Infinity where none says so); a plan without moves is bounded to one pod.
 */
export function planBounds(plan: InPlacePlan, set: TemplateSet): { pods: number; percent: number } {
  const revisions = everyRevision(set);
  const bounds = { pods: plan.moves.length > 0 ? Infinity : 1, percent: Infinity };
  for (const move of plan.moves) {
    const max = revisions.find((r) => r.name === move.template && r.hash === move.to)?.inPlaceMaxUnavailable ?? { pods: 1 };
    if ('pods' in max) bounds.pods = Math.min(bounds.pods, max.pods);
    else bounds.percent = Math.min(bounds.percent, max.percent);
  }
  return bounds;
}

/** How many pods of a workload of `pods` pods may have sidecars not settled at once, by its strictest bounds (planBounds). */
export function workloadMaxUnavailable(bounds: { pods: number; percent: number }, pods: number): number {
  return Math.min(bounds.pods, bounds.percent === Infinity ? Infinity : resolveMaxUnavailable({ percent: bounds.percent }, pods));
}

/**
 * Whether every move of the plan takes a template back to its stable revision from its candidate
 * (a halt, a stop, a share taken back), or resizes back what a candidate's resize left: a rollback,
 * which takes nothing a pod had before the candidate came.
 */
export function rollsBack(plan: InPlacePlan, set: TemplateSet): boolean {
  return (
    plan.moves.length > 0 &&
    plan.moves.every((move) => {
      const rollout = set.rollouts?.get(move.template);
      return rollout !== undefined && move.to === rollout.stable.hash && (move.from === move.to || move.from === rollout.candidate?.hash);
    })
  );
}

/**
 * Whether every sidecar of the pod's ledger that runs beside the app is ready and runs the
 * resources its spec asks for (no resize under way), and each one `updated` names (container → its containerID when it was updated) runs in another container
 * since: the kubelet has taken the update up. Until then, no other pod of the workload is
 * updated (at most one pod of a workload without ready sidecars at a time).
 */
export function sidecarsSettled(pod: JsonObject, updated: ReadonlyMap<string, string | undefined> = new Map()): boolean {
  const metadata = metadataOf(pod);
  if (!metadata) return true;
  const { ledger } = parseLedger(Object.hasOwn(metadata.annotations, AnnotationKeys.status) ? metadata.annotations[AnnotationKeys.status] : undefined);
  const names = new Set(Object.values(ledger.templates).flatMap((e) => [...(e.containers ?? []), ...(e.initContainers ?? [])]));
  if (names.size === 0 || ending(pod)) return true;
  const spec = isJsonObject(pod.spec) ? pod.spec : {};
  for (const name of names) {
    const found = findContainer(spec, name);
    if (!found || !runsBesideApp(found.container, found.list)) continue;
    const seen = statusOf(pod, name);
    if (seen?.ready !== true) return false;
    // A resize the kubelet works on (one it cannot make, Infeasible, it will not: that pod is no longer waited for).
    if (!resizeInfeasible(pod) && !resourcesTakenUp(pod, found.container, name)) return false;
    if (updated.has(name) && (typeof seen.containerID !== 'string' || seen.containerID === updated.get(name))) return false;
  }
  return true;
}

/** What `why` says of a skip id, after "stays stale until the pod is recreated: ". */
const skipWords: Record<InPlaceSkip, string> = {
  'namespace-not-opted-in': 'its namespace is not labelled sidecar-injector.io/in-place-updates=enabled',
  'recreate-strategy': 'the revision in force says updateStrategy: recreate',
  'unknown-revision': 'its revision is none the injector still knows',
  'not-images-or-resources': 'the revisions differ in more than their sidecars’ images and resources',
  'image-varies': 'a sidecar’s image depends on the pod',
  'resources-vary': 'a sidecar’s resources depend on the pod, written otherwise in the two revisions',
  altered: 'a sidecar’s image is not the one its revision set',
  'altered-by-resize': 'a sidecar’s resources are neither its revision’s nor the new one’s: resized by someone else',
  'runs-once': 'the change is to an init container that ran once',
  'pull-policy': 'a sidecar’s defaulted pull policy would differ for the new image',
  'resize-unserved': 'the API server does not serve pods/resize',
  'pod-level-resources': 'the pod sets pod-level resources',
  'qos-class': 'the new resources would change the pod’s QoS class',
  'resize-infeasible': 'the kubelet cannot give the new resources on its node (PodResizePending: Infeasible)',
};

/** Whether a sidecar of `at` (named `names`) runs resources other than those `at` gives every pod: someone else resized it. */
function resizedByOthers(at: Template, names: readonly string[], pod: JsonObject): boolean {
  if (at.resourcesManagedElsewhere) return false;
  const spec = isJsonObject(pod.spec) ? pod.spec : {};
  const guaranteed = qosClass(spec) === 'Guaranteed';
  return names.some((name) => {
    const stated = at.inPlaceFacts.resources.get(name);
    const held = stated && asHeld(stated, at, guaranteed);
    const found = findContainer(spec, name);
    return held !== undefined && found !== undefined && !sameContainerResources(found.container.resources, held);
  });
}

/**
 * What the in-place rules say of a running pod, per template, for `why`: a template it runs stale
 * is being moved in place or needs a re-create (and why, by its id); a template it runs current
 * whose sidecars' resources are not its revision's was resized by someone else, and is left so.
 */
export function inPlaceNotes(pod: JsonObject, namespaceLabels: Labels, set: TemplateSet, cluster: InPlaceCluster = {}): Map<string, string> {
  const notes = new Map<string, string>();
  if (!everyRevision(set).some((t) => t.updateStrategy === 'inPlace')) return notes;
  const plan = planInPlace(pod, namespaceLabels, set, cluster);
  if (!plan) return notes;
  for (const move of plan.moves)
    notes.set(
      move.template,
      move.from === move.to ? 'its sidecars are being resized back in place' : `being given revision ${move.to} in place, without a new pod`,
    );
  for (const { template, why } of plan.skipped) notes.set(template, `stays stale until the pod is recreated: ${skipWords[why]} (${why})`);
  const metadata = metadataOf(pod)!;
  const { ledger } = parseLedger(metadata.annotations[AnnotationKeys.status]);
  for (const t of judgePod(podFacts(metadata), namespaceLabels, set).templates) {
    const entry = ledger.templates[t.name];
    const at = t.state === 'current' ? everyRevision(set).find((r) => r.name === t.name && r.hash === t.have) : undefined;
    if (!at || !entry || notes.has(t.name)) continue;
    const names = [...(entry.initContainers ?? []), ...(entry.containers ?? [])];
    if (resizedByOthers(at, names, pod))
      notes.set(t.name, 'its sidecars’ resources are not its revision’s: resized by someone else (altered-by-resize), and left so');
  }
  return notes;
}

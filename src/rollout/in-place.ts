/**
 * In-place updates of running pods: which pods may get a new revision of a template without
 * being recreated, and the pod object that gives it to them. A revision qualifies when the
 * template says `updateStrategy: inPlace` and it differs from the pod's recorded revision only
 * in its sidecars' images (templates/template.ts ImageFacts): Kubernetes lets an update change
 * a container's `image`, and the kubelet restarts just that container. The update sets those
 * images and the ledger's revision, nothing else; a sidecar whose image is not the one the
 * recorded revision set (the author or another controller changed it) is left alone. Which
 * revision a pod should carry is the audit's answer (audit/…, pipeline/audit.ts): a candidate's
 * share, its preflight and its halt decide it, so a halted candidate is rolled back in place by
 * the same rule. Pure.
 */
import { AnnotationKeys, LabelKeys, LabelValues } from '../k8s/keys.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { parseLedger, serializeLedger } from '../inject/ledger.js';
// Beside the app: an ordinary container or a native sidecar, which the kubelet restarts with a new image.
import { runsBesideApp } from '../inject/pod-resources.js';
import { judgePod, podFacts, type ListedMetadata, type PodMetadata } from '../pipeline/audit.js';
import { bucketKey, everyRevision, rolloutSubject } from '../templates/rollout.js';
import type { Labels } from '../k8s/selector.js';
import type { TemplateSet } from '../templates/set.js';
import type { Template } from '../templates/template.js';

/** Why a template a pod runs stale is not updated in place (stable ids: logs, /status). */
export type InPlaceSkip =
  /** The pod's namespace does not say `sidecar-injector.io/in-place-updates: enabled`. */
  | 'namespace-not-opted-in'
  /** The revision the pod should carry says `updateStrategy: recreate`. */
  | 'recreate-strategy'
  /** The pod's revision is none the injector still knows (stable, candidate, previous). */
  | 'unknown-revision'
  /** The revisions differ in more than their sidecars' images. */
  | 'not-image-only'
  /** A sidecar's image depends on the pod (an overridable parameter, a pod field). */
  | 'image-varies'
  /** A sidecar's image is not the one its recorded revision set, or it is gone. */
  | 'altered'
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

/** One template's move to another revision in a pod. */
export interface TemplateMove {
  readonly template: string;
  readonly from: string;
  readonly to: string;
  readonly images: readonly ImageChange[];
}

export interface InPlacePlan {
  /** The pod with the moves applied (for an update with its resourceVersion); undefined when nothing moves. */
  readonly updated?: JsonObject;
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

/** Whether `to` may replace `from` in place, and the images it changes in a pod whose spec is `spec`, with the sidecars `names`. */
function moveOf(from: Template, to: Template, names: readonly string[], pod: JsonObject, set: TemplateSet): { move?: ImageChange[]; why?: InPlaceSkip } {
  const spec = isJsonObject(pod.spec) ? pod.spec : {};
  if (!inPlaceTo(from, to, set)) return { why: 'recreate-strategy' };
  if (from.imageFacts.shape !== to.imageFacts.shape) return { why: 'not-image-only' };
  const changes: ImageChange[] = [];
  for (const name of names) {
    const was = from.imageFacts.images.get(name);
    const next = to.imageFacts.images.get(name);
    if (was === undefined || next === undefined) return { why: 'image-varies' };
    const found = findContainer(spec, name);
    if (!found || found.container.image !== was) return { why: 'altered' };
    if (was === next) continue;
    if (!runsBesideApp(found.container, found.list)) return { why: 'runs-once' };
    const policy = found.container.imagePullPolicy;
    if (policy === defaultPullPolicy(was) && policy !== defaultPullPolicy(next)) return { why: 'pull-policy' };
    const containerID = statusOf(pod, name)?.containerID;
    changes.push({ container: name, list: found.list, from: was, to: next, ...(typeof containerID === 'string' ? { containerID } : {}) });
  }
  return { move: changes };
}

/**
 * The in-place plan for one running pod (as a full list returns it): each template it runs at a
 * revision other than the one it should carry, moved where the rules allow, and why not where they
 * do not. `set` is the set in force, candidates gated (what admission serves); `namespaceLabels`
 * the pod's namespace's labels.
 */
export function planInPlace(pod: JsonObject, namespaceLabels: Labels, set: TemplateSet): InPlacePlan | undefined {
  const metadata = metadataOf(pod);
  if (!metadata || !Object.hasOwn(metadata.annotations, AnnotationKeys.status) || ending(pod)) return undefined;
  const facts = podFacts(metadata);
  const verdict = judgePod(facts, namespaceLabels, set);
  const workload = bucketKey(rolloutSubject(metadata, metadata.namespace, metadata.labels));
  const stale = verdict.templates.filter((t) => t.state === 'stale' && t.want !== null && t.have !== null);
  if (stale.length === 0) return { moves: [], skipped: [], workload };
  const { ledger } = parseLedger(metadata.annotations[AnnotationKeys.status]);
  const revisions = everyRevision(set);
  const optedIn = namespaceLabels[LabelKeys.namespaceInPlace] === LabelValues.enabled;
  const moves: TemplateMove[] = [];
  const skipped: { template: string; to: string; why: InPlaceSkip }[] = [];
  for (const t of stale) {
    const to = revisions.find((r) => r.name === t.name && r.hash === t.want);
    const from = revisions.find((r) => r.name === t.name && r.hash === t.have);
    const entry = ledger.templates[t.name];
    if (!to || !from || !entry) {
      skipped.push({ template: t.name, to: t.want!, why: 'unknown-revision' });
      continue;
    }
    const { move, why } = optedIn
      ? moveOf(from, to, [...(entry.initContainers ?? []), ...(entry.containers ?? [])], pod, set)
      : { move: undefined, why: 'namespace-not-opted-in' as const };
    if (!move) skipped.push({ template: t.name, to: t.want!, why: why! });
    else moves.push({ template: t.name, from: from.hash, to: to.hash, images: move });
  }
  if (moves.length === 0) return { moves, skipped, workload };
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
 * Whether every sidecar of the pod's ledger that runs beside the app is ready, and each one
 * `updated` names (container → its containerID when it was updated) runs in another container
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
    if (updated.has(name) && (typeof seen.containerID !== 'string' || seen.containerID === updated.get(name))) return false;
  }
  return true;
}

/**
 * The automatic halt of a candidate in rollout: what its pods and workloads do. A pod carries
 * the candidate when its ledger records the candidate's revision and it holds the container as
 * the candidate adds it; it is unhealthy when such a container has restarted `restarts` times or
 * more, waits for a reason it does not get out of by itself (a crash loop, an image it cannot
 * pull, a configuration it cannot create), or has not been ready for `notReadyGraceMs`. A
 * workload the candidate takes (its pod template in the candidate's share) whose controller
 * cannot create pods counts too. Past `unhealthyPods` of both together, the candidate stops
 * taking pods. Pure.
 */
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { AnnotationKeys } from '../k8s/keys.js';
import type { TemplateSet } from '../templates/set.js';
import type { Template } from '../templates/template.js';
import { skeletonOf } from '../templates/render.js';
import { templateInForm } from '../templates/forms.js';
import { containsContainer } from '../k8s/contains.js';
import { matches, type Labels } from '../k8s/selector.js';
import { takesCandidate, bucketKey, type Rollout } from '../templates/rollout.js';

/** Waiting reasons of a container that mean the sidecar does not start. */
export const stuckReasons: ReadonlySet<string> = new Set([
  'CrashLoopBackOff',
  'ImagePullBackOff',
  'ErrImagePull',
  'InvalidImageName',
  'CreateContainerConfigError',
  'CreateContainerError',
  'RunContainerError',
]);

export interface HaltThresholds {
  /** Unhealthy pods and refused workloads of a candidate that halt it. @default 3 */
  readonly unhealthyPods: number;
  /** Restarts of one of its containers that make a pod unhealthy. @default 3 */
  readonly restarts: number;
  /** How long one of its containers may be not ready before the pod is unhealthy. @default 300000 */
  readonly notReadyGraceMs: number;
}

export const defaultHaltThresholds: HaltThresholds = { unhealthyPods: 3, restarts: 3, notReadyGraceMs: 5 * 60_000 };

/** One candidate's health: its pods, the unhealthy ones (restarting or not ready), refused workloads, and the first few reasons. */
export interface CandidateHealth {
  readonly template: string;
  readonly revision: string;
  /** The candidate's containers as every form renders them apart from the pod (its skeletons), by name. */
  readonly skeletons: ReadonlyMap<string, readonly unknown[]>;
  /** How the candidate's containers are rendered into a Guaranteed pod (its `guaranteedPods`). */
  readonly guaranteedPods: Template['guaranteedPods'];
  pods: number;
  /** Pods counted unhealthy: `restarting` + `notReady` (a pod counts once, as restarting when it is both). */
  unhealthy: number;
  /** Pods whose container crash-loops, cannot start, or restarted `restarts` times. */
  restarting: number;
  /** Pods whose container has not been ready for `notReadyGraceMs`. */
  notReady: number;
  /** Workloads the candidate takes whose controller cannot create pods. */
  refused: number;
  readonly examples: string[];
}

/** A workload whose controller reports that it cannot create pods (rollout/refusals.ts). */
export interface RefusedWorkload {
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  /** Its pod template's labels (a ReplicaSet's carry its pod-template-hash). */
  readonly labels: Labels;
  /** What the controller says, cut. */
  readonly message: string;
}

/**
 * The containers of the candidate the pod holds: those its ledger says `template`'s `revision`
 * added, and only where the pod's container of that name holds what the candidate adds in one of
 * its forms (a ledger is the pod's claim: any tenant could otherwise name its own crashing
 * container, and halt a rollout everywhere). Undefined when it records another revision or none.
 */
function candidateContainers(pod: JsonObject, health: CandidateHealth): ReadonlyMap<string, number> | undefined {
  const claimed = claimedContainers(pod, health.template, health.revision);
  if (!claimed) return undefined;
  const spec = isJsonObject(pod.spec) ? pod.spec : {};
  const held = new Map<string, number>();
  for (const list of [spec.containers, spec.initContainers]) {
    if (!Array.isArray(list)) continue;
    for (const c of list) {
      if (!isJsonObject(c) || typeof c.name !== 'string' || !claimed.has(c.name)) continue;
      if ((health.skeletons.get(c.name) ?? []).some((skeleton) => containsContainer(skeleton, c, health.guaranteedPods)))
        held.set(c.name, claimed.get(c.name)!);
    }
  }
  return held.size > 0 ? held : undefined;
}

/** The skeletons of `candidate`'s containers in each of its forms, by name. */
function skeletonsOf(candidate: Template): Map<string, unknown[]> {
  const out = new Map<string, unknown[]>();
  for (const form of ['native', 'container', 'sidecar'] as const) {
    const skeleton = skeletonOf(templateInForm(candidate, form));
    for (const c of [...skeleton.containers, ...skeleton.initContainers]) {
      const name = (c as JsonObject).name as string;
      out.set(name, [...(out.get(name) ?? []), c]);
    }
  }
  return out;
}

/**
 * The container names the ledger of `pod` says `template`'s `revision` added, each with the
 * restarts that were the injector's own (an in-place update restarts a container once).
 */
function claimedContainers(pod: JsonObject, template: string, revision: string): ReadonlyMap<string, number> | undefined {
  const metadata = isJsonObject(pod.metadata) ? pod.metadata : {};
  const annotations = isJsonObject(metadata.annotations) ? metadata.annotations : {};
  const raw = annotations[AnnotationKeys.status];
  if (typeof raw !== 'string' || raw.length > 64 * 1024) return undefined;
  try {
    const parsed = JSON.parse(raw) as { templates?: unknown };
    const entry = isJsonObject(parsed.templates) && Object.hasOwn(parsed.templates, template) ? parsed.templates[template] : undefined;
    if (!isJsonObject(entry) || entry.hash !== revision) return undefined;
    const names = [entry.containers, entry.initContainers].flatMap((list) => (Array.isArray(list) ? list : []));
    const ours = isJsonObject(entry.restarts) ? entry.restarts : {};
    const restarts = (name: string) => {
      const count = Object.hasOwn(ours, name) ? ours[name] : undefined;
      return typeof count === 'number' && Number.isSafeInteger(count) && count >= 0 ? count : 0;
    };
    return new Map(names.filter((n): n is string => typeof n === 'string').map((n) => [n, restarts(n)]));
  } catch {
    return undefined;
  }
}

/** Milliseconds since the epoch of a Kubernetes time, or undefined. */
function timeOf(value: unknown): number | undefined {
  if (typeof value !== 'string') return undefined;
  const ms = Date.parse(value);
  return Number.isNaN(ms) ? undefined : ms;
}

/** The containers of `names` that are meant to keep running: app containers, and init containers with restartPolicy Always (native sidecars). */
function longRunning(pod: JsonObject, names: ReadonlyMap<string, number>): ReadonlySet<string> {
  const spec = isJsonObject(pod.spec) ? pod.spec : {};
  const out = new Set<string>();
  for (const c of Array.isArray(spec.containers) ? spec.containers : [])
    if (isJsonObject(c) && typeof c.name === 'string' && names.has(c.name)) out.add(c.name);
  for (const c of Array.isArray(spec.initContainers) ? spec.initContainers : [])
    if (isJsonObject(c) && typeof c.name === 'string' && names.has(c.name) && c.restartPolicy === 'Always') out.add(c.name);
  return out;
}

/**
 * Since when the pod's container has been not ready: the latest of the pod's start, the
 * container's own start, and the pod's ContainersReady condition turning False. Undefined when
 * nothing says.
 */
function notReadySince(pod: JsonObject, container: JsonObject): number | undefined {
  const status = isJsonObject(pod.status) ? pod.status : {};
  const times = [timeOf(status.startTime)];
  if (isJsonObject(container.state) && isJsonObject(container.state.running)) times.push(timeOf(container.state.running.startedAt));
  for (const c of Array.isArray(status.conditions) ? status.conditions : [])
    if (isJsonObject(c) && c.type === 'ContainersReady' && c.status === 'False') times.push(timeOf(c.lastTransitionTime));
  const known = times.filter((t): t is number => t !== undefined);
  return known.length > 0 ? Math.max(...known) : undefined;
}

/** Why one of `names` is unhealthy in the pod's status, and how; undefined when none is. `names` maps each to the restarts that were the injector's own. */
function unhealthyBecause(
  pod: JsonObject,
  names: ReadonlyMap<string, number>,
  thresholds: HaltThresholds,
  now: number,
): { how: 'restarting' | 'not-ready'; why: string } | undefined {
  const status = isJsonObject(pod.status) ? pod.status : {};
  const lists = [status.containerStatuses, status.initContainerStatuses].map((list) => (Array.isArray(list) ? list : []));
  for (const list of lists) {
    for (const c of list) {
      if (!isJsonObject(c) || typeof c.name !== 'string' || !names.has(c.name)) continue;
      const waiting = isJsonObject(c.state) && isJsonObject(c.state.waiting) ? c.state.waiting.reason : undefined;
      if (typeof waiting === 'string' && stuckReasons.has(waiting)) return { how: 'restarting', why: `container ${c.name} is waiting: ${waiting}` };
      const restarts = typeof c.restartCount === 'number' ? c.restartCount - names.get(c.name)! : 0;
      if (restarts >= thresholds.restarts) return { how: 'restarting', why: `container ${c.name} restarted ${restarts} times` };
    }
  }
  // Not ready: only where the pod is meant to be running, for containers meant to keep running.
  const metadata = isJsonObject(pod.metadata) ? pod.metadata : {};
  if (status.phase === 'Succeeded' || status.phase === 'Failed' || metadata.deletionTimestamp) return undefined;
  const running = longRunning(pod, names);
  for (const list of lists) {
    for (const c of list) {
      if (!isJsonObject(c) || typeof c.name !== 'string' || !running.has(c.name) || c.ready !== false) continue;
      const since = notReadySince(pod, c);
      if (since !== undefined && now - since >= thresholds.notReadyGraceMs)
        return { how: 'not-ready', why: `container ${c.name} not ready for ${Math.floor((now - since) / 1000)} s` };
    }
  }
  return undefined;
}

/** Counts, per candidate of `set`, the pods that carry it, the unhealthy ones and its refused workloads; call `add` per pod and `addRefused` per workload, then read `health`. */
export class HealthCount {
  readonly health = new Map<string, CandidateHealth>();
  private readonly rollouts = new Map<string, Rollout>();
  /** Refused workloads already counted, per template (a Deployment's ReplicaSets are one workload). */
  private readonly refusedKeys = new Map<string, Set<string>>();

  /** `set` as on disk (its candidates' shares as written); `now` for the not-ready grace. */
  constructor(
    private readonly set: TemplateSet,
    private readonly thresholds: HaltThresholds = defaultHaltThresholds,
    private readonly now: number = Date.now(),
  ) {
    for (const r of set.rollouts?.values() ?? [])
      if (r.candidate) {
        this.rollouts.set(r.name, r);
        this.health.set(r.name, {
          template: r.name,
          revision: r.candidate.hash,
          skeletons: skeletonsOf(r.candidate),
          guaranteedPods: r.candidate.guaranteedPods,
          pods: 0,
          unhealthy: 0,
          restarting: 0,
          notReady: 0,
          refused: 0,
          examples: [],
        });
      }
  }

  add(pod: unknown): void {
    if (!isJsonObject(pod)) return;
    for (const h of this.health.values()) {
      const names = candidateContainers(pod, h);
      if (!names) continue;
      h.pods++;
      const bad = unhealthyBecause(pod, names, this.thresholds, this.now);
      if (!bad) continue;
      h.unhealthy++;
      if (bad.how === 'restarting') h.restarting++;
      else h.notReady++;
      const metadata = isJsonObject(pod.metadata) ? pod.metadata : {};
      if (h.examples.length < 3) h.examples.push(`pod ${String(metadata.namespace).slice(0, 63)}/${String(metadata.name).slice(0, 253)}: ${bad.why}`);
    }
  }

  /**
   * A workload whose controller cannot create pods: counted for each candidate whose share takes
   * its pods (the bucketing admission uses, by its pod template's labels and its owner) and whose
   * objectSelector selects them; once per workload as the share buckets it.
   */
  addRefused(workload: RefusedWorkload): void {
    const subject = { namespace: workload.namespace, name: workload.name, labels: workload.labels, owner: { kind: workload.kind, name: workload.name } };
    for (const h of this.health.values()) {
      const rollout = this.rollouts.get(h.template)!;
      if (!takesCandidate(rollout, subject) || !matches(rollout.candidate!.objectSelector, workload.labels)) continue;
      const keys = this.refusedKeys.get(h.template) ?? new Set<string>();
      this.refusedKeys.set(h.template, keys);
      const key = bucketKey(subject);
      if (keys.has(key)) continue;
      keys.add(key);
      h.refused++;
      if (h.examples.length < 3)
        h.examples.push(
          `${workload.kind} ${workload.namespace.slice(0, 63)}/${workload.name.slice(0, 253)} cannot create pods: ${workload.message.slice(0, 300)}`,
        );
    }
  }

  /** The candidates to halt, with why: at least `unhealthyPods` unhealthy pods and refused workloads together. */
  halts(): Map<string, { revision: string; why: string }> {
    const out = new Map<string, { revision: string; why: string }>();
    for (const h of this.health.values())
      if (h.unhealthy + h.refused >= this.thresholds.unhealthyPods) out.set(h.template, { revision: h.revision, why: `halted: ${describeHealth(h)}` });
    return out;
  }
}

/** A candidate's health in a sentence: how many pods are unhealthy and how, how many workloads cannot create pods, and examples. */
export function describeHealth(h: CandidateHealth): string {
  const kinds = [h.restarting > 0 ? `${h.restarting} restarting` : '', h.notReady > 0 ? `${h.notReady} not ready` : ''].filter(Boolean).join(', ');
  const pods = `${h.unhealthy} of ${h.pods} pods with the candidate are unhealthy${h.notReady > 0 ? ` (${kinds})` : ''}`;
  const refused = h.refused > 0 ? ` and ${h.refused} of its workloads cannot create pods` : '';
  return `${pods}${refused}${h.examples.length > 0 ? ` (${h.examples.join('; ')})` : ''}`;
}

/**
 * The automatic halt of a candidate in rollout: what its pods do. A pod carries the candidate
 * when its ledger records the candidate's revision; it is unhealthy when a container the
 * candidate added has restarted `restarts` times or more, or waits for a reason it does not
 * get out of by itself (a crash loop, an image it cannot pull, a configuration it cannot
 * create). Past `unhealthyPods` such pods, the candidate stops taking pods. Pure.
 */
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { AnnotationKeys } from '../k8s/keys.js';
import type { TemplateSet } from '../templates/set.js';
import type { Template } from '../templates/template.js';
import { skeletonOf } from '../templates/render.js';
import { templateInForm } from '../templates/forms.js';
import { containsContainer } from '../k8s/contains.js';

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
  /** Unhealthy pods of a candidate that halt it. @default 3 */
  readonly unhealthyPods: number;
  /** Restarts of one of its containers that make a pod unhealthy. @default 3 */
  readonly restarts: number;
}

export const defaultHaltThresholds: HaltThresholds = { unhealthyPods: 3, restarts: 3 };

/** One candidate's health: its pods, the unhealthy ones, and the first few reasons. */
export interface CandidateHealth {
  readonly template: string;
  readonly revision: string;
  /** The candidate's containers as every form renders them apart from the pod (its skeletons), by name. */
  readonly skeletons: ReadonlyMap<string, readonly unknown[]>;
  pods: number;
  unhealthy: number;
  readonly examples: string[];
}

/**
 * The containers of the candidate the pod holds: those its ledger says `template`'s `revision`
 * added, and only where the pod's container of that name holds what the candidate adds in one of
 * its forms (a ledger is the pod's claim: any tenant could otherwise name its own crashing
 * container, and halt a rollout everywhere). Undefined when it records another revision or none.
 */
function candidateContainers(pod: JsonObject, health: CandidateHealth): ReadonlySet<string> | undefined {
  const claimed = claimedContainers(pod, health.template, health.revision);
  if (!claimed) return undefined;
  const spec = isJsonObject(pod.spec) ? pod.spec : {};
  const held = new Set<string>();
  for (const list of [spec.containers, spec.initContainers]) {
    if (!Array.isArray(list)) continue;
    for (const c of list) {
      if (!isJsonObject(c) || typeof c.name !== 'string' || !claimed.has(c.name)) continue;
      if ((health.skeletons.get(c.name) ?? []).some((skeleton) => containsContainer(skeleton, c))) held.add(c.name);
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

/** The container names the ledger of `pod` says `template`'s `revision` added. */
function claimedContainers(pod: JsonObject, template: string, revision: string): ReadonlySet<string> | undefined {
  const metadata = isJsonObject(pod.metadata) ? pod.metadata : {};
  const annotations = isJsonObject(metadata.annotations) ? metadata.annotations : {};
  const raw = annotations[AnnotationKeys.status];
  if (typeof raw !== 'string' || raw.length > 64 * 1024) return undefined;
  try {
    const parsed = JSON.parse(raw) as { templates?: unknown };
    const entry = isJsonObject(parsed.templates) && Object.hasOwn(parsed.templates, template) ? parsed.templates[template] : undefined;
    if (!isJsonObject(entry) || entry.hash !== revision) return undefined;
    const names = [entry.containers, entry.initContainers].flatMap((list) => (Array.isArray(list) ? list : []));
    return new Set(names.filter((n): n is string => typeof n === 'string'));
  } catch {
    return undefined;
  }
}

/** Why one of `names` is unhealthy in the pod's status, or undefined. */
function unhealthyBecause(pod: JsonObject, names: ReadonlySet<string>, restarts: number): string | undefined {
  const status = isJsonObject(pod.status) ? pod.status : {};
  for (const list of [status.containerStatuses, status.initContainerStatuses]) {
    if (!Array.isArray(list)) continue;
    for (const c of list) {
      if (!isJsonObject(c) || typeof c.name !== 'string' || !names.has(c.name)) continue;
      const waiting = isJsonObject(c.state) && isJsonObject(c.state.waiting) ? c.state.waiting.reason : undefined;
      if (typeof waiting === 'string' && stuckReasons.has(waiting)) return `container ${c.name} is waiting: ${waiting}`;
      if (typeof c.restartCount === 'number' && c.restartCount >= restarts) return `container ${c.name} restarted ${c.restartCount} times`;
    }
  }
  return undefined;
}

/** Counts, per candidate of `set`, the pods that carry it and the unhealthy ones; call `add` per pod, then read `health`. */
export class HealthCount {
  readonly health = new Map<string, CandidateHealth>();

  constructor(
    private readonly set: TemplateSet,
    private readonly thresholds: HaltThresholds = defaultHaltThresholds,
  ) {
    for (const r of set.rollouts?.values() ?? [])
      if (r.candidate)
        this.health.set(r.name, { template: r.name, revision: r.candidate.hash, skeletons: skeletonsOf(r.candidate), pods: 0, unhealthy: 0, examples: [] });
  }

  add(pod: unknown): void {
    if (!isJsonObject(pod)) return;
    for (const h of this.health.values()) {
      const names = candidateContainers(pod, h);
      if (!names) continue;
      h.pods++;
      const why = unhealthyBecause(pod, names, this.thresholds.restarts);
      if (!why) continue;
      h.unhealthy++;
      const metadata = isJsonObject(pod.metadata) ? pod.metadata : {};
      if (h.examples.length < 3) h.examples.push(`pod ${String(metadata.namespace).slice(0, 63)}/${String(metadata.name).slice(0, 253)}: ${why}`);
    }
  }

  /** The candidates to halt, with why: at least `unhealthyPods` unhealthy pods. */
  halts(): Map<string, { revision: string; why: string }> {
    const out = new Map<string, { revision: string; why: string }>();
    for (const h of this.health.values())
      if (h.unhealthy >= this.thresholds.unhealthyPods)
        out.set(h.template, {
          revision: h.revision,
          why: `halted: ${h.unhealthy} of ${h.pods} pods with the candidate are unhealthy (${h.examples.join('; ')})`,
        });
    return out;
  }
}

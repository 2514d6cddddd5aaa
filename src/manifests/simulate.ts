/**
 * What a change of templates does to one workload, from two admission decisions on the pod its
 * controller would create (the templates in force, and the new ones) and the API server's answer
 * to a dry-run create of the new pod: the sidecars added, removed and changed, the QoS class
 * before and after, whether a Job still completes, and the verdict with who refused it. Pure.
 */
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { qosClass } from '../k8s/qos.js';
import { addQuantities, formatQuantity, parseQuantity, type Quantity } from '../k8s/quantity.js';
import type { PodOutcome } from '../pipeline/admit.js';

/** A workload's sidecars by template: `template@revision`. */
function revisions(outcome: PodOutcome): Map<string, string> {
  const out = new Map<string, string>();
  if (outcome.decision !== 'patched' && !(outcome.decision === 'allowed' && outcome.reason === 'already-injected')) return out;
  const injected = outcome.decision === 'patched' ? new Set(outcome.injection.injected) : undefined;
  for (const t of outcome.templates) if (!injected || injected.has(t.name)) out.set(t.name, t.hash);
  return out;
}

/** How the sidecars of a workload's next pod change. */
export interface SidecarChange {
  readonly added: readonly string[];
  readonly removed: readonly string[];
  /** `template: old → new` revision. */
  readonly changed: readonly string[];
}

export function sidecarChange(before: PodOutcome, after: PodOutcome): SidecarChange {
  const was = revisions(before);
  const now = revisions(after);
  return {
    added: [...now.keys()].filter((t) => !was.has(t)).map((t) => `${t}@${now.get(t)}`),
    removed: [...was.keys()].filter((t) => !now.has(t)).map((t) => `${t}@${was.get(t)}`),
    changed: [...now.keys()].filter((t) => was.has(t) && was.get(t) !== now.get(t)).map((t) => `${t}: ${was.get(t)} → ${now.get(t)}`),
  };
}

/** The pod an outcome makes: the patched pod, else the pod as it was. */
export function podOf(outcome: PodOutcome, original: JsonObject): JsonObject {
  return outcome.decision === 'patched' ? outcome.injection.pod : original;
}

/** The QoS class of a pod object. */
export const qosOf = (pod: JsonObject): string => qosClass(isJsonObject(pod.spec) ? pod.spec : {});

/**
 * Whether a pod that runs to completion still completes with its sidecars: every container in
 * `containers` must be one of its own or exit by itself (a template's `endsOnItsOwn`); native
 * sidecars (init containers that restart) end with the pod.
 */
export function stillCompletes(outcome: PodOutcome): boolean {
  if (outcome.decision !== 'patched') return true;
  const ledger = outcome.injection.ledger.templates;
  return outcome.templates.every((t) => t.endsOnItsOwn || !(ledger[t.name]?.containers?.length ?? 0));
}

/** A pod's cpu and memory, requested and limited, summed over what runs at once: its containers and native sidecars (requests defaulted from limits, as the API server does). */
export interface PodResources {
  readonly requests: { readonly cpu: string; readonly memory: string };
  readonly limits: { readonly cpu: string; readonly memory: string };
}

export function podResources(pod: JsonObject): PodResources {
  const spec = isJsonObject(pod.spec) ? pod.spec : {};
  const list = (value: unknown) => (Array.isArray(value) ? value.filter(isJsonObject) : []);
  const running = [...list(spec.containers), ...list(spec.initContainers).filter((c) => c.restartPolicy === 'Always')];
  const zero: Quantity = parseQuantity('0')!;
  const total = (kind: 'requests' | 'limits', resource: 'cpu' | 'memory') => {
    let sum = zero;
    for (const c of running) {
      const resources = isJsonObject(c.resources) ? c.resources : {};
      const values = isJsonObject(resources[kind]) ? resources[kind] : {};
      const limits = isJsonObject(resources.limits) ? resources.limits : {};
      // As the API server defaults them: a request not stated is the limit, when there is one.
      const q = parseQuantity(values[resource]) ?? (kind === 'requests' ? parseQuantity(limits[resource]) : undefined);
      if (q) sum = addQuantities(sum, q);
    }
    return formatQuantity(sum);
  };
  return {
    requests: { cpu: total('requests', 'cpu'), memory: total('requests', 'memory') },
    limits: { cpu: total('limits', 'cpu'), memory: total('limits', 'memory') },
  };
}

/** Who refused a dry-run create, read from the API server's message. */
export type RefusedBy = 'injector' | 'webhook' | 'policy' | 'pod-security' | 'quota' | 'limit-range' | 'api-server';

export function refusedBy(message: string): { readonly by: RefusedBy; readonly name?: string } {
  const webhook = /admission webhook "([^"]{1,253})" denied the request/.exec(message);
  if (webhook) return { by: 'webhook', name: webhook[1]! };
  const policy = /ValidatingAdmissionPolicy '([^']{1,253})'/.exec(message);
  if (policy) return { by: 'policy', name: policy[1]! };
  if (/violates PodSecurity/.test(message)) return { by: 'pod-security' };
  if (/exceeded quota|must specify (?:limits|requests)\./.test(message)) return { by: 'quota' };
  if (/(?:maximum|minimum) (?:cpu|memory|ephemeral-storage)[^ ]* usage per (?:Container|Pod)|LimitRange|limit to request ratio/.test(message))
    return { by: 'limit-range' };
  return { by: 'api-server' };
}

/**
 * A pod's QoS class as the kubelet computes it (`ComputePodQOS`, pkg/apis/core/helper/qos in
 * Kubernetes): only cpu and memory count. With pod-level resources (`spec.resources` holding a
 * cpu or memory request or limit), the class is the pod's own: Guaranteed when it limits cpu and
 * memory and requests what it limits. Otherwise every container and init container counts:
 * BestEffort when none requests or limits anything, Guaranteed when every one limits cpu and
 * memory and the requests, summed, equal the limits, summed; else Burstable. A request left
 * unset where a limit is set counts as that limit, as the API server defaults it (also after a
 * webhook's patch, before the pod is stored). Pure.
 */
import { isJsonObject, type JsonObject } from './json.js';
import { addQuantities, parseQuantity, type Quantity } from './quantity.js';

export type QosClass = 'Guaranteed' | 'Burstable' | 'BestEffort';

/** The resources the QoS class is computed from. */
export const qosResources = ['cpu', 'memory'] as const;

/** The cpu and memory values (in qosResources' order) above zero of one `requests` or `limits` map, undefined where unset. */
type Values = [Quantity | undefined, Quantity | undefined];

function positive(values: unknown): Values {
  const out: Values = [undefined, undefined];
  if (!isJsonObject(values)) return out;
  for (let r = 0; r < qosResources.length; r++) {
    const name = qosResources[r]!;
    const q = Object.hasOwn(values, name) ? parseQuantity(values[name]) : undefined;
    if (q && q.num > 0n) out[r] = q;
  }
  return out;
}

const count = (values: Values) => (values[0] ? 1 : 0) + (values[1] ? 1 : 0);

const equal = (a: Quantity, b: Quantity) => a.num * b.den === b.num * a.den;

/** `requests` with each unset one defaulted from `limits`, as the API server does. */
function defaulted(requests: Values, limits: Values): Values {
  for (let r = 0; r < requests.length; r++) requests[r] ??= limits[r];
  return requests;
}

/** The class of requests and limits summed as the kubelet sums them; `allLimited`: every container limits cpu and memory. */
function classOf(requests: Values, limits: Values, allLimited: boolean): QosClass {
  if (count(requests) === 0 && count(limits) === 0) return 'BestEffort';
  if (!allLimited) return 'Burstable';
  for (let r = 0; r < requests.length; r++) {
    const request = requests[r];
    const limit = limits[r];
    if (request && (!limit || !equal(limit, request))) return 'Burstable';
  }
  return count(requests) === count(limits) ? 'Guaranteed' : 'Burstable';
}

/** Whether the pod sets pod-level resources the class is computed from. */
export function podLevelResources(spec: JsonObject): boolean {
  const resources = spec.resources;
  return isJsonObject(resources) && (count(positive(resources.requests)) > 0 || count(positive(resources.limits)) > 0);
}

/** The QoS class of a pod with `spec`. */
export function qosClass(spec: JsonObject): QosClass {
  if (podLevelResources(spec)) {
    const resources = spec.resources as JsonObject;
    const limits = positive(resources.limits);
    return classOf(defaulted(positive(resources.requests), limits), limits, count(limits) === qosResources.length);
  }
  const requests: Values = [undefined, undefined];
  const limits: Values = [undefined, undefined];
  let allLimited = true;
  for (const list of [spec.containers, spec.initContainers]) {
    for (const container of Array.isArray(list) ? list : []) {
      const resources = isJsonObject(container) && isJsonObject(container.resources) ? container.resources : {};
      const own = positive(resources.limits);
      const wanted = defaulted(positive(resources.requests), own);
      for (let r = 0; r < qosResources.length; r++) {
        const request = wanted[r];
        const limit = own[r];
        if (request) requests[r] = requests[r] ? addQuantities(requests[r]!, request) : request;
        if (limit) limits[r] = limits[r] ? addQuantities(limits[r]!, limit) : limit;
      }
      if (count(own) < qosResources.length) allLimited = false;
    }
  }
  return classOf(requests, limits, allLimited);
}

/** How a template's containers behave in a Guaranteed pod (its `guaranteedPods` field). */
export type GuaranteedMode = 'requests-from-limits' | 'limits-from-requests';

/** A quantity above zero (what the kubelet counts). */
const statedQuantity = (value: unknown): boolean => {
  const q = parseQuantity(value);
  return q !== undefined && q.num > 0n;
};

/**
 * `container` as it must be in a Guaranteed pod to keep the pod Guaranteed: cpu and memory
 * requested as much as limited, taken from its limits (`requests-from-limits`) or its requests
 * (`limits-from-requests`); undefined when it does not state both values to take them from.
 * Other resources are left as they are. `stated` says what counts as a value: a quantity above
 * zero for a container, anything for a template's skeleton (a parameter is a pattern there).
 */
export function guaranteedContainer(container: JsonObject, mode: GuaranteedMode, stated: (value: unknown) => boolean = statedQuantity): JsonObject | undefined {
  const resources = isJsonObject(container.resources) ? container.resources : {};
  const from = mode === 'requests-from-limits' ? 'limits' : 'requests';
  const to = mode === 'requests-from-limits' ? 'requests' : 'limits';
  const source = isJsonObject(resources[from]) ? resources[from] : {};
  if (!qosResources.every((name) => Object.hasOwn(source, name) && stated(source[name]))) return undefined;
  const target: JsonObject = { ...(isJsonObject(resources[to]) ? resources[to] : {}) };
  for (const name of qosResources) target[name] = source[name]!;
  return { ...container, resources: { ...resources, [to]: target } };
}

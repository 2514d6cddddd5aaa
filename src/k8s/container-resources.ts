/**
 * A container's `resources` compared as the API server and the kubelet hold them: a request the
 * container leaves out is its limit (the API server defaults one from the other), and quantities
 * are equal by value (`0.5` is `500m`, `1Gi` is `1024Mi`). Pure.
 */
import { isJsonObject, type JsonObject } from './json.js';
import { sameQuantity } from './quantity.js';

/** `requests` and `limits` of `resources`, with each missing request taken from its limit. */
function defaulted(resources: unknown): { requests: JsonObject; limits: JsonObject } {
  const own = isJsonObject(resources) ? resources : {};
  const limits: JsonObject = isJsonObject(own.limits) ? { ...own.limits } : {};
  const requests: JsonObject = { ...limits, ...(isJsonObject(own.requests) ? own.requests : {}) };
  return { requests, limits };
}

function sameValues(a: JsonObject, b: JsonObject): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) if (!Object.hasOwn(a, key) || !Object.hasOwn(b, key) || !sameQuantity(a[key], b[key])) return false;
  return true;
}

/** True when two containers' `resources` request and limit the same (claims aside: a resize never changes them). */
export function sameContainerResources(a: unknown, b: unknown): boolean {
  const x = defaulted(a);
  const y = defaulted(b);
  return sameValues(x.requests, y.requests) && sameValues(x.limits, y.limits);
}

/** `resources.claims`, as canonical text: what no resize changes. */
export function resourceClaims(resources: unknown): string {
  return JSON.stringify(isJsonObject(resources) && Array.isArray(resources.claims) ? resources.claims : []);
}

/**
 * Pod-level resources (`spec.resources`, KEP-2837; CONTRACT R-72). When a pod sets them, the
 * API server requires the containers' aggregate requests within the pod's requests and each
 * container's limits within the pod's limits. A sidecar must not eat the app's budget or get
 * the pod rejected, so the pod's budget grows by the sidecars' share: for every resource the
 * pod budgets (in `requests` or `limits`), the sum of what the added sidecars request or limit.
 * Only sidecars count (containers, and init containers with `restartPolicy: Always`): an
 * ordinary init container runs before the app and alone. Pure.
 */
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { addQuantities, formatQuantity, parseQuantity, type Quantity } from '../k8s/quantity.js';

/** What was added to the pod's budget, per list and resource name, as quantity text. */
export interface ResourceGrowth {
  requests?: Record<string, string>;
  limits?: Record<string, string>;
}

const lists = ['requests', 'limits'] as const;

/** True when `container` runs beside the app containers (a regular container or a native sidecar). */
export function runsBesideApp(container: JsonObject, list: 'containers' | 'initContainers'): boolean {
  return list === 'containers' || container.restartPolicy === 'Always';
}

/** A container's own request or limit of `name`, when it states one. */
function own(container: JsonObject, list: 'requests' | 'limits', name: string): Quantity | undefined {
  const resources = container.resources;
  const values = isJsonObject(resources) ? resources[list] : undefined;
  const q = isJsonObject(values) ? parseQuantity(values[name]) : undefined;
  return q && q.num > 0n ? q : undefined;
}

/**
 * The share `sidecars` claim of the pod's budget `podResources`; undefined when nothing is
 * budgeted or claimed. A sidecar's request is its request, else its limit (the API server
 * defaults one from the other); its limit is its limit, else its request — so the pod's
 * limits grow at least as much as its requests, and requests never pass limits.
 */
export function sidecarShare(podResources: unknown, sidecars: readonly JsonObject[]): ResourceGrowth | undefined {
  if (!isJsonObject(podResources) || sidecars.length === 0) return undefined;
  let share: ResourceGrowth | undefined;
  for (const list of lists) {
    const budget = podResources[list];
    if (!isJsonObject(budget)) continue;
    const other = list === 'requests' ? 'limits' : 'requests';
    for (const name of Object.keys(budget)) {
      let sum: Quantity | undefined;
      for (const sidecar of sidecars) {
        const q = own(sidecar, list, name) ?? own(sidecar, other, name);
        if (q) sum = sum ? addQuantities(sum, q) : q;
      }
      if (sum) ((share ??= {})[list] ??= Object.create(null) as Record<string, string>)[name] = formatQuantity(sum);
    }
  }
  return share;
}

/** Adds two growths (the same sidecars' shares recorded over two calls). */
export function addGrowth(a: ResourceGrowth | undefined, b: ResourceGrowth | undefined): ResourceGrowth | undefined {
  if (!a) return b;
  if (!b) return a;
  const out: ResourceGrowth = {};
  for (const list of lists) {
    const merged: Record<string, string> = Object.assign(Object.create(null), a[list]);
    for (const [name, value] of Object.entries(b[list] ?? {})) {
      const before = parseQuantity(merged[name]);
      const added = parseQuantity(value);
      merged[name] = before && added ? formatQuantity(addQuantities(before, added)) : value;
    }
    if (Object.keys(merged).length > 0) out[list] = merged;
  }
  return out;
}

/**
 * The pod's `spec.resources` grown by `growth` (with `taken: true`, shrunk by it: the budget
 * before the sidecars' share); resources whose budget is not a quantity are left as they are
 * (the API server refuses such a pod anyway).
 */
export function grownResources(podResources: JsonObject, growth: ResourceGrowth, { taken = false } = {}): JsonObject {
  const out: JsonObject = { ...podResources };
  for (const list of lists) {
    const add = growth[list];
    const budget = podResources[list];
    if (!add || !isJsonObject(budget)) continue;
    const next: JsonObject = { ...budget };
    for (const [name, value] of Object.entries(add)) {
      const before = parseQuantity(budget[name]);
      const extra = parseQuantity(value);
      if (before && extra) next[name] = formatQuantity(addQuantities(before, taken ? { ...extra, num: -extra.num } : extra));
    }
    out[list] = next;
  }
  return out;
}

/** `cpu +10m, memory +64Mi (requests); memory +128Mi (limits)`. */
export function describeGrowth(growth: ResourceGrowth): string {
  return lists
    .filter((list) => growth[list] && Object.keys(growth[list]!).length > 0)
    .map(
      (list) =>
        `${Object.entries(growth[list]!)
          .map(([name, value]) => `${name} +${value}`)
          .join(', ')} (${list})`,
    )
    .join('; ');
}

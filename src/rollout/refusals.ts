/**
 * Workloads whose controller cannot create pods, for the automatic halt (halt.ts): what the
 * controllers record. The controller of each kind that creates pods (k8s/workloads.ts) writes
 * a Warning Event with reason `FailedCreate` on its object when a pod create is refused (the
 * message quotes the API server); the ReplicaSet controller also sets the status condition
 * `ReplicaFailure` with reason `FailedCreate` until a create succeeds again. So: the
 * `FailedCreate` Events of the cluster (one field-selected list, read page by page), recent
 * ones only, then one GET per workload they name (bounded) for its pod template's labels; a
 * ReplicaSet counts only while its condition still says so.
 *
 * Events are tenant-writable: anyone who may create Events in a namespace can name workloads
 * that do not exist, or write megabyte messages. So the list is read in pages bounded in bytes
 * (request.ts), only Events about a workload of their own namespace count, each namespace names
 * at most `maxPerNamespace` workloads, and the GETs go round the namespaces (each namespace's
 * first workload, then each one's second, …): a namespace's forged Events use its own slots,
 * never another namespace's.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { KubernetesApiError } from '../errors.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { isDns1123Label, isDns1123Subdomain } from '../k8s/label-syntax.js';
import { getJson, listPages } from '../kube-api/request.js';
import { isWorkloadKind, workloadPath } from '../k8s/workloads.js';
import type { RefusedWorkload } from './halt.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';

export interface RefusalOptions {
  /** Events last seen longer ago than this do not count. @default 600000 */
  readonly windowMs?: number;
  /** Workloads read at most per look, taken round the namespaces. @default 200 */
  readonly maxWorkloads?: number;
  /** Workloads one namespace's Events may name per look. @default 5 */
  readonly maxPerNamespace?: number;
  /** Now, in milliseconds since the epoch. */
  readonly now: number;
  readonly timeoutMs?: number;
  /** The most bytes of one page of Events (listPages). @default its own */
  readonly maxPageBytes?: number;
}

/** When an Event was last seen: its series, its lastTimestamp, or its eventTime. */
function lastSeen(event: JsonObject): number | undefined {
  const series = isJsonObject(event.series) ? event.series.lastObservedTime : undefined;
  for (const value of [series, event.lastTimestamp, event.eventTime, event.firstTimestamp]) {
    if (typeof value !== 'string') continue;
    const ms = Date.parse(value);
    if (!Number.isNaN(ms)) return ms;
  }
  return undefined;
}

/** The ReplicaSet's `ReplicaFailure` condition with reason FailedCreate, if it holds. */
function replicaFailure(workload: JsonObject): string | undefined {
  const status = isJsonObject(workload.status) ? workload.status : {};
  for (const c of Array.isArray(status.conditions) ? status.conditions : [])
    if (isJsonObject(c) && c.type === 'ReplicaFailure' && c.status === 'True' && c.reason === 'FailedCreate')
      return typeof c.message === 'string' ? c.message : 'ReplicaFailure: FailedCreate';
  return undefined;
}

/** The labels of the workload's pod template (a null-prototype map: the keys are the cluster's data). */
function templateLabels(workload: JsonObject): Record<string, string> {
  const spec = isJsonObject(workload.spec) ? workload.spec : {};
  const template = isJsonObject(spec.template) ? spec.template : {};
  const metadata = isJsonObject(template.metadata) ? template.metadata : {};
  const labels: Record<string, string> = Object.create(null);
  if (isJsonObject(metadata.labels)) for (const [k, v] of Object.entries(metadata.labels)) if (typeof v === 'string') labels[k] = v;
  return labels;
}

/** A workload a FailedCreate Event names. */
interface NamedWorkload {
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly message: string;
}

/** The workloads to read: each namespace's first, then each one's second, … up to `max`. */
export function roundTheNamespaces(byNamespace: ReadonlyMap<string, ReadonlyMap<string, NamedWorkload>>, max: number): NamedWorkload[] {
  const lists = [...byNamespace.values()].map((named) => [...named.values()]);
  const out: NamedWorkload[] = [];
  for (let round = 0; out.length < max; round++) {
    let any = false;
    for (const list of lists) {
      if (round >= list.length) continue;
      any = true;
      out.push(list[round]!);
      if (out.length >= max) break;
    }
    if (!any) break;
  }
  return out;
}

/** The workloads that cannot create pods now, as their controllers record it. */
export async function refusedWorkloads(kubeConfig: KubeConfig, options: RefusalOptions): Promise<RefusedWorkload[]> {
  const windowMs = options.windowMs ?? 10 * 60_000;
  const max = options.maxWorkloads ?? 200;
  const perNamespace = options.maxPerNamespace ?? 5;
  const timeoutMs = options.timeoutMs ?? 30_000;
  // By namespace, in list order; at most `max` namespaces (no more could get a GET), each at most `perNamespace` workloads.
  const byNamespace = new Map<string, Map<string, NamedWorkload>>();
  await listPages<unknown>(
    kubeConfig,
    `${apiPath(apiResources.coreEvents)}?${new URLSearchParams({ fieldSelector: 'reason=FailedCreate' })}`,
    { pageSize: 500, timeoutMs, ...(options.maxPageBytes ? { maxPageBytes: options.maxPageBytes } : {}), onRestart: () => byNamespace.clear() },
    (page) => {
      for (const event of page) {
        if (!isJsonObject(event) || event.reason !== 'FailedCreate' || event.type !== 'Warning') continue;
        const about = isJsonObject(event.involvedObject) ? event.involvedObject : {};
        const { kind, namespace, name } = about;
        if (typeof kind !== 'string' || !isWorkloadKind(kind) || typeof namespace !== 'string' || typeof name !== 'string') continue;
        // Names an object could have, or nothing: an Event's fields are whatever its writer chose.
        if (namespace.length > 63 || !isDns1123Label(namespace) || name.length > 253 || !isDns1123Subdomain(name)) continue;
        // A controller records a workload's Event in the workload's own namespace. The API server
        // does not hold an Event to that, so one written elsewhere about another namespace's
        // workload is a claim from outside it: never counted, never using that namespace's slots.
        const where = isJsonObject(event.metadata) ? event.metadata.namespace : undefined;
        if (where !== namespace) continue;
        const seen = lastSeen(event);
        if (seen === undefined || options.now - seen > windowMs) continue;
        let named = byNamespace.get(namespace);
        if (!named) {
          if (byNamespace.size >= max) continue;
          named = new Map();
          byNamespace.set(namespace, named);
        }
        const key = `${kind}/${name}`;
        if (named.has(key) || named.size >= perNamespace) continue;
        named.set(key, { kind, namespace, name, message: typeof event.message === 'string' ? event.message.slice(0, 1000) : '' });
      }
    },
  );
  const chosen = roundTheNamespaces(byNamespace, max);
  const out: RefusedWorkload[] = [];
  for (const { kind, namespace, name, message } of chosen) {
    const path = workloadPath(kind, namespace, name)!;
    let workload: unknown;
    try {
      workload = await getJson(kubeConfig, path, timeoutMs, undefined, 'get');
    } catch (err) {
      // Deleted since: nothing to count.
      if (err instanceof KubernetesApiError && err.statusCode === 404) continue;
      throw err;
    }
    if (!isJsonObject(workload)) continue;
    // A ReplicaSet's condition is its current state: gone once a create succeeded again.
    const condition = kind === 'ReplicaSet' ? replicaFailure(workload) : message;
    if (condition === undefined) continue;
    out.push({ kind, namespace, name, labels: templateLabels(workload), message: condition });
  }
  return out;
}

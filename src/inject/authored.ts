/**
 * The pod as its author sent it, from a pod the injector patched: every item its ledger records
 * (containers, native sidecars, volumes, pull secrets, labels, annotations, what was added to
 * the pod's own containers, the pod-level resources grown for the sidecars) taken out again, and
 * the ledger with them. What `simulate` sends for a bare pod, whose re-create starts from the
 * author's manifest, not from the stored pod. The ledger is read as written (a pod can forge
 * one): this is a prediction for an operator, never a decision. Pure.
 */
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { AnnotationKeys } from '../k8s/keys.js';
import { appItemKinds, itemKey, parseLedger, type LedgerEntry } from './ledger.js';
import { addGrowth, grownResources, type ResourceGrowth } from './pod-resources.js';

const namedLists = ['containers', 'initContainers', 'volumes', 'imagePullSecrets'] as const;

export function withoutInjected(pod: JsonObject): JsonObject {
  const metadata = isJsonObject(pod.metadata) ? pod.metadata : {};
  const annotations = isJsonObject(metadata.annotations) ? metadata.annotations : {};
  const raw = annotations[AnnotationKeys.status];
  if (typeof raw !== 'string') return pod;
  const entries: LedgerEntry[] = Object.values(parseLedger(raw).ledger.templates);
  const recorded = (kind: (typeof namedLists)[number] | 'labels' | 'annotations') => new Set(entries.flatMap((e) => e[kind] ?? []));

  const spec: JsonObject = isJsonObject(pod.spec) ? { ...pod.spec } : {};
  for (const list of namedLists) {
    const items = spec[list];
    if (!Array.isArray(items)) continue;
    const ours = recorded(list);
    const kept = items.filter((item) => !(isJsonObject(item) && typeof item.name === 'string' && ours.has(item.name)));
    if (kept.length > 0 || list === 'containers') spec[list] = kept;
    else delete spec[list];
  }
  // What was added to the pod's own containers, by container name and item key.
  if (Array.isArray(spec.containers))
    spec.containers = spec.containers.map((container) => {
      if (!isJsonObject(container) || typeof container.name !== 'string') return container;
      const name = container.name;
      const added = entries.map((e) => (e.appContainers && Object.hasOwn(e.appContainers, name) ? e.appContainers[name] : undefined)).filter((a) => a);
      if (added.length === 0) return container;
      const out: JsonObject = { ...container };
      for (const kind of appItemKinds) {
        const keys = new Set(added.flatMap((a) => a![kind] ?? []));
        const items = out[kind];
        if (keys.size === 0 || !Array.isArray(items)) continue;
        const kept = items.filter((item) => !(isJsonObject(item) && keys.has(itemKey(kind, item))));
        if (kept.length > 0) out[kind] = kept;
        else delete out[kind];
      }
      return out;
    });
  const growth = entries.reduce<ResourceGrowth | undefined>((sum, e) => addGrowth(sum, e.podResources), undefined);
  if (growth && isJsonObject(spec.resources)) spec.resources = grownResources(spec.resources, growth, { taken: true });

  const drop = (map: unknown, keys: ReadonlySet<string>): JsonObject | undefined => {
    if (!isJsonObject(map)) return undefined;
    const kept = Object.fromEntries(Object.entries(map).filter(([key]) => !keys.has(key)));
    return Object.keys(kept).length > 0 ? kept : undefined;
  };
  const { labels: _labels, annotations: _annotations, ...rest } = metadata;
  const labels = drop(metadata.labels, recorded('labels'));
  const kept = drop(annotations, new Set([...recorded('annotations'), AnnotationKeys.status]));
  return { ...pod, metadata: { ...rest, ...(labels ? { labels } : {}), ...(kept ? { annotations: kept } : {}) }, spec };
}

/**
 * The pod as its author sent it, from a pod the injector patched: every item its ledger records
 * (containers, native sidecars, volumes, pull secrets, labels, annotations, what was added to
 * the pod's own containers, the pod-level resources grown for the sidecars) taken out again, and
 * the ledger with them. What `simulate` sends for a bare pod, whose re-create starts from the
 * author's manifest, not from the stored pod. The ledger is a claim (a pod can write one): only
 * what the templates in force back, as admission believes it (trust.ts), is taken out, so a
 * forged entry cannot strip the pod's own containers from the simulation. Pure.
 */
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { AnnotationKeys } from '../k8s/keys.js';
import { parsePod } from '../k8s/pod.js';
import type { TemplateSet } from '../templates/set.js';
import { appItemKinds, itemKey, parseLedger, type LedgerEntry } from './ledger.js';
import { checkLedger } from './trust.js';
import { addGrowth, grownResources, type ResourceGrowth } from './pod-resources.js';

const namedLists = ['containers', 'initContainers', 'volumes', 'imagePullSecrets'] as const;

export function withoutInjected(pod: JsonObject, set: TemplateSet): JsonObject {
  const metadata = isJsonObject(pod.metadata) ? pod.metadata : {};
  const annotations = isJsonObject(metadata.annotations) ? metadata.annotations : {};
  const raw = annotations[AnnotationKeys.status];
  if (typeof raw !== 'string') return pod;
  let entries: LedgerEntry[];
  try {
    const claimed = parseLedger(raw).ledger;
    const believed = checkLedger(claimed, parsePod(pod), set).believed.templates;
    // The pod-level growth is a record, not an item to prove: taken with its template's believed entry.
    entries = Object.entries(believed).map(([name, entry]) => {
      const growth = Object.hasOwn(claimed.templates, name) ? claimed.templates[name]!.podResources : undefined;
      return growth ? { ...entry, podResources: growth } : entry;
    });
  } catch {
    // A pod admission could not read: sent as it is, the chain says what it makes of it.
    return pod;
  }
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

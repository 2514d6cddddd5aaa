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
import { skeletonOf } from '../templates/render.js';
import type { TemplateSet } from '../templates/set.js';
import { appItemKinds, itemKey, parseLedger, type LedgerEntry } from './ledger.js';
import { checkLedger } from './trust.js';
import { grownResources, runsBesideApp, sidecarShare } from './pod-resources.js';

const namedLists = ['containers', 'initContainers', 'volumes', 'imagePullSecrets'] as const;

export function withoutInjected(pod: JsonObject, set: TemplateSet): JsonObject {
  const metadata = isJsonObject(pod.metadata) ? pod.metadata : {};
  const annotations = isJsonObject(metadata.annotations) ? metadata.annotations : {};
  const raw = annotations[AnnotationKeys.status];
  if (typeof raw !== 'string') return pod;
  let entries: LedgerEntry[];
  let sidecars: ReadonlySet<string>;
  try {
    const checked = checkLedger(parseLedger(raw).ledger, parsePod(pod), set);
    entries = Object.values(checked.believed.templates);
    // A sidecar of an older revision (its content no longer the template's) is still the
    // template's: claimed under a name a template in force adds, it is no container of the
    // author's (admission would refuse such a container as a name conflict anyway).
    const added = new Set(set.templates.flatMap((t) => [...skeletonOf(t).containers, ...skeletonOf(t).initContainers].map((c) => String(c.name))));
    sidecars = new Set([...checked.sidecars].filter((name) => added.has(name)));
  } catch {
    // A pod admission could not read: sent as it is, the chain says what it makes of it.
    return pod;
  }
  const recorded = (kind: (typeof namedLists)[number] | 'labels' | 'annotations') =>
    new Set([...entries.flatMap((e) => e[kind] ?? []), ...(kind === 'containers' || kind === 'initContainers' ? sidecars : [])]);

  const spec: JsonObject = isJsonObject(pod.spec) ? { ...pod.spec } : {};
  const removed: { container: JsonObject; list: 'containers' | 'initContainers' }[] = [];
  for (const list of namedLists) {
    const items = spec[list];
    if (!Array.isArray(items)) continue;
    const ours = recorded(list);
    const kept = items.filter((item) => {
      const taken = isJsonObject(item) && typeof item.name === 'string' && ours.has(item.name);
      if (taken && (list === 'containers' || list === 'initContainers')) removed.push({ container: item as JsonObject, list });
      return !taken;
    });
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
  // The pod's budget grew by the sidecars' share (pod-resources.ts): the share of the sidecars
  // taken out, computed again from them (the ledger's record of it is a claim, never taken).
  if (isJsonObject(spec.resources)) {
    const growth = sidecarShare(
      spec.resources,
      removed.filter(({ container, list }) => runsBesideApp(container, list)).map(({ container }) => container),
    );
    if (growth) spec.resources = grownResources(spec.resources, growth, { taken: true });
  }

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

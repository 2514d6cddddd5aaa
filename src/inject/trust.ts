/**
 * The ledger is a claim; the pod is the truth.
 *
 * The `sidecar-injector.io/status` annotation arrives with the pod, and anyone who may create
 * a pod can write it. What it claims decides three things: which labels and annotations are
 * ours (and so hidden from template selectors and placeholders), which containers are ours
 * (and so receive no app-container items), and whether a template counts as already injected.
 * So a claim is believed only when the pod holds what the claimed template would add:
 *
 * - the template exists in the set in force and adds an item with that key;
 * - the pod's item contains the template's skeleton (every pod-independent field, with the
 *   API server's defaults, token mounts and canonical quantities allowed; see contains.ts);
 * - a label or annotation has the template's value (any value where it comes from the pod).
 *
 * A claimed item that is absent from the pod is kept (it was ours and someone removed it; it
 * is added back). Entries of templates that no longer exist are kept as written and used for
 * nothing. A claim that fails is dropped and explained in a warning, and the item is treated
 * as the pod's own: a forged ledger can hide from selection only a label a template adds with
 * that very value, and can make a sidecar count as present only by holding that sidecar.
 */
import { cut } from '../quote.js';
import { skeletonOf, type Skeleton } from '../templates/render.js';
import type { TemplateSet } from '../templates/set.js';
import type { JsonObject } from '../k8s/json.js';
import type { Template } from '../templates/template.js';
import { movedBy, templateInForm } from '../templates/forms.js';
import { anyValue, contains, containsContainer } from '../k8s/contains.js';
import { AnnotationKeys } from '../k8s/keys.js';
import {
  appItemKinds,
  emptyLedger,
  itemKey,
  mergeEntries,
  podItemKinds,
  type AppContainerItems,
  type AppItemKind,
  type Ledger,
  type LedgerEntry,
  type PodItemKind,
} from './ledger.js';
import type { PodParts } from '../k8s/pod.js';

/** A ledger after its claims were checked against the pod. */
export interface CheckedLedger {
  /** Entries of templates in the set, holding only believed items. */
  readonly believed: Ledger;
  /**
   * The ledger to carry into what is written back: the believed entries, entries of templates
   * no longer in the set (as written), and the doubted claims on `sidecars` — neither of the
   * last two is trusted, but the next call must still know those containers for no app containers.
   */
  readonly carried: Ledger;
  /** One sentence per disbelieved claim (at most a few, then a count). */
  readonly doubts: readonly string[];
  /**
   * Containers a template in force adds under that very name and the ledger claims: never app
   * containers, believed or not. A doubted one counts as someone else's sidecar — it gets no
   * items of ours, and the template is not taken as injected.
   */
  readonly sidecars: ReadonlySet<string>;
}

const maxDoubts = 3;

/** Skeleton items of a template by key, per kind; computed once per template. */
interface SkeletonIndex {
  readonly pod: Record<PodItemKind, ReadonlyMap<string, unknown>>;
  readonly app: Record<AppItemKind, ReadonlyMap<string, unknown>>;
}

const indexes = new WeakMap<Template, SkeletonIndex>();

function skeletonIndex(template: Template): SkeletonIndex {
  let index = indexes.get(template);
  if (index) return index;
  const s: Skeleton = skeletonOf(template);
  const byName = (items: readonly JsonObject[]) => new Map(items.map((item) => [item.name as string, item as unknown]));
  index = {
    pod: {
      containers: byName(s.containers),
      initContainers: byName(s.initContainers),
      volumes: byName(s.volumes),
      imagePullSecrets: byName(s.imagePullSecrets),
      labels: new Map(Object.entries(s.labels)),
      annotations: new Map<string, unknown>(Object.entries(s.annotations)),
    },
    app: {
      env: new Map(s.appEnv.map((item) => [itemKey('env', item), item as unknown])),
      envFrom: new Map(s.appEnvFrom.map((item) => [itemKey('envFrom', item), item as unknown])),
      volumeMounts: new Map(s.appVolumeMounts.map((item) => [itemKey('volumeMounts', item), item as unknown])),
    },
  };
  // A template placing a container first sets the default container to the pod's own (inject.ts).
  if (template.placement === 'first' && s.containers.length > 0) (index.pod.annotations as Map<string, unknown>).set(AnnotationKeys.defaultContainer, anyValue);
  indexes.set(template, index);
  return index;
}

/** The pod's items by key, built once per review. */
class PodIndex {
  private readonly containers = new Map<string, JsonObject>();
  private readonly initContainers = new Map<string, JsonObject>();
  private readonly volumes = new Map<string, JsonObject>();
  private readonly appItems = new Map<string, Map<string, JsonObject>>();

  constructor(private readonly parts: PodParts) {
    for (const c of parts.containers) this.containers.set(c.name as string, c);
    for (const c of parts.initContainers) this.initContainers.set(c.name as string, c);
    for (const v of parts.volumes) this.volumes.set(v.name as string, v);
  }

  /** The pod's item of this kind and key; `null` when absent. */
  item(kind: PodItemKind, key: string): unknown {
    switch (kind) {
      case 'containers':
        return this.containers.get(key) ?? null;
      case 'initContainers':
        return this.initContainers.get(key) ?? null;
      case 'volumes':
        return this.volumes.get(key) ?? null;
      case 'labels':
        return Object.hasOwn(this.parts.labels, key) ? this.parts.labels[key] : null;
      case 'annotations':
        return Object.hasOwn(this.parts.annotations, key) ? this.parts.annotations[key] : null;
      case 'imagePullSecrets':
        return this.parts.imagePullSecrets.find((s) => s.name === key) ?? null;
    }
  }

  container(name: string): JsonObject | undefined {
    return this.containers.get(name);
  }

  /** An app container's item with this key; `null` when absent. Each list is indexed once. */
  appItem(container: JsonObject, kind: AppItemKind, key: string): JsonObject | null {
    const id = `${container.name as string}\0${kind}`;
    let items = this.appItems.get(id);
    if (!items) {
      items = new Map();
      for (const item of (container[kind] as JsonObject[] | undefined) ?? []) {
        const key = itemKey(kind, item);
        if (!items.has(key)) items.set(key, item);
      }
      this.appItems.set(id, items);
    }
    return items.get(key) ?? null;
  }
}

/** Checks every claim of `claimed` against the pod and the templates in force. */
export function checkLedger(claimed: Ledger, parts: PodParts, set: TemplateSet): CheckedLedger {
  const believed = emptyLedger();
  // A pod without a ledger (every first call) costs nothing here.
  if (Object.keys(claimed.templates).length === 0) return { believed, carried: believed, doubts: [], sidecars: new Set() };
  const retired: Record<string, LedgerEntry> = Object.create(null);
  const doubts: string[] = [];
  let doubted = 0;
  const doubt = (template: string, what: string, reason: string) => {
    if (++doubted <= maxDoubts) doubts.push(`${template}: status annotation claims ${cut(what, 60)}, ${reason}; not treated as injected`);
  };
  const pod = new PodIndex(parts);
  // Containers claimed under a name their template adds: not app containers, so their app-item claims are void.
  const sidecars = new Set<string>();
  const claimedSidecars: Record<string, LedgerEntry> = Object.create(null);
  // A claimed form is a claim too: it holds only while the pod has one of the containers the
  // form moves, in the list it moves them to, as that form renders it; else the entry is read as written.
  const entries = Object.entries(claimed.templates).map(([name, entry]): [string, LedgerEntry] => {
    const inForce = set.byName.get(name);
    if (!entry.form || !inForce) return [name, entry];
    const moved = movedBy(inForce, entry.form);
    const form = skeletonIndex(templateInForm(inForce, entry.form));
    const holds = moved.names.some((sidecar) => {
      const actual = pod.item(moved.list, sidecar);
      return (
        (entry[moved.list] ?? []).includes(sidecar) && actual !== null && containsContainer(form.pod[moved.list].get(sidecar), actual, inForce.guaranteedPods)
      );
    });
    if (holds) return [name, entry];
    doubt(
      name,
      `form ${entry.form}`,
      `but the pod holds none of the containers that form moves as ${moved.list === 'containers' ? 'an ordinary container' : 'a native sidecar'}`,
    );
    const { form: _claimed, ...native } = entry;
    return [name, native];
  });

  for (const [name, entry] of entries) {
    const inForce = set.byName.get(name);
    if (!inForce) {
      retired[name] = entry;
      // An orphaned sidecar: the container of a template no longer in force is still no app
      // container (it gets none of the current templates' items). A forged entry can only keep
      // the pod's own items from its own container.
      for (const list of ['containers', 'initContainers'] as const) for (const key of entry[list] ?? []) if (pod.item(list, key) !== null) sidecars.add(key);
      continue;
    }
    // Checked against the form the ledger says was injected: a second call keeps that form.
    const skeleton = skeletonIndex(templateInForm(inForce, entry.form ?? 'native'));
    const kept: LedgerEntry = { hash: entry.hash };
    if (entry.form) kept.form = entry.form;
    // `podResources` and `params` are records of what a call did; a claim of them proves
    // nothing, so they are never carried from the pod: only the call that does it writes them.
    let items = 0;
    for (const kind of podItemKinds) {
      // Deduplicated: a forged list may repeat one key a hundred thousand times.
      for (const key of new Set(entry[kind] ?? [])) {
        const expected = skeleton.pod[kind].get(key);
        const what = `${kind === 'labels' ? 'label' : kind === 'annotations' ? 'annotation' : kind.replace(/s$/, '')} ${key}`;
        if (expected === undefined) {
          doubt(name, what, 'which the template does not add');
          continue;
        }
        const actual = pod.item(kind, key);
        const isContainer = kind === 'containers' || kind === 'initContainers';
        if (isContainer && actual === null && pod.item(kind === 'containers' ? 'initContainers' : 'containers', key) !== null) {
          doubt(name, what, `which the pod has in ${kind === 'containers' ? 'initContainers' : 'containers'}`);
          continue;
        }
        if (isContainer && actual !== null) sidecars.add(key);
        if (actual !== null && !(isContainer ? containsContainer(expected, actual, inForce.guaranteedPods) : contains(expected, actual))) {
          doubt(name, what, 'which does not match the template');
          // Kept in the ledger written back, so that the next call also knows it for a sidecar.
          if (isContainer) ((claimedSidecars[name] ??= { hash: entry.hash })[kind as 'containers' | 'initContainers'] ??= []).push(key);
          continue;
        }
        (kept[kind] ??= []).push(key);
        items++;
      }
    }
    if (items > 0 || entry.appContainers) believed.templates[name] = kept;
  }

  // App-container claims last: they hold only for containers that are not ours.
  for (const [name, entry] of entries) {
    const inForce = set.byName.get(name);
    const kept = believed.templates[name];
    if (!inForce || !kept || !entry.appContainers) continue;
    const skeleton = skeletonIndex(templateInForm(inForce, entry.form ?? 'native'));
    const apps: Record<string, AppContainerItems> = Object.create(null);
    let items = 0;
    for (const [containerName, claims] of Object.entries(entry.appContainers)) {
      const container = pod.container(containerName);
      const own: AppContainerItems = {};
      for (const kind of appItemKinds) {
        for (const key of new Set(claims[kind] ?? [])) {
          const expected = skeleton.app[kind].get(key);
          const what = `${kind === 'volumeMounts' ? 'mountPath' : kind} ${key} in container ${containerName}`;
          if (expected === undefined) {
            doubt(name, what, 'which the template does not add');
            continue;
          }
          if (container && sidecars.has(containerName)) {
            doubt(name, what, 'but that container is a sidecar');
            continue;
          }
          const actual = container ? pod.appItem(container, kind, key) : null;
          if (actual !== null && !contains(expected, actual)) {
            doubt(name, what, 'which does not match the template');
            continue;
          }
          (own[kind] ??= []).push(key);
          items++;
        }
      }
      if (Object.keys(own).length > 0) apps[containerName] = own;
    }
    if (items > 0) kept.appContainers = apps;
    else if (podItemKinds.every((kind) => !kept[kind])) delete believed.templates[name];
  }
  if (doubted > maxDoubts) doubts.push(`status annotation: ${doubted - maxDoubts} more claims not treated as injected`);
  const carried: Ledger = { v: 1, templates: Object.assign(Object.create(null) as Ledger['templates'], retired, believed.templates) };
  for (const [name, claims] of Object.entries(claimedSidecars)) carried.templates[name] = mergeEntries(carried.templates[name], claims);
  return { believed, carried, doubts, sidecars };
}

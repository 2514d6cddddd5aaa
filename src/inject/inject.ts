/**
 * Pod → pod with sidecars. Pure. Adds by key (container name across initContainers and
 * containers, volume name, imagePullSecret name, label/annotation key, and per app container
 * env name, envFrom source, mountPath); never modifies, reorders or removes anything.
 *
 * The result shares every untouched object with the input (structural sharing): the diff
 * then skips identical references in constant time, so the cost of a call grows with what
 * changed plus one pass over the lists that grew, never quadratically.
 */
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import type { RenderedTemplate } from '../templates/render.js';
import type { Placement } from '../templates/template.js';
import { labelValueProblem } from '../k8s/label-syntax.js';
import { AnnotationKeys } from '../k8s/keys.js';
import {
  appItemKinds,
  itemKey,
  mergeEntries,
  serializeLedger,
  type AppContainerItems,
  type AppItemKind,
  type Ledger,
  type LedgerEntry,
  type Ownership,
  type PodItemKind,
} from './ledger.js';
import type { PodParts } from '../k8s/pod.js';
import { contains } from '../k8s/contains.js';
import { addGrowth, grownResources, runsBesideApp, sidecarShare, type ResourceGrowth } from './pod-resources.js';
import { guaranteedContainer, qosClass, type QosClass } from '../k8s/qos.js';
import { serviceAccountTokenMount, withTokenMount } from '../k8s/service-account-token.js';

/** The result of injection. `pod` is the input object itself when nothing was added. */
export interface Injection {
  readonly pod: JsonObject;
  readonly changed: boolean;
  /** Names of templates that added at least one item in this call. */
  readonly injected: readonly string[];
  /** Names of templates whose items were all present already (earlier injection). */
  readonly present: readonly string[];
  /** Templates not injected at all because the pod's own items are in their way, with which. */
  readonly conflicts: readonly Conflict[];
  /** Sentences for the person reading kubectl output: collisions and skipped items. */
  readonly warnings: readonly string[];
  /** The ledger after this call. */
  readonly ledger: Ledger;
  /** Decisions worth explaining (`render --explain`, the log) but not worth a warning on every pod. */
  readonly notes: readonly string[];
  /** What the pod-level resources grew by in this call (pod-resources.ts), when they did. */
  readonly resourceGrowth?: ResourceGrowth;
  /** The pod's QoS class before this call and after it (k8s/qos.ts), when they differ. */
  readonly qosChange?: { readonly from: QosClass; readonly to: QosClass };
}

/**
 * A template left out whole because the pod's own item is in its way: a container with the
 * name of one of its sidecars (`name-conflict`: its items would land in the pod's container),
 * or a volume of its name that is something else (`volume-conflict`: its mounts would bind to
 * the pod's data); or because the pod is Guaranteed and one of its containers does not state
 * the cpu and memory values that would keep it so (`qos-class`). A partial injection is worse
 * than none.
 */
export interface Conflict {
  readonly template: string;
  readonly rule: 'name-conflict' | 'volume-conflict' | 'qos-class' | 'host-network-port';
  readonly text: string;
}

/**
 * In a pod on the node's network (`hostNetwork`), the first port a template's container
 * declares, and in which container: the API server makes every declared port a host port
 * there, so it binds the node's interfaces and no two such pods fit on one node.
 */
function declaredPort(t: RenderedTemplate): { readonly container: string; readonly port: string } | undefined {
  for (const c of [...t.initContainers, ...t.containers]) {
    for (const p of Array.isArray(c.ports) ? c.ports : []) {
      if (isJsonObject(p) && p.containerPort !== undefined)
        return { container: String(c.name), port: `${String(p.containerPort)}/${typeof p.protocol === 'string' ? p.protocol : 'TCP'}` };
    }
  }
  return undefined;
}

/**
 * The template's containers as a Guaranteed pod must get them (k8s/qos.ts guaranteedContainer),
 * or the text saying which one cannot be.
 */
function keepingGuaranteed(t: RenderedTemplate): { containers: JsonObject[]; initContainers: JsonObject[] } | { cannot: string } {
  const out = { containers: [] as JsonObject[], initContainers: [] as JsonObject[] };
  for (const list of ['initContainers', 'containers'] as const) {
    for (const c of t[list]) {
      const kept = guaranteedContainer(c, t.guaranteedPods);
      if (!kept) {
        return {
          cannot: `${t.name} not injected: it would make the Guaranteed pod Burstable (container ${String(c.name)} ${t.guaranteedPods === 'requests-from-limits' ? 'limits' : 'requests'} no cpu and memory)`,
        };
      }
      out[list].push(kept);
    }
  }
  return out;
}

/** Labels and annotations of the pod minus the ones the injector added (per the ledger). */
export function ownMetadata(parts: PodParts, owner: Ownership): { labels: Record<string, string>; annotations: Record<string, string> } {
  // Null-prototype maps: a hostile key such as "__proto__" stays an ordinary key.
  const labels: Record<string, string> = Object.create(null);
  for (const key in parts.labels) if (!owner.pod('labels', key)) labels[key] = parts.labels[key]!;
  const annotations: Record<string, string> = Object.create(null);
  for (const key in parts.annotations) {
    if (key !== AnnotationKeys.status && !owner.pod('annotations', key)) annotations[key] = parts.annotations[key]!;
  }
  return { labels, annotations };
}

function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  try {
    return JSON.stringify(a) === JSON.stringify(b);
  } catch {
    // Nested too deeply to serialise: certainly not one of our small items.
    return false;
  }
}

/** Accumulates additions for one call, then assembles the new pod with structural sharing. */
class PodBuilder {
  readonly warnings: string[] = [];
  private readonly containerNames = new Set<string>();
  private readonly volumeNames: Set<string>;
  private readonly pullSecretNames: Set<string>;
  // Null-prototype maps: keys come from templates and pods; "__proto__" or "constructor" stay ordinary keys.
  private readonly labels: Record<string, string> = Object.create(null);
  private readonly annotations: Record<string, string> = Object.create(null);
  /** Sidecars this call adds, in the order added; build() puts each in its place (placedAt). */
  private readonly added: { list: ContainerList; container: JsonObject; placement: Placement; template: string }[] = [];
  private readonly volumes: JsonObject[] = [];
  private readonly pullSecrets: JsonObject[] = [];
  /** App container index → additions by list. */
  private readonly appAdds = new Map<number, { env: JsonObject[]; envFrom: JsonObject[]; volumeMounts: JsonObject[] }>();
  /** Indexes of the pod's own (app) containers. */
  readonly appContainers: number[] = [];

  constructor(
    private readonly parts: PodParts,
    private readonly owner: Ownership,
    private readonly sidecars: ReadonlySet<string>,
    private readonly placementOf: (template: string) => Placement | undefined,
  ) {
    for (const c of parts.initContainers) this.containerNames.add(c.name as string);
    parts.containers.forEach((c, i) => {
      this.containerNames.add(c.name as string);
      if (!owner.injectedContainers.has(c.name as string) && !sidecars.has(c.name as string)) this.appContainers.push(i);
    });
    this.volumeNames = new Set(parts.volumes.map((v) => v.name as string));
    this.pullSecretNames = new Set(parts.imagePullSecrets.map((s) => s.name as string));
  }

  /** Says why an existing item is left alone; undefined when it is ours (no warning needed). */
  private collision(kind: string, key: string, owner: string | undefined, template: string): string | undefined {
    if (owner === template) return undefined;
    if (owner) return `${template}: ${kind} ${key} was added by template ${owner}; not added again`;
    return `${template}: ${kind} ${key} already exists in the pod; left as is, not injected`;
  }

  private warn(message: string | undefined): void {
    if (message) this.warnings.push(message);
  }

  addContainer(list: ContainerList, container: JsonObject, placement: Placement, template: string): boolean {
    const name = container.name as string;
    if (this.containerNames.has(name)) {
      const owner = this.owner.pod('containers', name) ?? this.owner.pod('initContainers', name);
      this.warn(this.collision('container', name, owner, template));
      return false;
    }
    this.containerNames.add(name);
    this.added.push({ list, container, placement, template });
    return true;
  }

  /**
   * The name of a volume of `template` that the pod already has as something else, if any.
   * Such a template is not injected at all: its mounts would bind to the pod's own data
   * (a Secret named like our emptyDir) — a partial injection is worse than none.
   */
  foreignVolume(volumes: readonly JsonObject[], template: string): string | undefined {
    for (const volume of volumes) {
      const name = volume.name as string;
      if (!this.volumeNames.has(name) || this.owner.pod('volumes', name) === template) continue;
      const existing = this.parts.volumes.find((v) => v.name === name) ?? this.volumes.find((v) => v.name === name);
      // The same volume (say, the same emptyDir another template or the user declared) is no conflict.
      if (!existing || !contains(volume, existing)) return name;
    }
    return undefined;
  }

  /**
   * The name of a container of `template` that the pod already has and that is not the
   * template's own, if any: no ledger entry claims it. A claimed container that does not hold
   * what the template adds (an older revision, an image another webhook rewrote, a retired
   * template's sidecar) is left as it is, gets no items of ours, and is not taken for the
   * template (trust.ts); refusing it would refuse every pod re-created from a manifest rendered
   * with an earlier revision.
   */
  /** True when the pod holds a container of every name the template adds (present from an earlier call). */
  holdsAll(template: RenderedTemplate): boolean {
    return [...template.initContainers, ...template.containers].every((c) => this.containerNames.has(c.name as string));
  }

  foreignContainer(template: RenderedTemplate): string | undefined {
    for (const list of ['initContainers', 'containers'] as const) {
      for (const c of template[list]) {
        const name = c.name as string;
        if (!this.containerNames.has(name)) continue;
        const owner = this.owner.pod('containers', name) ?? this.owner.pod('initContainers', name);
        if (owner === template.name || (owner === undefined && this.sidecars.has(name))) continue;
        return name;
      }
    }
    return undefined;
  }

  addVolume(volume: JsonObject, template: string): boolean {
    const name = volume.name as string;
    if (this.volumeNames.has(name)) {
      this.warn(this.collision('volume', name, this.owner.pod('volumes', name), template));
      return false;
    }
    this.volumeNames.add(name);
    this.volumes.push(volume);
    return true;
  }

  addPullSecret(secret: JsonObject): boolean {
    // The same secret name is the same reference: nothing to add and nothing to warn about.
    const name = secret.name as string;
    if (this.pullSecretNames.has(name)) return false;
    this.pullSecretNames.add(name);
    this.pullSecrets.push(secret);
    return true;
  }

  addMetadata(kind: 'labels' | 'annotations', key: string, value: string, template: string): boolean {
    const existing = this.parts[kind];
    const pending = this[kind];
    if (Object.hasOwn(existing, key) || Object.hasOwn(pending, key)) {
      const current = Object.hasOwn(pending, key) ? pending[key] : existing[key];
      if (current !== value) this.warn(this.collision(kind === 'labels' ? 'label' : 'annotation', key, this.owner.pod(kind, key), template));
      return false;
    }
    if (kind === 'labels') {
      const problem = labelValueProblem(value);
      if (problem) {
        this.warn(`${template}: label ${key} not added: ${problem}`);
        return false;
      }
    }
    pending[key] = value;
    return true;
  }

  /**
   * The item of an app container's list with this key, among what the pod has and what this
   * call added. A linear scan: templates add a handful of items, so k scans of n entries cost
   * less than hashing every entry of a 1,000-entry env list, and stay linear in the pod's size.
   */
  private findInApp(index: number, kind: AppItemKind, key: string): JsonObject | undefined {
    const own = (this.parts.containers[index]![kind] as JsonObject[] | undefined) ?? [];
    for (const item of own) if (itemKey(kind, item) === key) return item;
    for (const item of this.appAdds.get(index)?.[kind] ?? []) if (itemKey(kind, item) === key) return item;
    return undefined;
  }

  addToApp(index: number, kind: AppItemKind, item: JsonObject, template: string): string | undefined {
    const container = this.parts.containers[index]!;
    const containerName = container.name as string;
    const key = itemKey(kind, item);
    const existing = this.findInApp(index, kind, key);
    if (existing) {
      if (!sameJson(existing, item)) {
        const what = kind === 'env' ? `env ${key}` : kind === 'envFrom' ? `envFrom ${key}` : `mountPath ${key}`;
        this.warn(this.collision(`${what} in container`, containerName, this.owner.app(containerName, kind, key), template));
      }
      return undefined;
    }
    let adds = this.appAdds.get(index);
    if (!adds) this.appAdds.set(index, (adds = { env: [], envFrom: [], volumeMounts: [] }));
    adds[kind].push(item);
    return key;
  }

  /**
   * Where a sidecar of `template` placed `placement` goes in `list` as the pod has it: among the
   * sidecars of that placement already there, in template-name order. Placed first: after the
   * leading run of containers of earlier-named templates placed first (and of its own), where a
   * container no believed ledger entry claims (the pod's own, or one whose claim was not
   * believed) ends the run. Placed last: before the first container of a later-named template
   * placed last, else at the end. So the order is the same whichever call or policy added which
   * template, and in whichever order (the exported policy computes the same index:
   * manifests/mutating-policies.ts formPatch): native sidecars start in that order.
   */
  private placedAt(list: ContainerList, containers: readonly JsonObject[], placement: Placement, template: string): number {
    const placedBy = (c: JsonObject): string | undefined => {
      const owner = this.owner.pod(list, c.name as string);
      return owner !== undefined && this.placementOf(owner) === placement ? owner : undefined;
    };
    if (placement === 'first') {
      let at = 0;
      while (at < containers.length) {
        const owner = placedBy(containers[at]!);
        if (owner === undefined || owner > template) break;
        at++;
      }
      return at;
    }
    const later = containers.findIndex((c) => {
      const owner = placedBy(c);
      return owner !== undefined && owner > template;
    });
    return later === -1 ? containers.length : later;
  }

  /** `containers` with this call's sidecars of `list` each in its place (placedAt); the list itself when none. */
  private placed(list: ContainerList, containers: readonly JsonObject[]): readonly JsonObject[] {
    const adds = this.added.filter((a) => a.list === list).map((a, seq) => ({ ...a, seq, at: this.placedAt(list, containers, a.placement, a.template) }));
    if (adds.length === 0) return containers;
    // At one place: those placed first before those placed last, each by template name, each template's in its order.
    adds.sort(
      (a, b) =>
        a.at - b.at ||
        (a.placement === b.placement ? 0 : a.placement === 'first' ? -1 : 1) ||
        (a.template < b.template ? -1 : a.template > b.template ? 1 : 0) ||
        a.seq - b.seq,
    );
    const out: JsonObject[] = [];
    let next = 0;
    for (const add of adds) {
      while (next < add.at) out.push(containers[next++]!);
      out.push(add.container);
    }
    while (next < containers.length) out.push(containers[next++]!);
    return out;
  }

  /** Assembles the new pod; shares every object that did not change. */
  build(pod: JsonObject, ledgerText: string, growth: ResourceGrowth | undefined): JsonObject {
    const { parts } = this;
    const spec: JsonObject = { ...parts.spec };
    if (growth && isJsonObject(parts.spec.resources)) spec.resources = grownResources(parts.spec.resources, growth);
    if (this.added.some((a) => a.list === 'initContainers')) spec.initContainers = this.placed('initContainers', parts.initContainers);
    let containers: readonly JsonObject[] = parts.containers;
    if (this.appAdds.size > 0) {
      const copy = containers.slice();
      for (const [index, adds] of this.appAdds) {
        const container: JsonObject = { ...copy[index]! };
        for (const kind of appItemKinds) {
          if (adds[kind].length > 0) container[kind] = [...((container[kind] as JsonObject[] | undefined) ?? []), ...adds[kind]];
        }
        copy[index] = container;
      }
      containers = copy;
    }
    spec.containers = this.placed('containers', containers);
    if (this.volumes.length > 0) spec.volumes = [...parts.volumes, ...this.volumes];
    if (this.pullSecrets.length > 0) spec.imagePullSecrets = [...parts.imagePullSecrets, ...this.pullSecrets];
    const metadata: JsonObject = { ...parts.metadata };
    if (Object.keys(this.labels).length > 0) metadata.labels = { ...parts.labels, ...this.labels };
    metadata.annotations = { ...parts.annotations, ...this.annotations, [AnnotationKeys.status]: ledgerText };
    return { ...pod, metadata, spec };
  }
}

type ContainerList = 'containers' | 'initContainers';

function push(entry: LedgerEntry, kind: PodItemKind, key: string): void {
  (entry[kind] ??= []).push(key);
}

/**
 * Injects rendered templates into a pod. Items already present are never touched: ours (in
 * the ledger) are left as the API server defaulted them, someone else's are skipped with a
 * warning. `sidecars` names containers that are not app containers although the ledger's
 * claim on them was not believed (see trust.ts); `recordedParams` gives the overridden
 * parameters of a template in the ledger this call does not inject. When nothing is added the pod object itself is returned and `changed` is false;
 * that is the fixed point reinvocation relies on.
 */
export function inject(
  pod: JsonObject,
  parts: PodParts,
  previous: Ledger,
  owner: Ownership,
  rendered: readonly RenderedTemplate[],
  sidecars: ReadonlySet<string> = new Set(),
  recordedParams: (template: string) => Readonly<Record<string, string>> | undefined = () => undefined,
  placementOf: (template: string) => Placement | undefined = () => undefined,
): Injection {
  const builder = new PodBuilder(parts, owner, sidecars, placementOf);
  const qosBefore = qosClass(parts.spec);
  const guaranteed = qosBefore === 'Guaranteed';
  const hostNetwork = parts.spec.hostNetwork === true;
  const tokenMount = serviceAccountTokenMount(parts);
  const notes: string[] = [];
  let growth: ResourceGrowth | undefined;
  const next: Ledger = { v: 1, templates: Object.assign(Object.create(null) as Ledger['templates'], previous.templates) };
  const injected: string[] = [];
  const present: string[] = [];
  const conflicts: Conflict[] = [];

  for (const t of rendered) {
    const container = builder.foreignContainer(t);
    if (container !== undefined) {
      conflicts.push({
        template: t.name,
        rule: 'name-conflict',
        text: `${t.name} not injected: the pod has its own container ${container}, the name of its sidecar; rename that container`,
      });
      continue;
    }
    const foreign = builder.foreignVolume(t.volumes, t.name);
    if (foreign !== undefined) {
      conflicts.push({
        template: t.name,
        rule: 'volume-conflict',
        text: `${t.name} not injected: its mounts would use the pod's own volume ${foreign}; rename that volume`,
      });
      continue;
    }
    const declared = hostNetwork && !builder.holdsAll(t) ? declaredPort(t) : undefined;
    if (declared !== undefined) {
      conflicts.push({
        template: t.name,
        rule: 'host-network-port',
        text: `${t.name} not injected: a hostNetwork pod, and its container ${declared.container} declares port ${declared.port} (a port of the node)`,
      });
      continue;
    }
    // A Guaranteed pod stays Guaranteed: the template's containers request what they limit, or it is left out.
    let lists: { readonly containers: readonly JsonObject[]; readonly initContainers: readonly JsonObject[] } = t;
    if (guaranteed && !builder.holdsAll(t)) {
      const kept = keepingGuaranteed(t);
      if ('cannot' in kept) {
        conflicts.push({ template: t.name, rule: 'qos-class', text: kept.cannot });
        continue;
      }
      lists = kept;
    }
    const entry: LedgerEntry = t.form !== 'native' ? { hash: t.hash, form: t.form } : { hash: t.hash };
    if (t.overrides) entry.params = { ...t.overrides };
    let added = 0;
    const record = (kind: PodItemKind, key: string, ok: boolean) => {
      if (ok) {
        push(entry, kind, key);
        added++;
      }
    };
    // The sidecars this call adds for the template: their share of a pod-level budget.
    const besideApp: JsonObject[] = [];
    for (const list of ['initContainers', 'containers'] as const) {
      for (const rendered of lists[list]) {
        // With the token mount the ServiceAccount plugin's next run would add: that run then changes nothing.
        const c = tokenMount ? withTokenMount(rendered, tokenMount) : rendered;
        const added = builder.addContainer(list, c, t.placement, t.name);
        record(list, c.name as string, added);
        if (added && runsBesideApp(c, list)) besideApp.push(c);
      }
    }
    const share = sidecarShare(parts.spec.resources, besideApp);
    if (share) {
      entry.podResources = share;
      growth = growth ? addGrowth(growth, share) : share;
    }
    // A container placed first would become the one kubectl logs and exec pick (kubernetes#96986).
    const firstApp = builder.appContainers[0];
    if (t.placement === 'first' && entry.containers && firstApp !== undefined && !Object.hasOwn(parts.annotations, AnnotationKeys.defaultContainer)) {
      const appName = parts.containers[firstApp]!.name as string;
      const added = builder.addMetadata('annotations', AnnotationKeys.defaultContainer, appName, t.name);
      record('annotations', AnnotationKeys.defaultContainer, added);
      if (added) notes.push(`${AnnotationKeys.defaultContainer} set to ${appName}, the pod's first own container: ${t.name} places its container before it`);
    }
    for (const v of t.volumes) record('volumes', v.name as string, builder.addVolume(v, t.name));
    for (const s of t.imagePullSecrets) record('imagePullSecrets', s.name as string, builder.addPullSecret(s));
    for (const [k, v] of Object.entries(t.labels)) record('labels', k, builder.addMetadata('labels', k, v, t.name));
    for (const [k, v] of Object.entries(t.annotations)) record('annotations', k, builder.addMetadata('annotations', k, v, t.name));
    for (const index of builder.appContainers) {
      const containerName = parts.containers[index]!.name as string;
      for (const [kind, items] of [
        ['env', t.appEnv],
        ['envFrom', t.appEnvFrom],
        ['volumeMounts', t.appVolumeMounts],
      ] as const) {
        for (const item of items) {
          const key = builder.addToApp(index, kind, item, t.name);
          if (key === undefined) continue;
          // Container names come from the pod: a null-prototype map keeps "constructor" an ordinary key.
          const apps = (entry.appContainers ??= Object.create(null) as Record<string, AppContainerItems>);
          ((apps[containerName] ??= {})[kind] ??= []).push(key);
          added++;
        }
      }
    }
    if (added > 0) {
      next.templates[t.name] = mergeEntries(previous.templates[t.name], entry);
      injected.push(t.name);
    } else present.push(t.name);
  }

  if (injected.length === 0) return { pod, changed: false, injected, present, conflicts, warnings: builder.warnings, ledger: previous, notes };
  // Entries of templates this call did not inject (present, or the other webhook's): the
  // parameters their call recorded, resolved again from the same annotations (trust.ts never
  // carries a claim of them, and a ledger written without them would lose the record).
  const injectedNow = new Set(injected);
  for (const [name, entry] of Object.entries(next.templates)) {
    if (injectedNow.has(name)) continue;
    const params = recordedParams(name);
    if (!params) continue;
    const { hash, form, ...rest } = entry;
    next.templates[name] = { hash, ...(form ? { form } : {}), params: { ...params }, ...rest };
  }
  const newPod = builder.build(pod, serializeLedger(next), growth);
  // A Guaranteed pod never gets here changed (its templates keep it, or are left out); a
  // BestEffort one becomes Burstable as soon as a sidecar requests anything: said, not warned.
  const qosAfter = qosClass(newPod.spec as JsonObject);
  if (qosAfter !== qosBefore) notes.push(`the pod's QoS class becomes ${qosAfter} (was ${qosBefore}): ${injected.join(', ')} request resources`);
  return {
    pod: newPod,
    changed: true,
    injected,
    present,
    conflicts,
    warnings: builder.warnings,
    ledger: next,
    notes,
    ...(growth ? { resourceGrowth: growth } : {}),
    ...(qosAfter !== qosBefore ? { qosChange: { from: qosBefore, to: qosAfter } } : {}),
  };
}

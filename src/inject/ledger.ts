/**
 * The ledger: the `sidecar-injector.io/status` annotation that records, per template, every
 * item the injector added. It is how a call recognises its own earlier work (reinvocation,
 * R-62) and how the injector knows what it owns: anything not in the ledger belongs to
 * someone else and is never modified.
 */
import { LedgerError } from '../errors.js';
import { quote } from '../quote.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { addGrowth, type ResourceGrowth } from './pod-resources.js';

/** Items added to one of the pod's own containers, by key. */
export interface AppContainerItems {
  env?: string[];
  envFrom?: string[];
  volumeMounts?: string[];
}

/** What one template added, with the hash of the template version that added it. */
export interface LedgerEntry {
  hash: string;
  /**
   * The form the template was injected in when not as written (templates/forms.ts): `container`,
   * its native sidecars as ordinary containers; `sidecar`, its ordinary containers as native sidecars.
   */
  form?: 'container' | 'sidecar';
  containers?: string[];
  initContainers?: string[];
  volumes?: string[];
  imagePullSecrets?: string[];
  labels?: string[];
  annotations?: string[];
  appContainers?: Record<string, AppContainerItems>;
  /** What the template's sidecars added to the pod-level resources (pod-resources.ts): a record for readers, never acted on. */
  podResources?: ResourceGrowth;
  /** Parameters overridden by the namespace or the pod, with the values used: a record for readers (and the auditor), never acted on. */
  params?: Record<string, string>;
  /**
   * Per container, the restarts that were the injector's own doing: an in-place update of its image
   * restarts it once (rollout/in-place.ts). The automatic halt counts only restarts beyond these.
   */
  restarts?: Record<string, number>;
}

/** The whole ledger; `v` versions the format. */
export interface Ledger {
  v: 1;
  templates: Record<string, LedgerEntry>;
}

/** The item kinds recorded at pod level. */
export type PodItemKind = 'containers' | 'initContainers' | 'volumes' | 'imagePullSecrets' | 'labels' | 'annotations';
/** The item kinds recorded per app container. */
export type AppItemKind = keyof AppContainerItems;

export const podItemKinds: readonly PodItemKind[] = ['containers', 'initContainers', 'volumes', 'imagePullSecrets', 'labels', 'annotations'];
export const appItemKinds: readonly AppItemKind[] = ['env', 'envFrom', 'volumeMounts'];

/** A string field as part of a key; anything else (never sent by the API server) as a marker no key can equal. */
function keyPart(value: unknown): string {
  return typeof value === 'string' ? value : value === undefined || value === null ? '' : '\0not-a-string';
}

function envFromKey(source: JsonObject): string {
  const ref = (source.configMapRef ?? source.secretRef) as JsonObject | undefined;
  const kind = source.configMapRef ? 'configMap' : 'secret';
  return `${kind}:${keyPart(ref?.name)}:${keyPart(source.prefix)}`;
}

/** The key an item of an app container's list is known by: env name, envFrom source, mountPath. */
export function itemKey(kind: AppItemKind, item: JsonObject): string {
  return kind === 'env' ? keyPart(item.name) : kind === 'envFrom' ? envFromKey(item) : keyPart(item.mountPath);
}

/** An empty ledger. */
export function emptyLedger(): Ledger {
  return { v: 1, templates: Object.create(null) };
}

function isStringList(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((v) => typeof v === 'string');
}

/**
 * Parses the status annotation. Absent → empty ledger. A value that is not a ledger (edited
 * by hand, copied from elsewhere) → empty ledger and a problem to report as a warning: the
 * injector then treats everything in the pod as someone else's and never duplicates it.
 */
export function parseLedger(text: string | undefined): { ledger: Ledger; problem?: string } {
  if (text === undefined) return { ledger: emptyLedger() };
  try {
    return { ledger: readLedger(text) };
  } catch (err) {
    if (!(err instanceof LedgerError)) throw err;
    return { ledger: emptyLedger(), problem: `status annotation ${err.message}; ignoring it` };
  }
}

function stringList(value: unknown, where: string): string[] | undefined {
  if (value === undefined) return undefined;
  if (!isStringList(value)) throw new LedgerError(`${where} is malformed`);
  return value;
}

function readLedger(text: string): Ledger {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new LedgerError('is not JSON');
  }
  if (!isJsonObject(doc) || doc.v !== 1 || !isJsonObject(doc.templates)) throw new LedgerError('has an unknown format');
  // Null-prototype maps: keys come from the pod, and "__proto__" must stay an ordinary key.
  const templates: Record<string, LedgerEntry> = Object.create(null);
  for (const [name, raw] of Object.entries(doc.templates)) {
    if (!isJsonObject(raw) || typeof raw.hash !== 'string') throw new LedgerError(`entry ${quote(name)} is malformed`);
    const entry: LedgerEntry = { hash: raw.hash };
    if (raw.form === 'container' || raw.form === 'sidecar') entry.form = raw.form;
    else if (raw.form !== undefined) throw new LedgerError(`${name}.form is malformed`);
    for (const kind of podItemKinds) {
      const list = stringList(raw[kind], `${name}.${kind}`);
      if (list) entry[kind] = list;
    }
    if (raw.appContainers !== undefined) {
      if (!isJsonObject(raw.appContainers)) throw new LedgerError(`${name}.appContainers is malformed`);
      const apps: Record<string, AppContainerItems> = Object.create(null);
      for (const [container, items] of Object.entries(raw.appContainers)) {
        if (!isJsonObject(items)) throw new LedgerError(`${name}.appContainers is malformed`);
        const parsed: AppContainerItems = {};
        for (const kind of appItemKinds) {
          const list = stringList(items[kind], `${name}.appContainers`);
          if (list) parsed[kind] = list;
        }
        apps[container] = parsed;
      }
      entry.appContainers = apps;
    }
    if (raw.podResources !== undefined) entry.podResources = readGrowth(raw.podResources, name);
    if (raw.params !== undefined) {
      if (!isJsonObject(raw.params)) throw new LedgerError(`${name}.params is malformed`);
      const params: Record<string, string> = Object.create(null);
      for (const [key, value] of Object.entries(raw.params)) {
        if (typeof value !== 'string') throw new LedgerError(`${name}.params is malformed`);
        params[key] = value;
      }
      entry.params = params;
    }
    if (raw.restarts !== undefined) {
      if (!isJsonObject(raw.restarts)) throw new LedgerError(`${name}.restarts is malformed`);
      const restarts: Record<string, number> = Object.create(null);
      for (const [container, count] of Object.entries(raw.restarts)) {
        if (typeof count !== 'number' || !Number.isSafeInteger(count) || count < 0) throw new LedgerError(`${name}.restarts is malformed`);
        restarts[container] = count;
      }
      entry.restarts = restarts;
    }
    templates[name] = entry;
  }
  return { v: 1, templates };
}

function readGrowth(raw: unknown, name: string): ResourceGrowth {
  const malformed = () => new LedgerError(`${name}.podResources is malformed`);
  if (!isJsonObject(raw)) throw malformed();
  const growth: ResourceGrowth = {};
  for (const [list, values] of Object.entries(raw)) {
    if ((list !== 'requests' && list !== 'limits') || !isJsonObject(values)) throw malformed();
    const map: Record<string, string> = Object.create(null);
    for (const [resource, value] of Object.entries(values)) {
      if (typeof value !== 'string') throw malformed();
      map[resource] = value;
    }
    growth[list] = map;
  }
  return growth;
}

/**
 * The order of an entry's keys in the annotation: one order whichever call wrote the entry (the
 * call that injects a template writes its items as it adds them; a later call, of the other
 * webhook, rebuilds the entry from what it believes), so that equal ledgers are equal text.
 */
const entryKeyOrder: readonly (keyof LedgerEntry)[] = [
  'hash',
  'form',
  'params',
  'initContainers',
  'containers',
  'podResources',
  'volumes',
  'imagePullSecrets',
  'labels',
  'annotations',
  'appContainers',
  'restarts',
];

/** The annotation text for a ledger: templates sorted by name and each entry's keys in one order, so equal ledgers serialise equally. */
export function serializeLedger(ledger: Ledger): string {
  // Null prototype: a ledger read from a pod may hold any template name, "__proto__" included.
  const templates: Record<string, Partial<LedgerEntry>> = Object.create(null);
  for (const name of Object.keys(ledger.templates).sort()) {
    const entry = ledger.templates[name]!;
    const ordered: Record<string, unknown> = {};
    for (const key of entryKeyOrder) if (entry[key] !== undefined) ordered[key] = entry[key];
    templates[name] = ordered;
  }
  return JSON.stringify({ v: 1, templates });
}

/** Who owns what, derived from a ledger: item key → template name. */
export interface Ownership {
  pod(kind: PodItemKind, key: string): string | undefined;
  app(container: string, kind: AppItemKind, key: string): string | undefined;
  /** Names of containers and initContainers the injector added (never app containers). */
  readonly injectedContainers: ReadonlySet<string>;
}

/** Indexes a ledger for constant-time ownership look-ups. */
export function indexLedger(ledger: Ledger): Ownership {
  const pod = new Map<string, string>();
  const app = new Map<string, string>();
  const injectedContainers = new Set<string>();
  for (const [template, entry] of Object.entries(ledger.templates)) {
    for (const kind of podItemKinds) {
      for (const key of entry[kind] ?? []) pod.set(`${kind}\0${key}`, template);
    }
    for (const name of [...(entry.containers ?? []), ...(entry.initContainers ?? [])]) injectedContainers.add(name);
    for (const [container, items] of Object.entries(entry.appContainers ?? {})) {
      for (const kind of appItemKinds) {
        for (const key of items[kind] ?? []) app.set(`${container}\0${kind}\0${key}`, template);
      }
    }
  }
  return {
    pod: (kind, key) => pod.get(`${kind}\0${key}`),
    app: (container, kind, key) => app.get(`${container}\0${kind}\0${key}`),
    injectedContainers,
  };
}

/** The earlier entry of a template plus what this call added, under the current hash. */
export function mergeEntries(before: LedgerEntry | undefined, added: LedgerEntry): LedgerEntry {
  if (!before) return added;
  const out: LedgerEntry = { ...before, hash: added.hash };
  if (added.form) out.form = added.form;
  else delete out.form;
  if (added.params) out.params = added.params;
  else delete out.params;
  const podResources = addGrowth(before.podResources, added.podResources);
  if (podResources) out.podResources = podResources;
  for (const kind of podItemKinds) {
    if (added[kind]) out[kind] = union(before[kind], added[kind]);
  }
  if (added.appContainers) {
    const apps: Record<string, AppContainerItems> = Object.assign(Object.create(null), before.appContainers);
    for (const [container, items] of Object.entries(added.appContainers)) {
      const merged: AppContainerItems = { ...(Object.hasOwn(apps, container) ? apps[container] : {}) };
      for (const kind of appItemKinds) {
        if (items[kind]) merged[kind] = union(merged[kind], items[kind]);
      }
      apps[container] = merged;
    }
    out.appContainers = apps;
  }
  return out;
}

function union(before: readonly string[] | undefined, added: readonly string[]): string[] {
  return [...new Set([...(before ?? []), ...added])];
}

/**
 * What kube-apiserver does around a mutating webhook, simulated for tests (CONTRACT.md):
 * namespace fill-in and API defaulting before the call, the ServiceAccount admission
 * plugin, JSON Patch application with json-patch v4 semantics, and
 * re-defaulting after a patch. Helpers mutate the object they are given; callers pass
 * copies.
 */
import { randomUUID } from 'node:crypto';
import { formatQuantity, parseQuantity } from '../../src/k8s/quantity.js';

type Json = Record<string, any>;

export const tokenMountPath = '/var/run/secrets/kubernetes.io/serviceaccount';

/** SetDefaults_HTTPGetAction: probes and lifecycle hooks alike. */
function defaultHttpGet(handler: Json | undefined): void {
  if (!handler?.httpGet) return;
  handler.httpGet.path ||= '/';
  handler.httpGet.scheme ??= 'HTTP';
}

function defaultProbe(probe: Json | undefined): void {
  if (!probe) return;
  probe.timeoutSeconds ??= 1;
  probe.periodSeconds ??= 10;
  probe.successThreshold ??= 1;
  probe.failureThreshold ??= 3;
  // An int32 with omitempty: a 0 is not written back.
  if (probe.initialDelaySeconds === 0) delete probe.initialDelaySeconds;
  defaultHttpGet(probe);
}

/** Quantities come back in their canonical form (`0.15` → `150m`, `3000m` → `3`). */
function canonicalQuantities(list: Json | undefined): void {
  for (const [k, v] of Object.entries(list ?? {})) {
    const q = parseQuantity(v);
    if (q) list![k] = formatQuantity(q);
  }
}

function imageTag(image: string): string {
  const lastSlash = image.lastIndexOf('/');
  const name = image.slice(lastSlash + 1);
  if (name.includes('@')) return 'digest';
  const colon = name.indexOf(':');
  return colon === -1 ? '' : name.slice(colon + 1);
}

function defaultContainer(c: Json, hostNetwork: boolean): void {
  c.terminationMessagePath ??= '/dev/termination-log';
  c.terminationMessagePolicy ??= 'File';
  if (c.imagePullPolicy === undefined) {
    const tag = imageTag(String(c.image ?? ''));
    c.imagePullPolicy = tag === '' || tag === 'latest' ? 'Always' : 'IfNotPresent';
  }
  c.resources ??= {};
  canonicalQuantities(c.resources.limits);
  canonicalQuantities(c.resources.requests);
  if (c.resources.limits) {
    c.resources.requests ??= {};
    for (const [k, v] of Object.entries(c.resources.limits)) c.resources.requests[k] ??= v;
  }
  for (const port of c.ports ?? []) {
    port.protocol ??= 'TCP';
    if (hostNetwork) port.hostPort ??= port.containerPort;
  }
  for (const env of c.env ?? []) {
    if (env.valueFrom?.fieldRef) env.valueFrom.fieldRef.apiVersion ??= 'v1';
  }
  defaultProbe(c.livenessProbe);
  defaultProbe(c.readinessProbe);
  defaultProbe(c.startupProbe);
  defaultHttpGet(c.lifecycle?.postStart);
  defaultHttpGet(c.lifecycle?.preStop);
  // A bool with omitempty: false is not written back.
  for (const mount of c.volumeMounts ?? []) if (mount.readOnly === false) delete mount.readOnly;
}

/** A downward API item's fieldRef names its API version (SetDefaults_ObjectFieldSelector). */
function defaultDownwardApi(items: Json[] | undefined): void {
  for (const item of items ?? []) if (item.fieldRef) item.fieldRef.apiVersion ??= 'v1';
}

/** API defaulting of a Pod (a subset of SetDefaults_Pod and friends that touches what we add). */
export function applyDefaults(pod: Json): Json {
  const spec = pod.spec;
  spec.restartPolicy ??= 'Always';
  spec.dnsPolicy ??= 'ClusterFirst';
  spec.terminationGracePeriodSeconds ??= 30;
  spec.securityContext ??= {};
  spec.schedulerName ??= 'default-scheduler';
  spec.enableServiceLinks ??= true;
  const hostNetwork = spec.hostNetwork === true;
  for (const c of spec.initContainers ?? []) defaultContainer(c, hostNetwork);
  for (const c of spec.containers ?? []) defaultContainer(c, hostNetwork);
  for (const v of spec.volumes ?? []) {
    // SetDefaults_Volume: a volume that names no source is an emptyDir.
    if (Object.keys(v).every((k) => k === 'name')) v.emptyDir = {};
    for (const kind of ['secret', 'configMap', 'projected', 'downwardAPI']) if (v[kind]) v[kind].defaultMode ??= 420;
    if (v.hostPath) v.hostPath.type ??= '';
    defaultDownwardApi(v.downwardAPI?.items);
    for (const source of v.projected?.sources ?? []) defaultDownwardApi(source.downwardAPI?.items);
  }
  pod.status ??= {};
  return pod;
}

/**
 * The ServiceAccount admission plugin: service account name, the projected token volume
 * (reused when one exists) and a read-only mount in every container lacking that path.
 */
export function applyServiceAccountPlugin(pod: Json, suffix = 'x7k2q'): Json {
  const spec = pod.spec;
  spec.serviceAccountName ||= 'default';
  spec.serviceAccount = spec.serviceAccountName;
  if (spec.automountServiceAccountToken === false) return pod;
  spec.volumes ??= [];
  let volume = spec.volumes.find((v: Json) => String(v.name).startsWith('kube-api-access-'));
  if (!volume) {
    volume = {
      name: `kube-api-access-${suffix}`,
      projected: {
        sources: [
          { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
          { configMap: { name: 'kube-root-ca.crt', items: [{ key: 'ca.crt', path: 'ca.crt' }] } },
          { downwardAPI: { items: [{ path: 'namespace', fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } }] } },
        ],
        defaultMode: 420,
      },
    };
    spec.volumes.push(volume);
  }
  for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
    if ((c.volumeMounts ?? []).some((m: Json) => m.mountPath === tokenMountPath)) continue;
    (c.volumeMounts ??= []).push({ name: volume.name, readOnly: true, mountPath: tokenMountPath });
  }
  return pod;
}

/** DefaultTolerationSeconds and Priority plugins (no priority class: priority 0, PreemptLowerPriority). */
export function applyOtherPlugins(pod: Json): Json {
  const spec = pod.spec;
  spec.tolerations ??= [];
  for (const key of ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']) {
    if (!spec.tolerations.some((t: Json) => t.key === key)) {
      spec.tolerations.push({ key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 });
    }
  }
  spec.priority ??= 0;
  spec.preemptionPolicy ??= 'PreemptLowerPriority';
  return pod;
}

/**
 * Merge keys of the Pod's keyed lists (structured-merge-diff writes their items as `k:` plus the
 * JSON of these fields); lists not named here are atomic and owned whole.
 */
const listKeys: Readonly<Record<string, readonly string[]>> = {
  containers: ['name'],
  initContainers: ['name'],
  ephemeralContainers: ['name'],
  volumes: ['name'],
  env: ['name'],
  ports: ['containerPort', 'protocol'],
  volumeMounts: ['mountPath'],
  volumeDevices: ['devicePath'],
  ownerReferences: ['uid'],
  imagePullSecrets: ['name'],
  hostAliases: ['ip'],
  topologySpreadConstraints: ['topologyKey', 'whenUnsatisfiable'],
  resourceClaims: ['name'],
  finalizers: [],
};

/** The field set of `value` as `fieldsV1` writes it: `f:` per field, `k:` per keyed item, `.` for a set parent. */
function fieldSet(value: unknown, field: string | undefined, top: boolean): Json {
  if (Array.isArray(value)) {
    const keys = field === undefined ? undefined : listKeys[field];
    if (keys === undefined) return {};
    const set: Json = { '.': {} };
    for (const item of value) {
      // A set of scalars (finalizers) is written `v:` plus the value's JSON.
      if (keys.length === 0) set[`v:${JSON.stringify(item)}`] = {};
      else {
        const key = Object.fromEntries(keys.filter((k) => item?.[k] !== undefined).map((k) => [k, item[k]]));
        set[`k:${JSON.stringify(key)}`] = { '.': {}, ...fieldSet(item, undefined, true) };
      }
    }
    return set;
  }
  if (value === null || typeof value !== 'object') return {};
  const set: Json = top ? {} : { '.': {} };
  for (const [name, child] of Object.entries(value as Json)) set[`f:${name}`] = fieldSet(child, name, false);
  return set;
}

/**
 * The `managedFields` entry of the controller that created `body`: the full field set of
 * what it sent, with escaped quotes inside its `k:` keys, as every controller-created pod has.
 */
export function controllerManagedFields(body: Json, time = '2026-11-20T10:00:00Z'): Json[] {
  const { metadata = {}, spec = {} } = body;
  const sent = {
    metadata: Object.fromEntries(Object.entries(metadata).filter(([k]) => !['namespace', 'creationTimestamp', 'managedFields'].includes(k))),
    spec,
  };
  return [
    { manager: 'kube-controller-manager', operation: 'Update', apiVersion: 'v1', time, fieldsType: 'FieldsV1', fieldsV1: fieldSet(sent, undefined, true) },
  ];
}

/**
 * The pod as a mutating webhook receives it on CREATE: namespace filled from the
 * request, defaults applied, in-tree plugins run, the creating controller's `managedFields`;
 * no name when generateName is used.
 */
export function prepareCreate(body: Json, namespace: string, options: { managedAt?: string; before134?: boolean } = {}): Json {
  const pod = structuredClone(body);
  pod.metadata ??= {};
  pod.metadata.namespace ||= namespace;
  // Omitted from Kubernetes 1.34 on, null before (R-23; `before134` sends the older form).
  if (options.before134) pod.metadata.creationTimestamp = null;
  else delete pod.metadata.creationTimestamp;
  pod.metadata.managedFields ??= controllerManagedFields(body, options.managedAt);
  applyDefaults(pod);
  applyServiceAccountPlugin(pod);
  applyOtherPlugins(pod);
  return pod;
}

/** Round 1 of reinvocation: in-tree plugins run again on our output, then defaulting. */
export function reinvocationInput(patched: Json): Json {
  const pod = structuredClone(patched);
  applyDefaults(pod);
  applyServiceAccountPlugin(pod);
  applyOtherPlugins(pod);
  return pod;
}

/** An AdmissionReview for a pod CREATE as the API server sends it. */
export function createReview(pod: Json, options: { namespace: string; version?: 'v1' | 'v1beta1'; uid?: string; dryRun?: boolean }): Json {
  const request: Json = {
    uid: options.uid ?? randomUUID(),
    kind: { group: '', version: 'v1', kind: 'Pod' },
    resource: { group: '', version: 'v1', resource: 'pods' },
    requestKind: { group: '', version: 'v1', kind: 'Pod' },
    requestResource: { group: '', version: 'v1', resource: 'pods' },
    namespace: options.namespace,
    operation: 'CREATE',
    userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller', uid: 'u-1', groups: ['system:serviceaccounts'] },
    object: pod,
    oldObject: null,
    dryRun: options.dryRun ?? false,
    options: { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1' },
  };
  if (pod.metadata?.name) request.name = pod.metadata.name;
  return { apiVersion: `admission.k8s.io/${options.version ?? 'v1'}`, kind: 'AdmissionReview', request };
}

function unescape(segment: string): string {
  return segment.replace(/~1/g, '/').replace(/~0/g, '~');
}

function parsePath(path: unknown): string[] {
  if (typeof path !== 'string') throw new Error('missing path');
  if (path === '') return [];
  if (!path.startsWith('/')) throw new Error(`path ${path} does not start with /`);
  return path.slice(1).split('/').map(unescape);
}

function container(doc: unknown, parts: string[], op: string): { parent: any; key: string } {
  let node: any = doc;
  for (const part of parts.slice(0, -1)) {
    if (Array.isArray(node)) {
      const i = Number(part);
      if (!/^-?\d+$/.test(part) || i >= node.length || i < -node.length) throw new Error(`${op} operation does not apply: doc is missing path`);
      node = node[i < 0 ? node.length + i : i];
    } else if (node !== null && typeof node === 'object' && Object.hasOwn(node, part)) node = node[part];
    else throw new Error(`${op} operation does not apply: doc is missing path`);
  }
  if (node === null || typeof node !== 'object') throw new Error(`${op} operation does not apply: doc is missing path`);
  return { parent: node, key: parts[parts.length - 1]! };
}

/**
 * Applies a JSON Patch the way kube-apiserver does (gopkg.in/evanphx/json-patch.v4, R-50, R-55):
 * `add` needs the parent, array index 0..len or `-` (negative counts from the end), `remove`
 * needs the target, `replace` of a missing object key acts like add, `test` compares.
 * Throws on any failure, as the API server answers 500 then.
 */
export function applyPatchV4(document: unknown, patch: unknown): unknown {
  if (!Array.isArray(patch)) throw new Error('undecodable patch: not a JSON array');
  let doc = structuredClone(document);
  for (const operation of patch) {
    if (operation === null || typeof operation !== 'object') throw new Error('undecodable patch: operation is not an object');
    const { op, path, value } = operation as Json;
    const parts = parsePath(path);
    if (parts.length === 0) {
      if (op === 'add' || op === 'replace') doc = structuredClone(value);
      else throw new Error(`${op} on the whole document is not supported`);
      continue;
    }
    const { parent, key } = container(doc, parts, String(op));
    switch (op) {
      case 'add':
        if (Array.isArray(parent)) {
          if (key === '-') parent.push(structuredClone(value));
          else {
            let i = Number(key);
            if (!/^-?\d+$/.test(key) || i > parent.length || i < -parent.length) throw new Error(`add operation does not apply: index ${key} out of bounds`);
            if (i < 0) i = parent.length + i;
            parent.splice(i, 0, structuredClone(value));
          }
        } else parent[key] = structuredClone(value);
        break;
      case 'remove':
        if (Array.isArray(parent)) {
          const i = Number(key);
          if (!/^-?\d+$/.test(key) || i >= parent.length || i < -parent.length) throw new Error('remove operation does not apply: index out of bounds');
          parent.splice(i < 0 ? parent.length + i : i, 1);
        } else {
          if (!Object.hasOwn(parent, key)) throw new Error('remove operation does not apply: doc is missing key');
          delete parent[key];
        }
        break;
      case 'replace':
        if (Array.isArray(parent)) {
          const i = Number(key);
          if (!/^-?\d+$/.test(key) || i >= parent.length || i < -parent.length) throw new Error('replace operation does not apply: index out of bounds');
          parent[i < 0 ? parent.length + i : i] = structuredClone(value);
        } else parent[key] = structuredClone(value);
        break;
      case 'test': {
        const actual = Array.isArray(parent) ? parent[Number(key)] : parent[key];
        if (JSON.stringify(actual ?? null) !== JSON.stringify(value ?? null)) throw new Error('test operation failed');
        break;
      }
      default:
        throw new Error(`unsupported or unknown op ${JSON.stringify(op)}`);
    }
  }
  return doc;
}

/** Decodes a response's patch (standard base64 with padding, R-32), or [] when there is none. */
export function decodePatch(response: Json): Json[] {
  const { patch, patchType } = response;
  if (patch === undefined) {
    if (patchType !== undefined) throw new Error('patchType without patch (R-43)');
    return [];
  }
  if (patchType !== 'JSONPatch') throw new Error('patch without patchType JSONPatch (R-43)');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(patch) || patch.length % 4 !== 0) throw new Error('patch is not standard padded base64 (R-32)');
  return JSON.parse(Buffer.from(patch, 'base64').toString('utf8'));
}

/** What pod validation would refuse in `pod`; the production check, re-exported for tests. */
export { podProblems as validationProblems } from '../../src/k8s/pod-validation.js';

/**
 * Checks that a patch only adds: every op is `add`, and an `add` into an object never lands on
 * a key that already exists (which json-patch v4 would silently overwrite, R-55). Returns the
 * problems found; an empty list means nothing that was there before is changed.
 */
export function overwrites(document: unknown, patch: Json[]): string[] {
  const problems: string[] = [];
  let doc = structuredClone(document);
  // The status annotation is the injector's own key: rewriting it is how the ledger grows.
  const ownKey = '/metadata/annotations/sidecar-injector.io~1status';
  for (const op of patch) {
    if (op.path === ownKey && (op.op === 'add' || op.op === 'replace')) {
      doc = applyPatchV4(doc, [op]);
      continue;
    }
    if (op.op !== 'add') problems.push(`${op.op} ${op.path}`);
    else {
      const { parent, key } = container(doc, parsePath(op.path), 'add');
      if (!Array.isArray(parent) && Object.hasOwn(parent, key)) problems.push(`add over existing ${op.path}`);
    }
    doc = applyPatchV4(doc, [op]);
  }
  return problems;
}

/**
 * A small in-process HTTPS server that speaks the Kubernetes API's wire format for Namespaces
 * (and Nodes, with `/version`, for the version source):
 * list (`GET /api/v1/namespaces`), watch (`?watch=true`, newline-delimited JSON events with
 * resourceVersions, BOOKMARK events, `410 Gone` for a compacted history) and get
 * (`GET /api/v1/namespaces/NAME`, 404 as a Status). No Kubernetes API server can run on the
 * machines this project is tested on; this one is just enough of it to test the namespace
 * cache against real HTTP, TLS, bearer tokens and streaming.
 */
import { EventEmitter } from 'node:events';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { KubeConfig } from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { parse as parseCel } from '@bufbuild/cel';
import { testCertificates } from './server.js';
import { qosClass } from '../../src/k8s/qos.js';

interface NamespaceObject {
  kind: 'Namespace';
  apiVersion: 'v1';
  metadata: { name: string; uid: string; resourceVersion: string; labels: Record<string, string>; creationTimestamp: string };
  spec: { finalizers: string[] };
  status: { phase: string };
}

interface NodeObject {
  kind: 'Node';
  apiVersion: 'v1';
  metadata: { name: string; uid: string; resourceVersion: string; labels: Record<string, string> };
  status: { nodeInfo: { kubeletVersion: string; osImage: string }; images: { names: string[]; sizeBytes: number }[] };
}

type Collection = 'namespaces' | 'nodes' | 'pods' | 'sidecartemplates';
type Resource = 'pods' | 'replicasets' | 'jobs' | 'cronjobs' | 'deployments' | 'statefulsets' | 'daemonsets' | 'replicationcontrollers';
/** The API group path of a resource's collection. */
const groupOf = (resource: Resource) =>
  resource === 'pods' || resource === 'replicationcontrollers'
    ? '/api/v1'
    : resource === 'jobs' || resource === 'cronjobs'
      ? '/apis/batch/v1'
      : '/apis/apps/v1';
const kinds: Record<Resource, string> = {
  pods: 'Pod',
  replicasets: 'ReplicaSet',
  jobs: 'Job',
  cronjobs: 'CronJob',
  deployments: 'Deployment',
  statefulsets: 'StatefulSet',
  daemonsets: 'DaemonSet',
  replicationcontrollers: 'ReplicationController',
};

interface WatchEvent {
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: NamespaceObject | NodeObject | Record<string, any>;
  rv: number;
  collection: Collection;
}

/** A watch request as the server saw it. */
export interface WatchRequest {
  resourceVersion: string;
  allowWatchBookmarks: string | null;
  timeoutSeconds: string | null;
}

const token = 'test-token-0123';

const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** What kube-apiserver's validation refuses in an events.k8s.io/v1 Event create (the checks the recorder can trip). */
function eventProblem(body: any): string | undefined {
  const { name, generateName } = body.metadata ?? {};
  if (name !== undefined && (name.length > 253 || !dnsSubdomain.test(name))) return `metadata.name: Invalid value: "${name}": a lowercase RFC 1123 subdomain`;
  // A prefix: only a trailing dash is masked before the check, as the API server's maskTrailingDash.
  if (name === undefined && (typeof generateName !== 'string' || !dnsSubdomain.test(generateName.replace(/-$/, 'a'))))
    return `metadata.generateName: Invalid value: "${generateName}": a lowercase RFC 1123 subdomain`;
  for (const field of ['eventTime', 'reportingController', 'reportingInstance', 'action', 'reason'])
    if (typeof body[field] !== 'string' || body[field] === '') return `${field}: Required value`;
  if (body.type !== 'Normal' && body.type !== 'Warning') return `type: Unsupported value: "${body.type}"`;
  if (typeof body.note === 'string' && Buffer.byteLength(body.note) > 1024) return 'note: Too long: may not be more than 1024 bytes';
  return undefined;
}

function status(code: number, reason: string, message: string) {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

/** The form an answer takes: the object (or list) as stored, or metadata only, single or List. */
type Form = 'object' | 'metadata' | 'metadataList';

/**
 * The form the API server picks for an `Accept` header (CONTRACT.md section 12): the first
 * clause it can serve at all, whether or not it suits the request (both metadata forms are
 * allowed on every endpoint); undefined when none can be served (406).
 */
export function negotiate(accept: string | undefined): Form | undefined {
  if (!accept) return 'object';
  for (const clause of accept.split(',')) {
    const [type = '', ...parameters] = clause.split(';').map((part) => part.trim());
    if (!['application/json', 'application/*', '*/*'].includes(type.toLowerCase())) continue;
    const params = new Map(parameters.map((p) => p.split('=').map((part) => part.trim()) as [string, string]));
    const as = params.get('as');
    if (as === undefined) return 'object';
    if (params.get('g') !== 'meta.k8s.io' || params.get('v') !== 'v1') continue;
    if (as === 'PartialObjectMetadata') return 'metadata';
    if (as === 'PartialObjectMetadataList') return 'metadataList';
  }
  return undefined;
}

const notAcceptable = (detail: string) =>
  status(406, 'NotAcceptable', `the server was unable to respond with a content type that the client supports (${detail})`);
const partial = (object: Record<string, any>) => ({ kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: object.metadata });

export class FakeApiServer {
  private server!: https.Server;
  private rv = 100;
  /** Events at or below this resourceVersion are no longer retained (compaction). */
  private compactedAt = 100;
  private readonly store = new Map<string, NamespaceObject>();
  private readonly nodes = new Map<string, NodeObject>();
  private readonly history: WatchEvent[] = [];
  private readonly watchers = new Set<{ from: number; res: ServerResponse; collection: Collection; form: Form }>();
  /** The API server's `/version` gitVersion. */
  gitVersion = 'v1.31.4';
  /** Answer node lists and watches with 403 (RBAC without the nodes rule). */
  nodesForbidden = false;
  /** Requests of `/version` seen. */
  versionRequests = 0;
  /** Answer `/version` with 500 (an API server whose version cannot be read for now). */
  versionFails = false;
  /** Pods, ReplicaSets and Jobs by `namespace/name` (lists only, for the auditor). */
  private readonly workloads: Record<Resource, Map<string, Record<string, any>>> = {
    pods: new Map(),
    replicasets: new Map(),
    jobs: new Map(),
    deployments: new Map(),
    statefulsets: new Map(),
    daemonsets: new Map(),
    replicationcontrollers: new Map(),
    cronjobs: new Map(),
  };
  /** `Accept` headers of the workload lists seen (the auditor asks for metadata only). */
  readonly workloadAccepts: string[] = [];
  /** Requests answered 406 (an `Accept` whose first servable form does not fit the request), as `METHOD path`. */
  readonly notAcceptable: string[] = [];
  /** Pages served for workload lists. */
  workloadPages = 0;
  /** Paths of single-object GETs of pods and workloads, in order. */
  readonly objectGets: string[] = [];
  /** PATCHes of Deployments, StatefulSets and DaemonSets, as received (`audit --restart`). */
  readonly patches: { path: string; contentType: string; body: any }[] = [];
  /** Workload names whose PATCH is answered 404 (deleted meanwhile). */
  readonly goneWorkloads = new Set<string>();
  /** Events written (events.k8s.io/v1), by name; and their PATCHes (series updates). */
  readonly kubeEvents = new Map<string, Record<string, any>>();
  readonly eventPatches: { name: string; body: any }[] = [];
  /** Event writes refused because their namespace does not exist. */
  eventsRefused = 0;
  /** Answer event writes with 500 (a sick API server: admission must not notice). */
  failEvents = false;
  /** Leases (coordination.k8s.io/v1) by `namespace/name`; writes must carry the current resourceVersion. */
  readonly leases = new Map<string, Record<string, any>>();
  /** Never answer lease requests (an API server that stopped answering). */
  hangLeases = false;
  /** Lease requests received, as their methods, in order. */
  readonly leaseRequests: string[] = [];
  /** Secrets by `namespace/name`: create refuses a name taken (409), update needs the current resourceVersion. */
  readonly secrets = new Map<string, Record<string, any>>();
  /** ConfigMaps by `namespace/name` (read only: GET). */
  readonly configMaps = new Map<string, Record<string, any>>();
  /** MutatingWebhookConfigurations by name: get, and strategic merge patches (webhooks merged by name). */
  readonly webhookConfigurations = new Map<string, Record<string, any>>();
  /** MutatingAdmissionPolicies and their bindings by name, in the version `mutatingAdmissionPolicyApi` says: get only. */
  readonly admissionPolicies = {
    mutatingadmissionpolicies: new Map<string, Record<string, any>>(),
    mutatingadmissionpolicybindings: new Map<string, Record<string, any>>(),
  };
  /** ValidatingAdmissionPolicies and their bindings by name (v1, as every supported version serves them): get only. */
  readonly validatingPolicies = {
    validatingadmissionpolicies: new Map<string, Record<string, any>>(),
    validatingadmissionpolicybindings: new Map<string, Record<string, any>>(),
  };
  /**
   * The admissionregistration.k8s.io version that serves MutatingAdmissionPolicies (and lists them
   * in its discovery): v1 as from 1.36, v1beta1 as 1.34 and 1.35 with the feature gate, or none
   * (the resource a 404 in every version, and the beta group version itself a 404).
   */
  mutatingAdmissionPolicyApi: 'v1' | 'v1beta1' | undefined = 'v1';
  /** Writes to Secrets and webhook configurations, in order (`POST secrets/NAME`, `PATCH mutatingwebhookconfigurations/NAME`). */
  readonly writes: string[] = [];
  /** Resources answered 403 (RBAC without the rule). */
  readonly forbidden = new Set<'secrets' | 'mutatingwebhookconfigurations'>();
  /** Emits `watch` when a watch stream opens, `list` when a list is answered. */
  readonly events = new EventEmitter();
  readonly watchRequests: WatchRequest[] = [];
  readonly getRequests: string[] = [];
  listCount = 0;
  /** While set, list requests wait for it. */
  listGate: Promise<void> | undefined;
  /** Number of list requests to answer with 500 before answering normally. */
  failLists = 0;
  /** How get requests fail: not at all, with 500, or never answering. */
  getFailure: 'none' | 'error' | 'hang' = 'none';
  /** Answer an expired watch with HTTP 410 instead of a 200 stream with an ERROR event. */
  goneAsHttpStatus = false;
  /**
   * How watches misbehave: `end-at-once` closes the stream with no event, `error-event` sends
   * an ERROR event with code 500 and closes, `silent` keeps the stream open and never writes.
   */
  watchFailure: 'none' | 'end-at-once' | 'error-event' | 'silent' = 'none';
  /** Continue tokens to answer with 410 Expired (as after compaction) before honouring them. */
  expireContinueTokens = 0;
  /** Delay before each list page is answered. */
  listDelayMs = 0;
  /** `limit` values of the list requests seen. */
  readonly listLimits: (string | null)[] = [];
  port = 0;
  /** Core Events (v1), as controllers record them (`FailedCreate` on a ReplicaSet, say): listed with `fieldSelector` and pages. */
  readonly coreEvents: Record<string, any>[] = [];
  /** Answer core Event lists with 403 (RBAC without the rule). */
  coreEventsForbidden = false;
  /** `fieldSelector` of each core Event list seen. */
  readonly coreEventSelectors: (string | null)[] = [];
  /** Pod creates (`POST …/pods`) go through this admission chain (helpers/admission-chain.ts); unset: not served. */
  admission: { create(namespace: string, dryRun: boolean, pod: unknown): Promise<{ code: number; body: unknown; warnings?: readonly string[] }> } | undefined;

  async start(): Promise<void> {
    const { key, cert } = await testCertificates();
    this.server = https.createServer({ key, cert }, (req, res) => void this.handle(req, res));
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    for (const w of this.watchers) w.res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** A kubeconfig pointing at this server with its CA and bearer token. */
  async kubeConfig(): Promise<KubeConfig> {
    const { caCert } = await testCertificates();
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'fake', server: `https://127.0.0.1:${this.port}`, caData: Buffer.from(caCert).toString('base64'), skipTLSVerify: false }],
      users: [{ name: 'injector', token }],
      contexts: [{ name: 'fake', cluster: 'fake', user: 'injector' }],
      currentContext: 'fake',
    });
    return kc;
  }

  private object(name: string, labels: Record<string, string>, annotations?: Record<string, string>): NamespaceObject {
    return {
      kind: 'Namespace',
      apiVersion: 'v1',
      metadata: {
        name,
        uid: `uid-${name}`,
        resourceVersion: String(++this.rv),
        labels: { ...labels, 'kubernetes.io/metadata.name': name },
        ...(annotations ? { annotations } : {}),
        creationTimestamp: '2026-11-22T00:00:00Z',
      },
      spec: { finalizers: ['kubernetes'] },
      status: { phase: 'Active' },
    };
  }

  private emit(type: WatchEvent['type'], object: NamespaceObject | NodeObject | Record<string, any>): void {
    const collection: Collection =
      object.kind === 'Node' ? 'nodes' : object.kind === 'Pod' ? 'pods' : object.kind === 'SidecarTemplate' ? 'sidecartemplates' : 'namespaces';
    const event = { type, object, rv: Number(object.metadata.resourceVersion), collection };
    this.history.push(event);
    for (const w of this.watchers) if (w.collection === collection && event.rv > w.from) this.deliver(w, type, object);
  }

  /**
   * One watch event, in the form the watch negotiated. A watch that asked for the List form
   * ends at its first event, as the API server's does: a single object is not a list.
   */
  private deliver(w: { res: ServerResponse; form: Form }, type: string, object: Record<string, any>): void {
    if (w.form === 'metadataList') {
      this.watchers.delete(w as never);
      w.res.end();
      return;
    }
    w.res.write(`${JSON.stringify({ type, object: w.form === 'metadata' ? partial(object) : object })}\n`);
  }

  /** Answers one object in the negotiated form: 406 for the List form, or when nothing fits. */
  private sendObject(req: IncomingMessage, res: ServerResponse, object: Record<string, any>): void {
    const form = negotiate(req.headers.accept);
    if (form === undefined || form === 'metadataList') {
      this.notAcceptable.push(`${req.method} ${req.url}`);
      return this.send(res, 406, notAcceptable('you requested PartialObjectMetadataList, but the requested object is not a list'));
    }
    this.send(res, 200, form === 'metadata' ? partial(object) : object);
  }

  /** Answers a list page in the negotiated form: 406 for the single form, or when nothing fits. */
  private sendList(
    req: IncomingMessage,
    res: ServerResponse,
    kind: string,
    apiVersion: string,
    metadata: Record<string, any>,
    items: Record<string, any>[],
  ): void {
    const form = negotiate(req.headers.accept);
    if (form === undefined || form === 'metadata') {
      this.notAcceptable.push(`${req.method} ${req.url}`);
      return this.send(res, 406, notAcceptable('you requested PartialObjectMetadata, but the requested object is a list'));
    }
    if (form === 'metadataList') this.send(res, 200, { kind: 'PartialObjectMetadataList', apiVersion: 'meta.k8s.io/v1', metadata, items: items.map(partial) });
    else this.send(res, 200, { kind, apiVersion, metadata, items });
  }

  /** Opens a watch stream in the negotiated form (406 when nothing fits); false when refused. */
  private openWatch(req: IncomingMessage, res: ServerResponse): Form | undefined {
    const form = negotiate(req.headers.accept);
    if (form === undefined) {
      this.notAcceptable.push(`${req.method} ${req.url}`);
      this.send(res, 406, notAcceptable('no acceptable form'));
      return undefined;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders();
    return form;
  }

  /** Changes a pod's labels and annotations (as `kubectl annotate` would), with a MODIFIED event. */
  updatePod(namespace: string, name: string, metadata: { labels?: Record<string, string>; annotations?: Record<string, string> }): void {
    const pod = this.workloads.pods.get(`${namespace}/${name}`);
    if (!pod) return;
    const next = { ...pod, metadata: { ...pod.metadata, ...metadata, resourceVersion: String(++this.rv) } };
    this.workloads.pods.set(`${namespace}/${name}`, next);
    this.emit('MODIFIED', next);
  }

  /** A stored pod, as a GET would answer it. */
  storedPod(namespace: string, name: string): Record<string, any> | undefined {
    return this.workloads.pods.get(`${namespace}/${name}`);
  }

  /** Pod updates (`PUT …/pods/NAME`) the fake stored, in order: namespace/name. */
  readonly podUpdates: string[] = [];
  /** Set: every pod update is refused with 403 and these words (as a policy's denial), counted in `podUpdatesRefused`. */
  podUpdateRefusal: string | undefined;
  podUpdatesRefused = 0;

  /**
   * A pod update as the real API server judges one: the resourceVersion must be the stored one
   * (409), and of the spec only the images of containers and init containers may change
   * (ValidatePodUpdate's 422 "pod updates may not change fields other than …").
   */
  private async putPod(req: IncomingMessage, res: ServerResponse, namespace: string, name: string): Promise<void> {
    const body = await this.readBody(req);
    const current = this.workloads.pods.get(`${namespace}/${name}`);
    if (!current) return this.send(res, 404, status(404, 'NotFound', `pods "${name}" not found`));
    if (this.podUpdateRefusal !== undefined) {
      this.podUpdatesRefused++;
      return this.send(res, 403, status(403, 'Forbidden', this.podUpdateRefusal));
    }
    if (body.metadata?.resourceVersion !== current.metadata.resourceVersion)
      return this.send(
        res,
        409,
        status(
          409,
          'Conflict',
          `Operation cannot be fulfilled on pods "${name}": the object has been modified; please apply your changes to the latest version and try again`,
        ),
      );
    const withoutImages = (spec: any) =>
      JSON.stringify({
        ...spec,
        containers: (spec?.containers ?? []).map((c: any) => ({ ...c, image: '' })),
        initContainers: (spec?.initContainers ?? []).map((c: any) => ({ ...c, image: '' })),
      });
    if (withoutImages(body.spec) !== withoutImages(current.spec))
      return this.invalid(
        res,
        `Pod "${name}" is invalid: spec: Forbidden: pod updates may not change fields other than \`spec.containers[*].image\`,\`spec.initContainers[*].image\`,…`,
      );
    const stored = {
      ...current,
      metadata: { ...current.metadata, labels: body.metadata?.labels, annotations: body.metadata?.annotations, resourceVersion: String(++this.rv) },
      spec: body.spec,
    };
    this.workloads.pods.set(`${namespace}/${name}`, stored);
    this.podUpdates.push(`${namespace}/${name}`);
    this.emit('MODIFIED', stored);
    return this.send(res, 200, stored);
  }

  /** Unset: discovery of v1 no longer lists pods/resize, and a resize is a 404 (a cluster with the feature off). */
  resizeServed = true;
  /** Resizes (`PUT …/pods/NAME/resize`) the fake stored, in order: namespace/name. */
  readonly podResizes: string[] = [];

  /**
   * A resize as the real API server judges one (the pods/resize subresource): the resourceVersion
   * must be the stored one (409); of the body only the containers' resources are taken, by name
   * (the rest is dropped); a non-restartable init container may not be resized, nor the pod's QoS
   * class change (422).
   */
  private async resizePod(req: IncomingMessage, res: ServerResponse, namespace: string, name: string): Promise<void> {
    const body = await this.readBody(req);
    const current = this.workloads.pods.get(`${namespace}/${name}`);
    if (!this.resizeServed) return this.send(res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
    if (!current) return this.send(res, 404, status(404, 'NotFound', `pods "${name}" not found`));
    if (this.podUpdateRefusal !== undefined) {
      this.podUpdatesRefused++;
      return this.send(res, 403, status(403, 'Forbidden', this.podUpdateRefusal));
    }
    if (body.metadata?.resourceVersion !== current.metadata.resourceVersion)
      return this.send(res, 409, status(409, 'Conflict', `Operation cannot be fulfilled on pods "${name}": the object has been modified`));
    const spec = structuredClone(current.spec);
    for (const list of ['containers', 'initContainers'] as const)
      for (const container of spec[list] ?? []) {
        const asked = (body.spec?.[list] ?? []).find((c: any) => c?.name === container.name);
        if (!asked || JSON.stringify(asked.resources ?? {}) === JSON.stringify(container.resources ?? {})) continue;
        if (list === 'initContainers' && container.restartPolicy !== 'Always')
          return this.invalid(
            res,
            `Pod "${name}" is invalid: spec.initContainers[0].resources: Forbidden: resources for non-sidecar init containers are immutable`,
          );
        container.resources = asked.resources;
      }
    if (qosClass(spec) !== qosClass(current.spec))
      return this.invalid(res, `Pod "${name}" is invalid: spec: Invalid value: "${qosClass(spec)}": Pod QOS Class may not change as a result of resizing`);
    const stored = { ...current, metadata: { ...current.metadata, resourceVersion: String(++this.rv) }, spec };
    this.workloads.pods.set(`${namespace}/${name}`, stored);
    this.podResizes.push(`${namespace}/${name}`);
    this.emit('MODIFIED', stored);
    return this.send(res, 200, stored);
  }

  /** A 422 as the API server answers an invalid object. */
  private invalid(res: ServerResponse, message: string): void {
    this.send(res, 422, status(422, 'Invalid', message));
  }

  /** Deletes a pod, with a DELETED event. */
  deletePod(namespace: string, name: string): void {
    const pod = this.workloads.pods.get(`${namespace}/${name}`);
    if (!pod) return;
    this.workloads.pods.delete(`${namespace}/${name}`);
    this.emit('DELETED', { ...pod, metadata: { ...pod.metadata, resourceVersion: String(++this.rv) } });
  }

  private node(name: string, kubeletVersion: string): NodeObject {
    return {
      kind: 'Node',
      apiVersion: 'v1',
      metadata: { name, uid: `uid-${name}`, resourceVersion: String(++this.rv), labels: { 'kubernetes.io/hostname': name } },
      // Real nodes carry much more (conditions, images): the source must keep only the version.
      status: { nodeInfo: { kubeletVersion, osImage: 'Debian GNU/Linux 12' }, images: [{ names: ['registry.k8s.io/pause:3.9'], sizeBytes: 321520 }] },
    };
  }

  /** Adds a node or changes its kubelet version (an upgraded node). */
  setNode(name: string, kubeletVersion: string): void {
    const existed = this.nodes.has(name);
    const object = this.node(name, kubeletVersion);
    this.nodes.set(name, object);
    this.emit(existed ? 'MODIFIED' : 'ADDED', object);
  }

  deleteNode(name: string): void {
    const previous = this.nodes.get(name);
    if (!previous) return;
    this.nodes.delete(name);
    this.emit('DELETED', { ...previous, metadata: { ...previous.metadata, resourceVersion: String(++this.rv) } });
  }

  /** Creates a namespace; with `silently`, its watch event is held back until `release()` (a slow watch). */
  create(name: string, labels: Record<string, string> = {}, options: { silently?: boolean } = {}): void {
    const object = this.object(name, labels);
    this.store.set(name, object);
    if (options.silently) this.held.push(object);
    else this.emit('ADDED', object);
  }

  private readonly held: NamespaceObject[] = [];
  /** Sends the held-back events. */
  release(): void {
    for (const object of this.held.splice(0)) this.emit('ADDED', object);
  }

  /** Replaces a namespace's labels (and annotations, when given), with a MODIFIED event. */
  update(name: string, labels: Record<string, string>, annotations?: Record<string, string>): void {
    const object = this.object(name, labels, annotations);
    this.store.set(name, object);
    this.emit('MODIFIED', object);
  }

  delete(name: string): void {
    const previous = this.store.get(name);
    if (!previous) return;
    this.store.delete(name);
    this.emit('DELETED', { ...previous, metadata: { ...previous.metadata, resourceVersion: String(++this.rv) } });
  }

  /** Changes made while no watch can see them: forgets the history (as etcd compaction does). */
  compact(): void {
    this.compactedAt = this.rv;
    this.history.length = 0;
  }

  /** Sends a BOOKMARK with the current resourceVersion to every watch. */
  bookmark(): string {
    const rv = String(++this.rv);
    for (const w of this.watchers) this.deliver(w, 'BOOKMARK', { kind: 'Namespace', apiVersion: 'v1', metadata: { resourceVersion: rv } });
    return rv;
  }

  /** Drops every watch connection mid-stream (a network failure). */
  dropWatches(): void {
    for (const w of this.watchers) w.res.socket?.destroy();
    this.watchers.clear();
  }

  /** Ends every watch normally (as the server does after timeoutSeconds). */
  endWatches(): void {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
  }

  get activeWatches(): number {
    return this.watchers.size;
  }

  private async bodyOf(req: IncomingMessage): Promise<unknown> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  }

  private send(res: ServerResponse, code: number, body: unknown, warnings: readonly string[] = []): void {
    // As kube-apiserver relays admission warnings: one `Warning: 299 - "text"` header each, quotes and
    // backslashes escaped, the text's UTF-8 bytes as they are (Node writes a header string as latin1).
    const header = (w: string) => Buffer.from(`299 - "${w.replace(/["\\]/g, '\\$&')}"`, 'utf8').toString('latin1');
    const headers: [string, string][] = [['content-type', 'application/json'], ...warnings.map((w): [string, string] => ['warning', header(w)])];
    res.writeHead(code, headers.flat());
    res.end(JSON.stringify(body));
  }

  /**
   * Adds a pod (with spec and status, as the API server holds it: a metadata-only list must
   * leave those out), a ReplicaSet or a Job. `metadata` needs name and namespace.
   */
  addObject(resource: Resource, metadata: Record<string, any>, spec: Record<string, any> = {}): void {
    const kind = kinds[resource];
    const apiVersion = groupOf(resource)
      .replace(/^\/api\/v1$/, 'v1')
      .replace(/^\/apis\//, '');
    const object = {
      kind,
      apiVersion,
      metadata: {
        uid: `uid-${resource}-${metadata.namespace}-${metadata.name}`,
        resourceVersion: String(++this.rv),
        creationTimestamp: '2026-11-22T00:00:00Z',
        ...metadata,
      },
      spec,
      status: { phase: 'Running' },
    };
    this.workloads[resource].set(`${metadata.namespace}/${metadata.name}`, object);
    // Pods are watched (the server's auditor): others are only listed.
    if (resource === 'pods') this.emit('ADDED', object);
  }

  /** Sets the status of a pod or workload added with addObject (container statuses, a ReplicaSet's conditions). */
  setObjectStatus(resource: Resource, namespace: string, name: string, status: Record<string, any>): void {
    const object = this.workloads[resource].get(`${namespace}/${name}`);
    if (!object) throw new Error(`no ${resource} ${namespace}/${name}`);
    object.status = status;
    object.metadata = { ...object.metadata, resourceVersion: String(++this.rv) };
  }

  /** Core Events, all namespaces or one: `fieldSelector` on `reason`, `type`, `involvedObject.kind` (as the API server's field labels), paginated. */
  private handleCoreEvents(url: URL, req: IncomingMessage, res: ServerResponse, namespace: string | undefined): void {
    const selector = url.searchParams.get('fieldSelector');
    this.coreEventSelectors.push(selector);
    this.listLimits.push(url.searchParams.get('limit'));
    if (this.coreEventsForbidden)
      return this.send(
        res,
        403,
        status(403, 'Forbidden', 'events is forbidden: User "system:serviceaccount:sidecar-injector:sidecar-injector" cannot list resource "events"'),
      );
    const fields: [string, string][] = [];
    for (const term of selector ? selector.split(',') : []) {
      const [key, value] = term.split('=');
      if (!['reason', 'type', 'involvedObject.kind'].includes(key!) || value === undefined)
        return this.send(res, 400, status(400, 'BadRequest', `"${key}" is not a known field selector: only "involvedObject.kind", "reason", "type"`));
      fields.push([key!, value]);
    }
    const field = (event: Record<string, any>, key: string) => (key === 'involvedObject.kind' ? event.involvedObject?.kind : event[key]);
    const all = this.coreEvents.filter((e) => (!namespace || e.metadata.namespace === namespace) && fields.every(([k, v]) => field(e, k) === v));
    const limit = Number(url.searchParams.get('limit') ?? '0');
    const start = url.searchParams.get('continue') ? Number(Buffer.from(url.searchParams.get('continue')!, 'base64').toString('utf8')) : 0;
    const page = limit > 0 ? all.slice(start, start + limit) : all.slice(start);
    const more = limit > 0 && start + limit < all.length;
    const metadata = { resourceVersion: String(this.rv), ...(more ? { continue: Buffer.from(String(start + limit)).toString('base64') } : {}) };
    this.sendList(req, res, 'EventList', 'v1', metadata, page);
  }

  /** Lists of pods, ReplicaSets and Jobs, all namespaces or one, paginated; metadata only when asked by `Accept`. */
  private handleWorkloads(url: URL, req: IncomingMessage, res: ServerResponse): boolean {
    const match =
      /^\/(?:api\/v1|apis\/apps\/v1|apis\/batch\/v1)(?:\/namespaces\/([^/]+))?\/(pods|replicasets|jobs|cronjobs|deployments|statefulsets|daemonsets|replicationcontrollers)$/.exec(
        url.pathname,
      );
    if (!match || req.method !== 'GET') return false;
    const [, namespace, resource] = match as unknown as [string, string | undefined, Resource];
    const group = groupOf(resource);
    if (!url.pathname.startsWith(group)) {
      this.send(res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
      return true;
    }
    this.workloadAccepts.push(String(req.headers.accept ?? ''));
    if (url.searchParams.get('watch') === 'true' && resource === 'pods' && !namespace) {
      const form = this.openWatch(req, res);
      if (form === undefined) return true;
      this.stream(res, Number(url.searchParams.get('resourceVersion') ?? '0'), 'pods', form);
      this.events.emit('pod-watch');
      return true;
    }
    this.workloadPages++;
    const all = [...this.workloads[resource].values()].filter((o) => !namespace || o.metadata.namespace === namespace);
    const limit = Number(url.searchParams.get('limit') ?? '0');
    const start = url.searchParams.get('continue') ? Number(Buffer.from(url.searchParams.get('continue')!, 'base64').toString('utf8')) : 0;
    const page = limit > 0 ? all.slice(start, start + limit) : all.slice(start);
    const more = limit > 0 && start + limit < all.length;
    const metadata = { resourceVersion: String(this.rv), ...(more ? { continue: Buffer.from(String(start + limit)).toString('base64') } : {}) };
    const apiVersion = groupOf(resource)
      .replace(/^\/api\/v1$/, 'v1')
      .replace(/^\/apis\//, '');
    this.sendList(req, res, `${kinds[resource]}List`, apiVersion, metadata, page);
    return true;
  }

  /** Streams a collection's retained events after `from`, then every new one, until the client goes. */
  private stream(res: ServerResponse, from: number, collection: Collection, form: Form): void {
    const watcher = { from, res, collection, form };
    this.watchers.add(watcher);
    res.on('close', () => this.watchers.delete(watcher));
    for (const event of this.history) {
      if (event.collection === collection && event.rv > from && this.watchers.has(watcher)) this.deliver(watcher, event.type, event.object);
    }
  }

  /** SidecarTemplates by name (cluster-scoped): list, watch, get and status merge patches; `applyTemplate` writes the rest, as kubectl would. */
  readonly sidecarTemplates = new Map<string, Record<string, any>>();
  /** Status merge patches of SidecarTemplates, in order. */
  /** Status fields of SidecarTemplates this server's CRD does not declare (pruned from every status write). */
  readonly prunedStatusFields = new Set<string>();
  readonly templateStatusPatches: { name: string; body: any }[] = [];
  /** Answer SidecarTemplate lists with this status code (404: the resource is not installed; 403: no RBAC). */
  sidecarTemplatesFailWith: number | undefined;

  /** Creates or replaces a SidecarTemplate (kind, apiVersion filled in; generation bumped on a spec change), with its watch event. */
  applyTemplate(name: string, spec: Record<string, any>): Record<string, any> {
    const current = this.sidecarTemplates.get(name);
    const changed = !current || JSON.stringify(current.spec) !== JSON.stringify(spec);
    const object = {
      apiVersion: 'sidecar-injector.io/v1alpha1',
      kind: 'SidecarTemplate',
      metadata: {
        name,
        uid: current?.metadata.uid ?? `uid-${name}-${this.rv}`,
        generation: (current?.metadata.generation ?? 0) + (changed ? 1 : 0),
        resourceVersion: String(++this.rv),
        creationTimestamp: current?.metadata.creationTimestamp ?? '2026-01-01T00:00:00Z',
      },
      spec: structuredClone(spec),
      ...(current?.status ? { status: current.status } : {}),
    };
    this.sidecarTemplates.set(name, object);
    this.emit(current ? 'MODIFIED' : 'ADDED', object);
    return object;
  }

  /** Stores a template from its YAML (a bare document `name: …` or a SidecarTemplate manifest); `changedAt` sets its managedFields' time for spec. */
  applyTemplateText(text: string, changedAt?: string): Record<string, any> {
    const doc = parseYaml(text) as Record<string, any>;
    // A manifest's spec whole (a revision's spec.name is the template's, not the object's); a bare document's name is the object's.
    const { name, ...bare } = doc;
    const object = doc.kind === 'SidecarTemplate' ? this.applyTemplate(doc.metadata.name, doc.spec) : this.applyTemplate(name, bare);
    if (changedAt) object.metadata.managedFields = [{ manager: 'kubectl', operation: 'Apply', time: changedAt, fieldsV1: { 'f:spec': {} } }];
    return object;
  }

  /** Deletes every SidecarTemplate. */
  clearTemplates(): void {
    for (const name of [...this.sidecarTemplates.keys()]) this.deleteTemplate(name);
  }

  /** Deletes a SidecarTemplate, with its watch event. */
  deleteTemplate(name: string): void {
    const current = this.sidecarTemplates.get(name);
    if (!current) return;
    this.sidecarTemplates.delete(name);
    this.emit('DELETED', { ...current, metadata: { ...current.metadata, resourceVersion: String(++this.rv) } });
  }

  private async handleSidecarTemplates(
    url: URL,
    req: IncomingMessage,
    res: ServerResponse,
    name: string | undefined,
    subresource: string | undefined,
  ): Promise<void> {
    if (this.sidecarTemplatesFailWith !== undefined)
      return this.send(res, this.sidecarTemplatesFailWith, status(this.sidecarTemplatesFailWith, 'Failure', 'sidecartemplates are not served'));
    if (name === undefined && req.method === 'GET') {
      if (url.searchParams.get('watch') === 'true') {
        const form = this.openWatch(req, res);
        if (form) this.stream(res, Number(url.searchParams.get('resourceVersion') ?? 0), 'sidecartemplates', form);
        return;
      }
      this.listCount++;
      return this.sendList(req, res, 'SidecarTemplateList', 'sidecar-injector.io/v1alpha1', { resourceVersion: String(this.rv) }, [
        ...this.sidecarTemplates.values(),
      ]);
    }
    const current = name === undefined ? undefined : this.sidecarTemplates.get(name);
    if (!current) return this.send(res, 404, status(404, 'NotFound', `sidecartemplates.sidecar-injector.io "${name}" not found`));
    if (req.method === 'GET' && subresource === undefined) return this.send(res, 200, current);
    if (req.method === 'PATCH' && subresource === 'status') {
      const body = await this.readBody(req);
      this.templateStatusPatches.push({ name: name!, body });
      // Preconditions, as the API server checks them: another resourceVersion is a conflict, another uid an immutable field.
      if (body.metadata?.resourceVersion !== undefined && body.metadata.resourceVersion !== current.metadata.resourceVersion)
        return this.send(
          res,
          409,
          status(
            409,
            'Conflict',
            `Operation cannot be fulfilled on sidecartemplates.sidecar-injector.io "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          ),
        );
      if (body.metadata?.uid !== undefined && body.metadata.uid !== current.metadata.uid)
        return this.send(
          res,
          422,
          status(422, 'Invalid', `SidecarTemplate.sidecar-injector.io "${name}" is invalid: metadata.uid: Invalid value: field is immutable`),
        );
      // A merge patch (RFC 7386), as the API server applies one: objects merged key by key at any
      // depth, null removes a field, a list or any other value is replaced.
      const merge = (target: unknown, patch: unknown): unknown => {
        if (typeof patch !== 'object' || patch === null || Array.isArray(patch)) return patch;
        const out: Record<string, unknown> = typeof target === 'object' && target !== null && !Array.isArray(target) ? { ...target } : {};
        for (const [key, value] of Object.entries(patch)) {
          if (value === null) delete out[key];
          else out[key] = merge(out[key], value);
        }
        return out;
      };
      const merged = merge(current.status ?? {}, body.status ?? {}) as Record<string, any>;
      // An older CRD's structural schema prunes the status fields it does not declare.
      for (const field of this.prunedStatusFields) delete merged[field];
      const object = { ...current, status: merged, metadata: { ...current.metadata, resourceVersion: String(++this.rv) } };
      this.sidecarTemplates.set(name!, object);
      this.emit('MODIFIED', object);
      return this.send(res, 200, object);
    }
    return this.send(res, 405, status(405, 'MethodNotAllowed', 'method not allowed'));
  }

  /**
   * EndpointSlices by `namespace/service`: each endpoint's readiness, or the endpoint itself
   * (the pod it targets, terminating or not) (none: no slice at all, as for a Service without
   * ready pods' addresses yet).
   */
  /** Set: every EndpointSlice list is answered with this status (403 no right, 429 throttled, …). */
  endpointSlicesStatus: number | undefined;
  readonly serviceEndpoints = new Map<string, (boolean | { ready: boolean; pod: string; terminating?: boolean; serving?: boolean })[]>();

  /** Adds a MutatingWebhookConfiguration (as `kubectl apply` would): stored with a resourceVersion. */
  addWebhookConfiguration(object: Record<string, any>): void {
    const stored = structuredClone(object);
    stored.metadata = { ...stored.metadata, uid: `uid-mwc-${stored.metadata.name}`, resourceVersion: String(++this.rv) };
    this.webhookConfigurations.set(stored.metadata.name, stored);
  }

  private async readBody(req: IncomingMessage): Promise<any> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    try {
      return JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      return undefined;
    }
  }

  /** Secrets of one namespace: get, create and update, validated as the API server does for kubernetes.io/tls. */
  private async handleSecret(req: IncomingMessage, res: ServerResponse, namespace: string, name: string | undefined): Promise<void> {
    if (this.forbidden.has('secrets'))
      return this.send(res, 403, status(403, 'Forbidden', `secrets is forbidden: cannot ${req.method} secrets in "${namespace}"`));
    const key = (n: string) => `${namespace}/${n}`;
    if (req.method === 'GET' && name !== undefined) {
      const found = this.secrets.get(key(name));
      return found ? this.send(res, 200, found) : this.send(res, 404, status(404, 'NotFound', `secrets "${name}" not found`));
    }
    if (!((req.method === 'POST' && name === undefined) || (req.method === 'PUT' && name !== undefined))) {
      return this.send(res, 405, status(405, 'MethodNotAllowed', 'method not allowed'));
    }
    const body = await this.readBody(req);
    if (typeof body?.metadata?.name !== 'string') return this.send(res, 422, status(422, 'Invalid', 'metadata.name: Required value'));
    if (body.metadata.namespace !== undefined && body.metadata.namespace !== namespace) {
      return this.send(res, 400, status(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request'));
    }
    if (name !== undefined && body.metadata.name !== name)
      return this.send(res, 400, status(400, 'BadRequest', 'the name of the object does not match the name on the URL'));
    const data = body.data ?? {};
    for (const [k, v] of Object.entries(data)) {
      if (typeof v !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(v)) return this.send(res, 422, status(422, 'Invalid', `data[${k}]: not base64`));
    }
    if (body.type === 'kubernetes.io/tls' && !(Object.hasOwn(data, 'tls.crt') && Object.hasOwn(data, 'tls.key'))) {
      return this.send(res, 422, status(422, 'Invalid', 'data[tls.crt], data[tls.key]: Required value'));
    }
    const current = this.secrets.get(key(body.metadata.name));
    if (req.method === 'POST' && current) return this.send(res, 409, status(409, 'AlreadyExists', `secrets "${body.metadata.name}" already exists`));
    if (req.method === 'PUT') {
      if (!current) return this.send(res, 404, status(404, 'NotFound', `secrets "${name}" not found`));
      if (body.metadata.resourceVersion !== current.metadata.resourceVersion) {
        return this.send(res, 409, status(409, 'Conflict', 'the object has been modified; please apply your changes to the latest version and try again'));
      }
      if ((body.type ?? 'Opaque') !== (current.type ?? 'Opaque')) return this.send(res, 422, status(422, 'Invalid', 'type: Invalid value: field is immutable'));
    }
    const stored = {
      ...body,
      metadata: { ...body.metadata, namespace, uid: current?.metadata.uid ?? `uid-secret-${body.metadata.name}`, resourceVersion: String(++this.rv) },
    };
    this.secrets.set(key(body.metadata.name), stored);
    this.writes.push(`${req.method} secrets/${body.metadata.name}`);
    this.events.emit('secret-written', stored);
    return this.send(res, req.method === 'POST' ? 201 : 200, stored);
  }

  /** One MutatingWebhookConfiguration: get, and strategic merge patches that may only change webhooks it has. */
  private async handleWebhookConfiguration(req: IncomingMessage, res: ServerResponse, name: string): Promise<void> {
    if (this.forbidden.has('mutatingwebhookconfigurations')) {
      return this.send(res, 403, status(403, 'Forbidden', `mutatingwebhookconfigurations.admissionregistration.k8s.io "${name}" is forbidden`));
    }
    const current = this.webhookConfigurations.get(name);
    if (req.method !== 'GET' && req.method !== 'PATCH') return this.send(res, 405, status(405, 'MethodNotAllowed', 'method not allowed'));
    if (!current) return this.send(res, 404, status(404, 'NotFound', `mutatingwebhookconfigurations.admissionregistration.k8s.io "${name}" not found`));
    if (req.method === 'GET') return this.send(res, 200, current);
    if (req.headers['content-type'] !== 'application/strategic-merge-patch+json') {
      return this.send(res, 415, status(415, 'UnsupportedMediaType', `the body of the request was in an unknown format: ${req.headers['content-type']}`));
    }
    const patch = await this.readBody(req);
    if (typeof patch !== 'object' || patch === null) return this.send(res, 400, status(400, 'BadRequest', 'the patch is not a JSON object'));
    const rv = patch.metadata?.resourceVersion;
    if (rv !== undefined && rv !== current.metadata.resourceVersion) {
      return this.send(res, 409, status(409, 'Conflict', 'the object has been modified; please apply your changes to the latest version and try again'));
    }
    const next = structuredClone(current);
    for (const change of Array.isArray(patch.webhooks) ? patch.webhooks : []) {
      const hook = next.webhooks.find((w: any) => w.name === change?.name);
      // A new entry would lack sideEffects, admissionReviewVersions and clientConfig: invalid.
      if (!hook)
        return this.send(res, 422, status(422, 'Invalid', `webhooks[${JSON.stringify(change?.name)}]: Required value: sideEffects, admissionReviewVersions`));
      const bundle = change.clientConfig?.caBundle;
      if (bundle !== undefined && (typeof bundle !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(bundle))) {
        return this.send(res, 422, status(422, 'Invalid', 'clientConfig.caBundle: not base64'));
      }
      if (change.failurePolicy !== undefined && !['Fail', 'Ignore'].includes(change.failurePolicy)) {
        return this.send(res, 422, status(422, 'Invalid', 'failurePolicy: Unsupported value'));
      }
      const { clientConfig, matchConditions, ...rest } = change;
      // matchConditions merge by name, as the API server's strategic merge does ($patch: delete removes one).
      if (matchConditions !== undefined) {
        if (!Array.isArray(matchConditions)) return this.send(res, 400, status(400, 'BadRequest', 'matchConditions: not a list'));
        const merged: any[] = [...(hook.matchConditions ?? [])];
        for (const condition of matchConditions) {
          const at = merged.findIndex((c) => c.name === condition?.name);
          if (condition?.$patch === 'delete') {
            if (at >= 0) merged.splice(at, 1);
            continue;
          }
          if (typeof condition?.name !== 'string' || typeof condition?.expression !== 'string')
            return this.send(res, 422, status(422, 'Invalid', 'matchConditions: name and expression are required'));
          try {
            parseCel(condition.expression);
          } catch (err) {
            return this.send(
              res,
              422,
              status(422, 'Invalid', `matchConditions[${JSON.stringify(condition.name)}].expression: compilation failed: ${(err as Error).message}`),
            );
          }
          if (at >= 0) merged[at] = condition;
          else merged.push(condition);
        }
        if (merged.length > 64) return this.send(res, 422, status(422, 'Invalid', 'matchConditions: Too many: must have at most 64 items'));
        if (merged.length > 0) hook.matchConditions = merged;
        else delete hook.matchConditions;
      }
      Object.assign(hook, rest);
      if (clientConfig) hook.clientConfig = { ...hook.clientConfig, ...clientConfig };
    }
    // Annotations merge by key, as a strategic merge patch of a map does (null deletes one).
    const annotations = patch.metadata?.annotations;
    if (annotations !== undefined) {
      if (typeof annotations !== 'object' || annotations === null || Array.isArray(annotations))
        return this.send(res, 400, status(400, 'BadRequest', 'metadata.annotations: not a map'));
      const merged: Record<string, string> = { ...(next.metadata.annotations ?? {}) };
      for (const [key, value] of Object.entries(annotations)) {
        if (value === null) delete merged[key];
        else if (typeof value !== 'string')
          return this.send(res, 422, status(422, 'Invalid', `metadata.annotations[${JSON.stringify(key)}]: must be a string`));
        else merged[key] = value;
      }
      next.metadata.annotations = merged;
    }
    next.metadata.resourceVersion = String(++this.rv);
    this.webhookConfigurations.set(name, next);
    this.writes.push(`PATCH mutatingwebhookconfigurations/${name}`);
    this.events.emit('webhooks-patched', next);
    return this.send(res, 200, next);
  }

  /** Nodes: list (one page) and watch, or 403 when forbidden. */
  private handleNodes(url: URL, req: IncomingMessage, res: ServerResponse): void {
    if (this.nodesForbidden) {
      return this.send(
        res,
        403,
        status(403, 'Forbidden', 'nodes is forbidden: User "system:serviceaccount:sidecar-injector:sidecar-injector" cannot list resource "nodes"'),
      );
    }
    if (url.searchParams.get('watch') === 'true') {
      const from = Number(url.searchParams.get('resourceVersion') ?? '0');
      const form = this.openWatch(req, res);
      if (form === undefined) return;
      this.stream(res, from, 'nodes', form);
      this.events.emit('node-watch', from);
      return;
    }
    this.sendList(req, res, 'NodeList', 'v1', { resourceVersion: String(this.rv) }, [...this.nodes.values()]);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.headers.authorization !== `Bearer ${token}`) return this.send(res, 401, status(401, 'Unauthorized', 'Unauthorized'));
    const url = new URL(req.url ?? '/', 'https://x');
    if (url.pathname === '/version' && req.method === 'GET') {
      this.versionRequests++;
      if (this.versionFails) return this.send(res, 500, status(500, 'InternalError', 'version unavailable'));
      const [major, minor] = this.gitVersion.replace(/^v/, '').split('.');
      return this.send(res, 200, { major, minor, gitVersion: this.gitVersion, platform: 'linux/amd64' });
    }
    if (url.pathname === '/api/v1/nodes' && req.method === 'GET') return this.handleNodes(url, req, res);
    const templates = /^\/apis\/sidecar-injector\.io\/v1alpha1\/sidecartemplates(?:\/([^/]+)(?:\/(status))?)?$/.exec(url.pathname);
    if (templates) return this.handleSidecarTemplates(url, req, res, templates[1] && decodeURIComponent(templates[1]), templates[2]);
    const podCreate = /^\/api\/v1\/namespaces\/([^/]+)\/pods$/.exec(url.pathname);
    if (podCreate && req.method === 'POST' && this.admission) {
      const namespace = decodeURIComponent(podCreate[1]!);
      const body = await this.bodyOf(req);
      const name = (body as { metadata?: { name?: unknown } } | undefined)?.metadata?.name;
      // As the API server answers a create (a dry run too) of a name that is taken.
      if (typeof name === 'string' && this.workloads.pods.has(`${namespace}/${name}`))
        return this.send(res, 409, status(409, 'AlreadyExists', `pods "${name}" already exists`));
      const answer = await this.admission.create(namespace, url.searchParams.get('dryRun') === 'All', body);
      return this.send(res, answer.code, answer.body, answer.warnings);
    }
    if (this.handleWorkloads(url, req, res)) return;
    const coreEvents = /^\/api\/v1(?:\/namespaces\/([^/]+))?\/events$/.exec(url.pathname);
    if (coreEvents && req.method === 'GET') return this.handleCoreEvents(url, req, res, coreEvents[1] && decodeURIComponent(coreEvents[1]));
    const single =
      /^\/(?:api\/v1|apis\/apps\/v1|apis\/batch\/v1)\/namespaces\/([^/]+)\/(pods|jobs|cronjobs|replicasets|deployments|statefulsets|daemonsets|replicationcontrollers)\/([^/]+)$/.exec(
        url.pathname,
      );
    if (single && single[2] === 'pods' && req.method === 'PUT') return this.putPod(req, res, decodeURIComponent(single[1]!), decodeURIComponent(single[3]!));
    const resize = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/]+)\/resize$/.exec(url.pathname);
    if (resize && req.method === 'PUT') return this.resizePod(req, res, decodeURIComponent(resize[1]!), decodeURIComponent(resize[2]!));
    if (url.pathname === '/api/v1' && req.method === 'GET')
      return this.send(res, 200, {
        kind: 'APIResourceList',
        groupVersion: 'v1',
        resources: [
          { name: 'pods', namespaced: true, kind: 'Pod', verbs: ['create', 'delete', 'get', 'list', 'patch', 'update', 'watch'] },
          ...(this.resizeServed ? [{ name: 'pods/resize', namespaced: true, kind: 'Pod', verbs: ['get', 'patch', 'update'] }] : []),
          { name: 'pods/status', namespaced: true, kind: 'Pod', verbs: ['get', 'patch', 'update'] },
        ],
      });
    if (single && req.method === 'GET') {
      const resource = single[2] as Resource;
      const group = `${groupOf(resource)}/`;
      if (!url.pathname.startsWith(group)) return this.send(res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
      this.objectGets.push(url.pathname);
      const found = this.workloads[resource].get(`${decodeURIComponent(single[1]!)}/${decodeURIComponent(single[3]!)}`);
      if (!found) return this.send(res, 404, status(404, 'NotFound', `${resource} "${single[3]}" not found`));
      return this.sendObject(req, res, found);
    }
    const lease = /^\/apis\/coordination\.k8s\.io\/v1\/namespaces\/([^/]+)\/leases(?:\/([^/]+))?$/.exec(url.pathname);
    if (lease) {
      this.leaseRequests.push(req.method ?? '');
      if (this.hangLeases) return;
      const namespace = decodeURIComponent(lease[1]!);
      const key = (name: string) => `${namespace}/${name}`;
      if (req.method === 'GET' && lease[2]) {
        const found = this.leases.get(key(decodeURIComponent(lease[2])));
        return found ? this.sendObject(req, res, found) : this.send(res, 404, status(404, 'NotFound', `leases.coordination.k8s.io "${lease[2]}" not found`));
      }
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const name = body.metadata?.name as string;
      const current = this.leases.get(key(name));
      if (req.method === 'POST') {
        if (current) return this.send(res, 409, status(409, 'AlreadyExists', `leases.coordination.k8s.io "${name}" already exists`));
      } else if (req.method === 'PUT') {
        if (!current) return this.send(res, 404, status(404, 'NotFound', `leases.coordination.k8s.io "${name}" not found`));
        if (body.metadata?.resourceVersion !== current.metadata.resourceVersion) {
          return this.send(res, 409, status(409, 'Conflict', 'the object has been modified; please apply your changes to the latest version and try again'));
        }
      } else return this.send(res, 405, status(405, 'MethodNotAllowed', 'method not allowed'));
      const stored = { ...body, metadata: { ...body.metadata, namespace, resourceVersion: String(++this.rv) } };
      this.leases.set(key(name), stored);
      return this.send(res, req.method === 'POST' ? 201 : 200, stored);
    }
    const slices = /^\/apis\/discovery\.k8s\.io\/v1\/namespaces\/([^/]+)\/endpointslices$/.exec(url.pathname);
    if (slices && req.method === 'GET' && this.endpointSlicesStatus !== undefined)
      return this.send(res, this.endpointSlicesStatus, status(this.endpointSlicesStatus, 'Failure', `endpointslices answered ${this.endpointSlicesStatus}`));
    if (slices && req.method === 'GET') {
      // The EndpointSlice controller labels each slice with its Service; only that selector is served.
      const service = /^kubernetes\.io\/service-name=([a-z0-9.-]+)$/.exec(url.searchParams.get('labelSelector') ?? '')?.[1];
      const namespace = decodeURIComponent(slices[1]!);
      const ready = service === undefined ? undefined : this.serviceEndpoints.get(`${namespace}/${service}`);
      const items =
        ready === undefined
          ? []
          : [
              {
                metadata: { name: `${service}-abcde`, namespace, labels: { 'kubernetes.io/service-name': service } },
                addressType: 'IPv4',
                endpoints: ready.map((r, i) =>
                  typeof r === 'boolean'
                    ? { addresses: [`10.0.0.${i + 1}`], conditions: { ready: r, serving: r, terminating: false } }
                    : {
                        addresses: [`10.0.0.${i + 1}`],
                        conditions: { ready: r.ready, serving: r.serving ?? r.ready, terminating: r.terminating ?? false },
                        targetRef: { kind: 'Pod', namespace, name: r.pod },
                      },
                ),
                ports: [{ name: 'https', port: 10250, protocol: 'TCP' }],
              },
            ];
      return this.send(res, 200, { kind: 'EndpointSliceList', apiVersion: 'discovery.k8s.io/v1', metadata: { resourceVersion: String(this.rv) }, items });
    }
    const configMap = /^\/api\/v1\/namespaces\/([^/]+)\/configmaps\/([^/]+)$/.exec(url.pathname);
    if (configMap && req.method === 'GET') {
      const key = `${decodeURIComponent(configMap[1]!)}/${decodeURIComponent(configMap[2]!)}`;
      const found = this.configMaps.get(key);
      if (!found) return this.send(res, 404, status(404, 'NotFound', `configmaps "${decodeURIComponent(configMap[2]!)}" not found`));
      return this.send(res, 200, found);
    }
    const secret = /^\/api\/v1\/namespaces\/([^/]+)\/secrets(?:\/([^/]+))?$/.exec(url.pathname);
    if (secret) return this.handleSecret(req, res, decodeURIComponent(secret[1]!), secret[2] === undefined ? undefined : decodeURIComponent(secret[2]));
    const groupVersion = /^\/apis\/admissionregistration\.k8s\.io\/(v1|v1beta1)$/.exec(url.pathname);
    if (groupVersion && req.method === 'GET') {
      const version = groupVersion[1]!;
      // The beta group version is served only where the beta API is turned on.
      if (version === 'v1beta1' && this.mutatingAdmissionPolicyApi !== 'v1beta1')
        return this.send(res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
      const names =
        version === 'v1'
          ? ['mutatingwebhookconfigurations', 'validatingadmissionpolicies', 'validatingadmissionpolicybindings', 'validatingwebhookconfigurations']
          : [];
      if (this.mutatingAdmissionPolicyApi === version) names.push('mutatingadmissionpolicies', 'mutatingadmissionpolicybindings');
      return this.send(res, 200, {
        kind: 'APIResourceList',
        apiVersion: 'v1',
        groupVersion: `admissionregistration.k8s.io/${version}`,
        resources: names.sort().map((name) => ({ name, namespaced: false, kind: name, verbs: ['get', 'list'] })),
      });
    }
    const admissionPolicy = /^\/apis\/admissionregistration\.k8s\.io\/(v1|v1beta1)\/(mutatingadmissionpolicies|mutatingadmissionpolicybindings)\/([^/]+)$/.exec(
      url.pathname,
    );
    if (admissionPolicy && req.method === 'GET') {
      const [, version, resource, name] = admissionPolicy as unknown as [
        string,
        string,
        'mutatingadmissionpolicies' | 'mutatingadmissionpolicybindings',
        string,
      ];
      // As a cluster that does not serve the resource in this version: the resource itself is not found.
      if (this.mutatingAdmissionPolicyApi !== version) return this.send(res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
      const found = this.admissionPolicies[resource].get(decodeURIComponent(name));
      if (!found) return this.send(res, 404, status(404, 'NotFound', `${resource}.admissionregistration.k8s.io "${decodeURIComponent(name)}" not found`));
      return this.send(res, 200, found);
    }
    const validatingPolicy = /^\/apis\/admissionregistration\.k8s\.io\/v1\/(validatingadmissionpolicies|validatingadmissionpolicybindings)\/([^/]+)$/.exec(
      url.pathname,
    );
    if (validatingPolicy && req.method === 'GET') {
      const resource = validatingPolicy[1] as 'validatingadmissionpolicies' | 'validatingadmissionpolicybindings';
      const name = decodeURIComponent(validatingPolicy[2]!);
      const found = this.validatingPolicies[resource].get(name);
      if (!found) return this.send(res, 404, status(404, 'NotFound', `${resource}.admissionregistration.k8s.io "${name}" not found`));
      return this.send(res, 200, found);
    }
    const configuration = /^\/apis\/admissionregistration\.k8s\.io\/v1\/mutatingwebhookconfigurations\/([^/]+)$/.exec(url.pathname);
    if (configuration) return this.handleWebhookConfiguration(req, res, decodeURIComponent(configuration[1]!));
    const event = /^\/apis\/events\.k8s\.io\/v1\/namespaces\/([^/]+)\/events(?:\/([^/]+))?$/.exec(url.pathname);
    if (event && (req.method === 'POST' || req.method === 'PATCH')) {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      if (this.failEvents) return this.send(res, 500, status(500, 'InternalError', 'etcd is sad'));
      // As the API server: no object is created in a namespace that does not exist.
      const namespace = decodeURIComponent(event[1]!);
      if (!this.store.has(namespace)) {
        this.eventsRefused++;
        return this.send(res, 404, status(404, 'NotFound', `namespaces "${namespace}" not found`));
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      if (req.method === 'POST') {
        // As the API server validates an Event: a name (or a generateName, as a prefix with a
        // trailing "-" allowed) that is a DNS subdomain, and the fields events.k8s.io/v1 requires.
        const problem = eventProblem(body);
        if (problem) {
          this.eventsRefused++;
          return this.send(res, 422, status(422, 'Invalid', `Event "${body.metadata?.name ?? body.metadata?.generateName}" is invalid: ${problem}`));
        }
        const name = body.metadata.name ?? `${body.metadata.generateName}${(this.kubeEvents.size + 1).toString(36).padStart(5, '0')}`;
        if (this.kubeEvents.has(name)) return this.send(res, 409, status(409, 'AlreadyExists', `events.events.k8s.io "${name}" already exists`));
        const stored = { ...body, metadata: { ...body.metadata, name, namespace: decodeURIComponent(event[1]!) } };
        this.kubeEvents.set(name, stored);
        return this.send(res, 201, stored);
      }
      const name = decodeURIComponent(event[2] ?? '');
      if (!this.kubeEvents.has(name)) return this.send(res, 404, status(404, 'NotFound', `events "${name}" not found`));
      this.eventPatches.push({ name, body });
      Object.assign(this.kubeEvents.get(name)!, body);
      return this.send(res, 200, this.kubeEvents.get(name));
    }
    const patch = /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/(deployments|statefulsets|daemonsets)\/([^/]+)$/.exec(url.pathname);
    if (patch && req.method === 'PATCH') {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const name = decodeURIComponent(patch[3]!);
      if (this.goneWorkloads.has(name)) return this.send(res, 404, status(404, 'NotFound', `${patch[2]} "${name}" not found`));
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      this.patches.push({ path: url.pathname, contentType: String(req.headers['content-type']), body });
      // The workload's own annotations, merged as a strategic merge patch merges a map.
      const stored = this.workloads[patch[2] as Resource].get(`${decodeURIComponent(patch[1]!)}/${name}`);
      if (stored && body?.metadata?.annotations) {
        stored.metadata = {
          ...stored.metadata,
          annotations: { ...stored.metadata.annotations, ...body.metadata.annotations },
          resourceVersion: String(++this.rv),
        };
      }
      return this.send(res, 200, { kind: 'Deployment', apiVersion: 'apps/v1', metadata: { name, namespace: decodeURIComponent(patch[1]!) } });
    }
    const match = /^\/api\/v1\/namespaces(?:\/([^/]+))?$/.exec(url.pathname);
    if (!match || req.method !== 'GET') return this.send(res, 404, status(404, 'NotFound', 'the server could not find the requested resource'));
    const name = match[1] && decodeURIComponent(match[1]);
    if (name) {
      this.getRequests.push(name);
      if (this.getFailure === 'hang') return;
      if (this.getFailure === 'error') return this.send(res, 500, status(500, 'InternalError', 'etcd is sad'));
      const object = this.store.get(name);
      if (!object) return this.send(res, 404, status(404, 'NotFound', `namespaces "${name}" not found`));
      return this.sendObject(req, res, object);
    }
    if (url.searchParams.get('watch') === 'true') {
      const from = Number(url.searchParams.get('resourceVersion') ?? '0');
      this.watchRequests.push({
        resourceVersion: url.searchParams.get('resourceVersion') ?? '',
        allowWatchBookmarks: url.searchParams.get('allowWatchBookmarks'),
        timeoutSeconds: url.searchParams.get('timeoutSeconds'),
      });
      if (this.watchFailure === 'end-at-once') return void res.writeHead(200, { 'content-type': 'application/json' }).end();
      if (this.watchFailure === 'error-event') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return void res.end(`${JSON.stringify({ type: 'ERROR', object: status(500, 'InternalError', 'etcd leader changed') })}\n`);
      }
      if (from < this.compactedAt) {
        const body = status(410, 'Expired', `too old resource version: ${from} (${this.compactedAt})`);
        if (this.goneAsHttpStatus) return this.send(res, 410, body);
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(`${JSON.stringify({ type: 'ERROR', object: body })}\n`);
        return;
      }
      const form = this.openWatch(req, res);
      if (form === undefined) return;
      if (this.watchFailure === 'silent') {
        // Open and mute: a connection that silently stopped delivering.
        this.events.emit('watch', from);
        return;
      }
      this.stream(res, from, 'namespaces', form);
      this.events.emit('watch', from);
      return;
    }
    this.listCount++;
    if (this.listGate) await this.listGate;
    if (this.failLists > 0) {
      this.failLists--;
      return this.send(res, 500, status(500, 'InternalError', 'try again'));
    }
    if (this.listDelayMs > 0) await new Promise((resolve) => setTimeout(resolve, this.listDelayMs));
    // Pagination as the API server does it: `limit` items, and an opaque `continue` token.
    const limit = Number(url.searchParams.get('limit') ?? '0');
    this.listLimits.push(url.searchParams.get('limit'));
    const continueToken = url.searchParams.get('continue');
    if (continueToken && this.expireContinueTokens > 0) {
      this.expireContinueTokens--;
      return this.send(res, 410, status(410, 'Expired', 'The provided continue parameter is too old'));
    }
    const all = [...this.store.values()];
    const start = continueToken ? Number(Buffer.from(continueToken, 'base64').toString('utf8')) : 0;
    const items = limit > 0 ? all.slice(start, start + limit) : all.slice(start);
    const more = limit > 0 && start + limit < all.length;
    const metadata = { resourceVersion: String(this.rv), ...(more ? { continue: Buffer.from(String(start + limit)).toString('base64') } : {}) };
    this.sendList(req, res, 'NamespaceList', 'v1', metadata, items);
    if (!more) this.events.emit('list');
  }
}

/**
 * The test world's one node, and the kubelet's part for the pods it runs.
 *
 * The node `node-1` is a Node object with a kubelet version, kept alive by its Lease in
 * `kube-node-lease` as a kubelet keeps it. The world runs the pods of the namespaces it is
 * told to (the injector's own): it binds them to the node (the scheduler's part), gives each a
 * network namespace and a pod IP, writes their volumes (configMap, secret, emptyDir, and the
 * projected service-account token from the TokenRequest API) in the kubelet's atomic layout and
 * keeps configMap and secret volumes current, starts each container's command (container.sh),
 * probes readiness and liveness as the pod spec says, restarts containers that exit, reports
 * all of it in the pod's status, and on deletion sends SIGTERM (still probing readiness and
 * reporting it, as the kubelet does for a terminating pod), waits the grace period, and
 * removes the pod. Pods of namespaces labelled `sidecar-injector.test/pods: simulated` are run
 * as kwok runs them (reported Running and ready, no process); pods that name the real node
 * (real-node.ts) run there; every other pod stays Pending: admission is what the suite tests.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, closeSync, mkdirSync, openSync, readdirSync, readlinkSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import https from 'node:https';
import { fileURLToPath } from 'node:url';
import type { Json, Kube } from './kube.js';
import { addresses, connectPod, disconnectPod } from './network.js';
import { Loop, waitUntil } from './processes.js';

export const nodeName = 'node-1';

/** How a container's root filesystem is made. */
export type RootFilesystem =
  | {
      readonly mode: 'image';
      readonly rootfs: string;
      readonly entrypoint: readonly string[];
      readonly env: Readonly<Record<string, string>>;
      readonly user: string;
      /** The image's manifest digest (what `make push` would have pushed). */
      readonly digest: string;
    }
  | { readonly mode: 'clone'; readonly clone: string; readonly node: string };

export interface NodeOptions {
  readonly kube: Kube;
  /** The node's kubelet version (what `status.nodeInfo.kubeletVersion` says). */
  readonly kubeletVersion: string;
  /** Where pods' volumes, specs and logs go. */
  readonly state: string;
  /** Namespaces whose pods this node runs. */
  readonly namespaces: readonly string[];
  readonly root: RootFilesystem;
}

interface RunningContainer {
  readonly name: string;
  child: ChildProcess | undefined;
  restarts: number;
  ready: boolean;
  startedAt: string;
  liveFailures: number;
  readyFailures: number;
  lastProbe: number;
  lastLiveProbe: number;
  exit?: { code: number | string; at: string };
  probing: boolean;
}

interface RunningPod {
  /** The process that holds the pod's network and UTS namespaces (the pause container's part). */
  readonly sandbox: ChildProcess;
  readonly uid: string;
  readonly namespace: string;
  readonly name: string;
  readonly ip: string;
  readonly index: number;
  readonly dir: string;
  pod: Json;
  readonly containers: Map<string, RunningContainer>;
  /** configMap/secret volumes and the resourceVersion last written. */
  readonly projected: Map<string, string>;
  terminating?: Promise<void>;
  startTime: string;
  lastStatus: string;
}

const containerScript = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', 'test', 'cluster', 'world', 'container.sh');

/** The scheduler's part: binds `pod` to the node `node`; a pod bound meanwhile, or gone, is left to the next pass. */
export async function bindPod(kube: Kube, pod: Json, node: string): Promise<void> {
  const { namespace, name, uid } = pod.metadata;
  await kube
    .create(`/api/v1/namespaces/${namespace}/pods/${name}/binding`, {
      apiVersion: 'v1',
      kind: 'Binding',
      metadata: { name, namespace, ...(uid ? { uid } : {}) },
      target: { apiVersion: 'v1', kind: 'Node', name: node },
    })
    .catch(() => undefined);
}

/** The kubelet's atomic writer: files under a timestamped folder, `..data` swapped to it in one rename. */
export function writeAtomically(dir: string, files: Readonly<Record<string, string | Buffer>>, mode = 0o644): void {
  mkdirSync(dir, { recursive: true });
  const stamp = `..${new Date().toISOString().replace(/[:.]/g, '_')}.${Math.random().toString(36).slice(2, 8)}`;
  const target = join(dir, stamp);
  mkdirSync(target);
  for (const [key, value] of Object.entries(files)) {
    mkdirSync(dirname(join(target, key)), { recursive: true });
    writeFileSync(join(target, key), value, { mode });
  }
  const tmpLink = join(dir, '..data_tmp');
  rmSync(tmpLink, { force: true });
  symlinkSync(stamp, tmpLink);
  renameSync(tmpLink, join(dir, '..data'));
  // The visible names are links into ..data; those of keys no longer there go, then the old folder (the kubelet's order).
  const tops = new Set(Object.keys(files).map((key) => key.split('/')[0]!));
  const present = new Set(readdirSync(dir));
  for (const top of tops) if (!present.has(top)) symlinkSync(join('..data', top), join(dir, top));
  for (const entry of present) if (!entry.startsWith('..') && !tops.has(entry)) rmSync(join(dir, entry), { force: true });
  for (const entry of readdirSync(dir))
    if (entry.startsWith('..') && entry !== '..data' && entry !== stamp) rmSync(join(dir, entry), { recursive: true, force: true });
}

const decode = (data: Record<string, string> = {}) => Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64')]));

function probe(ip: string, spec: Json, port: Json, fallbackPort: number): Promise<boolean> {
  const get = spec.httpGet;
  if (!get) return Promise.resolve(true);
  const named = typeof get.port === 'string' ? port[get.port] : get.port;
  return new Promise((resolve) => {
    const req = (get.scheme === 'HTTPS' ? https : https).get(
      {
        host: ip,
        port: named ?? fallbackPort,
        path: get.path ?? '/',
        rejectUnauthorized: false,
        timeout: (spec.timeoutSeconds ?? 1) * 1000,
        headers: { 'user-agent': 'kube-probe/1.36' },
      },
      (res) => {
        res.resume();
        resolve((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 400);
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}

export class WorldNode {
  private readonly pods = new Map<string, RunningPod>();
  private nextIndex = 2;
  private readonly loop = new Loop('node', 200, () => this.sync());
  private leaseTimer: NodeJS.Timeout | undefined;

  constructor(private readonly options: NodeOptions) {}

  /** Registers the node (Ready, with its kubelet version) and starts its heartbeat. */
  async register(): Promise<void> {
    const { kube, kubeletVersion } = this.options;
    await kube.create('/api/v1/nodes', {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: {
        name: nodeName,
        labels: {
          'kubernetes.io/hostname': nodeName,
          'kubernetes.io/os': 'linux',
          'kubernetes.io/arch': 'amd64',
          'topology.kubernetes.io/zone': 'zone-a',
        },
      },
      spec: { podCIDR: addresses.podCidr, podCIDRs: [addresses.podCidr] },
    });
    const now = new Date().toISOString();
    await kube.mergePatch(`/api/v1/nodes/${nodeName}/status`, {
      status: {
        capacity: { cpu: '2', memory: '24Gi', pods: '110', 'ephemeral-storage': '100Gi' },
        allocatable: { cpu: '2', memory: '24Gi', pods: '110', 'ephemeral-storage': '100Gi' },
        addresses: [
          { type: 'InternalIP', address: addresses.advertise },
          { type: 'Hostname', address: nodeName },
        ],
        conditions: [
          { type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'the test world runs this node', lastHeartbeatTime: now, lastTransitionTime: now },
          { type: 'MemoryPressure', status: 'False', reason: 'KubeletHasSufficientMemory', lastHeartbeatTime: now, lastTransitionTime: now },
          { type: 'DiskPressure', status: 'False', reason: 'KubeletHasNoDiskPressure', lastHeartbeatTime: now, lastTransitionTime: now },
          { type: 'PIDPressure', status: 'False', reason: 'KubeletHasSufficientPID', lastHeartbeatTime: now, lastTransitionTime: now },
        ],
        nodeInfo: {
          kubeletVersion,
          kubeProxyVersion: '',
          containerRuntimeVersion: 'sidecar-injector-test-world://1',
          operatingSystem: 'linux',
          architecture: 'amd64',
          osImage: 'the sidecar-injector test world',
          kernelVersion: '',
          machineID: '',
          systemUUID: '',
          bootID: '',
        },
      },
    });
    await this.heartbeat();
    this.leaseTimer = setInterval(() => void this.heartbeat().catch(() => undefined), 10_000);
  }

  /** The node's Lease, renewed as a kubelet renews it: the node lifecycle controller keeps the node Ready. */
  private async heartbeat(): Promise<void> {
    const { kube } = this.options;
    const path = `/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/${nodeName}`;
    // MicroTime: RFC 3339 with six fractional digits.
    const renewTime = new Date().toISOString().replace(/Z$/, '000Z');
    const existing = await kube.find(path);
    if (!existing) {
      await kube.create('/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases', {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: nodeName, namespace: 'kube-node-lease' },
        spec: { holderIdentity: nodeName, leaseDurationSeconds: 40, renewTime },
      });
    } else await kube.mergePatch(path, { spec: { renewTime } });
  }

  start(): void {
    this.loop.start();
  }

  /** Binds a pending pod to the node: the scheduler's part. */
  private bind(pod: Json): Promise<void> {
    return bindPod(this.options.kube, pod, nodeName);
  }

  /**
   * Pods of namespaces labelled `sidecar-injector.test/pods: simulated`, as kwok runs them: bound,
   * reported Running with every container started and ready (no process runs), deleted at once.
   * What a test writes into their status afterwards (restarts, readiness) stays.
   */
  private async simulate(): Promise<void> {
    const { kube } = this.options;
    const namespaces = await kube.get('/api/v1/namespaces?labelSelector=sidecar-injector.test%2Fpods%3Dsimulated');
    for (const ns of namespaces.items as Json[]) {
      const list = await kube.get(`/api/v1/namespaces/${ns.metadata.name}/pods`);
      for (const pod of list.items as Json[]) {
        const path = `/api/v1/namespaces/${pod.metadata.namespace}/pods/${pod.metadata.name}`;
        if (pod.metadata.deletionTimestamp) await kube.delete(path, { gracePeriodSeconds: 0 }).catch(() => undefined);
        else if (!pod.spec.nodeName) await this.bind(pod);
        else if (pod.status?.phase === 'Pending') {
          const now = new Date().toISOString();
          const running = (c: Json) => ({
            name: c.name,
            image: c.image,
            imageID: '',
            containerID: `simulated://${pod.metadata.uid}/${c.name}`,
            ready: true,
            started: true,
            restartCount: 0,
            state: { running: { startedAt: now } },
          });
          await kube.mergePatch(`${path}/status`, {
            status: {
              phase: 'Running',
              hostIP: addresses.advertise,
              podIP: '10.245.0.1',
              podIPs: [{ ip: '10.245.0.1' }],
              startTime: now,
              conditions: ['PodReadyToStartContainers', 'Initialized', 'Ready', 'ContainersReady', 'PodScheduled'].map((type) => ({
                type,
                status: 'True',
                lastTransitionTime: now,
                lastProbeTime: null,
              })),
              initContainerStatuses: ((pod.spec.initContainers ?? []) as Json[]).map((c) =>
                c.restartPolicy === 'Always'
                  ? running(c)
                  : {
                      ...running(c),
                      ready: true,
                      started: false,
                      state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: now, finishedAt: now } },
                    },
              ),
              containerStatuses: (pod.spec.containers as Json[]).map(running),
            },
          });
        }
      }
    }
  }

  /** One pass of the kubelet's loop. */
  private async sync(): Promise<void> {
    const { kube } = this.options;
    await this.simulate();
    const seen = new Set<string>();
    for (const namespace of this.options.namespaces) {
      const list = await kube.get(`/api/v1/namespaces/${namespace}/pods`);
      for (const pod of list.items as Json[]) {
        seen.add(pod.metadata.uid);
        if (!pod.spec.nodeName) {
          // Every pod of these namespaces goes to the one node.
          await this.bind(pod);
          continue;
        }
        if (pod.spec.nodeName !== nodeName) continue;
        const running = this.pods.get(pod.metadata.uid);
        if (pod.metadata.deletionTimestamp) {
          if (running) {
            running.terminating ??= this.terminate(running, pod.metadata.deletionGracePeriodSeconds ?? 30);
            // As the kubelet does: readiness is still probed while the pod terminates (the
            // EndpointSlice's `serving`), liveness and startup are not.
            await this.probeAll(running, { terminating: true });
            await this.reportStatus(running).catch(() => undefined);
          } else if (pod.status?.phase !== 'Running') await kube.delete(`/api/v1/namespaces/${namespace}/pods/${pod.metadata.name}`, { gracePeriodSeconds: 0 });
          continue;
        }
        if (!running) {
          if (pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') continue;
          await this.run(pod);
          continue;
        }
        running.pod = pod;
        await this.refreshVolumes(running);
        await this.probeAll(running);
        await this.reportStatus(running);
      }
    }
    // Pods deleted at once (grace 0, or their namespace gone): their containers stop now.
    for (const [uid, running] of this.pods) if (!seen.has(uid)) running.terminating ??= this.terminate(running, 0);
  }

  private async run(pod: Json): Promise<void> {
    const index = this.nextIndex++;
    const ip = `10.244.${Math.floor(index / 250)}.${(index % 250) + 1}`;
    const dir = join(this.options.state, 'pods', `${pod.metadata.namespace}_${pod.metadata.name}_${pod.metadata.uid}`);
    mkdirSync(dir, { recursive: true });
    // The sandbox: the pod's network and hostname live as long as it does, across container restarts.
    const sandbox = spawn('unshare', ['--net', '--uts', '--', 'bash', '-c', 'hostname "$1"; exec sleep infinity', 'sandbox', pod.metadata.name], {
      stdio: 'ignore',
    });
    const running: RunningPod = {
      sandbox,
      uid: pod.metadata.uid,
      namespace: pod.metadata.namespace,
      name: pod.metadata.name,
      ip,
      index,
      dir,
      pod,
      containers: new Map(),
      projected: new Map(),
      startTime: new Date().toISOString(),
      lastStatus: '',
    };
    try {
      const own = readlinkSync('/proc/self/ns/net');
      await waitUntil('the pod sandbox in a network namespace of its own', () => readlinkSync(`/proc/${sandbox.pid}/ns/net`) !== own, { everyMs: 5 });
      connectPod(sandbox.pid!, ip, index);
      // Volumes before containers, as the kubelet mounts them: a missing ConfigMap that is not optional fails the start (tried again next pass).
      await this.refreshVolumes(running);
    } catch (err) {
      sandbox.kill('SIGKILL');
      disconnectPod(index);
      throw err;
    }
    this.pods.set(running.uid, running);
    for (const container of pod.spec.containers as Json[]) {
      const c: RunningContainer = {
        name: container.name,
        child: undefined,
        restarts: 0,
        ready: false,
        startedAt: '',
        liveFailures: 0,
        readyFailures: 0,
        lastProbe: 0,
        lastLiveProbe: 0,
        probing: false,
      };
      running.containers.set(container.name, c);
      this.startContainer(running, container, c);
    }
    await this.reportStatus(running);
  }

  /** Writes every volume the pod's containers mount; configMap and secret volumes again when their object changed. */
  private async refreshVolumes(running: RunningPod): Promise<void> {
    const { kube } = this.options;
    for (const volume of (running.pod.spec.volumes ?? []) as Json[]) {
      const dir = join(running.dir, 'volumes', volume.name);
      if (volume.configMap || volume.secret) {
        const path = volume.configMap
          ? `/api/v1/namespaces/${running.namespace}/configmaps/${volume.configMap.name}`
          : `/api/v1/namespaces/${running.namespace}/secrets/${volume.secret.secretName}`;
        const object = await kube.find(path);
        if (!object) {
          // As the kubelet: a missing optional object is an empty volume (filled once it exists,
          // emptied when it goes); a required one keeps the pod from starting.
          if (!(volume.configMap ?? volume.secret).optional) throw new Error(`volume ${volume.name}: ${path} not found`);
          if (running.projected.get(volume.name) !== '') writeAtomically(dir, {});
          running.projected.set(volume.name, '');
          continue;
        }
        if (running.projected.get(volume.name) === object.metadata.resourceVersion) continue;
        const data: Record<string, string | Buffer> = volume.configMap ? { ...object.data, ...decode(object.binaryData) } : decode(object.data);
        const items = (volume.configMap ?? volume.secret).items as Json[] | undefined;
        const files = items ? Object.fromEntries(items.filter((i) => i.key in data).map((i) => [i.path, data[i.key]!])) : data;
        writeAtomically(dir, files);
        running.projected.set(volume.name, object.metadata.resourceVersion);
      } else if (volume.projected && !running.projected.has(volume.name)) {
        const files: Record<string, string | Buffer> = {};
        for (const source of volume.projected.sources as Json[]) {
          if (source.serviceAccountToken) {
            const request = await kube.create(`/api/v1/namespaces/${running.namespace}/serviceaccounts/${running.pod.spec.serviceAccountName}/token`, {
              apiVersion: 'authentication.k8s.io/v1',
              kind: 'TokenRequest',
              spec: {
                ...(source.serviceAccountToken.audience ? { audiences: [source.serviceAccountToken.audience] } : {}),
                expirationSeconds: source.serviceAccountToken.expirationSeconds ?? 3607,
                boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: running.name, uid: running.uid },
              },
            });
            files[source.serviceAccountToken.path] = request.status.token;
          } else if (source.configMap) {
            const cm = await kube.get(`/api/v1/namespaces/${running.namespace}/configmaps/${source.configMap.name}`);
            for (const item of source.configMap.items ?? Object.keys(cm.data ?? {}).map((k) => ({ key: k, path: k }))) files[item.path] = cm.data[item.key];
          } else if (source.downwardAPI) {
            for (const item of source.downwardAPI.items as Json[])
              if (item.fieldRef?.fieldPath === 'metadata.namespace') files[item.path] = running.namespace;
              else if (item.fieldRef?.fieldPath === 'metadata.name') files[item.path] = running.name;
          }
        }
        writeAtomically(dir, files);
        running.projected.set(volume.name, 'projected');
      } else if (volume.emptyDir && !running.projected.has(volume.name)) {
        // World-writable, as the kubelet makes an emptyDir (the process umask would take the write bits off).
        mkdirSync(dir, { recursive: true });
        chmodSync(dir, 0o777);
        running.projected.set(volume.name, 'emptyDir');
      }
    }
  }

  private environment(running: RunningPod, container: Json): string[] {
    const root = this.options.root;
    const env = new Map<string, string>(Object.entries(root.mode === 'image' ? root.env : { PATH: '/usr/local/bin:/usr/bin:/bin', NODE_ENV: 'production' }));
    env.set('HOSTNAME', running.name);
    // What the kubelet adds for the `kubernetes` Service (enableServiceLinks adds more; the injector reads these two).
    env.set('KUBERNETES_SERVICE_HOST', addresses.kubernetesService);
    env.set('KUBERNETES_SERVICE_PORT', '443');
    env.set('KUBERNETES_SERVICE_PORT_HTTPS', '443');
    env.set('KUBERNETES_PORT', `tcp://${addresses.kubernetesService}:443`);
    for (const e of (container.env ?? []) as Json[]) {
      if (e.value !== undefined) env.set(e.name, String(e.value));
      else if (e.valueFrom?.fieldRef) {
        const field = e.valueFrom.fieldRef.fieldPath as string;
        const value =
          field === 'metadata.name'
            ? running.name
            : field === 'metadata.namespace'
              ? running.namespace
              : field === 'spec.nodeName'
                ? nodeName
                : field === 'status.podIP'
                  ? running.ip
                  : field === 'spec.serviceAccountName'
                    ? running.pod.spec.serviceAccountName
                    : undefined;
        if (value === undefined) throw new Error(`the test world's node cannot resolve fieldRef ${field}`);
        env.set(e.name, value);
      }
    }
    return [...env].map(([k, v]) => `${k}=${v}`);
  }

  private startContainer(running: RunningPod, container: Json, c: RunningContainer): void {
    const root = this.options.root;
    const spec = join(running.dir, 'containers', `${container.name}-${c.restarts}`);
    mkdirSync(spec, { recursive: true });
    const security = { ...(running.pod.spec.securityContext ?? {}), ...(container.securityContext ?? {}) };
    const [imageUid, imageGid] = root.mode === 'image' ? root.user.split(':') : ['0', '0'];
    const uid = security.runAsUser ?? imageUid;
    const gid = security.runAsGroup ?? imageGid ?? uid;
    const entrypoint = container.command ?? (root.mode === 'image' ? root.entrypoint : [root.node, '/app/dist/src/cli/main.js']);
    const argv = [...entrypoint, ...(container.args ?? [])];
    writeFileSync(join(spec, 'argv'), argv.map((a) => `${a}\0`).join(''));
    writeFileSync(
      join(spec, 'environment'),
      this.environment(running, container)
        .map((a) => `${a}\0`)
        .join(''),
    );
    const mounts = ((container.volumeMounts ?? []) as Json[]).map(
      (m) => `${join(running.dir, 'volumes', m.name)}\t${m.mountPath}\t${m.readOnly ? 'ro' : 'rw'}`,
    );
    writeFileSync(join(spec, 'mounts'), mounts.join('\n') + '\n');
    const quote = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    writeFileSync(
      join(spec, 'config.sh'),
      [
        `MODE=${root.mode}`,
        `ROOTFS=${quote(root.mode === 'image' ? root.rootfs : '')}`,
        `ROOT=${quote(join(spec, 'root'))}`,
        `USERSPEC=${uid}:${gid}`,
        `READONLY=${security.readOnlyRootFilesystem === true}`,
        `CLONE=${quote(root.mode === 'clone' ? root.clone : '')}`,
        `NODE_DIR=${quote(root.mode === 'clone' ? dirname(root.node) : '')}`,
        '',
      ].join('\n'),
    );
    const log = join(running.dir, `${container.name}.log`);
    const fd = openSync(log, 'a');
    const sandbox = String(running.sandbox.pid);
    const child = spawn(
      'nsenter',
      ['--target', sandbox, '--net', '--uts', '--', 'unshare', '--mount', '--propagation', 'private', '--', 'bash', containerScript, spec],
      {
        stdio: ['ignore', fd, fd],
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin' },
      },
    );
    closeSync(fd);
    c.child = child;
    c.ready = false;
    c.readyFailures = 0;
    c.liveFailures = 0;
    c.lastProbe = 0;
    c.lastLiveProbe = performance.now() + (container.livenessProbe?.initialDelaySeconds ?? 0) * 1000;
    c.startedAt = new Date().toISOString();
    delete c.exit;
    child.once('exit', (code, signal) => {
      c.exit = { code: code ?? signal ?? 'unknown', at: new Date().toISOString() };
      c.ready = false;
      if (c.child === child) c.child = undefined;
      // restartPolicy Always: a container that exits is started again, after a back-off that doubles
      // from a second (the kubelet's starts at ten: tests are short).
      if (!running.terminating && this.pods.get(running.uid) === running) {
        c.restarts++;
        setTimeout(
          () => {
            if (!running.terminating && this.pods.get(running.uid) === running) this.startContainer(running, container, c);
          },
          Math.min(1000 * 2 ** (c.restarts - 1), 30_000),
        );
      }
    });
  }

  private async probeAll(running: RunningPod, { terminating = false } = {}): Promise<void> {
    const now = performance.now();
    await Promise.all(
      (running.pod.spec.containers as Json[]).map(async (container) => {
        const c = running.containers.get(container.name);
        if (!c?.child || c.probing) return;
        const ports = Object.fromEntries(((container.ports ?? []) as Json[]).filter((p) => p.name).map((p) => [p.name, p.containerPort]));
        c.probing = true;
        try {
          const readiness = container.readinessProbe;
          if (!readiness) c.ready = true;
          else if (now - c.lastProbe >= (readiness.periodSeconds ?? 10) * 1000) {
            c.lastProbe = now;
            const ok = await probe(running.ip, readiness, ports, 0);
            if (ok) {
              c.readyFailures = 0;
              c.ready = true;
            } else if (++c.readyFailures >= (readiness.failureThreshold ?? 3) || !c.ready) c.ready = false;
          }
          const liveness = terminating ? undefined : container.livenessProbe;
          if (liveness && now >= c.lastLiveProbe + (liveness.periodSeconds ?? 10) * 1000) {
            c.lastLiveProbe = now;
            const ok = await probe(running.ip, liveness, ports, 0);
            if (ok) c.liveFailures = 0;
            else if (++c.liveFailures >= (liveness.failureThreshold ?? 3)) {
              // The kubelet kills a container that fails its liveness probe; restartPolicy starts it again.
              c.liveFailures = 0;
              c.child?.kill('SIGKILL');
            }
          }
        } finally {
          c.probing = false;
        }
      }),
    );
  }

  private async reportStatus(running: RunningPod): Promise<void> {
    const containers = running.pod.spec.containers as Json[];
    const statuses = containers.map((container) => {
      const c = running.containers.get(container.name)!;
      return {
        name: container.name,
        image: container.image,
        imageID: '',
        containerID: `test-world://${running.uid}/${container.name}/${c.restarts}`,
        ready: c.ready,
        started: c.child !== undefined,
        restartCount: c.restarts,
        state: c.child ? { running: { startedAt: c.startedAt } } : { waiting: { reason: 'ContainerCreating' } },
        ...(c.exit
          ? { lastState: { terminated: { exitCode: typeof c.exit.code === 'number' ? c.exit.code : 137, finishedAt: c.exit.at, reason: 'Error' } } }
          : {}),
      };
    });
    const ready = statuses.every((s) => s.ready);
    const status = {
      phase: 'Running',
      hostIP: addresses.advertise,
      hostIPs: [{ ip: addresses.advertise }],
      podIP: running.ip,
      podIPs: [{ ip: running.ip }],
      startTime: running.startTime,
      qosClass: running.pod.status?.qosClass,
      conditions: [
        { type: 'PodReadyToStartContainers', status: 'True' },
        { type: 'Initialized', status: 'True' },
        { type: 'Ready', status: ready ? 'True' : 'False' },
        { type: 'ContainersReady', status: ready ? 'True' : 'False' },
        { type: 'PodScheduled', status: 'True' },
      ],
      containerStatuses: statuses,
    };
    const text = JSON.stringify(status);
    if (text === running.lastStatus) return;
    const now = new Date().toISOString();
    await this.options.kube.mergePatch(`/api/v1/namespaces/${running.namespace}/pods/${running.name}/status`, {
      status: { ...status, conditions: status.conditions.map((c) => ({ ...c, lastProbeTime: null, lastTransitionTime: now })) },
    });
    running.lastStatus = text;
  }

  /** SIGTERM to every container, SIGKILL after the grace period, then the pod's final removal. */
  private async terminate(running: RunningPod, graceSeconds: number): Promise<void> {
    const exits = [...running.containers.values()].map(
      (c) =>
        new Promise<void>((resolve) => {
          const child = c.child;
          if (!child) return resolve();
          child.once('exit', () => resolve());
          child.kill(graceSeconds > 0 ? 'SIGTERM' : 'SIGKILL');
          setTimeout(() => child.kill('SIGKILL'), Math.max(graceSeconds, 0) * 1000).unref();
        }),
    );
    await Promise.all(exits);
    running.sandbox.kill('SIGKILL');
    disconnectPod(running.index);
    this.pods.delete(running.uid);
    await this.options.kube
      .delete(`/api/v1/namespaces/${running.namespace}/pods/${running.name}`, { gracePeriodSeconds: 0, preconditions: { uid: running.uid } })
      .catch(() => undefined);
  }

  /** The pods this node runs now: name → pod IP and each container's PID. */
  runningPods(): { namespace: string; name: string; ip: string; pids: Record<string, number | undefined> }[] {
    return [...this.pods.values()].map((p) => ({
      namespace: p.namespace,
      name: p.name,
      ip: p.ip,
      pids: Object.fromEntries([...p.containers].map(([n, c]) => [n, c.child?.pid])),
    }));
  }

  async stop(): Promise<void> {
    if (this.leaseTimer) clearInterval(this.leaseTimer);
    await this.loop.stop();
    await Promise.all(
      [...this.pods.values()].map((running) => {
        running.terminating ??= Promise.all(
          [...running.containers.values()].map(
            (c) =>
              new Promise<void>((resolve) => {
                if (!c.child) return resolve();
                c.child.once('exit', () => resolve());
                c.child.kill('SIGKILL');
              }),
          ),
        ).then(() => {
          running.sandbox.kill('SIGKILL');
          disconnectPod(running.index);
        });
        return running.terminating;
      }),
    );
  }
}

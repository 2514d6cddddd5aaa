/**
 * The test world's stand-in node, `node-1`: a Node object with a kubelet version, kept alive by
 * its Lease in `kube-node-lease` as a kubelet keeps it, for the pods no container needs to run
 * for. Pods of namespaces labelled `sidecar-injector.test/pods: simulated` are run as kwok runs
 * them: bound, reported Running and ready, no process (fleets of hundreds of pods for the audit,
 * the rollout and `simulate`). It runs no container: the injector's pods, and every pod that
 * names it, run on the real node (real-node.ts); every other pod stays Pending: admission is
 * what the suite tests.
 */
import type { Json, Kube } from './kube.js';
import { addresses } from './network.js';
import { Loop } from './processes.js';

export const nodeName = 'node-1';

export interface NodeOptions {
  readonly kube: Kube;
  /** The node's kubelet version (what `status.nodeInfo.kubeletVersion` says). */
  readonly kubeletVersion: string;
}

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

export class WorldNode {
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

  /** One pass: the simulated pods. */
  private sync(): Promise<void> {
    return this.simulate();
  }

  async stop(): Promise<void> {
    if (this.leaseTimer) clearInterval(this.leaseTimer);
    await this.loop.stop();
  }
}

/**
 * The test world's real node, `real-node`: a kubelet built from the control plane's own module,
 * Debian's containerd and runc under it, CNI's bridge plugin for the pod network, and a registry
 * on the world's loopback. Pods that name it (`spec.nodeName: real-node`; the world runs no
 * scheduler) really run: their images are unpacked, their containers are processes in cgroups
 * with their limits, their probes are the kubelet's, and `kubectl logs` and `kubectl exec` go
 * through the API server to this kubelet.
 *
 * Everything it writes is under `<state>/real-node`, or on a tmpfs mounted in the world's own
 * mount namespace over the host paths containerd, runc and CNI insist on (/run/containerd,
 * /run/netns, /var/lib/cni, /etc/cni, /var/log/containers). What a mount namespace cannot hold
 * is put back on stop: the kubelet's cgroups (`kubepods` in every controller) and the global
 * sysctls the kubelet sets (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops).
 *
 * Two things of this machine shape it: root may lack CAP_SYS_RESOURCE (so no negative
 * oom_score_adj: containerd's restrict_oom_score_adj and the kubelet's oomScoreAdj: 0), and the
 * world's init (node) reaps no orphans (so containerd runs under `tini -s`, a subreaper).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Json, Kube } from './kube.js';
import { addresses } from './network.js';
import { Loop, startProcess, waitUntil, type Managed } from './processes.js';

export const realNodeName = 'real-node';
/** The real node's taint: the pods a test puts there tolerate it (realNodePodSpec in the tests' helpers). */
export const realNodeTaint = { key: 'sidecar-injector.test/real-node', value: 'true', effect: 'NoSchedule' } as const;

/** What a test needs to run pods on the real node (world.json's `realNode`). */
export interface RealNodeFile {
  readonly name: string;
  /** The busybox image every container runs from, present on the node (imagePullPolicy IfNotPresent or Never). */
  readonly image: string;
  /** An image only the world's registry holds: the kubelet pulls it. */
  readonly pulledImage: string;
  /** The registry on the world's loopback (plain HTTP), for `skopeo copy … docker://<registry>/…`. */
  readonly registry: string;
  /** The pod network's range on this node (CNI's bridge). */
  readonly podCidr: string;
  /** The node's folder: containerd's, the kubelet's and the registry's state and logs. */
  readonly dir: string;
  /** How long each step took to come up, in ms. */
  readonly startMs: { readonly images: number; readonly containerd: number; readonly registry: number; readonly kubeletReady: number };
}

const here = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', 'test', 'cluster', 'world', 'real-node');
const podCidr = '10.245.0.0/24';
const registry = '127.0.0.1:5000';
/** Host paths the runtime writes to whatever its configuration says: a tmpfs each, in the world's mount namespace. */
const hostPaths = ['/run/containerd', '/run/netns', '/var/lib/cni', '/etc/cni', '/var/log/containers'];
/** Global sysctls the kubelet sets (not namespaced): saved before it starts, put back on stop. */
const globalSysctls = ['vm/overcommit_memory', 'kernel/panic', 'kernel/panic_on_oops'];
/** The Debian packages the node needs, by the command each one brings. */
const tools: readonly (readonly [string, string])[] = [
  ['containerd', 'containerd'],
  ['runc', 'runc'],
  ['tini', 'tini'],
  ['umoci', 'umoci'],
  ['skopeo', 'skopeo'],
  ['busybox', 'busybox-static'],
  ['docker-registry', 'docker-registry'],
  ['gcc', 'gcc'],
  ['go', 'Go 1.26'],
];

/** Why the real node cannot start here (a Debian package missing), or undefined. */
export function realNodeMissing(): string | undefined {
  for (const [command, pkg] of tools)
    try {
      execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    } catch {
      return `${command} is missing (Debian: ${pkg})`;
    }
  if (!existsSync('/usr/lib/cni/bridge')) return 'the CNI plugins are missing (Debian: containernetworking-plugins)';
  return undefined;
}

const fill = (text: string, dir: string) => text.replaceAll('@DIR@', dir).replaceAll('@POD_CIDR@', podCidr);

function writeConfig(source: string, target: string, dir: string): string {
  mkdirSync(dirname(target), { recursive: true });
  writeFileSync(target, fill(readFileSync(join(here, source), 'utf8'), dir));
  return target;
}

/** Every cgroup folder the kubelet made (`kubepods` in each controller's hierarchy), deepest first. */
function kubepodsCgroups(): string[] {
  const found: string[] = [];
  for (const controller of readdirSync('/sys/fs/cgroup')) {
    const root = join('/sys/fs/cgroup', controller, 'kubepods');
    if (!existsSync(root)) continue;
    const walk = (dir: string) => {
      for (const entry of readdirSync(dir, { withFileTypes: true })) if (entry.isDirectory()) walk(join(dir, entry.name));
      found.push(dir);
    };
    walk(root);
  }
  return found;
}

export class RealNode {
  private readonly processes: Managed[] = [];
  private readonly sysctls = new Map<string, string>();
  private mounted: string[] = [];
  private scheduler: Loop | undefined;

  private constructor(
    private current: RealNodeFile,
    private readonly kube: Kube,
    private readonly kubeconfig: string,
  ) {}

  get file(): RealNodeFile {
    return this.current;
  }

  /** Starts containerd, the registry and the kubelet (as `kubeconfig`'s user); resolves once the Node is Ready. */
  static async start(options: { readonly kube: Kube; readonly bin: string; readonly state: string; readonly kubeconfig: string }): Promise<RealNode> {
    const dir = join(options.state, 'real-node');
    const file: RealNodeFile = {
      name: realNodeName,
      image: 'sidecar-injector.test/busybox:1',
      pulledImage: `${registry}/test/busybox:pulled`,
      registry,
      podCidr,
      dir,
      startMs: { images: 0, containerd: 0, registry: 0, kubeletReady: 0 },
    };
    const node = new RealNode(file, options.kube, options.kubeconfig);
    try {
      await node.run(options.bin);
    } catch (err) {
      await node.stop();
      throw err;
    }
    return node;
  }

  private async run(bin: string): Promise<void> {
    const { dir } = this.file;
    const logs = join(dir, 'logs');
    mkdirSync(logs, { recursive: true });
    const startMs: Record<keyof RealNodeFile['startMs'], number> = { images: 0, containerd: 0, registry: 0, kubeletReady: 0 };
    let t0 = performance.now();
    const images = join(dir, 'images');
    execFileSync(join(here, 'images.sh'), [images], { stdio: ['ignore', 'ignore', 'pipe'] });
    startMs.images = performance.now() - t0;

    for (const path of hostPaths) {
      mkdirSync(path, { recursive: true });
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'mode=0755', 'tmpfs', path]);
      this.mounted.push(path);
    }
    const containerdConfig = writeConfig('containerd.toml', join(dir, 'config', 'containerd.toml'), dir);
    writeConfig('registry-hosts.toml', join(dir, 'containerd', 'certs.d', registry, 'hosts.toml'), dir);
    writeConfig('cni.conflist', join(dir, 'cni', 'net.d', '10-real-node.conflist'), dir);
    const registryConfig = writeConfig('registry.yml', join(dir, 'config', 'registry.yml'), dir);
    const kubeletConfig = writeConfig('kubelet.yaml', join(dir, 'config', 'kubelet.yaml'), dir);

    t0 = performance.now();
    const socket = join(dir, 'containerd', 'containerd.sock');
    const containerd = startProcess('containerd', 'tini', ['-s', '--', 'containerd', '--config', containerdConfig], join(logs, 'containerd.log'));
    this.processes.push(containerd);
    await waitUntil('containerd serving', () => existsSync(socket), { checks: 300, alive: containerd });
    const ctr = (...args: string[]) => execFileSync('ctr', ['--address', socket, '-n', 'k8s.io', ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    ctr('images', 'import', join(images, 'pause.tar'));
    ctr('images', 'import', join(images, 'busybox.tar'));
    startMs.containerd = performance.now() - t0;

    t0 = performance.now();
    const registryProcess = startProcess('docker-registry', 'docker-registry', ['serve', registryConfig], join(logs, 'registry.log'));
    this.processes.push(registryProcess);
    await waitUntil('the registry serving', async () => (await fetch(`http://${registry}/v2/`)).ok, { checks: 300, alive: registryProcess });
    execFileSync('skopeo', ['copy', '-q', '--dest-tls-verify=false', `oci:${join(images, 'layout')}:busybox-pulled`, `docker://${this.file.pulledImage}`], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    startMs.registry = performance.now() - t0;

    for (const name of globalSysctls) this.sysctls.set(name, readFileSync(join('/proc/sys', name), 'utf8').trim());
    t0 = performance.now();
    const kubelet = startProcess(
      'kubelet',
      join(bin, 'kubelet'),
      [
        `--config=${kubeletConfig}`,
        `--kubeconfig=${this.kubeconfig}`,
        `--root-dir=${join(dir, 'kubelet')}`,
        `--hostname-override=${realNodeName}`,
        `--node-ip=${addresses.advertise}`,
        // Only pods that ask for it: a DaemonSet's controller makes no pod for a node it is not tolerated on.
        `--register-with-taints=${realNodeTaint.key}=${realNodeTaint.value}:${realNodeTaint.effect}`,
        '--v=2',
      ],
      join(logs, 'kubelet.log'),
    );
    this.processes.push(kubelet);
    await waitUntil(
      `node ${realNodeName} Ready`,
      async () => {
        const node = await this.kube.find(`/api/v1/nodes/${realNodeName}`);
        return node?.status?.conditions?.some((c: { type: string; status: string }) => c.type === 'Ready' && c.status === 'True') === true;
      },
      { checks: 1200, alive: kubelet },
    );
    startMs.kubeletReady = performance.now() - t0;
    this.current = { ...this.current, startMs };
  }

  /**
   * The scheduler's part for the pods of `namespaces` (the world runs no scheduler): binds each pod
   * that names no node to this one.
   */
  schedule(namespaces: readonly string[]): void {
    this.scheduler = new Loop('real-node scheduler', 200, async () => {
      for (const namespace of namespaces) {
        const pending = (await this.kube.get(`/api/v1/namespaces/${namespace}/pods?fieldSelector=spec.nodeName%3D`)).items as Json[];
        for (const pod of pending)
          if (!pod.metadata.deletionTimestamp)
            await this.kube
              .create(`/api/v1/namespaces/${namespace}/pods/${pod.metadata.name}/binding`, {
                apiVersion: 'v1',
                kind: 'Binding',
                metadata: { name: pod.metadata.name, uid: pod.metadata.uid },
                target: { apiVersion: 'v1', kind: 'Node', name: realNodeName },
              })
              // Bound meanwhile, or gone: the next pass sees it.
              .catch(() => undefined);
      }
    });
    this.scheduler.start();
  }

  /**
   * Stops the kubelet, every container it started, the registry and containerd; then unmounts
   * what the node mounted, removes its cgroups and puts the global sysctls back.
   */
  async stop(): Promise<void> {
    await this.scheduler?.stop();
    const [containerd, ...rest] = this.processes;
    for (const process of rest.reverse()) await process.stop(5_000);
    // The containers outlive the kubelet (their shims belong to containerd): end them first.
    for (const cgroup of kubepodsCgroups())
      for (const pid of readFileSync(join(cgroup, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean))
        try {
          process.kill(Number(pid), 'SIGKILL');
        } catch {
          // Gone already.
        }
    await containerd?.stop(5_000);
    // containerd's overlay mounts and the pods' network namespaces, under the node's folder or the tmpfs mounts.
    const mounts = readFileSync('/proc/self/mounts', 'utf8')
      .split('\n')
      .map((line) => line.split(' ')[1]?.replace(/\\040/g, ' '))
      .filter((path): path is string => path !== undefined && (path.startsWith(`${this.file.dir}/`) || hostPaths.some((p) => path.startsWith(`${p}/`))))
      .reverse();
    for (const path of [...mounts, ...this.mounted.reverse()])
      try {
        execFileSync('umount', ['-l', path], { stdio: 'ignore' });
      } catch {
        // Not mounted (any more).
      }
    this.mounted = [];
    // An emptied cgroup goes once its last process has been reaped: a few tries.
    for (let attempt = 0; attempt < 50; attempt++) {
      const left = kubepodsCgroups().filter((cgroup) => {
        try {
          rmdirSync(cgroup);
          return false;
        } catch {
          return true;
        }
      });
      if (left.length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    for (const [name, value] of this.sysctls) writeFileSync(join('/proc/sys', name), value);
    this.sysctls.clear();
  }
}

/**
 * The test world's real node, `real-node`: a kubelet built from the control plane's own module,
 * Debian's containerd and runc under it, CNI's bridge plugin for the pod network, and a registry
 * on the world's loopback. Pods that name it (`spec.nodeName: real-node`; the world runs no
 * scheduler) really run: their images are unpacked, their containers are processes in cgroups
 * with their limits, their probes are the kubelet's, and `kubectl logs` and `kubectl exec` go
 * through the API server to this kubelet.
 *
 * Everything it writes is under `<state>/real-node`, or on a tmpfs mounted in the world's own
 * mount namespace over the host paths the kubelet, containerd, runc and CNI insist on
 * (/run/containerd, /run/netns, /var/lib/cni, /var/lib/kubelet, /etc/cni, /var/log/containers,
 * /usr/libexec/kubernetes). The global sysctls the kubelet sets (vm.overcommit_memory,
 * kernel.panic, …) are regular files bind-mounted over their /proc/sys entries in that mount
 * namespace, so the machine's are never changed. What a mount namespace cannot hold, the cgroups,
 * live under a cgroup root of this world's own (`cgroupRoot`), removed on stop. It needs cgroup
 * v1 (the machine's; the kubelet's cgroupfs driver).
 *
 * Two things of this machine shape it: root may lack CAP_SYS_RESOURCE (so no negative
 * oom_score_adj: containerd's restrict_oom_score_adj and the kubelet's oomScoreAdj: 0), and the
 * world's init (node) reaps no orphans (so containerd runs under `tini -s`, a subreaper).
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Json, Kube } from './kube.js';
import { addresses } from './network.js';
import { bindPod } from './node.js';
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
  /** The kubelet's cgroup root (its `kubepods` is under it), in every controller's hierarchy under /sys/fs/cgroup/CONTROLLER. */
  readonly cgroupRoot: string;
  /** How long each step took to come up, in ms. */
  readonly startMs: { readonly images: number; readonly containerd: number; readonly registry: number; readonly kubeletReady: number };
}

const here = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..', 'test', 'cluster', 'world', 'real-node');
/** Not 10.244.0.0/16 (the stand-in's pods) nor 10.245.0.1 (the address the stand-in reports for simulated pods). */
const podCidr = '10.246.0.0/24';
const registry = '127.0.0.1:5000';
/** Host paths the runtime writes to whatever its configuration says: a tmpfs each, in the world's mount namespace. */
const hostPaths = ['/run/containerd', '/run/netns', '/var/lib/cni', '/var/lib/kubelet', '/etc/cni', '/var/log/containers', '/usr/libexec/kubernetes'];
/** The global (not namespaced) sysctls the kubelet sets (its container manager's list): a file of the world's over each. */
const globalSysctls = [
  'vm/overcommit_memory',
  'vm/panic_on_oom',
  'kernel/panic',
  'kernel/panic_on_oops',
  'kernel/keys/root_maxkeys',
  'kernel/keys/root_maxbytes',
];
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
  // The container images get the machine's busybox: it must run with no library beside it.
  if (/=>/.test(execFileSync('sh', ['-c', 'ldd "$(command -v busybox)" 2>&1 || true'], { encoding: 'utf8' })))
    return 'the busybox here is dynamically linked (Debian: busybox-static, which replaces busybox)';
  if (!existsSync('/sys/fs/cgroup/memory/'))
    return 'the machine has no cgroup v1 memory hierarchy (the real node uses the kubelet’s cgroupfs driver on cgroup v1)';
  return undefined;
}

function writeConfig(source: string, target: string, values: Readonly<Record<string, string>>): string {
  mkdirSync(dirname(target), { recursive: true });
  let text = readFileSync(join(here, source), 'utf8');
  for (const [name, value] of Object.entries(values)) text = text.replaceAll(`@${name}@`, value);
  writeFileSync(target, text);
  return target;
}

/**
 * The cgroup hierarchies mounted under /sys/fs/cgroup: one per v1 controller, and with
 * `unified`, the hybrid layout's cgroup2 one (the kubelet makes its folders there too).
 */
const cgroupHierarchies = ({ withUnified }: { withUnified: boolean }): string[] =>
  readdirSync('/sys/fs/cgroup')
    .filter((name) => withUnified || name !== 'unified')
    .map((name) => join('/sys/fs/cgroup', name))
    .filter((path) => existsSync(join(path, 'cgroup.procs')));

/** Every cgroup folder under `root` in each hierarchy, deepest first (root last). */
function cgroupsUnder(root: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    let entries;
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return; // Removed meanwhile (containerd deletes a stopped container's cgroups).
    }
    for (const entry of entries) if (entry.isDirectory()) walk(join(dir, entry.name));
    found.push(dir);
  };
  for (const hierarchy of cgroupHierarchies({ withUnified: true })) if (existsSync(join(hierarchy, root))) walk(join(hierarchy, root));
  return found;
}

/** A file's content, or undefined when it is gone. */
function readIfThere(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

export class RealNode {
  private readonly processes: Managed[] = [];
  private mounted: string[] = [];
  private cgroupsMade = false;
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
      // One world's own: a second world, or the machine's own kubelet, has another.
      cgroupRoot: `sidecar-injector-${basename(options.state)}`,
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
    // The kubelet's writes to global sysctls land in files of the world's (as a container runtime masks /proc paths).
    for (const name of globalSysctls) {
      const copy = join(dir, 'sysctl', name.replaceAll('/', '.'));
      mkdirSync(dirname(copy), { recursive: true });
      writeFileSync(copy, readFileSync(join('/proc/sys', name)));
      execFileSync('mount', ['--bind', copy, join('/proc/sys', name)]);
      this.mounted.push(join('/proc/sys', name));
    }
    // The kubelet wants its cgroup root to exist in every v1 hierarchy.
    this.cgroupsMade = true;
    for (const hierarchy of cgroupHierarchies({ withUnified: false })) mkdirSync(join(hierarchy, this.file.cgroupRoot), { recursive: true });
    const values = { DIR: dir, POD_CIDR: podCidr, CGROUP_ROOT: `/${this.file.cgroupRoot}` };
    const containerdConfig = writeConfig('containerd.toml', join(dir, 'config', 'containerd.toml'), values);
    writeConfig('registry-hosts.toml', join(dir, 'containerd', 'certs.d', registry, 'hosts.toml'), values);
    writeConfig('cni.conflist', join(dir, 'cni', 'net.d', '10-real-node.conflist'), values);
    const registryConfig = writeConfig('registry.yml', join(dir, 'config', 'registry.yml'), values);
    const kubeletConfig = writeConfig('kubelet.yaml', join(dir, 'config', 'kubelet.yaml'), values);

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

    // The kubelet serves anonymously (the world's API server has no client certificate for it): no pod may reach it.
    execFileSync('nft', ['-f', '-'], {
      input: `table inet real-node-guard {\n  chain input {\n    type filter hook input priority filter; policy accept;\n    ip saddr ${podCidr} tcp dport { 10248, 10250 } drop\n  }\n}\n`,
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    t0 = performance.now();
    const kubelet = startProcess(
      'kubelet',
      join(bin, 'kubelet'),
      [
        `--config=${kubeletConfig}`,
        `--kubeconfig=${this.kubeconfig}`,
        `--root-dir=${join(dir, 'kubelet')}`,
        `--cert-dir=${join(dir, 'kubelet', 'pki')}`,
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
        for (const pod of pending) if (!pod.metadata.deletionTimestamp) await bindPod(this.kube, pod, realNodeName);
      }
    });
    this.scheduler.start();
  }

  /**
   * Stops the kubelet, every container it started, the registry and containerd; then unmounts
   * what the node mounted, removes its cgroups and puts the global sysctls back.
   */
  async stop(): Promise<void> {
    // Each step runs whatever the one before did: a half-started node is stopped as far as it got.
    try {
      await this.scheduler?.stop();
      const [containerd, ...rest] = this.processes;
      for (const process of rest.reverse()) await process.stop(5_000);
      // The containers outlive the kubelet (their shims belong to containerd): end them first.
      for (const cgroup of cgroupsUnder(this.file.cgroupRoot))
        for (const pid of (readIfThere(join(cgroup, 'cgroup.procs')) ?? '').split('\n').filter(Boolean))
          try {
            process.kill(Number(pid), 'SIGKILL');
          } catch {
            // Gone already.
          }
      await containerd?.stop(5_000);
    } finally {
      this.unmount();
      if (this.cgroupsMade) await this.removeCgroups();
    }
  }

  /** containerd's overlay mounts and the pods' network namespaces (under the node's folder or the tmpfs mounts), then the node's own mounts. */
  private unmount(): void {
    const under = [this.file.dir, ...hostPaths].map((p) => `${p}/`);
    const mounts = readFileSync('/proc/self/mounts', 'utf8')
      .split('\n')
      .map((line) => line.split(' ')[1]?.replace(/\\040/g, ' '))
      .filter((path): path is string => path !== undefined && under.some((p) => path.startsWith(p)))
      .reverse();
    for (const path of [...mounts, ...this.mounted.reverse()])
      try {
        execFileSync('umount', ['-l', path], { stdio: 'ignore' });
      } catch {
        // Not mounted (any more).
      }
    this.mounted = [];
  }

  /** The world's cgroup root in every hierarchy: an emptied cgroup goes once its last process has been reaped, so a few tries. */
  private async removeCgroups(): Promise<void> {
    for (let attempt = 0; attempt < 50; attempt++) {
      const left = cgroupsUnder(this.file.cgroupRoot).filter((cgroup) => {
        try {
          rmdirSync(cgroup);
          return false;
        } catch (err) {
          return (err as NodeJS.ErrnoException).code !== 'ENOENT';
        }
      });
      if (left.length === 0) return;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    console.error(`real node: cgroups left under ${this.file.cgroupRoot}: ${cgroupsUnder(this.file.cgroupRoot).join(', ')}`);
  }
}

/**
 * The real-cluster test world: a control plane built from Kubernetes' own modules, a network
 * where ClusterIP Services work as kube-proxy makes them, a real node whose kubelet runs the
 * injector's pods and the pods that name it (real-node.ts), a stand-in node for fleets of
 * simulated pods (node.ts), and the injector installed as the README says (`make push`, `make
 * deploy` pinned to the digest, `kubectl apply -k templates/`), exactly as a user does. It runs inside a network namespace of its own (scripts/cluster.sh makes it), so nothing
 * it does reaches the machine's network.
 *
 * `world.json` in the state folder says how to reach it; tests read it with `joinWorld()`
 * (test/cluster/helpers.ts).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { imageArchive } from '../../helpers/image.js';
import { apiServerUrl, startControlPlane, type ControlPlane } from './control-plane.js';
import { Kube } from './kube.js';
import { ServiceProxy, setUpNode } from './network.js';
import { WorldNode } from './node.js';
import { RealNode, realNodeMissing, type RealNodeFile } from './real-node.js';
import { createPki, type Pki } from './pki.js';
import { waitUntil } from './processes.js';

const run = promisify(execFile);

/** The image name the README's install uses. */
const readmeImage = 'registry.example.com/platform/sidecar-injector:0.1.0';

/** What a test needs to reach the world (world.json). */
export interface WorldFile {
  readonly state: string;
  readonly bin: string;
  readonly server: string;
  readonly caFile: string;
  readonly admin: { readonly user: string; readonly token: string; readonly kubeconfig: string };
  readonly nobody: { readonly user: string; readonly token: string; readonly kubeconfig: string };
  /** The CA of the client certificate the API server presents to webhooks (what `serve --client-ca` is given). */
  readonly webhookClientCaFile: string;
  readonly kubernetesVersion: string;
  /**
   * Whether the injector is installed: `real-node` (the built image, pushed to the world's registry
   * and pulled and run by the real node's kubelet), or `none` (a world with only the stand-in node).
   */
  readonly containers: 'real-node' | 'none';
  readonly startTimes: ControlPlane['startTimes'] & { readonly installedMs?: number };
  /** The README's `make deploy`: the image it names and the digest file it pins the install to. */
  readonly deploy: { readonly image: string; readonly digestFile: string };
  /** What the fresh install (before any template was applied) did to a pod of an opted-in namespace. */
  readonly freshInstall?: FreshInstallPod;
  /** The real node (a kubelet with containerd and runc), unless the world was started with only the stand-in. */
  readonly realNode?: RealNodeFile;
}

export interface World {
  readonly file: WorldFile;
  readonly kube: Kube;
  readonly node: WorldNode;
  stop(): Promise<void>;
}

export interface WorldOptions {
  readonly bin: string;
  readonly state: string;
  /** The clone whose image and manifests are installed. */
  readonly clone: string;
  /** Namespaces opted in for injection once the injector is installed. */
  readonly optIn: readonly string[];
  /** Start the real node beside the stand-in and install the injector on it (the default); without it, nothing is installed. */
  readonly realNode: boolean;
}

/** The last lines of every container log of the real node's pods (for a failure's report). */
export function containerLogs(state: string, lines = 15): { file: string; tail: string }[] {
  const pods = join(state, 'real-node', 'pod-logs');
  if (!existsSync(pods)) return [];
  return readdirSync(pods, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.log'))
    .map((f) => {
      const file = join(pods, f);
      return { file, tail: readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n') };
    });
}

/** `kubectl` of the world's version, as the admin; a failure is an Error that quotes kubectl's stderr. */
export async function kubectl(file: Pick<WorldFile, 'bin' | 'admin'>, args: readonly string[], input?: string): Promise<{ stdout: string; stderr: string }> {
  const child = run(join(file.bin, 'kubectl'), [...args], { env: { ...process.env, KUBECONFIG: file.admin.kubeconfig }, maxBuffer: 64 * 1024 * 1024 });
  if (input !== undefined) child.child.stdin?.end(input);
  // A failure becomes a plain Error: ava's reporter cannot copy what execFile rejects with, and then reports nothing.
  const outcome = await child.then(
    (result) => ({ result }),
    (err: { stderr?: string; message?: string }) => ({ failed: String(err.stderr || err.message).trim() }),
  );
  if ('failed' in outcome) throw new Error(`kubectl ${args.join(' ')}: ${outcome.failed}`);
  return outcome.result;
}

/** The newest modification time of `path`, a file or any file under a folder. */
function newest(path: string): number {
  if (!statSync(path).isDirectory()) return statSync(path).mtimeMs;
  let latest = 0;
  for (const entry of readdirSync(path, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) latest = Math.max(latest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
  return latest;
}

/** The image archive `make image` built (scripts/cluster.sh builds it first when it is missing or older than what it is built from). */
function freshImageArchive(clone: string): string {
  // An absolute IMAGE_ARCHIVE stays as it is; a relative one is the clone's.
  const archive = resolve(clone, imageArchive());
  if (!existsSync(archive)) throw new Error(`${archive} is missing: make image (scripts/cluster.sh builds it)`);
  // A stale image never stands in for the code under test: the inputs are the ones scripts/cluster.sh checks.
  const inputs = readFileSync(join(clone, 'scripts', 'image', 'inputs'), 'utf8')
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '' && !line.startsWith('#'));
  const newer = inputs.find((input) => statSync(archive).mtimeMs < newest(join(clone, input)));
  if (newer !== undefined) throw new Error(`${archive} is older than ${newer}: make image (scripts/cluster.sh builds it)`);
  return archive;
}

export async function startWorld(options: WorldOptions): Promise<World> {
  const { bin, state, clone } = options;
  mkdirSync(state, { recursive: true });
  setUpNode();
  const pki: Pki = createPki(join(state, 'pki'), apiServerUrl);
  const controlPlane = await startControlPlane(bin, state, pki);
  const kube = new Kube({ server: apiServerUrl, ca: pki.ca, token: pki.admin.token });
  const proxy = new ServiceProxy(kube, join(state, 'service-proxy.log'));
  let node: WorldNode | undefined;
  let realNode: RealNode | undefined;
  const stop = async () => {
    await realNode?.stop();
    await node?.stop();
    await proxy.stop();
    kube.close();
    await controlPlane.stop();
  };
  try {
    await proxy.sync();
    proxy.start();
    const kubernetesVersion = (await kube.get('/version')).gitVersion as string;
    node = new WorldNode({ kube, kubeletVersion: kubernetesVersion });
    await node.register();
    node.start();
    const digestFile = join(state, 'pushed.digest');
    let image = readmeImage;
    if (options.realNode) {
      const missing = realNodeMissing();
      if (missing)
        throw new Error(
          `the real node cannot start: ${missing} (SIDECAR_INJECTOR_REAL_NODE=off starts the world with only the stand-in node, and no injector)`,
        );
      const archive = freshImageArchive(clone);
      realNode = await RealNode.start({ kube, bin, state, kubeconfig: pki.admin.kubeconfig });
      // The install is what a cluster runs: `make push` to the world's registry, `make deploy`
      // pinned to that digest, the kubelet pulling and running it.
      image = `${realNode.file.registry}/platform/sidecar-injector:${readmeImage.split(':').pop()}`;
      await run('make', [
        '-C',
        clone,
        '--no-print-directory',
        'push',
        `IMAGE=${image}`,
        `IMAGE_ARCHIVE=${archive}`,
        `DIGEST_FILE=${digestFile}`,
        'PUSH_FLAGS=--dest-tls-verify=false',
      ]);
      realNode.schedule(['sidecar-injector']);
    }
    const file: Omit<WorldFile, 'startTimes'> = {
      deploy: { image, digestFile },
      state,
      bin,
      server: apiServerUrl,
      caFile: pki.caFile,
      admin: pki.admin,
      nobody: pki.nobody,
      webhookClientCaFile: pki.webhookClient.caFile,
      kubernetesVersion,
      containers: realNode ? 'real-node' : 'none',
      ...(realNode ? { realNode: realNode.file } : {}),
    };
    const t0 = performance.now();
    const freshInstall = realNode ? await install(file, kube, clone, options.optIn) : undefined;
    const world: WorldFile = {
      ...file,
      ...(freshInstall ? { freshInstall } : {}),
      startTimes: { ...controlPlane.startTimes, ...(realNode ? { installedMs: controlPlane.startTimes.controllersMs + performance.now() - t0 } : {}) },
    };
    writeFileSync(join(state, 'world.json'), JSON.stringify(world, null, 2));
    return { file: world, kube, node, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A pod of a fresh install (no templates yet), as a dry-run create through the real chain returned it. */
export interface FreshInstallPod {
  readonly namespace: string;
  readonly initContainers: readonly string[];
  readonly containers: readonly string[];
  readonly annotations: Readonly<Record<string, string>>;
}

/**
 * The README's `make deploy IMAGE=…` (of `kustomization`, manifests/ unless said): the install
 * rendered with the image pinned to the pushed digest, applied with the world's kubectl.
 */
export async function makeDeploy(file: Pick<WorldFile, 'bin' | 'admin' | 'deploy'>, clone: string, kustomization = 'manifests'): Promise<string> {
  const args = [
    '-C',
    clone,
    '--no-print-directory',
    'deploy',
    `IMAGE=${file.deploy.image}`,
    `DIGEST_FILE=${file.deploy.digestFile}`,
    `KUSTOMIZATION=${kustomization}`,
  ];
  const outcome = await run('make', args, { env: { ...process.env, KUBECONFIG: file.admin.kubeconfig, PATH: `${file.bin}:${process.env.PATH ?? ''}` } }).then(
    ({ stdout }) => ({ stdout }),
    (err: { stderr?: string; message?: string }) => ({ failed: String(err.stderr || err.message).trim() }),
  );
  if ('failed' in outcome) throw new Error(`make ${args.join(' ')}: ${outcome.failed}`);
  return outcome.stdout;
}

/**
 * The README's install: `make deploy` (manifests/ with the image pinned), waits until the install is healthy
 * (every replica ready, both caBundles written, the required webhook armed), opts in the
 * namespaces asked for, and sends a pod through the real admission chain (a dry-run create) to
 * see what a fresh install does to it; then adds templates as a user does, with the bundled
 * examples (`kubectl apply -k templates/`), and waits until every replica serves them.
 */
export async function install(
  file: Pick<WorldFile, 'bin' | 'admin' | 'deploy'>,
  kube: Kube,
  clone: string,
  optIn: readonly string[],
): Promise<FreshInstallPod | undefined> {
  await makeDeploy(file, clone);
  await waitForHealthyInstall(kube);
  for (const namespace of optIn) {
    await kube.create('/api/v1/namespaces', {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: namespace, labels: { 'sidecar-injector.io/injection': 'enabled' } },
    });
    await waitUntil(
      `the default ServiceAccount of ${namespace}`,
      async () => (await kube.find(`/api/v1/namespaces/${namespace}/serviceaccounts/default`)) !== undefined,
    );
  }
  let fresh: FreshInstallPod | undefined;
  if (optIn[0] !== undefined) {
    const namespace = optIn[0];
    const pod = await kube.create(`/api/v1/namespaces/${namespace}/pods?dryRun=All`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'fresh-install', labels: { app: 'fresh-install' } },
      spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0' }] },
    });
    fresh = {
      namespace,
      initContainers: ((pod.spec.initContainers ?? []) as Record<string, any>[]).map((c) => c.name as string),
      containers: (pod.spec.containers as Record<string, any>[]).map((c) => c.name as string),
      annotations: pod.metadata.annotations ?? {},
    };
  }
  await kubectl(file, ['apply', '-k', join(clone, 'templates')]);
  await waitUntil(
    'every replica serving the templates applied',
    async () => {
      const pods = (await kube.get('/api/v1/namespaces/sidecar-injector/pods?labelSelector=app.kubernetes.io%2Fcomponent%3Dwebhook')).items as Record<
        string,
        any
      >[];
      for (const pod of pods) {
        const status = await kube.get(`/api/v1/namespaces/sidecar-injector/pods/https:${pod.metadata.name}:8443/proxy/status`);
        const served = (status.templates.templates as string[]).map((t) => t.split('@')[0]).sort();
        if (served.join() !== 'log-shipper,proxy') return false;
      }
      return pods.length > 0;
    },
    { checks: 1800 },
  );
  return fresh;
}

/** Every replica of the Deployment ready, the caBundles written, the required webhook armed. */
export async function waitForHealthyInstall(kube: Kube): Promise<void> {
  await waitUntil(
    'the injector Deployment available with every replica ready',
    async () => {
      const d = await kube.get('/apis/apps/v1/namespaces/sidecar-injector/deployments/sidecar-injector');
      return (
        d.status?.observedGeneration === d.metadata.generation &&
        d.status?.readyReplicas === d.spec.replicas &&
        d.status?.updatedReplicas === d.spec.replicas &&
        (d.status?.replicas ?? 0) === d.spec.replicas &&
        // No replica of an older revision still terminating: every pod that may answer is of this one.
        (await kube.get('/api/v1/namespaces/sidecar-injector/pods?labelSelector=app.kubernetes.io%2Fcomponent%3Dwebhook')).items.length === d.spec.replicas
      );
    },
    { checks: 1800 },
  );
  await waitUntil(
    'both webhooks with a caBundle, the required one armed Fail',
    async () => {
      const c = await kube.get('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sidecar-injector');
      return (
        c.webhooks.every((w: Record<string, any>) => (w.clientConfig.caBundle ?? '') !== '') &&
        c.webhooks.find((w: Record<string, any>) => w.name === 'required.sidecar-injector.io')?.failurePolicy === 'Fail'
      );
    },
    { checks: 1800 },
  );
}

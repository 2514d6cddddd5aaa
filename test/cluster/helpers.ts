/**
 * What a real-cluster test uses: the world it runs in (scripts/cluster.sh started it and named its
 * state folder in SIDECAR_INJECTOR_TEST_CLUSTER), the admin's client and kubectl, a namespace
 * of its own per test, the API server's audit log, and the injector's CLI as a process.
 */
import { parse as parseYaml } from 'yaml';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import type { ExecutionContext } from 'ava';
import { loadCorpus } from '../helpers/corpus.js';
import { Kube, type Json } from './world/kube.js';
import { realNodeTaint } from './world/real-node.js';
import { kubectl as worldKubectl, makeDeploy, waitForHealthyInstall, type WorldFile } from './world/world.js';

const run = promisify(execFile);

export type { Json };

export interface TestWorld {
  readonly file: WorldFile;
  /** The API server as the admin (system:masters). */
  readonly kube: Kube;
  kubectl(args: readonly string[], input?: string): Promise<{ stdout: string; stderr: string }>;
}

let joined: TestWorld | undefined;

/** The world this test process runs in; fails with how to start one when there is none. */
export function joinWorld(): TestWorld {
  if (joined) return joined;
  const state = process.env.SIDECAR_INJECTOR_TEST_CLUSTER;
  if (!state || !existsSync(join(state, 'world.json')))
    throw new Error('no test cluster: run the real-cluster suite with `npm run test:cluster` (scripts/cluster.sh starts the cluster)');
  const file = JSON.parse(readFileSync(join(state, 'world.json'), 'utf8')) as WorldFile;
  if (file.containers !== 'real-node' || !file.realNode)
    throw new Error('the test cluster has no injector: it was started with SIDECAR_INJECTOR_REAL_NODE=off, and the injector runs only on the real node');
  const kube = new Kube({ server: file.server, ca: readFileSync(file.caFile, 'utf8'), token: file.admin.token });
  joined = { file, kube, kubectl: (args, input) => worldKubectl(file, args, input) };
  return joined;
}

/**
 * Waits until `predicate` holds, checking every 50 ms (each check asks the API server, so no
 * faster): at most 2,400 checks, two minutes on an idle machine, longer on a busy one.
 */
export async function eventually<T>(what: string, predicate: () => Promise<T | undefined | false> | T | undefined | false, checks = 2400): Promise<T> {
  let last: unknown;
  for (let i = 0; i < checks; i++) {
    try {
      const value = await predicate();
      if (value !== undefined && value !== false) return value as T;
    } catch (err) {
      last = err;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${what} did not come in ${checks} checks${last ? ` (last error: ${(last as Error).message})` : ''}`);
}

/** Waits until the leader has written its template condition (a-template-may-apply) on both pod webhooks. */
export async function templateConditionsWritten(): Promise<void> {
  const { kube } = joinWorld();
  await eventually("the leader's template conditions on both pod webhooks", async () => {
    const configuration = await kube.get('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sidecar-injector');
    return (configuration.webhooks as Json[]).filter((w) => ((w.matchConditions ?? []) as Json[]).some((c) => c.name === 'a-template-may-apply')).length === 2;
  });
}

/** A namespace name no other test uses. */
export const testNamespaceName = (prefix: string) => `${prefix}-${randomBytes(3).toString('hex')}`;

/** A fresh namespace for one test, with `labels`, its default ServiceAccount made; deleted after the test. */
export async function testNamespace(t: ExecutionContext, prefix: string, labels: Record<string, string> = {}): Promise<string> {
  const { kube } = joinWorld();
  const name = testNamespaceName(prefix);
  await kube.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels } });
  t.teardown(() => kube.delete(`/api/v1/namespaces/${name}`));
  await eventually(`the default ServiceAccount of ${name}`, () => kube.find(`/api/v1/namespaces/${name}/serviceaccounts/default`));
  return name;
}

/** The ServiceAccounts the corpus pods name (test/fixtures/corpus): the ServiceAccount plugin refuses a pod whose account does not exist. */
export async function createCorpusServiceAccounts(namespace: string): Promise<void> {
  const { kube } = joinWorld();
  const names = new Set(
    loadCorpus()
      .map((p) => p.body.spec.serviceAccountName ?? p.body.spec.serviceAccount)
      .filter((n) => n && n !== 'default'),
  );
  for (const name of names)
    await kube.create(`/api/v1/namespaces/${namespace}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name } });
}

/** A namespace opted in for injection. */
export const optedInNamespace = (t: ExecutionContext, prefix: string, labels: Record<string, string> = {}) =>
  testNamespace(t, prefix, { 'sidecar-injector.io/injection': 'enabled', ...labels });

/**
 * Every line every injector container the world ran so far has written, in order of writing:
 * from the real node's pod log files (the CRI's format, partial lines joined).
 */
export function injectorLogLines(): string[] {
  const { file } = joinWorld();
  const lines: string[] = [];
  const dir = join(file.realNode!.dir, 'pod-logs');
  for (const pod of readdirSync(dir).filter((d) => d.startsWith('sidecar-injector_'))) {
    const container = join(dir, pod, 'injector');
    if (!existsSync(container)) continue;
    for (const log of readdirSync(container).filter((f) => /^\d+\.log$/.test(f))) {
      let partial = '';
      // "<time> <stream> <P|F> <text>": P is a part of a longer line, F its end.
      for (const line of readFileSync(join(container, log), 'utf8').split('\n')) {
        const match = /^\S+ (?:stdout|stderr) ([PF]) (.*)$/.exec(line);
        if (!match) continue;
        partial += match[2];
        if (match[1] === 'F') {
          lines.push(partial);
          partial = '';
        }
      }
    }
  }
  return lines;
}

/** The API server's audit events so far (Metadata level: the injector's requests and every pod create). */
export function auditEvents(): Json[] {
  const { file } = joinWorld();
  return readFileSync(join(file.state, 'audit.log'), 'utf8')
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Json);
}

/** The injector's CLI as a process (`dist/src/cli/main.js`), its exit code and output. */
export async function cli(
  args: readonly string[],
  options: { input?: string; env?: Record<string, string>; cwd?: string } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const child = run(process.execPath, [resolve('dist', 'src', 'cli', 'main.js'), ...args], {
    env: { ...process.env, ...options.env },
    ...(options.cwd ? { cwd: options.cwd } : {}),
    maxBuffer: 64 * 1024 * 1024,
  });
  if (options.input !== undefined) child.child.stdin?.end(options.input);
  try {
    const { stdout, stderr } = await child;
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
}

/** The injector's pods as the API server has them. */
export async function injectorPods(): Promise<Json[]> {
  const { kube } = joinWorld();
  return (await kube.get('/api/v1/namespaces/sidecar-injector/pods?labelSelector=app.kubernetes.io%2Fcomponent%3Dwebhook')).items;
}

/** The README's `make deploy` again, of `kustomization` (manifests/ unless said): as an upgrade or an overlay is applied. */
export async function deploy(kustomization = 'manifests'): Promise<string> {
  return makeDeploy(joinWorld().file, process.cwd(), kustomization);
}

/** Installs `kustomization` and waits until every replica runs with the argument `flag`, and the install is healthy. */
export async function deployOverlay(kustomization: string, flag: string): Promise<void> {
  await deploy(kustomization);
  await injectorArgs(`the Deployment rolled out with ${flag}`, (args) => args.includes(flag));
  await healthyInstall();
}

/** Installs the shipped manifests again and waits until no replica runs with `flag`, and the install is healthy. */
export async function restoreShipped(flag: string): Promise<void> {
  await deploy();
  await injectorArgs('the Deployment back as shipped', (args) => !args.includes(flag));
  await healthyInstall();
}

/** Waits until the injector's Deployment, rolled out, runs with arguments of which `holds` is true (the JSON text of the list). */
async function injectorArgs(what: string, holds: (args: string) => boolean): Promise<void> {
  await eventually(what, async () => {
    const d = await joinWorld().kube.get('/apis/apps/v1/namespaces/sidecar-injector/deployments/sidecar-injector');
    return holds(JSON.stringify(d.spec.template.spec.containers[0].args)) && d.status?.updatedReplicas === d.spec.replicas;
  });
}

/** The securityContext of a test sidecar that fits Pod Security restricted (the probe namespace enforces it). */
export const restrictedSecurityContext: Json = Object.freeze({
  allowPrivilegeEscalation: false,
  runAsNonRoot: true,
  runAsUser: 65534,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
});

/**
 * The spec of a test template (optional, for the pods labelled `real-node-test: <name>`) with one
 * native sidecar of `image` that waits until stopped and is ready at once, restricted; `extra`
 * adds to the template.
 */
export function waitingSidecarSpec(name: string, image: string, extra: Json = {}): Json {
  return {
    description: 'a sidecar on the real node',
    injection: 'automatic',
    failurePolicy: 'Ignore',
    objectSelector: { matchLabels: { 'real-node-test': name } },
    initContainers: [
      {
        name,
        image,
        imagePullPolicy: 'IfNotPresent',
        restartPolicy: 'Always',
        command: ['sh', '-c', "trap 'exit 0' TERM; while true; do sleep 1; done"],
        readinessProbe: { exec: { command: ['true'] }, periodSeconds: 1 },
        securityContext: restrictedSecurityContext,
      },
    ],
    ...extra,
  };
}

/**
 * `count` Deployments (`web-0`, `web-1`, …) of `replicas` pods each on the real node, labelled
 * `real-node-test: <selector>` (the bundled log shipper kept out), their app container a busybox
 * that sleeps; `app` adds to that container, `deployment` to the Deployment's spec.
 */
export async function realNodeDeployments(
  namespace: string,
  selector: string,
  count: number,
  replicas: number,
  app: Json = {},
  deployment: Json = {},
): Promise<void> {
  const { kube, file } = joinWorld();
  for (let i = 0; i < count; i++)
    await kube.create(`/apis/apps/v1/namespaces/${namespace}/deployments`, {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: `web-${i}` },
      spec: {
        replicas,
        selector: { matchLabels: { app: `web-${i}` } },
        template: {
          metadata: { labels: { app: `web-${i}`, 'real-node-test': selector, 'logging.example.com/ship': 'false' } },
          spec: onRealNode({
            containers: [{ name: 'app', image: file.realNode!.image, imagePullPolicy: 'IfNotPresent', command: ['sleep', '36000'], ...app }],
          }),
        },
        ...deployment,
      },
    });
}

/** Waits until the install is healthy again (every replica ready, caBundles, the required webhook armed). */
export async function healthyInstall(): Promise<void> {
  await waitForHealthyInstall(joinWorld().kube);
}

/** Scales the injector's Deployment and waits until that many replicas run and are ready (0: all gone). */
export async function scaleInjector(replicas: number): Promise<void> {
  const { kube } = joinWorld();
  await kube.mergePatch('/apis/apps/v1/namespaces/sidecar-injector/deployments/sidecar-injector/scale', { spec: { replicas } });
  await eventually(`${replicas} injector replicas`, async () => {
    const pods = await injectorPods();
    const ready = pods.filter((p) => !p.metadata.deletionTimestamp && p.status?.conditions?.some((c: Json) => c.type === 'Ready' && c.status === 'True'));
    return pods.length === replicas && ready.length === replicas;
  });
}

/**
 * Sets (or, with null, removes) one environment variable of the injector's container — a flag of
 * `serve` — and waits until both replicas run with it, ready, and the install is healthy.
 */
export async function setInjectorEnv(name: string, value: string | null): Promise<void> {
  const { kube } = joinWorld();
  // Merged by name: the entry set, or deleted ($patch: delete); the other variables stay.
  const entry = value === null ? { name, $patch: 'delete' } : { name, value };
  await kube.call(
    'PATCH',
    '/apis/apps/v1/namespaces/sidecar-injector/deployments/sidecar-injector',
    { spec: { template: { spec: { containers: [{ name: 'injector', env: [entry] }] } } } },
    'application/strategic-merge-patch+json',
  );
  await eventually(`both replicas with ${name}${value === null ? ' unset' : `=${value}`}, ready`, async () => {
    const pods = await injectorPods();
    const set = (p: Json) =>
      (((p.spec.containers as Json[]).find((c) => c.name === 'injector')?.env ?? []) as Json[]).find((e) => e.name === name)?.value === (value ?? undefined);
    const ready = (p: Json) => !p.metadata.deletionTimestamp && p.status?.conditions?.some((c: Json) => c.type === 'Ready' && c.status === 'True');
    return pods.length === 2 && pods.every((p) => set(p) && ready(p));
  });
  await healthyInstall();
}

/** A pod manifest with one container, the way a user writes it. */
export function plainPod(name: string, extra: Json = {}): Json {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, labels: { app: name } },
    spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0' }], ...extra },
  };
}

/** Names of a pod's init and app containers. */
export const containerNames = (pod: Json) => ({
  init: ((pod.spec.initContainers ?? []) as Json[]).map((c) => c.name as string),
  app: ((pod.spec.containers ?? []) as Json[]).map((c) => c.name as string),
});

/**
 * Waits until the `/status` of every running replica, each asked through the API server's pod
 * proxy, satisfies `holds`. (Asking through the Service says little: kube-apiserver keeps one
 * connection per webhook open, so its calls reach one replica until that connection closes.)
 */
export async function everyReplica(holds: (status: Json) => boolean, what: string): Promise<void> {
  const { kube } = joinWorld();
  await eventually(what, async () => {
    const pods = (await injectorPods()).filter((p) => !p.metadata.deletionTimestamp);
    for (const pod of pods) {
      const status = await kube.get(`/api/v1/namespaces/sidecar-injector/pods/https:${pod.metadata.name}:8443/proxy/status`);
      if (!holds(status)) return false;
    }
    return pods.length > 0;
  });
}

/** Waits until the `/status` of some running replica (the leader, for what only it says), asked through the pod proxy, satisfies `holds`. */
export async function someReplica(holds: (status: Json) => boolean, what: string): Promise<Json> {
  const { kube } = joinWorld();
  return eventually(what, async () => {
    for (const pod of (await injectorPods()).filter((p) => !p.metadata.deletionTimestamp)) {
      const status = await kube.get(`/api/v1/namespaces/sidecar-injector/pods/https:${pod.metadata.name}:8443/proxy/status`);
      if (holds(status)) return status;
    }
    return undefined;
  });
}

/**
 * A pod spec on the real node: the node by name (the world runs no scheduler), its taint
 * tolerated, a short grace period; `spec` adds to it or overrides it.
 */
export function onRealNode(spec: Json): Json {
  return {
    nodeName: joinWorld().file.realNode!.name,
    tolerations: [{ key: realNodeTaint.key, operator: 'Equal', value: realNodeTaint.value, effect: realNodeTaint.effect }],
    terminationGracePeriodSeconds: 2,
    ...spec,
  };
}

/** The path of the SidecarTemplates, or of one of them. */
export const sidecarTemplatesPath = (name?: string) => `/apis/sidecar-injector.io/v1alpha1/sidecartemplates${name ? `/${name}` : ''}`;

/** A template's YAML (a bare document `name: …` or a SidecarTemplate manifest) as the SidecarTemplate object that holds it. */
export function sidecarTemplate(text: string): Json {
  const doc = parseYaml(text) as Json;
  if (doc.kind === 'SidecarTemplate') return doc;
  const { name, ...spec } = doc;
  return { apiVersion: 'sidecar-injector.io/v1alpha1', kind: 'SidecarTemplate', metadata: { name }, spec };
}

/**
 * Stores the template `name` (YAML text, bare or a manifest) as a SidecarTemplate for one test,
 * and waits until every replica serves it; after the test, deletes it and waits until none does.
 */
export async function withTemplate(t: ExecutionContext, name: string, text: string): Promise<void> {
  const { kube } = joinWorld();
  const serves = (status: Json) => (status.templates.templates as string[]).some((tpl) => tpl.startsWith(`${name}@`));
  await kube.create(sidecarTemplatesPath(), sidecarTemplate(text));
  t.teardown(async () => {
    await kube.delete(sidecarTemplatesPath(name));
    await everyReplica((status) => !serves(status), `every replica without template ${name}`);
  });
  await everyReplica(serves, `every replica serving template ${name}`);
  // And the pod webhooks' template conditions, written by the leader, cover it.
  await eventually(`the webhooks' template conditions covering ${name}`, async () => {
    for (const pod of await injectorPods()) {
      const status = await kube.get(`/api/v1/namespaces/sidecar-injector/pods/https:${pod.metadata.name}:8443/proxy/status`);
      if (((status['webhook-conditions']?.coveredTemplates ?? []) as string[]).some((tpl) => tpl.startsWith(`${name}@`))) return true;
    }
    return undefined;
  });
}

/**
 * A ValidatingAdmissionPolicy on pod CREATEs with one validation, and its binding (Deny; for the
 * namespaces `namespaceSelector` selects, else all), for one test: deleted after it.
 */
export async function podPolicy(
  t: ExecutionContext,
  name: string,
  validation: { readonly expression: string; readonly message: string },
  namespaceSelector?: Json,
): Promise<void> {
  const { kube } = joinWorld();
  const apis = '/apis/admissionregistration.k8s.io/v1';
  await kube.create(`${apis}/validatingadmissionpolicies`, {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name },
    spec: {
      failurePolicy: 'Fail',
      matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }] },
      validations: [validation],
    },
  });
  await kube.create(`${apis}/validatingadmissionpolicybindings`, {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name },
    spec: { policyName: name, validationActions: ['Deny'], ...(namespaceSelector ? { matchResources: { namespaceSelector } } : {}) },
  });
  t.teardown(async () => {
    await kube.delete(`${apis}/validatingadmissionpolicybindings/${name}`);
    await kube.delete(`${apis}/validatingadmissionpolicies/${name}`);
  });
}

/**
 * The warnings of an API answer, as kubectl prints them: each `Warning: 299 - "…"` header value
 * unquoted (Node reads header bytes as Latin-1; the API server sends UTF-8).
 */
export function warnings(answer: { headers: Record<string, string | string[] | undefined> }): string[] {
  const raw = answer.headers.warning;
  const text = Buffer.from(Array.isArray(raw) ? raw.join(', ') : (raw ?? ''), 'latin1').toString('utf8');
  return [...text.matchAll(/299 - "((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!.replace(/\\(.)/g, '$1'));
}

/** A folder of the machine's temporary folder for one test, removed after it. */
export async function testFolder(t: ExecutionContext, prefix: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `${prefix}-`));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/**
 * One truth about each pod, across features: template classes (required/optional ×
 * automatic/on-request × native/ordinary sidecar) × pods (Deployment, StatefulSet, DaemonSet,
 * Job, a CronJob's Job, bare pods with restartPolicy Always/Never/OnFailure, a mirror pod, a
 * Windows Deployment) × the namespace's enforced Pod Security (none, baseline, restricted) ×
 * Kubernetes 1.28 and 1.33. Every cell goes through both webhooks over HTTPS in both orders, each
 * re-invoked; the pod as stored is then audited by `sidecar-injector audit` against the test API
 * server, and `audit --restart missing,stale` runs twice. What each cell must come to is written
 * here from the rules (docs/decisions.md), not asked of the code.
 */
import test from 'ava';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { audit } from '../src/cli/audit.js';
import type { TemplateSet } from '../src/templates/set.js';
import { applyPatchV4, createReview, decodePatch, overwrites, prepareCreate, reinvocationInput, validationProblems } from './helpers/apiserver.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { templateSet } from './helpers/templates.js';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';

type Json = Record<string, any>;

// --- The axes -------------------------------------------------------------------------------

interface TemplateClass {
  readonly required: boolean;
  readonly onRequest: boolean;
  readonly native: boolean;
}
const classes: TemplateClass[] = [];
for (const required of [true, false]) for (const onRequest of [false, true]) for (const native of [true, false]) classes.push({ required, onRequest, native });
const className = (c: TemplateClass) =>
  `${c.required ? 'required' : 'optional'} ${c.onRequest ? 'on-request' : 'automatic'} ${c.native ? 'native' : 'ordinary'}`;

/**
 * A sidecar that runs until stopped and sets no seccomp profile: it passes baseline, and breaks
 * restricted (so the Pod Security rule is exercised); linux only (the Windows pod is out of scope).
 */
function sidecarTemplate(c: TemplateClass): Json {
  const container = {
    name: 'agent',
    image: 'example.com/agent:1.0',
    securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] } },
  };
  return {
    name: 'agent',
    injection: c.onRequest ? 'on-request' : 'automatic',
    failurePolicy: c.required ? 'Fail' : 'Ignore',
    ...(c.native ? { initContainers: [{ ...container, restartPolicy: 'Always' }] } : { containers: [container] }),
  };
}

type PodKind =
  | 'Deployment'
  | 'StatefulSet'
  | 'DaemonSet'
  | 'Job'
  | 'CronJob'
  | 'bare-Always'
  | 'bare-Never'
  | 'bare-OnFailure'
  | 'mirror'
  | 'Windows'
  | 'Windows-beta-label'
  | 'Windows-affinity';
const podKinds: PodKind[] = [
  'Deployment',
  'StatefulSet',
  'DaemonSet',
  'Job',
  'CronJob',
  'bare-Always',
  'bare-Never',
  'bare-OnFailure',
  'mirror',
  'Windows',
  'Windows-beta-label',
  'Windows-affinity',
];
const windows = (k: PodKind) => k.startsWith('Windows');
const runsToCompletion = (k: PodKind) => k === 'Job' || k === 'CronJob' || k === 'bare-Never' || k === 'bare-OnFailure';

type Level = 'none' | 'baseline' | 'restricted';
const levels: Level[] = ['none', 'baseline', 'restricted'];
const versions = [28, 33] as const;

const namespaceLabels = (level: Level): Record<string, string> => ({
  'sidecar-injector.io/injection': 'enabled',
  ...(level === 'none' ? {} : { 'pod-security.kubernetes.io/enforce': level }),
});
const nsOf = (level: Level) => `ps-${level}`;

// --- The oracle: what the rules say, written from docs/decisions.md ----------------------------

type Expected =
  | { readonly kind: 'not-applicable' }
  | { readonly kind: 'inject'; readonly list: 'containers' | 'initContainers' }
  | { readonly kind: 'rule'; readonly rule: 'runs-to-completion' | 'pod-security' };

function expected(c: TemplateClass, pod: PodKind, level: Level, version: number): Expected {
  // Mirror pods belong to the kubelet; a linux-only template does not apply to a Windows pod.
  if (pod === 'mirror' || windows(pod)) return { kind: 'not-applicable' };
  const completes = runsToCompletion(pod);
  // Below 1.29 a sidecar in a pod that runs to completion could only be a container that never exits.
  if (version < 29 && completes) return { kind: 'rule', rule: 'runs-to-completion' };
  if (level === 'restricted') return { kind: 'rule', rule: 'pod-security' };
  // Native sidecars below 1.29 fall back to ordinary containers; ordinary ones become native in pods that complete.
  const native = version >= 29 && (c.native || completes);
  return { kind: 'inject', list: native ? 'initContainers' : 'containers' };
}

// --- The pods as their controllers create them -------------------------------------------------

/** The app container: passes restricted on its own, so only the sidecar can break the level. */
const app = {
  name: 'app',
  image: 'example.com/app:2.1',
  securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } },
};

function podTemplate(kind: PodKind, requestAgent: boolean): Json {
  const spec: Json = { containers: [structuredClone(app)], securityContext: { runAsNonRoot: true } };
  if (kind === 'Job' || kind === 'CronJob' || kind === 'bare-Never') spec.restartPolicy = 'Never';
  if (kind === 'bare-OnFailure') spec.restartPolicy = 'OnFailure';
  if (windows(kind)) {
    // The three ways a pod lands on Windows nodes: spec.os, the older OS node label, required node affinity.
    if (kind === 'Windows') spec.os = { name: 'windows' };
    if (kind === 'Windows-beta-label') spec.nodeSelector = { 'beta.kubernetes.io/os': 'windows' };
    if (kind === 'Windows-affinity')
      spec.affinity = {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['windows'] }] }],
          },
        },
      };
    spec.securityContext = {};
    spec.containers = [{ name: 'app', image: 'example.com/app:2.1-windows' }];
  }
  const annotations: Json = requestAgent ? { 'sidecar-injector.io/templates': 'agent' } : {};
  if (kind === 'mirror') annotations['kubernetes.io/config.mirror'] = 'abc123';
  return { metadata: { labels: { app: kind.toLowerCase() }, annotations }, spec };
}

/** Where a pod of `kind` comes from: its workload (stored in the test API server) and its owner reference. */
function workloadOf(kind: PodKind, name: string): { resource?: 'deployments' | 'statefulsets' | 'daemonsets' | 'jobs'; owner?: Json; top?: Json } {
  const ref = (apiVersion: string, k: string, n: string) => ({ apiVersion, kind: k, name: n, uid: `uid-${k}-${n}`, controller: true });
  switch (kind) {
    case 'Deployment':
    case 'Windows':
    case 'Windows-beta-label':
    case 'Windows-affinity':
      return { resource: 'deployments', owner: ref('apps/v1', 'ReplicaSet', `${name}-5d8f`), top: ref('apps/v1', 'Deployment', name) };
    case 'StatefulSet':
      return { resource: 'statefulsets', owner: ref('apps/v1', 'StatefulSet', name) };
    case 'DaemonSet':
      return { resource: 'daemonsets', owner: ref('apps/v1', 'DaemonSet', name) };
    case 'Job':
      return { resource: 'jobs', owner: ref('batch/v1', 'Job', name) };
    case 'CronJob':
      return { resource: 'jobs', owner: ref('batch/v1', 'Job', `${name}-29010`), top: ref('batch/v1', 'CronJob', name) };
    default:
      return {};
  }
}

// --- Admission through both webhooks --------------------------------------------------------

/** One webhook call as the API server makes it: the patch applied (only adds) and the pod still valid, or the denial. */
async function call(t: any, server: TestServer, path: string, input: Json, namespace: string): Promise<{ pod: Json } | { denied: string }> {
  const res = await server.post(createReview(input, { namespace }), path);
  t.is(res.status, 200);
  if (!res.json.response.allowed) return { denied: `${res.json.response.status.code} ${res.json.response.status.message}` };
  const patch = decodePatch(res.json.response);
  t.deepEqual(overwrites(input, patch), []);
  const output = applyPatchV4(input, patch) as Json;
  t.deepEqual(validationProblems(output), []);
  return { pod: output };
}

/** Both webhooks in `order`, then each again (reinvocation after defaulting): the stored pod, or the first denial. */
async function admit(t: any, server: TestServer, order: readonly string[], pod: Json, namespace: string): Promise<{ pod: Json } | { denied: string }> {
  let current = pod;
  for (const path of order) {
    const out = await call(t, server, path, current, namespace);
    if ('denied' in out) return out;
    current = out.pod;
  }
  for (const path of order) {
    const again = await server.post(createReview(reinvocationInput(current), { namespace }), path);
    // The fixed point: a pod that carries its sidecars gets no patch from either webhook.
    t.is(again.json.response.patch, undefined, `${path} patched again`);
    t.true(again.json.response.allowed);
  }
  return { pod: current };
}

const agentIn = (pod: Json) => ({
  containers: (pod.spec.containers ?? []).filter((c: Json) => c.name === 'agent'),
  initContainers: (pod.spec.initContainers ?? []).filter((c: Json) => c.name === 'agent'),
});

// --- The matrix -----------------------------------------------------------------------------

for (const c of classes) {
  for (const version of versions) {
    test(`${className(c)} at Kubernetes 1.${version}: admission, audit and restart agree in every cell`, async (t) => {
      const set: TemplateSet = templateSet(sidecarTemplate(c));
      const hash = set.byName.get('agent')!.hash;
      const labels = Object.fromEntries(levels.map((l) => [nsOf(l), namespaceLabels(l)]));
      const server = await startTestServer({ templates: set, namespaces: createLocalNamespaceSource(labels), kubernetesVersion: { major: 1, minor: version } });
      t.teardown(() => server.stop());
      const api = new FakeApiServer();
      await api.start();
      t.teardown(() => api.stop());
      for (const level of levels) api.create(nsOf(level), namespaceLabels(level));

      /** Per stored workload: what the audit must say of its pods. */
      const want = new Map<string, { state: string; rule?: string; restartable: boolean }>();
      let cells = 0;
      for (const level of levels) {
        const namespace = nsOf(level);
        for (const kind of podKinds) {
          cells++;
          const rule = expected(c, kind, level, version);
          const cell = `${kind} in ${namespace}`;
          // Two workloads per cell: one whose pod went through admission, and one whose pod was
          // created before the namespace opted in (never admitted): what the audit and --restart act on.
          for (const admitted of [true, false]) {
            const name = `${kind.toLowerCase()}-${admitted ? 'new' : 'old'}`;
            const template = podTemplate(kind, c.onRequest);
            const { resource, owner, top } = workloadOf(kind, name);
            const podName = owner ? `${owner.name}-x1` : name;
            const created = prepareCreate(
              {
                apiVersion: 'v1',
                kind: 'Pod',
                metadata: { ...template.metadata, name: podName, ...(owner ? { ownerReferences: [owner] } : {}) },
                spec: template.spec,
              },
              namespace,
            );
            let stored = created;
            if (admitted) {
              const outcomes = [];
              for (const order of [
                ['/mutate/required', '/mutate/optional'],
                ['/mutate/optional', '/mutate/required'],
              ]) {
                outcomes.push(await admit(t, server, order, created, namespace));
              }
              // Both orders reach the same pod, or the same denial.
              t.deepEqual(outcomes[0], outcomes[1], cell);
              const outcome = outcomes[0]!;
              if ('denied' in outcome) {
                // Required means required: only a required template a rule leaves out refuses the pod.
                t.true(c.required && rule.kind === 'rule', `${cell}: denied ${outcome.denied}`);
                t.regex(outcome.denied, new RegExp(`^403 required sidecar agent cannot be injected: .*`), cell);
                continue;
              }
              stored = outcome.pod;
              const agent = agentIn(stored);
              if (rule.kind === 'inject') {
                t.is(agent[rule.list].length, 1, `${cell}: agent in ${rule.list}`);
                t.is(agent[rule.list === 'containers' ? 'initContainers' : 'containers'].length, 0, cell);
                if (rule.list === 'initContainers') t.is(agent.initContainers[0].restartPolicy, 'Always', cell);
              } else {
                // Left out (optional) or not applicable: the pod is as it came.
                t.false(c.required && rule.kind === 'rule', `${cell}: a required template left out without a denial`);
                t.is(agent.containers.length + agent.initContainers.length, 0, cell);
              }
              // A pod that runs to completion never gets a container that never exits.
              if (runsToCompletion(kind)) t.is(agent.containers.length, 0, `${cell}: a never-ending ordinary container`);
            }
            // Into the test API server: the workload (with its pod template) and the pod as stored.
            if (resource) {
              const withTemplate = { template: { metadata: template.metadata, spec: template.spec } };
              if (top?.kind === 'Deployment') {
                api.addObject('deployments', { namespace, name: top.name, uid: top.uid }, withTemplate);
                api.addObject('replicasets', { namespace, name: owner!.name, uid: owner!.uid, ownerReferences: [top] }, withTemplate);
              } else if (top?.kind === 'CronJob') {
                api.addObject('jobs', { namespace, name: owner!.name, uid: owner!.uid, ownerReferences: [top] }, withTemplate);
              } else api.addObject(resource, { namespace, name: owner!.name, uid: owner!.uid }, withTemplate);
            }
            api.addObject('pods', stored.metadata, stored.spec);
            const workloadKey = `${namespace}/${top?.name ?? owner?.name ?? podName}`;
            const state = rule.kind === 'not-applicable' ? 'not-selected' : rule.kind === 'rule' ? 'left-out' : admitted ? 'current' : 'missing';
            want.set(workloadKey, {
              state,
              ...(rule.kind === 'rule' ? { rule: rule.rule } : {}),
              restartable: state === 'missing' && (top?.kind === 'Deployment' || kind === 'StatefulSet' || kind === 'DaemonSet'),
            });
          }
        }
      }
      t.is(cells, podKinds.length * levels.length);

      // The audit, as the hourly CronJob runs it: the stored pods, decided as admission decides.
      const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-matrix-'));
      const kubeconfig = join(dir, 'kubeconfig');
      await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
      const templatesDir = join(dir, 'templates');
      await mkdir(templatesDir);
      await writeFile(join(templatesDir, 'agent.yaml'), JSON.stringify(sidecarTemplate(c)));
      const run = async (args: string[]) => {
        let stdout = '';
        let stderr = '';
        const code = await audit(
          ['--kubeconfig', kubeconfig, '--templates', templatesDir, '--kubernetes-version', `1.${version}`, ...args],
          { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: (s: string) => (stderr += s) } },
          {},
          async () => {},
        );
        return { code, stdout, stderr };
      };
      const report = JSON.parse((await run(['-o', 'json'])).stdout);
      for (const [key, expectedState] of want) {
        const [namespace, workload] = key.split('/') as [string, string];
        const owner = report.owners.find((o: Json) => o.namespace === namespace && o.name === workload);
        t.truthy(owner, `${key}: audited`);
        if (!owner) continue;
        t.deepEqual(Object.keys(owner.states), [expectedState.state], `${key}: ${JSON.stringify(owner.states)}`);
        const pod = report.pods.find((p: Json) => p.namespace === namespace && p.owner.name === workload);
        if (expectedState.rule) t.is(pod.templates[0]?.rule, expectedState.rule, key);
        if (expectedState.state === 'current') t.is(pod.templates[0]?.want, hash, key);
      }

      // --restart twice: only workloads whose new pods would carry the template, each once.
      const first = await run(['--restart', 'missing,stale']);
      t.is(first.code, 0, first.stderr);
      const second = await run(['--restart', 'missing,stale']);
      t.is(second.code, 0, second.stderr);
      const expectedRestarts = [...want]
        .filter(([, w]) => w.restartable)
        .map(([key]) => key)
        .sort();
      const patchedKeys = api.patches.map((p) => `${p.path.split('/')[5]}/${p.path.split('/').at(-1)}`).sort();
      t.deepEqual(patchedKeys, expectedRestarts);
      for (const p of api.patches) t.is(p.body.metadata.annotations['sidecar-injector.io/restarted-for'], `agent@${hash}`);
      // The second run names each once-restarted workload, and why it does not restart it again.
      for (const key of expectedRestarts)
        t.true(second.stdout.includes(`in ${key.split('/')[0]} (restarted once already for agent@${hash}`), `${key}: ${second.stdout}`);
    });
  }
}

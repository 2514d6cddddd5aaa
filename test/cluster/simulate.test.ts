/**
 * `sidecar-injector simulate` against the real cluster, then the same change rolled out for
 * real: a fleet of 500 Deployments and a Job across namespaces with a Pod Security level, a
 * LimitRange, a ResourceQuota and a ValidatingAdmissionPolicy that refuses the new image, with
 * Guaranteed pods and pods that already have a container of the sidecar's name. The new
 * revision of a template is simulated (dry runs through the real admission chain), then put in
 * force and every Deployment restarted (the Job run again): the workloads simulate says would be
 * refused are exactly those whose new pods the cluster refuses.
 */
import test from 'ava';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { formatSimulation, type SimulateReport } from '../../src/cli/simulate.js';
import { loadTemplateDir } from '../../src/templates/load.js';
import {
  cli,
  eventually,
  everyReplica,
  joinWorld,
  podPolicy,
  sidecarTemplate,
  sidecarTemplatesPath,
  testFolder,
  testNamespace,
  withTemplate,
  type Json,
} from './helpers.js';

/** The template in force: small enough for every namespace's limits. */
const agentNow = `name: agent
failurePolicy: Ignore
containers:
  - name: agent
    image: registry.example/agent:1
    resources:
      limits: {cpu: 100m, memory: 32Mi}
`;
/** Its new revision: a new image, twice the memory, no cpu limit. */
const agentNext = `name: agent
failurePolicy: Ignore
containers:
  - name: agent
    image: registry.example/agent:2
    resources:
      limits: {memory: 64Mi}
`;

const restricted = {
  runAsNonRoot: true,
  runAsUser: 1000,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};

/** A Deployment of one replica: `shape` says what is special about its pod. */
function deployment(name: string, shape: 'plain' | 'guaranteed' | 'named-agent' | 'restricted' | 'no-shipper'): Json {
  const container: Json = {
    name: shape === 'named-agent' ? 'agent' : 'app',
    image: 'registry.example/app:1',
    // Burstable (requests below limits); the Guaranteed ones below.
    resources: { requests: { cpu: '10m', memory: '8Mi' }, limits: { cpu: '50m', memory: '16Mi' } },
  };
  if (shape === 'guaranteed') container.resources = { limits: { cpu: '50m', memory: '16Mi' }, requests: { cpu: '50m', memory: '16Mi' } };
  if (shape === 'restricted') container.securityContext = restricted;
  const labels: Json = { app: name, ...(shape === 'no-shipper' ? { 'logging.example.com/ship': 'false' } : {}) };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: { replicas: 1, selector: { matchLabels: { app: name } }, template: { metadata: { labels }, spec: { containers: [container] } } },
  };
}

/** Creates every object, a few at a time. */
async function createAll(items: { path: string; object: Json }[]): Promise<void> {
  const { kube } = joinWorld();
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < items.length) {
        const { path, object } = items[next++]!;
        await kube.create(path, object);
      }
    }),
  );
}

test('simulate predicts exactly which of 500 Deployments and a Job a real rollout of the change then fails on', async (t) => {
  t.timeout(20 * 60_000);
  const { kube, file } = joinWorld();
  const opted = { 'sidecar-injector.io/injection': 'enabled' };
  const plain = await testNamespace(t, 'sim-plain', opted);
  const strict = await testNamespace(t, 'sim-psa', { ...opted, 'pod-security.kubernetes.io/enforce': 'restricted' });
  const limited = await testNamespace(t, 'sim-limit', opted);
  const quota = await testNamespace(t, 'sim-quota', opted);
  const policed = await testNamespace(t, 'sim-policy', { ...opted, 'sim-policy': 'strict' });
  await kube.create(`/api/v1/namespaces/${limited}/limitranges`, {
    apiVersion: 'v1',
    kind: 'LimitRange',
    metadata: { name: 'small' },
    spec: { limits: [{ type: 'Container', max: { memory: '32Mi' } }] },
  });
  await kube.create(`/api/v1/namespaces/${quota}/resourcequotas`, {
    apiVersion: 'v1',
    kind: 'ResourceQuota',
    metadata: { name: 'cpu' },
    spec: { hard: { 'limits.cpu': '100' } },
  });
  const policy = `sim-no-agent-2-${policed}`;
  await podPolicy(
    t,
    policy,
    {
      expression:
        "object.spec.containers.all(c, c.image != 'registry.example/agent:2') && (!has(object.spec.initContainers) || object.spec.initContainers.all(c, c.image != 'registry.example/agent:2'))",
      message: 'the image registry.example/agent:2 is not allowed here',
    },
    { matchLabels: { 'sim-policy': 'strict' } },
  );
  await withTemplate(t, 'agent', agentNow);

  // The fleet: 500 Deployments and a Job.
  const fleet: { namespace: string; name: string; shape: Parameters<typeof deployment>[1] }[] = [];
  for (let i = 0; i < 200; i++) fleet.push({ namespace: plain, name: `web-${i}`, shape: i < 10 ? 'guaranteed' : i < 20 ? 'named-agent' : 'plain' });
  for (let i = 0; i < 100; i++) fleet.push({ namespace: strict, name: `web-${i}`, shape: 'restricted' });
  for (let i = 0; i < 100; i++) fleet.push({ namespace: limited, name: `web-${i}`, shape: 'no-shipper' });
  for (let i = 0; i < 50; i++) fleet.push({ namespace: quota, name: `web-${i}`, shape: 'no-shipper' });
  for (let i = 0; i < 50; i++) fleet.push({ namespace: policed, name: `web-${i}`, shape: 'plain' });
  const job = (name: string): Json => ({
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name },
    spec: {
      template: {
        spec: {
          restartPolicy: 'Never',
          containers: [
            { name: 'app', image: 'registry.example/app:1', resources: { requests: { cpu: '10m', memory: '8Mi' }, limits: { cpu: '50m', memory: '16Mi' } } },
          ],
        },
      },
    },
  });
  const started = Date.now();
  await createAll([
    ...fleet.map((w) => ({ path: `/apis/apps/v1/namespaces/${w.namespace}/deployments`, object: deployment(w.name, w.shape) })),
    { path: `/apis/batch/v1/namespaces/${plain}/jobs`, object: job('batch') },
  ]);
  const pods = async (namespace: string) => (await kube.get(`/api/v1/namespaces/${namespace}/pods`)).items.length as number;
  await eventually(
    'a pod of every Deployment',
    async () => (await Promise.all([plain, strict, limited, quota, policed].map(pods))).reduce((a, b) => a + b, 0) >= fleet.length + 1,
    12_000,
  );
  t.log(`fleet of ${fleet.length} Deployments and a Job created, each with its pod, in ${Math.round((Date.now() - started) / 1000)} s`);

  // Simulate the new revision: the folder as it would be applied (the installed examples and the new agent).
  const dir = await testFolder(t, 'simulate');
  for (const name of ['log-shipper.yaml', 'proxy.yaml']) await writeFile(join(dir, name), await readFile(join('templates', name), 'utf8'));
  await writeFile(join(dir, 'agent.yaml'), agentNext);
  const simulatedAt = Date.now();
  const run = await cli(['simulate', '--templates', dir, '-o', 'json', '--rate', '100', '--kubeconfig', file.admin.kubeconfig]);
  const seconds = (Date.now() - simulatedAt) / 1000;
  const report = JSON.parse(run.stdout) as SimulateReport;
  t.is(run.code, 3, run.stderr);
  const fleetNamespaces = new Set([plain, strict, limited, quota, policed]);
  const simulated = report.workloads.filter((w) => fleetNamespaces.has(w.namespace));
  t.is(simulated.length, fleet.length + 1);
  t.log(`simulate: ${report.workloads.length} workloads in ${seconds.toFixed(1)} s: ${JSON.stringify(report.summary.byVerdict)}`);
  // The text form's head, as docs/rollout.md shows it.
  t.log(formatSimulation(report).split('\n').slice(0, 10).join('\n'));
  const predictedRefused = new Set(
    simulated.filter((w) => w.verdict === 'refused' || w.verdict === 'not-fixed-point').map((w) => `${w.namespace}/${w.kind}/${w.name}`),
  );
  // Who refused, by namespace: the LimitRange, the quota, the policy.
  const by = (namespace: string) => [...new Set(simulated.filter((w) => w.namespace === namespace && w.verdict === 'refused').map((w) => w.refusedBy))];
  t.deepEqual(by(limited), ['limit-range']);
  t.deepEqual(by(quota), ['quota']);
  t.deepEqual(by(policed), ['policy']);
  t.deepEqual(by(plain), []);
  t.deepEqual(by(strict), []);
  t.like(
    simulated.find((w) => w.kind === 'Job'),
    { verdict: 'admitted', completes: true },
  );

  // The change for real: the new revision in force, every Deployment restarted, the Job run again.
  await kube.mergePatch(sidecarTemplatesPath('agent'), { spec: sidecarTemplate(agentNext).spec });
  const nextRevision = (await loadTemplateDir(dir)).byName.get('agent')!.hash;
  await everyReplica((status) => (status.templates.templates as string[]).includes(`agent@${nextRevision}`), 'every replica serving the new agent');
  const restartedAt = new Date().toISOString();
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < fleet.length) {
        const w = fleet[next++]!;
        await kube.strategicPatch(`/apis/apps/v1/namespaces/${w.namespace}/deployments/${w.name}`, {
          spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': restartedAt } } } },
        });
      }
    }),
  );
  await kube.create(`/apis/batch/v1/namespaces/${plain}/jobs`, job('batch-again'));

  // What happened: per Deployment, its new ReplicaSet made its pod, or recorded FailedCreate.
  const outcome = async (namespace: string): Promise<Map<string, 'admitted' | 'refused' | undefined>> => {
    const sets = (await kube.get(`/apis/apps/v1/namespaces/${namespace}/replicasets`)).items as Json[];
    const events = (await kube.get(`/api/v1/namespaces/${namespace}/events?fieldSelector=reason%3DFailedCreate`)).items as Json[];
    const failed = new Set(events.map((e) => `${e.involvedObject.kind}/${e.involvedObject.name}`));
    const out = new Map<string, 'admitted' | 'refused' | undefined>();
    for (const rs of sets) {
      if (rs.metadata.annotations?.['deployment.kubernetes.io/revision'] !== '2') continue;
      const owner = rs.metadata.ownerReferences?.[0]?.name as string;
      out.set(
        `${namespace}/Deployment/${owner}`,
        (rs.status?.replicas ?? 0) > 0 ? 'admitted' : failed.has(`ReplicaSet/${rs.metadata.name}`) ? 'refused' : undefined,
      );
    }
    if (namespace === plain) {
      const jobPods = (await kube.get(`/api/v1/namespaces/${namespace}/pods?labelSelector=job-name%3Dbatch-again`)).items.length;
      out.set(`${namespace}/Job/batch`, jobPods > 0 ? 'admitted' : failed.has('Job/batch-again') ? 'refused' : undefined);
    }
    return out;
  };
  const real = await eventually(
    'every restarted Deployment and the Job decided',
    async () => {
      const all = new Map<string, 'admitted' | 'refused' | undefined>();
      for (const ns of fleetNamespaces) for (const [k, v] of await outcome(ns)) all.set(k, v);
      return all.size === fleet.length + 1 && [...all.values()].every((v) => v !== undefined) ? all : undefined;
    },
    12_000,
  );
  const actualRefused = new Set([...real].filter(([, v]) => v === 'refused').map(([k]) => k));
  const differences = [...new Set([...predictedRefused, ...actualRefused])].filter((k) => predictedRefused.has(k) !== actualRefused.has(k));
  t.deepEqual(differences, [], 'simulate and the real rollout disagree on these');
  // The LimitRange's, the quota's and the policy's namespaces: 100 + 50 + 50.
  t.is(actualRefused.size, 200);
  t.log(`real rollout: ${actualRefused.size} of ${real.size} refused, as simulated`);
});

test('simulate as a CI gate: a bare pod is judged on the change (not on its name being taken), a workload refused before the change is refused-before, and exit 3 only for the change’s refusals', async (t) => {
  const { kube, file } = joinWorld();
  const namespace = await testNamespace(t, 'sim-gate', { 'sidecar-injector.io/injection': 'enabled', 'sim-gate': 'on' });
  await withTemplate(t, 'agent', agentNow);
  // A policy that refuses the legacy app whatever its sidecars.
  const policy = `sim-blocked-${namespace}`;
  await podPolicy(
    t,
    policy,
    { expression: "!has(object.metadata.labels) || !('blocked' in object.metadata.labels)", message: 'this app is blocked' },
    { matchLabels: { 'sim-gate': 'on' } },
  );
  const bare = await eventually('the bare pod created through the chain', async () => {
    const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'bare-one', labels: { app: 'bare' } },
      spec: {
        containers: [
          { name: 'app', image: 'registry.example/app:1', resources: { requests: { cpu: '10m', memory: '8Mi' }, limits: { cpu: '50m', memory: '16Mi' } } },
        ],
      },
    });
    return answer.status === 201 ? answer.body : undefined;
  });
  t.true(
    ((bare.spec.containers ?? []) as Json[]).some((c) => c.name === 'agent'),
    'the bare pod carries the agent in force',
  );
  await eventually('the policy in force', async () => {
    const probe = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { generateName: 'probe-', labels: { blocked: 'yes' } },
      spec: { containers: [{ name: 'app', image: 'registry.example/app:1' }] },
    });
    return probe.status === 422 || probe.status === 403;
  });
  const legacy = deployment('legacy', 'plain');
  legacy.spec.template.metadata.labels.blocked = 'yes';
  await kube.create(`/apis/apps/v1/namespaces/${namespace}/deployments`, legacy);

  const dir = await testFolder(t, 'simulate-gate');
  for (const name of ['log-shipper.yaml', 'proxy.yaml']) await writeFile(join(dir, name), await readFile(join('templates', name), 'utf8'));
  await writeFile(join(dir, 'agent.yaml'), agentNext);
  const run = await cli(['simulate', '--templates', dir, '-n', namespace, '-o', 'json', '--kubeconfig', file.admin.kubeconfig]);
  const report = JSON.parse(run.stdout) as SimulateReport;
  const byName = Object.fromEntries(report.workloads.map((w) => [`${w.kind}/${w.name}`, w]));
  t.like(byName['Pod/bare-one'], { verdict: 'admitted' });
  t.regex(byName['Pod/bare-one']!.sidecars.changed.join(), /^agent: [0-9a-f]{12} → [0-9a-f]{12}$/);
  t.like(byName['Deployment/legacy'], { verdict: 'refused-before', refusedBy: 'policy', refuser: policy });
  t.regex(byName['Deployment/legacy']!.message!, /this app is blocked/);
  t.is(run.code, 0, run.stderr);
  const strict = await cli(['simulate', '--templates', dir, '-n', namespace, '--strict', '--kubeconfig', file.admin.kubeconfig]);
  t.is(strict.code, 3);
  t.regex(strict.stdout, /^2 workload\(s\): admitted 1, refused-before 1\n {2}REFUSED-BEFORE by policy sim-blocked-/);
  t.log(strict.stdout.trim());
});

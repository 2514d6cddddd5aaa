/**
 * `sidecar-injector simulate` against the in-process API server and its admission chain (the
 * injector as its webhook, with the templates in force; a policy that refuses an image): per
 * workload, what the new templates change and the chain's verdict; the injector stands aside for
 * a simulation's dry run only; nothing else is sent for unchanged workloads; exit 3 on a refusal.
 */
import test from 'ava';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { simulate, type SimulateReport } from '../src/cli/simulate.js';
import { ConfigError } from '../src/errors.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { AdmissionChain } from './helpers/admission-chain.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { optedIn } from './helpers/pods.js';
import { startTestServer } from './helpers/server.js';
import { createReview } from './helpers/apiserver.js';
import { mutate } from '../src/admission/mutate.js';

const agent = (image: string) => `name: agent
failurePolicy: Ignore
containers:
  - name: agent
    image: ${image}
    resources:
      limits: {cpu: 100m, memory: 64Mi}
`;

async function world(t: { teardown: (fn: () => unknown) => void }) {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  const inForceDir = await mkdtemp(join(tmpdir(), 'simulate-now-'));
  await writeFile(join(inForceDir, 'agent.yaml'), agent('agent:1'));
  const nextDir = await mkdtemp(join(tmpdir(), 'simulate-next-'));
  await writeFile(join(nextDir, 'agent.yaml'), agent('blocked.example/agent:2'));
  api.applyTemplateText(agent('agent:1'));
  api.create('shop', { 'sidecar-injector.io/injection': 'enabled' });
  api.create('strict', { 'sidecar-injector.io/injection': 'enabled' });
  api.create('plain');
  const chain = new AdmissionChain();
  api.admission = chain;
  const inForce = await loadTemplateDir(inForceDir);
  const injector = await startTestServer({ templates: () => inForce, namespaces: optedIn('shop', 'strict') });
  t.teardown(() => injector.stop());
  chain.webhooks.push({ name: 'all.sidecar-injector.io', port: injector.port, path: '/mutate?timeout=10s' });
  // A policy in one namespace that refuses images of blocked.example.
  chain.validators.push((pod, namespace) =>
    namespace === 'strict' && JSON.stringify(pod.spec).includes('blocked.example')
      ? "pods \"x\" is forbidden: ValidatingAdmissionPolicy 'no-blocked-images' with binding 'no-blocked-images' denied request: images of blocked.example are not allowed"
      : undefined,
  );
  const template = (app: string, extra: Record<string, unknown> = {}) => ({
    template: { metadata: { labels: { app } }, spec: { containers: [{ name: app, image: `${app}:1` }], ...extra } },
  });
  api.addObject('deployments', { namespace: 'shop', name: 'web' }, template('web'));
  api.addObject('deployments', { namespace: 'strict', name: 'api' }, template('api'));
  api.addObject('deployments', { namespace: 'plain', name: 'quiet' }, template('quiet'));
  api.addObject('jobs', { namespace: 'shop', name: 'once' }, template('once', { restartPolicy: 'Never' }));
  const kubeconfig = join(nextDir, '..', `kubeconfig-${Math.random()}`);
  await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
  const run = async (...args: string[]) => {
    let out = '';
    let err = '';
    const code = await simulate([...args, '--kubeconfig', kubeconfig, '--kubernetes-version', '1.33'], {
      stdout: { write: (s: string) => (out += s) },
      stderr: { write: (s: string) => (err += s) },
    });
    return { code, out, err };
  };
  return { api, chain, run, nextDir, inForceDir };
}

test('per workload: the sidecars that change, the verdict of the cluster chain with who refused, a Job that still completes; exit 3 on a refusal', async (t) => {
  const { chain, run, nextDir } = await world(t);
  const { code, out } = await run('--templates', nextDir, '-o', 'json');
  t.is(code, 3);
  const report = JSON.parse(out) as SimulateReport;
  const byName = Object.fromEntries(report.workloads.map((w) => [`${w.namespace}/${w.kind}/${w.name}`, w]));
  t.like(byName['shop/Deployment/web'], { verdict: 'admitted', qos: { before: 'Burstable', after: 'Burstable' } });
  t.is(byName['shop/Deployment/web']!.sidecars.changed.length, 1);
  // The same limits (the agent's resources did not change): before and after alike; the app requests nothing.
  t.deepEqual(byName['shop/Deployment/web']!.resources.after, { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '100m', memory: '64Mi' } });
  t.deepEqual(byName['shop/Deployment/web']!.resources.before, byName['shop/Deployment/web']!.resources.after);
  t.regex(byName['shop/Deployment/web']!.sidecars.changed[0]!, /^agent: [0-9a-f]{12} → [0-9a-f]{12}$/);
  t.like(byName['strict/Deployment/api'], { verdict: 'refused', refusedBy: 'policy', refuser: 'no-blocked-images' });
  t.like(byName['shop/Job/once'], { verdict: 'admitted', completes: true });
  // A namespace that has not opted in: nothing changes, nothing is sent.
  t.like(byName['plain/Deployment/quiet'], { verdict: 'unchanged' });
  t.deepEqual(report.summary.byVerdict, { admitted: 2, refused: 1, unchanged: 1 });
  // Every dry run reached the injector, which stood aside; none was a real create. The refused
  // one was sent again as the templates in force make it (admitted: the change's doing).
  t.is(chain.calls.length, 4);
  t.true(chain.calls.every((c) => c.dryRun && c.pod.metadata.annotations['sidecar-injector.io/simulation'] === 'true'));
  // The text form: counts, the failure first with its refuser.
  const text = (await run('--templates', nextDir)).out;
  t.regex(
    text,
    /^4 workload\(s\): admitted 2, refused 1, unchanged 1\n {2}REFUSED by policy no-blocked-images: 1 workload\(s\), e\.g\.\n {4}Deployment strict\/api: /,
  );
});

test('the same templates change nothing; --max-failures stops early; bad flags are refused', async (t) => {
  const { run, nextDir, inForceDir } = await world(t);
  const same = await run('--templates', inForceDir, '-o', 'json');
  t.is(same.code, 0);
  t.true((JSON.parse(same.out) as SimulateReport).workloads.every((w) => w.verdict === 'unchanged'));
  const stopped = JSON.parse((await run('--templates', nextDir, '--max-failures', '1', '-o', 'json')).out) as SimulateReport;
  t.is(stopped.stoppedEarly, true);
  t.true(stopped.workloads.length < 4);
  t.is(stopped.workloads.at(-1)!.verdict, 'refused');
  await t.throwsAsync(run(), { instanceOf: ConfigError, message: /--templates DIR \(the new templates\) is required/ });
  await t.throwsAsync(run('--templates', nextDir, '--rate', '0'), { instanceOf: ConfigError, message: /--rate/ });
  await t.throwsAsync(run('--templates', nextDir, '--max-failures', 'x'), { instanceOf: ConfigError, message: /--max-failures/ });
});

test('the injector stands aside only for a dry run that carries the simulation annotation', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'simulate-aside-'));
  await writeFile(join(dir, 'agent.yaml'), agent('agent:1'));
  const set = await loadTemplateDir(dir);
  const deps = { templates: () => set, namespaces: optedIn('shop') };
  const pod = (annotations: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'p-', namespace: 'shop', annotations },
    spec: { containers: [{ name: 'app', image: 'app:1' }] },
  });
  const marked = { 'sidecar-injector.io/simulation': 'true' };
  const answer = (p: unknown, dryRun: boolean) => mutate(createReview(p as Record<string, unknown>, { namespace: 'shop', dryRun }), deps);
  t.like(await answer(pod(marked), true), { decision: 'allowed', reason: 'simulation' });
  // A real create with the same annotation gets its sidecar; so does a dry run without it.
  t.like(await answer(pod(marked), false), { decision: 'patched', injected: ['agent'] });
  t.like(await answer(pod({}), true), { decision: 'patched', injected: ['agent'] });
});

test('a bare pod is sent under a generated name (its own is taken); a workload refused with the templates in force too is refused-before, and exit 3 is for what the change refuses', async (t) => {
  const { api, chain, run, nextDir } = await world(t);
  api.addObject('pods', { namespace: 'shop', name: 'bare-one', labels: { app: 'bare' } }, { containers: [{ name: 'bare', image: 'bare:1' }] });
  api.addObject(
    'deployments',
    { namespace: 'shop', name: 'legacy' },
    {
      template: { metadata: { labels: { app: 'legacy', blocked: 'yes' } }, spec: { containers: [{ name: 'legacy', image: 'legacy:1' }] } },
    },
  );
  // A policy that refuses the legacy app whatever its sidecars: refused before the change as after.
  chain.validators.push((pod) =>
    pod.metadata?.labels?.blocked === 'yes'
      ? "pods \"x\" is forbidden: ValidatingAdmissionPolicy 'no-blocked-apps' with binding 'no-blocked-apps' denied request: this app is blocked"
      : undefined,
  );
  const { code, out } = await run('--templates', nextDir, '-n', 'shop', '-o', 'json');
  const report = JSON.parse(out) as SimulateReport;
  const byName = Object.fromEntries(report.workloads.map((w) => [`${w.kind}/${w.name}`, w]));
  t.like(byName['Pod/bare-one'], { verdict: 'admitted' });
  const bareSent = chain.calls.filter((c) => c.pod.metadata.labels?.app === 'bare');
  t.deepEqual(
    bareSent.map((c) => [c.pod.metadata.name, c.pod.metadata.generateName]),
    [[undefined, 'bare-one-']],
  );
  t.like(byName['Deployment/legacy'], { verdict: 'refused-before', refusedBy: 'policy', refuser: 'no-blocked-apps' });
  // The legacy pod was sent twice: as the new templates make it, then as those in force do.
  t.deepEqual(
    chain.calls.filter((c) => c.pod.metadata.labels?.app === 'legacy').map((c) => c.pod.spec.containers.find((x: any) => x.name === 'agent')?.image),
    ['blocked.example/agent:2', 'agent:1'],
  );
  t.is(code, 0, 'no refusal is the change’s doing');
  t.deepEqual(report.summary.byVerdict, { admitted: 3, 'refused-before': 1 });
  t.regex(
    (await run('--templates', nextDir, '-n', 'shop')).out,
    /^4 workload\(s\): admitted 3, refused-before 1\n {2}REFUSED-BEFORE by policy no-blocked-apps: 1 workload\(s\), e\.g\.\n/,
  );
  t.is((await run('--templates', nextDir, '-n', 'shop', '--strict')).code, 3, '--strict: any refusal');
});

/**
 * The audit's decisions on pod templates, attacked: forged ledgers and names at admission, stale
 * pods whose new pods a rule would leave out, orphaned sidecars and restarts, and the bound on
 * the look-ups when decisions are dropped.
 */
import test from 'ava';
import { mkdir, mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { audit } from '../src/cli/audit.js';
import { restartRecord } from '../src/pipeline/audit.js';
import { PodTemplateDecisions } from '../src/audit/pod-template-decisions.js';
import { admitPod } from '../src/pipeline/admit.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { optedIn, pod } from './helpers/pods.js';
import { templateSet } from './helpers/templates.js';

const shop = optedIn('shop');
const agent = { name: 'agent', image: 'example.com/agent:1.0' };

test('a pod’s own container named like a required sidecar refuses the pod; one a ledger claims (an earlier revision, a retired template) is left as it is', async (t) => {
  const set = await loadTemplateDir('templates');
  const own = { name: 'proxy', image: 'example.com/my-proxy', restartPolicy: 'Always' };
  const admit = (ledger?: object) =>
    admitPod(
      {
        pod: pod({
          annotations: {
            'sidecar-injector.io/templates': 'proxy',
            ...(ledger ? { 'sidecar-injector.io/status': JSON.stringify({ v: 1, templates: ledger }) } : {}),
          },
          initContainers: [own],
        }),
        namespace: 'shop',
        name: '',
      },
      { templates: () => set, namespaces: shop },
    );
  const refused = await admit();
  t.is(refused.reason, 'required-sidecar-unavailable');
  t.like(
    refused.decisions.find((d) => d.template === 'proxy'),
    { kind: 'cannot', rule: 'name-conflict' },
  );
  for (const ledger of [{ proxy: { hash: 'earlier00000', initContainers: ['proxy'] } }, { 'old-proxy': { hash: 'r1', initContainers: ['proxy'] } }]) {
    const kept = await admit(ledger);
    t.not(kept.decision, 'denied', JSON.stringify(ledger));
    const spec = kept.decision === 'patched' ? (kept.injection.pod as any).spec : undefined;
    if (spec)
      t.deepEqual(
        spec.initContainers.filter((c: any) => c.name === 'proxy'),
        [own],
        'left exactly as it is',
      );
  }
});

test('a ledger that names a sidecar the pod does not hold never puts a container that never exits into a Job’s pod', async (t) => {
  const set = templateSet({ name: 'agent', failurePolicy: 'Ignore', containers: [agent] });
  const ledger = JSON.stringify({ v: 1, templates: { agent: { hash: 'stale0000000', containers: ['agent'] } } });
  const job = pod({ annotations: { 'sidecar-injector.io/status': ledger }, spec: { restartPolicy: 'Never' } });
  for (const version of [undefined, { version: { major: 1, minor: 33 }, source: 'flag' as const, reason: 'flag' }]) {
    const outcome = await admitPod(
      { pod: job, namespace: 'shop', name: '' },
      { templates: () => set, namespaces: shop, ...(version ? { kubernetesVersion: () => version } : {}) },
    );
    if (outcome.decision !== 'patched') return t.fail(outcome.message);
    const spec = (outcome.injection.pod as any).spec;
    t.deepEqual(
      spec.containers.map((c: any) => c.name),
      ['web'],
    );
    t.deepEqual(
      spec.initContainers.map((c: any) => [c.name, c.restartPolicy]),
      [['agent', 'Always']],
    );
  }
  // Below 1.29: left out, not added as an ordinary container.
  const old = await admitPod(
    { pod: job, namespace: 'shop', name: '' },
    { templates: () => set, namespaces: shop, kubernetesVersion: () => ({ version: { major: 1, minor: 28 }, source: 'flag', reason: 'flag' }) },
  );
  t.is(old.reason, 'cluster-unfit');
  t.like(
    old.decisions.find((d) => d.template === 'agent'),
    { kind: 'left-out', rule: 'runs-to-completion' },
  );
});

async function cluster(t: { teardown: (fn: () => unknown) => void }, templateDoc: Record<string, unknown>, namespaceLabels: Record<string, string>) {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.create('shop', { 'sidecar-injector.io/injection': 'enabled', ...namespaceLabels });
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-audit-decisions-'));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
  await mkdir(join(dir, 'templates'));
  await writeFile(join(dir, 'templates', 'agent.yaml'), JSON.stringify(templateDoc));
  const run = async (args: string[]) => {
    let stdout = '';
    const code = await audit(
      ['--kubeconfig', kubeconfig, '--templates', join(dir, 'templates'), '--kubernetes-version', '1.33', ...args],
      { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: () => true } },
      {},
      async () => {},
    );
    return { code, stdout };
  };
  /** A Deployment, its ReplicaSet (with `spec` as pod template) and one pod with `annotations`. */
  const deployment = (name: string, spec: Record<string, unknown>, annotations: Record<string, string>) => {
    const top = { apiVersion: 'apps/v1', kind: 'Deployment', name, uid: `uid-${name}`, controller: true };
    const rs = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `${name}-1`, uid: `uid-${name}-1`, controller: true };
    const template = { template: { metadata: { labels: { app: name } }, spec } };
    api.addObject('deployments', { namespace: 'shop', name, uid: top.uid }, template);
    api.addObject('replicasets', { namespace: 'shop', name: rs.name, uid: rs.uid, ownerReferences: [top] }, template);
    api.addObject('pods', { namespace: 'shop', name: `${name}-1-a`, labels: { app: name }, annotations, ownerReferences: [rs] }, spec);
  };
  return { api, run, deployment };
}

test('a stale pod whose new pods a rule would refuse is left-out, never restarted', async (t) => {
  // A required agent without a seccomp profile, in a namespace that enforces restricted.
  const doc = {
    name: 'agent',
    containers: [{ ...agent, securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, runAsNonRoot: true } }],
  };
  const { api, run, deployment } = await cluster(t, doc, { 'pod-security.kubernetes.io/enforce': 'restricted' });
  const ledger = JSON.stringify({ v: 1, templates: { agent: { hash: 'old000000000', containers: ['agent'] } } });
  const app = {
    name: 'app',
    image: 'app',
    securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } },
  };
  deployment('web', { securityContext: { runAsNonRoot: true }, containers: [app] }, { 'sidecar-injector.io/status': ledger });
  const report = JSON.parse((await run(['-o', 'json'])).stdout);
  t.like(report.pods[0], { state: 'left-out', templates: [{ name: 'agent', state: 'left-out', rule: 'pod-security', have: 'old000000000' }] });
  await run(['--restart', 'missing,stale']);
  t.deepEqual(api.patches, []);
});

test('orphaned pods are restarted once for what they carry, and the record keeps earlier revisions of the same templates', async (t) => {
  const doc = { name: 'agent', failurePolicy: 'Ignore', injection: 'on-request', containers: [agent] };
  const { api, run, deployment } = await cluster(t, doc, {});
  // The pod carries a template that is no longer in force: its workload's pod template does too (GitOps), so restarts do not help.
  const ledger = JSON.stringify({ v: 1, templates: { retired: { hash: 'r1', containers: ['retired'] } } });
  deployment('web', { containers: [{ name: 'app', image: 'app' }], restartPolicy: 'Always' }, { 'sidecar-injector.io/status': ledger });
  for (let i = 0; i < 3; i++) await run(['--restart', 'orphaned']);
  t.is(api.patches.length, 1);
  t.is(api.patches[0]!.body.metadata.annotations['sidecar-injector.io/restarted-for'], 'retired@r1');
  const second = await run(['--restart', 'orphaned,stale']);
  t.true(second.stdout.includes('not restarted: deployment/web in shop (restarted once already for'), second.stdout);
  // The record keeps what earlier restarts were for, of the same templates only: a revision that comes back is not restarted for again.
  const owner = { namespace: 'shop', kind: 'Deployment', name: 'web', pods: 1, states: { stale: 1 }, restartFor: ['agent@2'] };
  t.is(restartRecord(owner, 'agent@1,gone@7'), 'agent@2,agent@1');
  t.is(restartRecord({ ...owner, restartFor: ['agent@1'] }, restartRecord(owner, 'agent@1')), 'agent@1,agent@2');
});

test('decisions dropped by a recount are never looked up: the look-ups stay bounded by the owners asked after it', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  const set = templateSet({ name: 'agent', failurePolicy: 'Ignore', containers: [agent] });
  for (let i = 0; i < 40; i++)
    api.addObject('replicasets', { namespace: 'shop', name: `rs-${i}`, uid: `u-${i}` }, { template: { spec: { containers: [{ name: 'a', image: 'a' }] } } });
  const decisions = new PodTemplateDecisions(await api.kubeConfig(), { templates: () => set, namespaces: shop });
  const ask = (i: number) =>
    decisions.decisionsFor({
      namespace: 'shop',
      name: `p-${i}`,
      owner: { apiVersion: 'apps/v1', kind: 'ReplicaSet', namespace: 'shop', name: `rs-${i}`, uid: `u-${i}` },
    });
  const first = Array.from({ length: 40 }, (_, i) => ask(i));
  decisions.clear();
  const again = await Promise.all(Array.from({ length: 40 }, (_, i) => ask(i)));
  await Promise.all(first);
  t.true(again.every((d) => d?.get('agent')?.kind === 'inject'));
  // At most the 8 reads under way when the decisions were dropped are read twice.
  t.true(api.objectGets.length <= 48, `${api.objectGets.length} reads`);
  // Remembered: asking again reads nothing.
  const before = api.objectGets.length;
  await Promise.all(Array.from({ length: 40 }, (_, i) => ask(i)));
  t.is(api.objectGets.length, before);
});

test('a template whose containers end on their own keeps them ordinary containers in a Job’s pod; the field is a boolean', async (t) => {
  const oneShot = templateSet({
    name: 'uploader',
    failurePolicy: 'Ignore',
    endsOnItsOwn: true,
    containers: [{ name: 'uploader', image: 'example.com/uploader:1' }],
  });
  const job = pod({ spec: { restartPolicy: 'OnFailure' } });
  for (const minor of [28, 33]) {
    const outcome = await admitPod(
      { pod: job, namespace: 'shop', name: '' },
      { templates: () => oneShot, namespaces: shop, kubernetesVersion: () => ({ version: { major: 1, minor }, source: 'flag', reason: 'flag' }) },
    );
    if (outcome.decision !== 'patched') return t.fail(outcome.message);
    t.deepEqual(
      (outcome.injection.pod as any).spec.containers.map((c: any) => c.name),
      ['web', 'uploader'],
    );
  }
  t.throws(() => templateSet({ name: 'bad', endsOnItsOwn: 'yes', containers: [agent] }), { message: /endsOnItsOwn.*must be true or false/s });
});

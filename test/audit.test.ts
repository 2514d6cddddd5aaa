/**
 * The auditor: every pod state, grouping by workload (pod → ReplicaSet → Deployment, Job →
 * CronJob, StatefulSet, bare pods), the text and JSON reports, --fail-on, one namespace, and
 * metadata-only lists read page by page from the in-process API server.
 */
import { applyExamples } from './helpers/templates.js';
import test from 'ava';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { audit } from '../src/cli/audit.js';
import { auditPod, reportOwner } from '../src/pipeline/audit.js';
import { readOwnersLookup, type OwnerFacts } from '../src/k8s/owners.js';
import { loadTemplateDir } from '../src/templates/load.js';
import type { TemplateSet } from '../src/templates/set.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';

const enabled = { 'sidecar-injector.io/injection': 'enabled', 'kubernetes.io/metadata.name': 'shop' };
let set: TemplateSet;
let shipper: string;
test.before(async () => {
  set = await loadTemplateDir('templates');
  shipper = set.byName.get('log-shipper')!.hash;
});
const ledger = (templates: Record<string, string>) =>
  JSON.stringify({ v: 1, templates: Object.fromEntries(Object.entries(templates).map(([name, hash]) => [name, { hash, containers: [name] }])) });
const meta = (labels: Record<string, string> = {}, annotations: Record<string, string> = {}) => ({ namespace: 'shop', name: 'p', labels, annotations });

test('every state of a pod, from its metadata and its ledger', (t) => {
  const judge = (labels: Record<string, string>, annotations: Record<string, string>, ns: Record<string, string> = enabled) =>
    auditPod(meta(labels, annotations), ns, set);
  t.deepEqual(judge({}, { 'sidecar-injector.io/status': ledger({ 'log-shipper': shipper }) }), {
    state: 'current',
    templates: [{ name: 'log-shipper', state: 'current', want: shipper, have: shipper }],
  });
  t.is(judge({}, { 'sidecar-injector.io/status': ledger({ 'log-shipper': '000000000000' }) }).state, 'stale');
  t.deepEqual(judge({}, {}), { state: 'missing', templates: [{ name: 'log-shipper', state: 'missing', want: shipper, have: null }] });
  // Requested proxy missing, log shipper current: the worst wins.
  t.is(judge({}, { 'sidecar-injector.io/templates': 'proxy', 'sidecar-injector.io/status': ledger({ 'log-shipper': shipper }) }).state, 'missing');
  // A template that no longer exists, or no longer selects the pod.
  t.deepEqual(judge({ 'logging.example.com/ship': 'false' }, { 'sidecar-injector.io/status': ledger({ 'log-shipper': shipper, retired: 'abc' }) }).templates, [
    { name: 'log-shipper', state: 'orphaned', want: null, have: shipper },
    { name: 'retired', state: 'orphaned', want: null, have: 'abc' },
  ]);
  t.deepEqual(judge({ 'logging.example.com/ship': 'false' }, {}), { state: 'not-selected', templates: [] });
  t.deepEqual(judge({}, {}, { 'kubernetes.io/metadata.name': 'shop' }), { state: 'not-selected', templates: [] });
  t.deepEqual(judge({ 'sidecar-injector.io/inject': 'disabled' }, {}), { state: 'opted-out', templates: [] });
  t.is(judge({}, { 'kubernetes.io/config.mirror': 'x' }).state, 'not-selected');
  // A label the ledger says we added does not select (as at admission).
  const proxyLedger = JSON.stringify({
    v: 1,
    templates: { proxy: { hash: set.byName.get('proxy')!.hash, initContainers: ['proxy'], labels: ['proxy.example.com/injected'] } },
  });
  t.is(
    judge({ 'proxy.example.com/injected': 'true' }, { 'sidecar-injector.io/status': proxyLedger, 'sidecar-injector.io/templates': 'proxy' }).templates.find(
      (x) => x.name === 'proxy',
    )!.state,
    'current',
  );
});

test('the workload of a pod: owners count only when an object of that kind, name and uid exists', (t) => {
  const read = new Map<string, OwnerFacts>([
    ['ReplicaSet/shop/web-5d8f', { uid: 'rs-1', owner: { apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'shop', name: 'web', uid: 'd-1' } }],
    ['Deployment/shop/web', { uid: 'd-1' }],
    ['Job/shop/backup-2901', { uid: 'j-1', owner: { apiVersion: 'batch/v1', kind: 'CronJob', namespace: 'shop', name: 'backup', uid: 'c-1' } }],
    ['ReplicaSet/shop/orphan-rs', { uid: 'rs-2' }],
    ['ReplicaSet/shop/stray-rs', { uid: 'rs-3', owner: { apiVersion: 'apps/v1', kind: 'Deployment', namespace: 'shop', name: 'gone', uid: 'd-9' } }],
    ['StatefulSet/shop/db', { uid: 's-1' }],
  ]);
  const listed = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job']);
  const of = (ownerReferences: unknown) => reportOwner({ namespace: 'shop', name: 'p-1', ownerReferences }, readOwnersLookup(read, listed));
  const controller = (kind: string, name: string, uid: string) => [{ apiVersion: 'apps/v1', kind, name, uid, controller: true }];
  t.deepEqual(of(controller('ReplicaSet', 'web-5d8f', 'rs-1')), { kind: 'Deployment', name: 'web' });
  t.deepEqual(of(controller('Job', 'backup-2901', 'j-1')), { kind: 'CronJob', name: 'backup' });
  t.deepEqual(of(controller('ReplicaSet', 'orphan-rs', 'rs-2')), { kind: 'ReplicaSet', name: 'orphan-rs' });
  // A ReplicaSet naming a Deployment that is not there is its own workload.
  t.deepEqual(of(controller('ReplicaSet', 'stray-rs', 'rs-3')), { kind: 'ReplicaSet', name: 'stray-rs' });
  t.deepEqual(of(controller('StatefulSet', 'db', 's-1')), { kind: 'StatefulSet', name: 'db' });
  // A claim no object backs: another uid, a name that does not exist, a kind with a newline.
  t.deepEqual(of(controller('StatefulSet', 'db', 'forged')), { kind: 'Pod', name: 'p-1' });
  t.deepEqual(of(controller('Deployment', 'payments', 'x')), { kind: 'Pod', name: 'p-1' });
  t.deepEqual(of(controller('Deploy\nment', 'web', 'd-1')), { kind: 'Pod', name: 'p-1' });
  // A custom controller is taken as named (and never restarted).
  t.deepEqual(of(controller('Rollout', 'canary', 'r-1')), { kind: 'Rollout', name: 'canary' });
  t.deepEqual(of(undefined), { kind: 'Pod', name: 'p-1' });
  t.deepEqual(of([{ kind: 'Node', name: 'n1', controller: false }]), { kind: 'Pod', name: 'p-1' });
  t.deepEqual(of('garbage'), { kind: 'Pod', name: 'p-1' });
});

async function cluster(t: { teardown: (fn: () => unknown) => void }) {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.create('shop', { 'sidecar-injector.io/injection': 'enabled' });
  api.create('plain');
  const owned = (kind: string, name: string) => [
    { apiVersion: kind === 'Job' || kind === 'CronJob' ? 'batch/v1' : 'apps/v1', kind, name, uid: `u-${name}`, controller: true },
  ];
  api.addObject('deployments', { namespace: 'shop', name: 'web', uid: 'u-web' });
  api.addObject('statefulsets', { namespace: 'shop', name: 'db', uid: 'u-db' });
  api.addObject('replicasets', { namespace: 'shop', name: 'web-5d8f', uid: 'u-web-5d8f', ownerReferences: owned('Deployment', 'web') });
  api.addObject('jobs', { namespace: 'shop', name: 'backup-2901', uid: 'u-backup-2901', ownerReferences: owned('CronJob', 'backup') });
  const spec = { containers: [{ name: 'app', image: 'app:1' }] };
  const pod = (name: string, ownerReferences: unknown, annotations: Record<string, string> = {}, labels: Record<string, string> = {}, namespace = 'shop') =>
    api.addObject('pods', { namespace, name, labels, annotations, ...(ownerReferences ? { ownerReferences } : {}) }, spec);
  pod('web-5d8f-a', owned('ReplicaSet', 'web-5d8f'), { 'sidecar-injector.io/status': ledger({ 'log-shipper': shipper }) });
  pod('web-5d8f-b', owned('ReplicaSet', 'web-5d8f'), { 'sidecar-injector.io/status': ledger({ 'log-shipper': '000000000000' }) });
  pod('web-5d8f-c', owned('ReplicaSet', 'web-5d8f'));
  pod('db-0', owned('StatefulSet', 'db'), { 'sidecar-injector.io/status': ledger({ 'log-shipper': shipper }) });
  pod('backup-2901-x', owned('Job', 'backup-2901'));
  pod('debug', undefined);
  pod('quiet', undefined, {}, { 'sidecar-injector.io/inject': 'disabled' });
  pod('elsewhere', undefined, {}, {}, 'plain');
  applyExamples(api);
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-audit-'));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
  return { api, kubeconfig };
}

async function run(args: string[]) {
  let stdout = '';
  const code = await audit(args, { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: () => true } });
  return { code, stdout };
}

test('audit -o json: every pod with its owner and templates, every workload with its counts, from metadata-only lists', async (t) => {
  const { api, kubeconfig } = await cluster(t);
  const { code, stdout } = await run(['--kubeconfig', kubeconfig, '-o', 'json']);
  t.is(code, 0);
  const report = JSON.parse(stdout);
  t.deepEqual(Object.keys(report), ['pods', 'owners']);
  const byName = Object.fromEntries(report.pods.map((p: any) => [p.name, p]));
  t.deepEqual(byName['web-5d8f-b'], {
    namespace: 'shop',
    name: 'web-5d8f-b',
    owner: { kind: 'Deployment', name: 'web' },
    state: 'stale',
    templates: [{ name: 'log-shipper', state: 'stale', want: shipper, have: '000000000000' }],
  });
  t.deepEqual(
    report.pods.map((p: any) => [p.name, p.owner.kind, p.owner.name, p.state]),
    [
      ['elsewhere', 'Pod', 'elsewhere', 'not-selected'],
      ['backup-2901-x', 'CronJob', 'backup', 'missing'],
      ['db-0', 'StatefulSet', 'db', 'current'],
      ['debug', 'Pod', 'debug', 'missing'],
      ['quiet', 'Pod', 'quiet', 'opted-out'],
      ['web-5d8f-a', 'Deployment', 'web', 'current'],
      ['web-5d8f-b', 'Deployment', 'web', 'stale'],
      ['web-5d8f-c', 'Deployment', 'web', 'missing'],
    ],
  );
  t.deepEqual(
    report.owners.find((o: any) => o.name === 'web'),
    { namespace: 'shop', kind: 'Deployment', name: 'web', pods: 3, states: { current: 1, stale: 1, missing: 1 }, restartFor: [`log-shipper@${shipper}`] },
  );
  // Pods, ReplicaSets and Jobs were asked as metadata only.
  t.true(api.workloadAccepts.length >= 6);
  for (const accept of api.workloadAccepts) t.true(accept.startsWith('application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1'));
  t.deepEqual(api.notAcceptable, []);
});

test('audit text: one line per workload with the command that fixes it; --fail-on exits 3; -n limits to one namespace', async (t) => {
  const { kubeconfig } = await cluster(t);
  const { code, stdout } = await run(['--kubeconfig', kubeconfig]);
  t.is(code, 0);
  const lines = stdout.split('\n');
  t.regex(lines[0]!, /^NAMESPACE\s+WORKLOAD\s+PODS\s+STATES\s+FIX$/);
  t.true(lines.some((l) => /^shop\s+deployment\/web\s+3\s+missing 1, stale 1, current 1\s+kubectl -n shop rollout restart deployment\/web$/.test(l)));
  t.true(lines.some((l) => /^shop\s+statefulset\/db\s+1\s+current 1\s+-$/.test(l)));
  t.true(lines.some((l) => /^shop\s+pod\/debug\s+1\s+missing 1\s+recreate pod debug/.test(l)));
  t.true(lines.some((l) => /^shop\s+cronjob\/backup\s+1\s+missing 1\s+the next run of cronjob\/backup gets them$/.test(l)));
  t.true(stdout.endsWith('\n8 pods: missing 3, stale 1, current 2, not-selected 1, opted-out 1\n'));
  t.is((await run(['--kubeconfig', kubeconfig, '--fail-on', 'missing,stale'])).code, 3);
  t.is((await run(['--kubeconfig', kubeconfig, '--fail-on', 'orphaned'])).code, 0);
  const one = JSON.parse((await run(['--kubeconfig', kubeconfig, '-n', 'plain', '-o', 'json'])).stdout);
  t.deepEqual(
    one.pods.map((p: any) => [p.name, p.state]),
    [['elsewhere', 'not-selected']],
  );
});

test('audit on an empty templates folder (the CronJob before any template is applied): no pod missing or stale (those with a ledger orphaned), exit 0, said on stderr', async (t) => {
  const { kubeconfig } = await cluster(t);
  const empty = await mkdtemp(join(tmpdir(), 'sidecar-injector-audit-empty-'));
  let stdout = '';
  let stderr = '';
  const code = await audit(['--kubeconfig', kubeconfig, '--templates', empty, '-o', 'json', '--fail-on', 'missing,stale'], {
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  });
  t.is(code, 0);
  t.is(stderr, `audit: no templates in ${empty}: no pod can lack a sidecar\n`);
  const states = new Set((JSON.parse(stdout).pods as { state: string }[]).map((p) => p.state));
  // Pods whose ledger names a template no longer there carry a retired sidecar: orphaned, never missing.
  t.deepEqual([...states].sort(), ['not-selected', 'opted-out', 'orphaned']);
});

test('audit reads a large cluster page by page', async (t) => {
  const { api, kubeconfig } = await cluster(t);
  for (let i = 0; i < 1200; i++)
    api.addObject('pods', { namespace: 'shop', name: `bulk-${i}`, labels: {}, annotations: {} }, { containers: [{ name: 'a', image: 'a' }] });
  const pagesBefore = api.workloadPages;
  const report = JSON.parse((await run(['--kubeconfig', kubeconfig, '-o', 'json'])).stdout);
  t.is(report.pods.length, 1208);
  t.true(api.workloadPages - pagesBefore >= 5, 'pods came in pages of 500, plus ReplicaSets and Jobs');
});

test('audit refuses bad options with a message', async (t) => {
  await t.throwsAsync(run(['-o', 'yaml']), { message: /-o: expected text or json \(got "yaml"\)/ });
  await t.throwsAsync(run(['--fail-on', 'broken']), {
    message: /--fail-on: "broken" is not a state \(expected missing, stale, orphaned, left-out, current, not-selected, opted-out\)/,
  });
});

test('audit --restart restarts Deployments, StatefulSets and DaemonSets as kubectl rollout restart does, paced; lists the rest; --dry-run touches nothing', async (t) => {
  const { api, kubeconfig } = await cluster(t);
  const delays: number[] = [];
  const runWith = async (args: string[]) => {
    let stdout = '';
    let stderr = '';
    const code = await audit(
      args,
      { stdout: { write: (s: string) => (stdout += s) }, stderr: { write: (s: string) => (stderr += s) } },
      {},
      async (ms) => void delays.push(ms),
    );
    return { code, stdout, stderr };
  };
  const dry = await runWith(['--kubeconfig', kubeconfig, '--restart', 'missing,stale', '--dry-run']);
  t.is(api.patches.length, 0);
  t.true(dry.stdout.includes('would restart deployment/web in shop\n'));
  t.true(dry.stdout.includes('not restarted: pod/debug in shop (a bare pod: recreate it yourself)\n'));
  t.true(dry.stdout.includes('not restarted: cronjob/backup in shop (a CronJob is never restarted: the next run of cronjob/backup gets them)\n'));
  // db is current: not restarted at all.
  t.false(/restart statefulset\/db/.test(dry.stdout));
  // A stale StatefulSet joins; a Deployment gone meanwhile is reported, not fatal.
  api.addObject(
    'pods',
    {
      namespace: 'shop',
      name: 'cache-0',
      labels: {},
      annotations: {},
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'cache', uid: 'c', controller: true }],
    },
    {},
  );
  api.addObject(
    'pods',
    {
      namespace: 'shop',
      name: 'gone-1',
      labels: {},
      annotations: {},
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'DaemonSet', name: 'gone', uid: 'g', controller: true }],
    },
    {},
  );
  // The StatefulSet and the DaemonSet exist (a pod's owner counts only then); the DaemonSet is gone by the time of the patch.
  api.addObject('statefulsets', { namespace: 'shop', name: 'cache', uid: 'c' });
  api.addObject('daemonsets', { namespace: 'shop', name: 'gone', uid: 'g' });
  api.goneWorkloads.add('gone');
  // A bare pod claiming the healthy StatefulSet db (another uid) never makes db restart.
  api.addObject(
    'pods',
    {
      namespace: 'shop',
      name: 'impostor',
      labels: {},
      annotations: {},
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: 'forged', controller: true }],
    },
    {},
  );
  const real = await runWith(['--kubeconfig', kubeconfig, '--restart', 'missing', '--max-per-minute', '30']);
  t.true(real.stdout.includes('not restarted: pod/impostor in shop (a bare pod: recreate it yourself)\n'));
  t.is(real.code, 0, real.stdout + real.stderr);
  t.deepEqual(
    api.patches.map((p) => p.path),
    ['/apis/apps/v1/namespaces/shop/deployments/web', '/apis/apps/v1/namespaces/shop/statefulsets/cache'],
  );
  for (const p of api.patches) {
    t.is(p.contentType, 'application/strategic-merge-patch+json');
    t.deepEqual(Object.keys(p.body.spec.template.metadata.annotations), ['kubectl.kubernetes.io/restartedAt']);
    t.false(Number.isNaN(Date.parse(p.body.spec.template.metadata.annotations['kubectl.kubernetes.io/restartedAt'])));
  }
  t.regex(real.stderr, /could not restart daemonset\/gone in shop: PATCH \/apis\/apps\/v1\/namespaces\/shop\/daemonsets\/gone: HTTP 404/);
  // 30 a minute: two seconds between restarts (daemonset/gone, deployment/web, statefulset/cache), none before the first.
  t.deepEqual(delays, [2000, 2000]);
  await t.throwsAsync(runWith(['--dry-run']), { message: /--dry-run goes with --restart/ });
  await t.throwsAsync(runWith(['--restart', 'missing', '--max-per-minute', '0']), { message: /--max-per-minute: expected a whole number from 1 to 60000/ });
});

/**
 * The server's auditor and its leader election, against the in-process API server: a
 * metadata-only list and watch of pods, the gauge per namespace, template and state kept exact
 * through additions, changes, deletions and a template change; a Warning Event when a pod goes
 * missing; one leader at a time, and another taking over when it stops or dies.
 */
import test from 'ava';
import { pino } from 'pino';
import { PodAuditor } from '../src/audit/pod-auditor.js';
import { LeaderElector } from '../src/kube-api/lease.js';
import { loadTemplateDir } from '../src/templates/load.js';
import type { AdmissionEvent } from '../src/pipeline/admission-events.js';
import type { TemplateSet } from '../src/templates/set.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { FakeClock } from './helpers/fake-clock.js';
import { until } from './helpers/until.js';
import { templateSet } from './helpers/templates.js';

const silent = pino({ level: 'silent' });

function fakeGauge() {
  const values = new Map<string, number>();
  const key = (l: { namespace: string; template: string; state: string }) => `${l.namespace}/${l.template}/${l.state}`;
  return { values, set: (l: Parameters<typeof key>[0], v: number) => values.set(key(l), v), remove: (l: Parameters<typeof key>[0]) => values.delete(key(l)) };
}

test('the gauge follows every pod through list, watch, change, deletion and a template change; a missing pod is a Warning Event on its owner', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const set = await loadTemplateDir('templates');
  const hash = set.byName.get('log-shipper')!.hash;
  const ledger = JSON.stringify({ v: 1, templates: { 'log-shipper': { hash, containers: ['log-shipper'] } } });
  const owner = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f', uid: 'rs-1', controller: true }];
  api.addObject(
    'pods',
    { namespace: 'shop', name: 'a', labels: {}, annotations: { 'sidecar-injector.io/status': ledger }, ownerReferences: owner },
    { containers: [] },
  );
  api.addObject('pods', { namespace: 'shop', name: 'b', labels: {}, annotations: {}, ownerReferences: owner }, { containers: [] });
  api.addObject('pods', { namespace: 'plain', name: 'c', labels: {}, annotations: {} }, { containers: [] });
  let templates: TemplateSet = set;
  const gauge = fakeGauge();
  const events: AdmissionEvent[] = [];
  const auditor = new PodAuditor({
    kubeConfig: await api.kubeConfig(),
    log: silent,
    templates: () => templates,
    namespaceLabels: (ns) => (ns === 'shop' ? { 'sidecar-injector.io/injection': 'enabled', 'kubernetes.io/metadata.name': ns } : undefined),
    gauge,
    onMissing: (e) => events.push(e),
    backoffInitialMs: 5,
  });
  t.teardown(async () => {
    auditor.stop();
    await api.stop();
  });
  auditor.start();
  await until(() => auditor.status().synced);
  t.deepEqual(Object.fromEntries(gauge.values), { 'shop/log-shipper/current': 1, 'shop/log-shipper/missing': 1 });
  t.deepEqual(auditor.status(), { pods: 3, synced: true, states: { current: 1, missing: 1, 'not-selected': 1 }, oversizedLedgers: 0 });
  // Pods already missing at start are counted, not announced.
  t.deepEqual(events, []);
  // Asked as metadata only, the list in the List form and the watch in the single form; nothing answered 406.
  await until(() => api.workloadAccepts.length >= 2);
  t.true(api.workloadAccepts[0]!.startsWith('application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,'));
  t.true(api.workloadAccepts[1]!.startsWith('application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,'));
  t.deepEqual(api.notAcceptable, []);
  // A new pod without its sidecar: counted, and a Warning Event on its owner.
  api.addObject('pods', { namespace: 'shop', name: 'd', labels: {}, annotations: {}, ownerReferences: owner }, { containers: [] });
  await until(() => gauge.values.get('shop/log-shipper/missing') === 2);
  // The event follows once its workload is looked up (the ReplicaSet is not there: the event stays on it).
  await until(() => events.length === 1);
  t.like(events[0], {
    type: 'Warning',
    reason: 'SidecarsMissing',
    regarding: { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f', namespace: 'shop', uid: 'rs-1' },
  });
  t.is(events[0]!.note, 'pod d lacks log-shipper; restart ReplicaSet/web-5d8f as its controller allows');
  // With its ReplicaSet readable (and owned by a Deployment, by uid), the event goes on the Deployment.
  api.addObject('replicasets', {
    namespace: 'shop',
    name: 'api-7c9d',
    uid: 'rs-2',
    ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'api', uid: 'd-2', controller: true }],
  });
  api.addObject(
    'pods',
    {
      namespace: 'shop',
      name: 'e',
      labels: {},
      annotations: {},
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'api-7c9d', uid: 'rs-2', controller: true }],
    },
    { containers: [] },
  );
  await until(() => events.length === 2);
  t.like(events[1], { reason: 'SidecarsMissing', regarding: { apiVersion: 'apps/v1', kind: 'Deployment', name: 'api', namespace: 'shop', uid: 'd-2' } });
  t.is(events[1]!.note, 'pod e lacks log-shipper; kubectl -n shop rollout restart deployment/api');
  api.deletePod('shop', 'e');
  // A Job's pod: the event goes on the CronJob that owns the Job.
  api.addObject('jobs', {
    namespace: 'shop',
    name: 'backup-2901',
    uid: 'j-1',
    ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: 'backup', uid: 'c-1', controller: true }],
  });
  api.addObject(
    'pods',
    {
      namespace: 'shop',
      name: 'f',
      labels: {},
      annotations: {},
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'backup-2901', uid: 'j-1', controller: true }],
    },
    { containers: [] },
  );
  await until(() => events.length === 3);
  t.like(events[2], { reason: 'SidecarsMissing', regarding: { apiVersion: 'batch/v1', kind: 'CronJob', name: 'backup', namespace: 'shop', uid: 'c-1' } });
  t.is(events[2]!.note, 'pod f lacks log-shipper; the next run of cronjob/backup gets them');
  api.deletePod('shop', 'f');
  // b gets its ledger (a stale one), d is deleted.
  api.updatePod('shop', 'b', { annotations: { 'sidecar-injector.io/status': ledger.replace(hash, '000000000000') } });
  api.deletePod('shop', 'd');
  await until(() => !gauge.values.has('shop/log-shipper/missing'));
  t.deepEqual(Object.fromEntries(gauge.values), { 'shop/log-shipper/current': 1, 'shop/log-shipper/stale': 1 });
  // The template changes: every pod is judged again.
  templates = templateSet({ name: 'log-shipper', containers: [{ name: 'log-shipper', image: 'other:2' }] });
  auditor.templatesChanged();
  t.deepEqual(Object.fromEntries(gauge.values), { 'shop/log-shipper/stale': 2 });
  auditor.stop();
  t.is(gauge.values.size, 0, 'a replica that stops auditing leaves no series behind');
});

test('leader election: one leader; a stopped leader hands over at the next try, a dead one after the lease expires', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  const clock = new FakeClock();
  // Defaults: a 15 s lease, renewed every 2 s, given up 10 s after the last renewal sent.
  const elector = async (identity: string, on = clock) =>
    new LeaderElector({ kubeConfig: await api.kubeConfig(), log: silent, namespace: 'sidecar-injector', name: 'audit', identity, clock: on });
  // Each elector holds one retry timer between its tries, and a leader one deadline timer: a
  // count of timers is how the test knows that every try in flight has finished.
  const tried = (timers: number) => until(() => clock.pending === timers, `${timers} timers`);
  const a = await elector('injector-a');
  const b = await elector('injector-b');
  a.start();
  await until(() => a.isLeader(), 'a leads');
  b.start();
  await tried(3);
  // b sees a renewing: it never leads while a does, however long.
  for (let i = 0; i < 10; i++) {
    await clock.advance(2000);
    await tried(3);
    t.false(b.isLeader());
  }
  t.is(api.leases.get('sidecar-injector/audit')!.spec.holderIdentity, 'injector-a');
  // A stop releases the lease: b takes over at its next try, not when the lease would expire.
  t.is(a.lastRenewalBeforeMe(), undefined, 'a created the lease: nobody led before it');
  const aLastRenewal = api.leases.get('sidecar-injector/audit')!.spec.renewTime as string;
  await a.stop();
  t.false(a.isLeader());
  await clock.advance(2000);
  await until(() => b.isLeader(), 'b leads');
  t.is(b.lastRenewalBeforeMe()?.getTime(), Date.parse(aLastRenewal), 'b knows when a last said it was alive');
  t.is(api.leases.get('sidecar-injector/audit')!.spec.holderIdentity, 'injector-b');
  t.is(api.leases.get('sidecar-injector/audit')!.spec.leaseTransitions, 1);
  await tried(2);
  // b dies (its time stops: it never renews, never releases): a new replica on a clock of its
  // own waits for the lease to expire, then leads.
  const own = new FakeClock();
  const c = await elector('injector-c', own);
  c.start();
  await until(() => own.pending === 1, 'c tried');
  let waited = 0;
  while (!c.isLeader()) {
    await own.advance(2000);
    waited += 2000;
    await until(() => c.isLeader() || own.pending === 1, 'c tried');
  }
  t.true(waited >= 15_000 && waited <= 18_000, `took over after ${waited} ms of a record unchanged (the lease is 15 s)`);
  t.is(api.leases.get('sidecar-injector/audit')!.spec.holderIdentity, 'injector-c');
  await c.stop();
});

test('what a pod says about itself is bounded: forged ledger names, huge ledgers and owners never become series or state', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const set = await loadTemplateDir('templates');
  const hash = set.byName.get('log-shipper')!.hash;
  const forged = JSON.stringify({
    v: 1,
    templates: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`x${i}=current,log-shipper`, { hash, containers: ['a'] }])),
  });
  api.addObject(
    'pods',
    { namespace: 'shop', name: 'forger', labels: { 'sidecar-injector.io/inject': 'disabled' }, annotations: { 'sidecar-injector.io/status': forged } },
    {},
  );
  // Names a template could have, but no template in force has: one "(other)" series, counted once.
  const retired = JSON.stringify({ v: 1, templates: Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`retired-${i}`, { hash, containers: ['a'] }])) });
  api.addObject(
    'pods',
    { namespace: 'shop', name: 'retiree', labels: { 'sidecar-injector.io/inject': 'disabled' }, annotations: { 'sidecar-injector.io/status': retired } },
    {},
  );
  api.addObject(
    'pods',
    { namespace: 'shop', name: 'huge', labels: {}, annotations: { 'sidecar-injector.io/status': `{"v":1,"templates":{}}${' '.repeat(70_000)}` } },
    {},
  );
  const owner = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'x'.repeat(100_000), uid: 'u', controller: true }];
  api.addObject('pods', { namespace: 'shop', name: 'long-owner', labels: {}, annotations: {}, ownerReferences: owner }, {});
  const gauge = fakeGauge();
  const events: AdmissionEvent[] = [];
  const auditor = new PodAuditor({
    kubeConfig: await api.kubeConfig(),
    log: silent,
    templates: () => set,
    namespaceLabels: () => ({ 'sidecar-injector.io/injection': 'enabled' }),
    gauge,
    onMissing: (e) => events.push(e),
  });
  t.teardown(async () => {
    auditor.stop();
    await api.stop();
  });
  auditor.start();
  await until(() => auditor.status().synced);
  // The forger's names could be no template's (they hold "=" and ","): dropped, never "log-shipper current".
  t.deepEqual(Object.fromEntries(gauge.values), { 'shop/(other)/orphaned': 1, 'shop/log-shipper/missing': 2 });
  t.is(auditor.status().oversizedLedgers, 1);
  // A pod with an owner no object could have gets its event on the namespace.
  api.addObject('pods', { namespace: 'shop', name: 'long-owner-2', labels: {}, annotations: {}, ownerReferences: owner }, {});
  await until(() => events.length === 1);
  t.deepEqual(events[0]!.regarding, { apiVersion: 'v1', kind: 'Namespace', namespace: 'shop', name: 'shop' });
});

test('a leader whose API server stops answering steps down within the renew deadline, before anyone could take over', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  const clock = new FakeClock();
  const a = new LeaderElector({ kubeConfig: await api.kubeConfig(), log: silent, namespace: 'ns', name: 'audit', identity: 'a', clock });
  a.start();
  await until(() => a.isLeader() && clock.pending === 2, 'a leads');
  api.hangLeases = true;
  // The next renewal hangs; leadership ends 10 s after the last renewal was sent, not a moment later.
  await clock.advance(9999);
  t.true(a.isLeader());
  await clock.advance(1);
  t.false(a.isLeader(), 'stepped down at the renew deadline, 5 s before the 15 s lease could pass to another');
  api.hangLeases = false;
  await a.stop();
});

test('the auditor decides as admission does: a pod a rule leaves out is left-out with the rule, never missing, and draws no SidecarsMissing Event', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const set = await loadTemplateDir('templates');
  const namespaces = new Map<string, Record<string, string>>([['shop', { 'sidecar-injector.io/injection': 'enabled', 'kubernetes.io/metadata.name': 'shop' }]]);
  const rs = (name: string) => [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name, uid: `uid-${name}`, controller: true }];
  const template = (spec: Record<string, unknown>) => ({ template: { metadata: { labels: { app: 'x' } }, spec } });
  // A Windows Deployment's ReplicaSet (the bundled templates are linux-only), a Job at 1.28
  // (the log shipper would be a container that never exits), and an ordinary Deployment.
  api.addObject(
    'replicasets',
    { namespace: 'shop', name: 'win-1', uid: 'uid-win-1' },
    template({ os: { name: 'windows' }, containers: [{ name: 'w', image: 'w' }] }),
  );
  api.addObject(
    'jobs',
    { namespace: 'shop', name: 'batch-1', uid: 'uid-batch-1' },
    template({ restartPolicy: 'Never', containers: [{ name: 'b', image: 'b' }] }),
  );
  api.addObject('replicasets', { namespace: 'shop', name: 'web-1', uid: 'uid-web-1' }, template({ containers: [{ name: 'web', image: 'nginx' }] }));
  const events: AdmissionEvent[] = [];
  const gauge = fakeGauge();
  const auditor = new PodAuditor({
    kubeConfig: await api.kubeConfig(),
    log: silent,
    templates: () => set,
    namespaceLabels: (ns) => namespaces.get(ns),
    gauge,
    onMissing: (e) => events.push(e),
    backoffInitialMs: 5,
    decide: {
      namespaces: {
        kind: 'test',
        labelsOf: async (ns) => namespaces.get(ns) ?? { 'kubernetes.io/metadata.name': ns },
        isReady: () => true,
        status: () => ({}),
      },
      kubernetesVersion: () => ({ version: { major: 1, minor: 28 }, source: 'flag', reason: '--kubernetes-version 1.28 was given' }),
    },
  });
  const confirmed: string[] = [];
  auditor.on('confirmed', (key: string, state: string) => confirmed.push(`${key}=${state}`));
  t.teardown(async () => {
    auditor.stop();
    await api.stop();
  });
  auditor.start();
  await until(() => auditor.status().synced);
  for (const [name, owner] of [
    ['win-1-a', rs('win-1')],
    ['batch-1-a', [{ apiVersion: 'batch/v1', kind: 'Job', name: 'batch-1', uid: 'uid-batch-1', controller: true }]],
    ['web-1-a', rs('web-1')],
  ] as const)
    api.addObject('pods', { namespace: 'shop', name, labels: { app: 'x' }, annotations: {}, ownerReferences: owner }, { containers: [] });
  await until(() => confirmed.length === 3);
  t.deepEqual(confirmed.sort(), ['shop/batch-1-a=left-out', 'shop/web-1-a=missing', 'shop/win-1-a=not-selected']);
  t.deepEqual(Object.fromEntries(gauge.values), { 'shop/log-shipper/left-out': 1, 'shop/log-shipper/missing': 1 });
  t.deepEqual(auditor.status().states, { 'left-out': 1, missing: 1, 'not-selected': 1 });
  // Only the pod a new pod of its workload would really differ from is announced.
  await until(() => events.length === 1);
  t.regex(events[0]!.note, /^pod web-1-a lacks log-shipper/);
});

test('a missing pod no audit saw created (created after the last auditor last renewed, or in that second, while every replica was down) gets its Event at the first list; older ones are counted, not announced', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const set = await loadTemplateDir('templates');
  const owner = (name: string) => [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name, uid: `rs-${name}`, controller: true }];
  // Created before the last auditor's last renewal: that auditor saw it (and said so then).
  api.addObject('pods', { namespace: 'shop', name: 'seen', labels: {}, annotations: {}, ownerReferences: owner('old') }, { containers: [] });
  // Created while no replica ran: after it.
  api.addObject(
    'pods',
    { namespace: 'shop', name: 'unseen', labels: {}, annotations: {}, ownerReferences: owner('new'), creationTimestamp: '2026-12-01T10:00:00Z' },
    { containers: [] },
  );
  const events: AdmissionEvent[] = [];
  const auditor = new PodAuditor({
    kubeConfig: await api.kubeConfig(),
    log: silent,
    templates: () => set,
    namespaceLabels: (ns) => (ns === 'shop' ? { 'sidecar-injector.io/injection': 'enabled', 'kubernetes.io/metadata.name': ns } : undefined),
    gauge: fakeGauge(),
    onMissing: (e) => events.push(e),
    // Renewed in the second the unseen pod was created (a creationTimestamp has whole seconds): it may have come after.
    unseenSince: () => new Date('2026-12-01T10:00:00.400Z'),
    backoffInitialMs: 5,
  });
  t.teardown(async () => {
    auditor.stop();
    await api.stop();
  });
  auditor.start();
  await until(() => auditor.status().synced && events.length === 1, 'the unseen pod announced');
  t.deepEqual(auditor.status().states, { missing: 2 });
  t.like(events[0], { reason: 'SidecarsMissing', regarding: { kind: 'ReplicaSet', name: 'new' } });
  t.is(events[0]!.note, 'pod unseen lacks log-shipper; restart ReplicaSet/new as its controller allows');
  // A new pod gone missing is announced as ever; the seen one never is.
  api.addObject('pods', { namespace: 'shop', name: 'later', labels: {}, annotations: {}, ownerReferences: owner('later') }, { containers: [] });
  await until(() => events.length === 2, 'the later pod announced');
  t.deepEqual(
    events.map((e) => e.note.split(' ')[1]),
    ['unseen', 'later'],
  );
});

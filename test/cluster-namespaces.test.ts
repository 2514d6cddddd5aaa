import test from 'ava';
import { once } from 'node:events';
import { pino } from 'pino';
import { mutate } from '../src/admission/mutate.js';
import { ClusterNamespaceSource, type ClusterSourceOptions } from '../src/namespaces/cluster.js';
import { NamespaceLabelsUnavailableError, type NamespaceFailurePolicy } from '../src/errors.js';
import { createReview, prepareCreate } from './helpers/apiserver.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { FakeClock } from './helpers/fake-clock.js';
import { until } from './helpers/until.js';
import { startTestServer } from './helpers/server.js';
import { logShipperDoc, templateSet } from './helpers/templates.js';

const enabled = { 'sidecar-injector.io/injection': 'enabled' };
const silent = pino({ level: 'silent' });

async function setup(
  t: { teardown: (fn: () => unknown) => void },
  options: { policy?: NamespaceFailurePolicy; lookupTimeoutMs?: number; before?: (api: FakeApiServer) => void; tuning?: Partial<ClusterSourceOptions> } = {},
) {
  const api = new FakeApiServer();
  await api.start();
  options.before?.(api);
  const source = new ClusterNamespaceSource({
    kubeConfig: await api.kubeConfig(),
    log: silent,
    failurePolicy: options.policy ?? 'deny',
    lookupTimeoutMs: options.lookupTimeoutMs ?? 2000,
    backoffInitialMs: 5,
    backoffMaxMs: 50,
    negativeCacheMs: 0,
    ...options.tuning,
  });
  t.teardown(async () => {
    source.stop();
    await api.stop();
  });
  return { api, source };
}

const labelsIn = async (source: ClusterNamespaceSource, name: string) => (await source.labelsOf(name).catch(() => undefined))?.team;

test('lists every namespace, then watches from the list resourceVersion with bookmarks', async (t) => {
  const { api, source } = await setup(t, { before: (a) => (a.create('shop', { ...enabled, team: 'payments' }), a.create('plain')) });
  const watching = once(api.events, 'watch');
  source.start();
  await watching;
  t.true(source.isReady());
  t.is(source.size(), 2);
  t.deepEqual(await source.labelsOf('shop'), { ...enabled, team: 'payments', 'kubernetes.io/metadata.name': 'shop' });
  t.is(api.watchRequests[0]?.resourceVersion, '102');
  t.is(api.watchRequests[0]?.allowWatchBookmarks, 'true');
  t.is(api.watchRequests[0]?.timeoutSeconds, '300');
  t.deepEqual(api.getRequests, []);
});

test('is not ready until the first list has completed', async (t) => {
  let release!: () => void;
  const { api, source } = await setup(t, { before: (a) => ((a.listGate = new Promise((r) => (release = r))), a.create('shop', enabled)) });
  source.start();
  t.false(source.isReady());
  const listed = once(source, 'reload');
  release();
  await listed;
  t.true(source.isReady());
  t.is(api.listCount, 1);
});

test('applies add, modify and delete events', async (t) => {
  const { api, source } = await setup(t);
  const watching = once(api.events, 'watch');
  source.start();
  await watching;
  api.create('a', { team: 'one' });
  await until(async () => (await labelsIn(source, 'a')) === 'one');
  api.update('a', { team: 'two' });
  await until(async () => (await labelsIn(source, 'a')) === 'two');
  api.delete('a');
  await until(() => source.size() === 0);
  t.is(source.size(), 0);
});

for (const asHttp of [false, true]) {
  test(`relists after 410 Gone (${asHttp ? 'HTTP status' : 'ERROR event'}) and sees what changed meanwhile, deletions too`, async (t) => {
    const { api, source } = await setup(t, { before: (a) => ((a.goneAsHttpStatus = asHttp), a.create('old', { team: 'x' }), a.create('kept', { team: 'k' })) });
    let watching = once(api.events, 'watch');
    source.start();
    await watching;
    t.is(api.listCount, 1);
    // While no watch is connected: a deletion, a change and a creation, then the history is compacted.
    api.endWatches();
    api.delete('old');
    api.update('kept', { team: 'changed' });
    api.create('new', { team: 'n' });
    api.compact();
    watching = once(api.events, 'watch');
    await watching;
    t.is(api.listCount, 2);
    t.is(await labelsIn(source, 'kept'), 'changed');
    t.is(await labelsIn(source, 'new'), 'n');
    t.is(source.size(), 2);
    t.deepEqual(api.getRequests, [], 'no live look-ups were needed');
  });
}

test('reconnects after the connection drops mid-watch and misses no change', async (t) => {
  const { api, source } = await setup(t, { before: (a) => a.create('shop', { team: 'a' }) });
  let watching = once(api.events, 'watch');
  source.start();
  await watching;
  api.update('shop', { team: 'b' });
  await until(async () => (await labelsIn(source, 'shop')) === 'b');
  const resumeFrom = api.watchRequests.length;
  watching = once(api.events, 'watch');
  api.dropWatches();
  // Changes while the client is away are replayed on resume (history is retained).
  api.update('shop', { team: 'c' });
  api.create('late', { team: 'l' });
  await watching;
  await until(async () => (await labelsIn(source, 'late')) === 'l');
  t.is(await labelsIn(source, 'shop'), 'c');
  t.is(api.listCount, 1, 'resumed the watch without listing again');
  t.is(api.watchRequests[resumeFrom]?.resourceVersion, '102', 'resumed from the last event seen');
});

test('a bookmark advances the resourceVersion a resumed watch starts from', async (t) => {
  const { api, source } = await setup(t, { before: (a) => a.create('shop') });
  let watching = once(api.events, 'watch');
  source.start();
  await watching;
  const rv = api.bookmark();
  // The bookmark reaches the client before the end of the stream: a change after it proves order.
  api.create('marker');
  await until(() => source.size() === 2);
  watching = once(api.events, 'watch');
  api.endWatches();
  await watching;
  t.true(Number(api.watchRequests.at(-1)?.resourceVersion) > Number(rv));
});

test('retries a failed list with backoff and becomes ready', async (t) => {
  const { api, source } = await setup(t, { before: (a) => ((a.failLists = 2), a.create('shop')) });
  const watching = once(api.events, 'watch');
  source.start();
  await watching;
  t.is(api.listCount, 3);
  t.true(source.isReady());
});

test('a cache miss costs one live GET, shared by concurrent look-ups, and is cached', async (t) => {
  const { api, source } = await setup(t);
  const watching = once(api.events, 'watch');
  source.start();
  await watching;
  // Created a moment before its first pod: the watch event has not arrived yet.
  api.create('fresh', { ...enabled, team: 'f' }, { silently: true });
  const [a, b] = await Promise.all([source.labelsOf('fresh'), source.labelsOf('fresh')]);
  t.is(a.team, 'f');
  t.is(b, a);
  t.deepEqual(api.getRequests, ['fresh']);
  await source.labelsOf('fresh');
  t.deepEqual(api.getRequests, ['fresh']);
  api.release();
});

for (const failure of ['error', 'hang'] as const) {
  test(`a failed look-up (${failure}) raises NamespaceLabelsUnavailableError with the configured policy`, async (t) => {
    // Only the hanging GET needs a short timeout; the failing one answers, however busy the machine.
    const { api, source } = await setup(t, { policy: 'allow', lookupTimeoutMs: failure === 'hang' ? 200 : 30_000, before: (a) => (a.getFailure = failure) });
    const watching = once(api.events, 'watch');
    source.start();
    await watching;
    const err = await t.throwsAsync(source.labelsOf('ghost'), { instanceOf: NamespaceLabelsUnavailableError });
    t.is(err?.policy, 'allow');
    t.regex(err?.message ?? '', failure === 'hang' ? /no answer within 200 ms/ : /HTTP 500/);
  });
}

test('a namespace that does not exist is reported as such', async (t) => {
  const { api, source } = await setup(t);
  const watching = once(api.events, 'watch');
  source.start();
  await watching;
  const err = await t.throwsAsync(source.labelsOf('nowhere'), { instanceOf: NamespaceLabelsUnavailableError });
  t.regex(err?.message ?? '', /namespace nowhere cannot be known: it does not exist/);
});

for (const policy of ['deny', 'allow'] as const) {
  test(`through a review: labels that cannot be known are answered per policy (${policy})`, async (t) => {
    const { api, source } = await setup(t, { policy, before: (a) => (a.getFailure = 'error') });
    const watching = once(api.events, 'watch');
    source.start();
    await watching;
    const set = templateSet(logShipperDoc);
    const pod = { metadata: { generateName: 'w-' }, spec: { containers: [{ name: 'w', image: 'x' }] } };
    const outcome = await mutate(createReview(prepareCreate(pod, 'ghost'), { namespace: 'ghost' }), { templates: () => set, namespaces: source });
    t.is(outcome.reason, 'namespace-unknown');
    t.is(outcome.decision, policy === 'deny' ? 'denied' : 'allowed');
  });
}

test('selects by live labels: a namespace opted in by a label change is injected', async (t) => {
  const { api, source } = await setup(t, { before: (a) => a.create('shop') });
  const watching = once(api.events, 'watch');
  source.start();
  await watching;
  const set = templateSet(logShipperDoc);
  const server = await startTestServer({ templates: set, namespaces: source });
  t.teardown(() => server.stop());
  const pod = { metadata: { generateName: 'w-' }, spec: { containers: [{ name: 'w', image: 'x' }] } };
  const before = await server.post(createReview(prepareCreate(pod, 'shop'), { namespace: 'shop' }));
  t.is(before.json.response.patch, undefined);
  api.update('shop', enabled);
  await until(async () => (await source.labelsOf('shop'))['sidecar-injector.io/injection'] === 'enabled');
  const after = await server.post(createReview(prepareCreate(pod, 'shop'), { namespace: 'shop' }));
  t.is(after.json.response.patchType, 'JSONPatch');
});

// --- Issue 9: a source that fails gently, and notices when it is failing ---------------------

for (const failure of ['end-at-once', 'error-event'] as const) {
  test(`a watch that fails at once (${failure}) is retried with backoff, not in a tight loop`, async (t) => {
    const clock = new FakeClock();
    const { api, source } = await setup(t, { before: (a) => a.create('shop', enabled), tuning: { backoffInitialMs: 50, backoffMaxMs: 400, clock } });
    let rejected = 0;
    source.on('rejected', () => rejected++);
    api.watchFailure = failure;
    source.start();
    await until(() => rejected === 1, 'the first watch failed');
    // The clock moves 5 ms at a time until the retry fires; then the retry runs (real I/O) and fails.
    const delays: number[] = [];
    for (let n = 1; n <= 6; n++) {
      let waited = 0;
      for (const fired = clock.fired; clock.fired === fired; waited += 5) await clock.advance(5);
      delays.push(waited);
      await until(() => rejected === n + 1 && api.watchRequests.length === n + 1, `retry ${n}`);
    }
    // Backoff 50, 100, 200, 400, 400, 400 ms, each ±20 % (and the 5 ms steps of the test).
    const expected = [50, 100, 200, 400, 400, 400];
    for (const [i, delay] of delays.entries()) t.true(delay >= expected[i]! * 0.8 && delay <= expected[i]! * 1.2 + 5, `retry ${i + 1} after ${delay} ms`);
    t.true(source.isReady(), 'the list succeeded, so the cache is ready');
  });
}

test('lists page by page (limit and continue), each page with the list timeout, not the look-up timeout', async (t) => {
  const { api, source } = await setup(t, {
    lookupTimeoutMs: 100,
    before: (a) => {
      for (let i = 0; i < 25; i++) a.create(`ns-${i}`, i === 3 ? enabled : {});
      a.listDelayMs = 150;
    },
    tuning: { listPageSize: 10, listTimeoutMs: 5000 },
  });
  const watching = once(api.events, 'watch');
  source.start();
  await watching;
  t.true(source.isReady());
  t.is(source.size(), 25);
  t.deepEqual(api.listLimits, ['10', '10', '10']);
  t.is((await source.labelsOf('ns-3'))['sidecar-injector.io/injection'], 'enabled');
});

test('an expired continue token (410) restarts the list from the beginning', async (t) => {
  const { api, source } = await setup(t, {
    before: (a) => {
      for (let i = 0; i < 15; i++) a.create(`ns-${i}`);
      a.expireContinueTokens = 1;
    },
    tuning: { listPageSize: 10 },
  });
  const watching = once(api.events, 'watch');
  source.start();
  await watching;
  t.is(source.size(), 15);
  // First page, expired second page, then both pages again.
  t.deepEqual(api.listLimits, ['10', '10', '10', '10']);
});

test('a watch that silently stops delivering is noticed and restarted, and then sees changes', async (t) => {
  const { api, source } = await setup(t, { before: (a) => a.create('shop', enabled), tuning: { watchStallMs: 300 } });
  api.watchFailure = 'silent';
  const stalled = once(source, 'stall');
  const firstWatch = once(api.events, 'watch');
  source.start();
  await firstWatch;
  const secondWatch = once(api.events, 'watch');
  api.watchFailure = 'none';
  await stalled;
  await secondWatch;
  t.is(api.watchRequests.length, 2, 'the stalled watch was replaced');
  t.is(source.size(), 1);
  api.create('late', { team: 'late' });
  await until(() => source.size() === 2);
  t.deepEqual(api.getRequests, [], 'the change came through the new watch, not a look-up');
});

test('a watch with bookmarks is not taken for a stalled one', async (t) => {
  const clock = new FakeClock();
  const { api, source } = await setup(t, { before: (a) => a.create('shop', enabled), tuning: { watchStallMs: 300, clock } });
  let stalls = 0;
  source.on('stall', () => stalls++);
  const watching = once(api.events, 'watch');
  source.start();
  await watching;
  await until(() => source.status().resourceVersion !== '', 'the watch is open');
  // A bookmark every 100 ms of the clock, each seen before time goes on: 800 ms, nearly three stall limits.
  for (let i = 0; i < 8; i++) {
    await clock.advance(100);
    const rv = api.bookmark();
    await until(() => source.status().resourceVersion === rv, `bookmark ${rv}`);
  }
  t.is(stalls, 0);
  t.is(api.watchRequests.length, 1);
  // Silence after the last bookmark: the stall is noticed once the limit has passed on the clock.
  await clock.advance(400);
  t.is(stalls, 1);
});

test('live look-ups of unknown namespaces are bounded in number at once and per second', async (t) => {
  const { api, source } = await setup(t, { tuning: { maxConcurrentLookups: 2, maxLookupsPerSecond: 5 } });
  api.getFailure = 'hang';
  const watching = once(api.events, 'watch');
  source.start();
  await watching;
  const attempts = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => source.labelsOf(`unknown-${i}`)));
  t.is(api.getRequests.length, 2, 'at most two GETs in flight');
  const refused = attempts.filter((a) => a.status === 'rejected' && /look-ups are already running/.test(String((a.reason as Error).message)));
  t.true(refused.length >= 48);
});

test('the memory of failed look-ups is bounded', async (t) => {
  const { api, source } = await setup(t, {
    tuning: { maxRememberedFailures: 10, negativeCacheMs: 60_000, maxLookupsPerSecond: 1000, maxConcurrentLookups: 1000 },
  });
  const watching = once(api.events, 'watch');
  source.start();
  await watching;
  for (let i = 0; i < 100; i++) await source.labelsOf(`gone-${i}`).catch(() => undefined);
  t.is(api.getRequests.length, 100);
  const failures = (source as unknown as { failures: Map<string, unknown> }).failures;
  t.true(failures.size <= 10, `${failures.size} failures remembered`);
  // The most recent ones are still remembered: no second GET for them.
  await source.labelsOf('gone-99').catch(() => undefined);
  t.is(api.getRequests.length, 100);
});

test('reloadNow lists again at once: a change the watch never delivered is seen, and status says so', async (t) => {
  const { api, source } = await setup(t, { before: (a) => a.create('shop', enabled) });
  const watching = once(api.events, 'watch');
  source.start();
  await watching;
  api.create('quiet', { team: 'quiet' }, { silently: true });
  t.false(source.current().has('quiet'));
  await source.reloadNow();
  t.is(source.current().get('quiet')?.team, 'quiet');
  t.like(source.status(), { source: 'cluster', ready: true, namespaces: 2, failurePolicy: 'deny' });
  t.deepEqual(api.getRequests, []);
  // The watch it replaced does not come back beside the new one: once a change has come
  // through the new watch, there is that one watch and no other was asked for.
  await until(() => api.activeWatches === 1 && api.watchRequests.length === 2, 'the new watch');
  api.create('later', { team: 'later' });
  await until(() => source.current().get('later')?.team === 'later');
  t.is(api.activeWatches, 1);
  t.is(api.watchRequests.length, 2);
});

test('a look-up of a name no namespace can have is refused without a request', async (t) => {
  const { api, source } = await setup(t, { before: (a) => a.create('shop', enabled) });
  source.start();
  await until(() => source.isReady());
  for (const name of ['.', '..', 'a/b', '']) {
    const err = await t.throwsAsync(source.labelsOf(name), { instanceOf: NamespaceLabelsUnavailableError });
    t.regex(err!.message, /it is not a namespace name/);
  }
  t.deepEqual(api.getRequests, []);
});

test('each namespace has a generation that changes when its labels or overrides do, and only then', async (t) => {
  const { api, source } = await setup(t, { before: (a) => (a.create('shop', { team: 'a' }), a.create('kept', { team: 'k' })) });
  let watching = once(api.events, 'watch');
  source.start();
  await watching;
  const first = source.generationOf('shop');
  t.is(typeof first, 'number');
  t.not(first, source.generationOf('kept'));
  t.is(source.generationOf('nosuch'), undefined);
  // The same labels again (another resourceVersion): the same generation.
  const applied = once(source, 'change');
  api.update('shop', { team: 'a' }, { note: 'not an override' });
  await applied;
  t.is(source.generationOf('shop'), first);
  api.update('shop', { team: 'b' });
  await until(async () => (await labelsIn(source, 'shop')) === 'b');
  const second = source.generationOf('shop')!;
  t.true(second > first!);
  api.update('shop', { team: 'b' }, { 'log-shipper.sidecar-injector.io/memoryLimit': '64Mi' });
  await until(() => source.overridesOf('shop')['log-shipper.sidecar-injector.io/memoryLimit'] === '64Mi');
  const third = source.generationOf('shop')!;
  t.true(third > second);
  // A relist that finds a namespace as it was keeps its generation; one gone has none.
  const kept = source.generationOf('kept');
  api.endWatches();
  api.delete('shop');
  api.compact();
  watching = once(api.events, 'watch');
  await watching;
  t.is(api.listCount, 2);
  t.is(source.generationOf('kept'), kept);
  t.is(source.generationOf('shop'), undefined);
});

/**
 * The version source against the in-process API server: `/version` and a list and watch of
 * Nodes, over real HTTPS with a bearer token. The oldest kubelet decides; the API server's
 * version when nodes are forbidden; the flag over both.
 */
import test from 'ava';
import { pino } from 'pino';
import { ClusterVersionSource } from '../src/kube-api/cluster-version.js';
import type { KubernetesVersion } from '../src/k8s/version.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { FakeClock } from './helpers/fake-clock.js';
import { until } from './helpers/until.js';

const silent = pino({ level: 'silent' });

async function setup(
  t: { teardown: (fn: () => unknown) => void },
  before: (api: FakeApiServer) => void,
  flag?: KubernetesVersion,
  timing: { clock?: FakeClock; versionRefreshMs?: number } = {},
) {
  const api = new FakeApiServer();
  await api.start();
  before(api);
  const source = new ClusterVersionSource({
    kubeConfig: await api.kubeConfig(),
    log: silent,
    backoffInitialMs: 5,
    backoffMaxMs: 50,
    ...(flag ? { flag } : {}),
    ...timing,
  });
  t.teardown(async () => {
    source.stop();
    await api.stop();
  });
  return { api, source };
}

/** Resolves with the source's status once it satisfies `predicate`. */
async function settled(
  source: ClusterVersionSource,
  predicate: (status: ReturnType<ClusterVersionSource['status']>) => boolean,
): Promise<ReturnType<ClusterVersionSource['status']>> {
  await until(() => predicate(source.status()), 'the version source to decide');
  return source.status();
}

test('the oldest kubelet decides, and the decision follows node upgrades and removals', async (t) => {
  const { api, source } = await setup(t, (a) => {
    a.gitVersion = 'v1.31.4';
    a.setNode('node-a', 'v1.31.4');
    a.setNode('node-b', 'v1.28.9-eks-1234');
    a.setNode('node-c', 'v1.30.2');
  });
  source.start();
  const first = await settled(source, (s) => s.nodes === 3 && s.apiServer !== null);
  t.is(first.kubernetesVersion, '1.28');
  t.is(first.source, 'nodes');
  t.regex(first.reason, /oldest kubelet is v1\.28\.9-eks-1234 \(node node-b\) of 3 node\(s\); API server v1\.31\.4/);
  // The old node is upgraded: the next oldest decides.
  api.setNode('node-b', 'v1.31.1');
  t.is((await settled(source, (s) => s.kubernetesVersion !== '1.28')).kubernetesVersion, '1.30');
  // A new old node joins, then leaves.
  api.setNode('node-d', 'v1.27.0');
  t.is((await settled(source, (s) => s.kubernetesVersion === '1.27')).source, 'nodes');
  api.deleteNode('node-d');
  t.is((await settled(source, (s) => s.kubernetesVersion === '1.30')).nodes, 3);
});

test('nodes forbidden: the API server version decides, and /status says why', async (t) => {
  const { api, source } = await setup(t, (a) => {
    a.gitVersion = 'v1.28.3';
    a.nodesForbidden = true;
    a.setNode('node-a', 'v1.25.0');
  });
  source.start();
  const status = await settled(source, (s) => s.apiServer !== null && /HTTP 403/.test(s.reason));
  t.is(status.kubernetesVersion, '1.28');
  t.is(status.source, 'api-server');
  t.is(status.nodes, null);
  t.regex(status.reason, /^API server v1\.28\.3; nodes could not be read \(GET \/api\/v1\/nodes\?limit=500: HTTP 403\)/);
  t.true(api.versionRequests >= 1);
});

test('an API server older than every kubelet decides; a node without a readable version counts as three minors behind', async (t) => {
  const { api, source } = await setup(t, (a) => {
    a.gitVersion = 'v1.29.0';
    a.setNode('node-a', 'v1.30.0');
    a.setNode('node-b', 'v1.31.2_custom');
  });
  t.false(source.isSettled());
  source.start();
  const status = await settled(source, (s) => s.nodes === 2 && s.apiServer !== null);
  t.true(source.isSettled());
  t.is(status.kubernetesVersion, '1.29');
  t.is(status.source, 'api-server');
  t.regex(status.reason, /older than every kubelet/);
  // A kubelet that reports nothing readable is never taken for a new one.
  api.setNode('node-c', '');
  const skewed = await settled(source, (s) => s.nodes === 3 && s.kubernetesVersion !== '1.29');
  t.is(skewed.kubernetesVersion, '1.26');
  t.regex(
    skewed.reason,
    /^oldest kubelet is 1\.26 \(assumed\) \(node node-c\) of 3 node\(s\); API server v1\.29\.0; 1 node\(s\) report no readable kubelet version, taken as 3 minor versions behind the API server$/,
  );
});

test('the flag decides over the cluster', async (t) => {
  const { source } = await setup(
    t,
    (a) => {
      a.gitVersion = 'v1.33.0';
      a.setNode('node-a', 'v1.33.0');
    },
    { major: 1, minor: 28 },
  );
  source.start();
  const status = await settled(source, (s) => s.nodes === 1 && s.apiServer !== null);
  t.is(status.kubernetesVersion, '1.28');
  t.is(status.source, 'flag');
  t.is(status.apiServer, 'v1.33.0');
});

test('the generation changes with the decision and only with it', async (t) => {
  const { api, source } = await setup(t, (a) => {
    a.gitVersion = 'v1.31.4';
    a.setNode('node-a', 'v1.31.4');
    a.setNode('node-b', 'v1.28.9');
    a.setNode('node-c', 'v1.30.2');
  });
  const initial = source.generation();
  source.start();
  await settled(source, (s) => s.nodes === 3 && s.apiServer !== null);
  const decided = source.generation();
  t.not(decided, initial, 'learning the cluster changes the decision');
  const decision = source.current();
  // Node events that leave the decision as it was: a kubelet upgraded that is not the oldest, and
  // a node written again with its version unchanged (as its conditions change all day).
  api.setNode('node-c', 'v1.30.5');
  api.setNode('node-a', 'v1.31.4');
  // Then the oldest node is upgraded: the decision changes, once.
  api.setNode('node-b', 'v1.31.1');
  await settled(source, (s) => s.kubernetesVersion === '1.30');
  t.is(source.generation(), decided + 1, 'only the event that changed the decision moved the generation');
  t.not(source.current(), decision);
  // A node that changes only the reason (how many nodes were counted) moves it too.
  const before = source.generation();
  api.setNode('node-d', 'v1.31.0');
  await settled(source, (s) => s.nodes === 4);
  t.is(source.current().version?.minor, 30);
  t.regex(source.current().reason, /of 4 node\(s\)/);
  t.is(source.generation(), before + 1);
});

test('an unreadable /version is asked again on the source clock, and a same answer keeps the generation', async (t) => {
  // The delays the source asks its clock for: each `/version` read, once answered, sets the next.
  const delays: number[] = [];
  const clock = new (class extends FakeClock {
    override after(ms: number, fn: () => void) {
      delays.push(ms);
      return super.after(ms, fn);
    }
  })();
  const { api, source } = await setup(
    t,
    (a) => {
      a.gitVersion = 'v1.31.4';
      a.versionFails = true;
    },
    undefined,
    { clock, versionRefreshMs: 60_000 },
  );
  source.start();
  await until(() => source.isSettled(), 'the version asked and nodes listed');
  t.is(source.status().apiServer, null);
  t.is(api.versionRequests, 1);
  // The retry waits on the clock (10 s after a failure), not on the machine's time.
  t.deepEqual(delays, [10_000]);
  await clock.advance(9_999);
  t.is(api.versionRequests, 1);
  api.versionFails = false;
  await clock.advance(1);
  await settled(source, (s) => s.apiServer === 'v1.31.4');
  t.is(api.versionRequests, 2);
  t.is(source.status().kubernetesVersion, '1.31');
  // Read again every refresh period; the same answer changes nothing.
  const generation = source.generation();
  const decision = source.current();
  const readsTimed = () => delays.filter((ms) => ms === 60_000).length;
  t.is(readsTimed(), 1);
  await clock.advance(60_000);
  await until(() => readsTimed() === 2, 'the third read answered and the next one set');
  t.is(api.versionRequests, 3);
  t.is(source.generation(), generation);
  t.is(source.current(), decision);
});

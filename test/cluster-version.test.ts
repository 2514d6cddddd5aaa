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

const silent = pino({ level: 'silent' });

async function setup(t: { teardown: (fn: () => unknown) => void }, before: (api: FakeApiServer) => void, flag?: KubernetesVersion) {
  const api = new FakeApiServer();
  await api.start();
  before(api);
  const source = new ClusterVersionSource({
    kubeConfig: await api.kubeConfig(),
    log: silent,
    backoffInitialMs: 5,
    backoffMaxMs: 50,
    ...(flag ? { flag } : {}),
  });
  t.teardown(async () => {
    source.stop();
    await api.stop();
  });
  return { api, source };
}

/** Resolves when the source's status satisfies `predicate` (checked on every decision change and poll tick of 5 ms). */
async function until(
  source: ClusterVersionSource,
  predicate: (status: ReturnType<ClusterVersionSource['status']>) => boolean,
): Promise<ReturnType<ClusterVersionSource['status']>> {
  for (;;) {
    const status = source.status();
    if (predicate(status)) return status;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

test('the oldest kubelet decides, and the decision follows node upgrades and removals', async (t) => {
  const { api, source } = await setup(t, (a) => {
    a.gitVersion = 'v1.31.4';
    a.setNode('node-a', 'v1.31.4');
    a.setNode('node-b', 'v1.28.9-eks-1234');
    a.setNode('node-c', 'v1.30.2');
  });
  source.start();
  const first = await until(source, (s) => s.nodes === 3 && s.apiServer !== null);
  t.is(first.kubernetesVersion, '1.28');
  t.is(first.source, 'nodes');
  t.regex(first.reason, /oldest kubelet is v1\.28\.9-eks-1234 \(node node-b\) of 3 node\(s\); API server v1\.31\.4/);
  // The old node is upgraded: the next oldest decides.
  api.setNode('node-b', 'v1.31.1');
  t.is((await until(source, (s) => s.kubernetesVersion !== '1.28')).kubernetesVersion, '1.30');
  // A new old node joins, then leaves.
  api.setNode('node-d', 'v1.27.0');
  t.is((await until(source, (s) => s.kubernetesVersion === '1.27')).source, 'nodes');
  api.deleteNode('node-d');
  t.is((await until(source, (s) => s.kubernetesVersion === '1.30')).nodes, 3);
});

test('nodes forbidden: the API server version decides, and /status says why', async (t) => {
  const { api, source } = await setup(t, (a) => {
    a.gitVersion = 'v1.28.3';
    a.nodesForbidden = true;
    a.setNode('node-a', 'v1.25.0');
  });
  source.start();
  const status = await until(source, (s) => s.apiServer !== null && /HTTP 403/.test(s.reason));
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
  const status = await until(source, (s) => s.nodes === 2 && s.apiServer !== null);
  t.true(source.isSettled());
  t.is(status.kubernetesVersion, '1.29');
  t.is(status.source, 'api-server');
  t.regex(status.reason, /older than every kubelet/);
  // A kubelet that reports nothing readable is never taken for a new one.
  api.setNode('node-c', '');
  const skewed = await until(source, (s) => s.nodes === 3 && s.kubernetesVersion !== '1.29');
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
  const status = await until(source, (s) => s.nodes === 1 && s.apiServer !== null);
  t.is(status.kubernetesVersion, '1.28');
  t.is(status.source, 'flag');
  t.is(status.apiServer, 'v1.33.0');
});

/**
 * Run last (test/cluster/ava.config.mjs): every request the injector made to the API server over
 * the whole suite — installs, restarts, hand-overs, renewals, rollouts, audits — was made as its
 * ServiceAccount with a token bound to its pod, and RBAC as manifests/ grants it refused none.
 */
import test from 'ava';
import { auditEvents, injectorPods } from './helpers.js';

const injectorUser = 'system:serviceaccount:sidecar-injector:sidecar-injector';

test('over the whole suite the injector talked to the API server as its ServiceAccount, with a token bound to its pod, and RBAC refused none of its requests', async (t) => {
  const events = auditEvents().filter((e) => e.user?.username === injectorUser);
  t.true(events.length > 0, 'the injector made requests');
  const pods = new Set((await injectorPods()).map((p) => p.metadata.name as string));
  for (const event of events) {
    const podName = event.user.extra?.['authentication.kubernetes.io/pod-name']?.[0];
    t.truthy(podName, 'a token the API server issued for a pod (TokenRequest), not a static one');
  }
  t.true(
    events.some((e) => pods.has(e.user.extra['authentication.kubernetes.io/pod-name'][0])),
    'requests from the running replicas',
  );
  const forbidden = events.filter((e) => e.responseStatus?.code === 403);
  t.deepEqual(
    forbidden.map((e) => `${e.verb} ${e.requestURI}: ${e.responseStatus.message ?? ''}`),
    [],
    'no request refused by RBAC',
  );
  const verbs = new Set(events.map((e) => `${e.verb} ${e.objectRef?.resource ?? e.requestURI}`));
  for (const expected of ['list namespaces', 'watch namespaces', 'list nodes', 'update leases', 'patch mutatingwebhookconfigurations'])
    t.true(
      [...verbs].some((v) => v === expected),
      `the injector did ${expected}`,
    );
});

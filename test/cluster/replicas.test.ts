/**
 * Two replicas on a real cluster: one leader on real Leases, handed over when its pod is deleted
 * (the node sends SIGTERM as a kubelet does) while pods keep being admitted; certificates made
 * again when their Secret is deleted; and the Events the injector writes, read with kubectl.
 */
import test from 'ava';
import { X509Certificate } from 'node:crypto';
import { createReview, prepareCreate } from '../helpers/apiserver.js';
import { auditEvents, eventually, everyReplica, healthyInstall, injectorPods, joinWorld, optedInNamespace, plainPod, type Json } from './helpers.js';

const leasePath = (name: string) => `/apis/coordination.k8s.io/v1/namespaces/sidecar-injector/leases/${name}`;

/** Creates pods one after another until `done` resolves; how many were created and how many refused (with why). */
async function createWhile(namespace: string, done: Promise<unknown>): Promise<{ created: number; refused: string[] }> {
  const { kube } = joinWorld();
  let finished = false;
  void done.then(
    () => (finished = true),
    () => (finished = true),
  );
  let created = 0;
  const refused: string[] = [];
  for (let i = 0; !finished || i < 5; i++) {
    const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, plainPod(`p-${i}`));
    if (answer.status === 201 && answer.body.metadata.annotations?.['sidecar-injector.io/status']) created++;
    else refused.push(`${answer.status} ${answer.body.message ?? 'created without its sidecars'}`);
  }
  return { created, refused };
}

test.serial(
  'leader election on a real Lease: deleting the leader’s pod releases the one lease to another replica, and no pod create is refused meanwhile',
  async (t) => {
    const { kube } = joinWorld();
    t.teardown(healthyInstall);
    const namespace = await optedInNamespace(t, 'handover');
    const leader = (await kube.get(leasePath('sidecar-injector-leader'))).spec.holderIdentity as string;
    const pods = (await injectorPods()).map((p) => p.metadata.name as string);
    t.true(pods.includes(leader), `the leader ${leader} is one of the replicas`);
    // What Prometheus scrapes from each replica says the same: the holder 1, the other 0.
    const leading = async (pod: string) =>
      Number(
        /^sidecar_injector_leader\{lease="sidecar-injector-leader"\} (\d+)$/m.exec(
          (await kube.request('GET', `/api/v1/namespaces/sidecar-injector/pods/https:${pod}:8443/proxy/metrics`)).text,
        )?.[1],
      );
    t.deepEqual(
      await Promise.all(pods.map(leading)),
      pods.map((p) => (p === leader ? 1 : 0)),
    );
    const other = pods.find((p) => p !== leader)!;
    const since = new Date().toISOString();
    const handedOver = (async () => {
      await kube.delete(`/api/v1/namespaces/sidecar-injector/pods/${leader}`);
      // The lease goes first (the leader-only parts stop first and the election releases it, so the
      // other replica audits and writes certificates at once).
      return eventually('the lease held by a running replica other than the deleted one', async () => {
        const live = new Set((await injectorPods()).filter((p) => !p.metadata.deletionTimestamp).map((p) => p.metadata.name as string));
        const holder = (await kube.get(leasePath('sidecar-injector-leader'))).spec.holderIdentity as string;
        return holder !== leader && live.has(holder) ? [holder] : undefined;
      });
    })();
    const load = await createWhile(namespace, handedOver);
    const [auditLeader] = await handedOver;
    t.is(auditLeader, other, 'the lead goes to the replica that was running already');
    t.deepEqual(load.refused, [], `${load.created} pods created during the hand-over, none refused`);
    // The leaving replica released the Lease on its way out (an update of its own after the delete), rather than letting it expire.
    for (const lease of ['sidecar-injector-leader']) {
      const released = auditEvents().filter(
        (e) =>
          e.verb === 'update' &&
          e.objectRef?.name === lease &&
          e.user?.extra?.['authentication.kubernetes.io/pod-name']?.[0] === leader &&
          e.requestReceivedTimestamp > since,
      );
      t.true(released.length > 0, `the leaving leader wrote ${lease} after its pod was deleted`);
    }
  },
);

test.serial(
  'the certificate Secret deleted: the leader makes a new CA and certificate, both caBundles trust it beside the old one, and no pod create is refused meanwhile',
  async (t) => {
    const { kube } = joinWorld();
    const namespace = await optedInNamespace(t, 'renewal');
    const secretPath = '/api/v1/namespaces/sidecar-injector/secrets/sidecar-injector-tls';
    const oldCa = Buffer.from((await kube.get(secretPath)).data['ca.crt'], 'base64').toString('utf8');
    const renewed = (async () => {
      await kube.delete(secretPath);
      const secret = await eventually('a new Secret', async () => {
        const s = await kube.find(secretPath);
        return s && Buffer.from(s.data['ca.crt'], 'base64').toString('utf8') !== oldCa ? s : undefined;
      });
      const newCa = Buffer.from(secret.data['ca.crt'], 'base64').toString('utf8');
      await eventually('both caBundles hold the new CA', async () => {
        const c = await kube.get('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sidecar-injector');
        return (c.webhooks as Json[]).every((w) => Buffer.from(w.clientConfig.caBundle, 'base64').toString('utf8').includes(newCa.trim()));
      });
      return newCa;
    })();
    const load = await createWhile(namespace, renewed);
    const newCa = await renewed;
    t.notThrows(() => new X509Certificate(newCa));
    // Every replica serves the Secret's new certificate (its /status, asked through the pod proxy).
    const served = new X509Certificate(Buffer.from((await kube.get(secretPath)).data['tls.crt'], 'base64').toString('utf8')).fingerprint256;
    await everyReplica((status) => status.certificate.fingerprint256 === served, 'every replica serving the new certificate');
    const after = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, plainPod('after'));
    t.is(after.status, 201);
    t.truthy(after.body.metadata.annotations?.['sidecar-injector.io/status']);
    // The old CA stayed trusted beside the new one until every replica served the new certificate.
    t.deepEqual(load.refused, [], `${load.created} pods created during the renewal, none refused`);
  },
);

test.serial('Events the injector writes are read with kubectl get events: injected on the ReplicaSet, denied on the namespace', async (t) => {
  const { kube, kubectl } = joinWorld();
  const namespace = await optedInNamespace(t, 'events');
  await kubectl(['create', 'deployment', 'web', '-n', namespace, '--image=registry.example/web:1', '--replicas=2']);
  const denied = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, {
    ...plainPod('asks-for-tracer'),
    metadata: { name: 'asks-for-tracer', annotations: { 'sidecar-injector.io/templates': 'tracer' } },
  });
  // The API server answers a webhook's denial with the code the webhook gave (400 here: the pod's annotation is wrong).
  t.is(denied.status, 400);
  t.regex(
    String(denied.body.message),
    /^admission webhook "(required|optional)\.sidecar-injector\.io" denied the request: annotation sidecar-injector\.io\/templates names "tracer"/,
  );
  const events = await eventually('both Events', async () => {
    const { stdout } = await kubectl(['get', 'events', '-n', namespace, '-o', 'json']);
    const items = JSON.parse(stdout).items as Json[];
    const injected = items.find((e) => e.reason === 'SidecarsInjected');
    const deniedEvent = items.find((e) => e.reason === 'SidecarInjectionDenied');
    return injected && deniedEvent ? { injected, denied: deniedEvent } : undefined;
  });
  t.is(events.injected.involvedObject.kind, 'ReplicaSet');
  t.regex(events.injected.message, /^injected log-shipper@[0-9a-f]{12} \(pod web-[a-z0-9]+-\)/);
  t.is(events.injected.reportingComponent, 'sidecar-injector.io/injector');
  t.is(events.denied.involvedObject.kind, 'Namespace');
  // The denial quotes the pod's annotation: the Event says the reason only (the creator read the answer above).
  t.is(events.denied.message, "the pod was denied (unknown-template): the API server's answer to its creator says why (pod asks-for-tracer)");
  const { stdout: table } = await kubectl(['get', 'events', '-n', namespace]);
  t.regex(table, /SidecarsInjected/);
  t.regex(table, /SidecarInjectionDenied/);

  // A direct caller (here through the pod proxy, straight to one replica) naming owners that do not
  // exist, or the real ReplicaSet with a uid it guessed: no Event, each counted as dropped.
  const [replica] = await injectorPods();
  const proxy = (path: string, port = 10250) => `/api/v1/namespaces/sidecar-injector/pods/https:${replica!.metadata.name}:${port}/proxy${path}`;
  const dropped = async () => Number(/^sidecar_injector_events_dropped_total (\d+)/m.exec((await kube.request('GET', proxy('/metrics', 8443))).text)?.[1] ?? 0);
  const before = await dropped();
  const realSet = events.injected.involvedObject.name as string;
  for (const [name, uid] of [
    ['web-forged', '4b4d5c1e-0000-4000-8000-000000000001'],
    [realSet, '4b4d5c1e-0000-4000-8000-000000000002'],
  ]) {
    const body = plainPod('claimed');
    body.metadata = { generateName: 'claimed-', ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name, uid, controller: true }] };
    const answer = await kube.request('POST', proxy('/mutate/optional'), createReview(prepareCreate(body, namespace), { namespace }));
    t.is(answer.status, 200);
  }
  await eventually('both claims checked and dropped', async () => (await dropped()) >= before + 2);
  const { stdout: after } = await kubectl(['get', 'events', '-n', namespace, '-o', 'json']);
  const claimed = (JSON.parse(after).items as Json[]).filter(
    (e) => e.involvedObject.name === 'web-forged' || (e.involvedObject.uid ?? '').startsWith('4b4d5c1e-'),
  );
  t.deepEqual(claimed, [], 'no Event on an owner that is not there with that uid');
});

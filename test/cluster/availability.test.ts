/**
 * A tenant who can reach the injector's pods tries to take pod creation down, through the real
 * API server: connections that never start TLS, and large uploads that never finish, aimed at
 * every replica from an address of the tenant's own while pods are created. Every create goes
 * through, with its sidecars.
 */
import test, { type ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import tls from 'node:tls';
import { readFileSync } from 'node:fs';
import { deploy, eventually, healthyInstall, injectorPods, joinWorld, optedInNamespace, plainPod, type Json } from './helpers.js';

/** The tenant's own address inside the world (a pod's would route the same way to the replicas). */
const tenantAddress = '10.244.250.1';
const webhookPort = 10250;

/** Gives the world's node the tenant's address for one test. */
function tenantSource(t: ExecutionContext): void {
  try {
    execFileSync('ip', ['addr', 'add', `${tenantAddress}/32`, 'dev', 'lo'], { stdio: 'ignore' });
  } catch {
    // Already there (an earlier test in this file).
  }
  t.teardown(() => {
    try {
      execFileSync('ip', ['addr', 'del', `${tenantAddress}/32`, 'dev', 'lo'], { stdio: 'ignore' });
    } catch {
      // Gone already.
    }
  });
}

/** The replicas' pod IPs, every replica running and ready. */
async function replicaAddresses(): Promise<string[]> {
  const pods = (await injectorPods()).filter((p) => !p.metadata.deletionTimestamp && p.status?.podIP);
  return pods.map((p) => p.status.podIP as string);
}

/**
 * An attack that keeps `perTarget` connections open to each target, each made by `open`, and
 * opens a new one whenever one closes, until stopped. `opened` counts every connection made.
 */
function sustained(targets: readonly string[], perTarget: number, open: (host: string) => net.Socket) {
  let stopped = false;
  const live = new Set<net.Socket>();
  const counts = { opened: 0, closedByServer: 0 };
  const keep = (host: string) => {
    if (stopped) return;
    const socket = open(host);
    counts.opened++;
    live.add(socket);
    socket.on('error', () => undefined);
    socket.once('close', () => {
      live.delete(socket);
      if (stopped) return;
      counts.closedByServer++;
      // Renewed as the server closes them, 10 ms later: as fast as the node stays within its
      // CPU here. (Renewed on the next turn of the event loop instead, the flood starves a
      // replica's readiness probe on a busy 2-core machine: the injector has no CPU of its own.)
      setTimeout(() => keep(host), 10);
    });
  };
  for (const host of targets) for (let i = 0; i < perTarget; i++) keep(host);
  return {
    counts,
    stop() {
      stopped = true;
      for (const socket of live) socket.destroy();
    },
  };
}

/** Creates `count` pods at once in `namespace`; the statuses and the created pods. */
async function createAtOnce(namespace: string, count: number, pod: (i: number) => Json): Promise<{ statuses: number[]; created: Json[]; messages: string[] }> {
  const { kube } = joinWorld();
  const answers = await Promise.all(Array.from({ length: count }, (_, i) => kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, pod(i))));
  return {
    statuses: answers.map((a) => a.status),
    created: answers.filter((a) => a.status === 201).map((a) => a.body),
    messages: answers.filter((a) => a.status !== 201).map((a) => String(a.body.message)),
  };
}

const withProxy = (name: string, extra: Json = {}) => {
  const pod = plainPod(name);
  pod.metadata.annotations = { 'sidecar-injector.io/templates': 'proxy', ...extra };
  return pod;
};

const injected = (pod: Json) => typeof pod.metadata.annotations?.['sidecar-injector.io/status'] === 'string';

test.serial('a thousand silent TCP connections to every replica, renewed as they are closed, refuse no pod create', async (t) => {
  tenantSource(t);
  const namespace = await optedInNamespace(t, 'silent-flood');
  const targets = await replicaAddresses();
  t.true(targets.length >= 2, 'both replicas');
  const attack = sustained(targets, 1100, (host) => net.connect({ host, port: webhookPort, localAddress: tenantAddress }));
  t.teardown(() => attack.stop());
  // The injector has closed the oldest: the attack holds more than it keeps, and goes on renewing.
  await eventually('the attack renewing closed connections', () => attack.counts.closedByServer >= 200 * targets.length);
  const { statuses, created, messages } = await createAtOnce(namespace, 24, (i) => withProxy(`flooded-${i}`));
  t.deepEqual(messages, [], 'no create refused');
  t.deepEqual(statuses, Array<number>(24).fill(201));
  t.true(created.every(injected), 'every pod has its sidecars');
  t.true(attack.counts.opened >= 2200, `${attack.counts.opened} silent connections made`);
  // Not asserted: that every replica stays ready. The probes have a listener of their own (the
  // flood's connections never take their place), but under this flood on a busy 2-core machine
  // the injector's one event loop can spend a probe's second accepting and closing connections:
  // what the tenant cannot do is get a pod create refused.
  attack.stop();
  t.log(`${attack.counts.opened} silent connections made, ${attack.counts.closedByServer} closed by the injector; 24 of 24 creates admitted`);
});

test.serial('three stalled 6 MB uploads per replica, renewed as they are cut, refuse no create of a 150 KB pod', async (t) => {
  tenantSource(t);
  const namespace = await optedInNamespace(t, 'stalled-uploads');
  const targets = await replicaAddresses();
  const payload = ' '.repeat(5_650_000);
  let cut = 0;
  let flushed = 0;
  const attack = sustained(targets, 3, (host) => {
    const socket = tls.connect({ socket: net.connect({ host, port: webhookPort, localAddress: tenantAddress }), rejectUnauthorized: false });
    socket.once('secureConnect', () =>
      socket.write(
        `POST /mutate HTTP/1.1\r\nHost: sidecar-injector\r\nContent-Type: application/json\r\nContent-Length: 6000000\r\n\r\n${payload}`,
        () => flushed++,
      ),
    );
    socket.on('data', (c: Buffer) => {
      if (c.toString('utf8').includes('cut to make room')) cut++;
    });
    return socket;
  });
  t.teardown(() => attack.stop());
  // The uploads handed to the network: the budget of each replica is then held by them.
  await eventually('the stalled uploads sent', () => flushed >= 3 * targets.length);
  const large = 'x'.repeat(150_000);
  const statuses: number[] = [];
  const messages: string[] = [];
  for (let i = 0; i < 25; i++) {
    const { statuses: s, created, messages: m } = await createAtOnce(namespace, 1, () => withProxy(`large-${i}`, { 'example.com/config': large }));
    statuses.push(...s);
    messages.push(...m);
    t.true(created.every(injected));
  }
  attack.stop();
  t.deepEqual(messages, [], 'no create refused');
  t.deepEqual(statuses, Array<number>(25).fill(201));
  t.true(cut > 0, 'uploads were cut to make room');
  t.log(`25 of 25 creates of a 150 KB pod admitted; ${cut} stalled uploads cut, ${attack.counts.opened} made`);
});

/** A review as a tenant would send it straight to a replica, from the tenant's address; the HTTP status and body. */
function directReview(host: string, namespace: string): Promise<{ status: number; body: Json }> {
  const review = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'direct-1',
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      namespace,
      operation: 'CREATE',
      userInfo: { username: 'tenant' },
      object: withProxy('direct'),
      dryRun: false,
    },
  };
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ socket: net.connect({ host, port: webhookPort, localAddress: tenantAddress }), rejectUnauthorized: false });
    socket.on('error', reject);
    const body = JSON.stringify(review);
    socket.once('secureConnect', () =>
      socket.write(
        `POST /mutate/optional HTTP/1.1\r\nHost: sidecar-injector\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
      ),
    );
    let text = '';
    socket.on('data', (c: Buffer) => {
      text += c.toString('utf8');
      const head = text.indexOf('\r\n\r\n');
      const length = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? -1);
      if (head >= 0 && length >= 0 && Buffer.byteLength(text.slice(head + 4)) >= length) {
        socket.destroy();
        resolve({ status: Number(text.slice(9, 12)), body: JSON.parse(text.slice(head + 4)) as Json });
      }
    });
  });
}

test.serial('with the api-server-client-ca component, the API server’s calls are answered and a tenant’s direct review is refused', async (t) => {
  const { kube, file } = joinWorld();
  tenantSource(t);
  const namespace = await optedInNamespace(t, 'client-ca');
  const configMapPath = '/api/v1/namespaces/sidecar-injector/configmaps';
  // Before: anyone who reaches a replica gets an answer, with what the templates would add.
  const before = await directReview((await replicaAddresses())[0]!, namespace);
  t.is(before.status, 200);
  t.is(before.body.response?.patchType, 'JSONPatch');
  await kube.create(configMapPath, {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name: 'sidecar-injector-client-ca' },
    data: { 'ca.crt': readFileSync(file.webhookClientCaFile, 'utf8') },
  });
  t.teardown(async () => {
    await deploy();
    await eventually('the Deployment back as shipped', async () => {
      const d = await kube.get('/apis/apps/v1/namespaces/sidecar-injector/deployments/sidecar-injector');
      return !JSON.stringify(d.spec.template.spec.containers[0].args).includes('--client-ca');
    });
    await healthyInstall();
    await kube.delete(`${configMapPath}/sidecar-injector-client-ca`);
  });
  await deploy('test/cluster/overlays/client-ca');
  await eventually('every replica started with --client-ca', async () => {
    const pods = (await injectorPods()).filter((p) => !p.metadata.deletionTimestamp);
    return pods.length === 2 && pods.every((p) => JSON.stringify(p.spec.containers[0].args).includes('--client-ca=') && p.status?.podIP);
  });
  await healthyInstall();
  // The API server presents its client certificate: every create is admitted with its sidecars.
  const { statuses, created, messages } = await createAtOnce(namespace, 8, (i) => withProxy(`with-ca-${i}`));
  t.deepEqual(messages, []);
  t.deepEqual(statuses, Array<number>(8).fill(201));
  t.true(created.every(injected));
  // A tenant's direct review, to each replica: refused before its body is read, with why.
  for (const host of await replicaAddresses()) {
    const direct = await directReview(host, namespace);
    t.is(direct.status, 401, host);
    t.like(direct.body, { code: 'ERR_CLIENT_CERTIFICATE' });
    t.regex(String(direct.body.message), /^reviews are answered only for the API server: no client certificate was presented/);
  }
});

/**
 * Self-managed certificates against the test API server: the leader makes the Secret and
 * writes its CA into every webhook of the configuration shipped in manifests/ (arming the
 * required one), a second replica serves the same certificate, renewals (the clock moved on)
 * reach every replica, and `serve` runs with the Deployment's own flags outside a cluster.
 */
import { applyExamples } from './helpers/templates.js';
import test from 'ava';
import { spawn } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { mkdtemp, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pino } from 'pino';
import { SelfManagedCertificates } from '../src/certs/self-managed.js';
import { LeaderElector } from '../src/kube-api/lease.js';
import { armedAnnotation, failClosedAnnotation, serviceDnsNames, splitCertificates } from '../src/certs/plan.js';
import { createCa, createServingCertificate } from '../src/tls/certificates.js';
import { loadConfig } from '../src/config.js';
import { CertificateControllerError, ConfigError } from '../src/errors.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { until } from './helpers/until.js';
import { kustomizeObjects } from './helpers/kustomize.js';

type Obj = Record<string, any>;
const day = 24 * 60 * 60 * 1000;
const namespace = 'sidecar-injector';
const serviceHost = 'sidecar-injector.sidecar-injector.svc';
const rendered = kustomizeObjects('manifests');
const shipped = (kind: string) => structuredClone(rendered.find((o) => o.kind === kind)!);
/**
 * The shipped configuration with its two pod webhooks only (what most tests below arm and
 * count); the SidecarTemplate webhook beside them has a test of its own.
 */
const shippedPodWebhooks = () => {
  const configuration = shipped('MutatingWebhookConfiguration');
  configuration.webhooks = configuration.webhooks.filter((w: Obj) => w.name !== 'templates.sidecar-injector.io');
  configuration.metadata.annotations[failClosedAnnotation] = 'required.sidecar-injector.io';
  return configuration;
};

async function cluster(t: { teardown(fn: () => unknown): void }): Promise<FakeApiServer> {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.addWebhookConfiguration(shippedPodWebhooks());
  // A replica ready behind the Service: the required webhook may be armed (tests of arming itself clear it).
  api.serviceEndpoints.set(`${namespace}/sidecar-injector`, [true]);
  return api;
}

/**
 * One replica's certificates, following an election of its own on the one Lease (as serve's
 * manager runs it: started with them, released when they stop), with short lease timings.
 */
class Replica extends SelfManagedCertificates {
  constructor(
    options: ConstructorParameters<typeof SelfManagedCertificates>[0],
    private readonly elector: LeaderElector,
  ) {
    super(options);
  }
  override start(): void {
    this.elector.start();
    super.start();
  }
  override async stop(): Promise<void> {
    await super.stop();
    await this.elector.stop();
  }
}

async function replica(api: FakeApiServer, identity: string, clock = { now: Date.now() }, t?: { teardown(fn: () => unknown): void }) {
  const kubeConfig = await api.kubeConfig();
  const log = pino({ level: 'silent' });
  const election = new LeaderElector({
    kubeConfig,
    log,
    namespace,
    name: 'sidecar-injector-leader',
    identity,
    leaseDurationMs: 2000,
    renewDeadlineMs: 1500,
    retryPeriodMs: 200,
  });
  const certificates = new Replica(
    {
      kubeConfig,
      log,
      namespace,
      secretName: 'sidecar-injector-tls',
      webhookConfigurationName: 'sidecar-injector',
      serviceName: 'sidecar-injector',
      election,
      now: () => clock.now,
    },
    election,
  );
  t?.teardown(() => certificates.stop());
  return certificates;
}

const secretOf = (api: FakeApiServer) => api.secrets.get(`${namespace}/sidecar-injector-tls`)!;
const field = (secret: Obj, key: string) => Buffer.from(secret.data[key], 'base64').toString('utf8');
const configuration = (api: FakeApiServer) => api.webhookConfigurations.get('sidecar-injector')!;
const bundles = (api: FakeApiServer) => configuration(api).webhooks.map((w: Obj) => Buffer.from(w.clientConfig.caBundle ?? '', 'base64').toString('utf8'));

/** A TLS handshake as the API server makes it: the caBundle as the only trust, the Service's DNS name. */
async function handshake(port: number, caBundle: string): Promise<{ status: number; text: string; fingerprint256: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path: '/readyz', servername: serviceHost, ca: caBundle, agent: false }, (res) => {
      const fingerprint256 = (res.socket as import('node:tls').TLSSocket).getPeerCertificate().fingerprint256;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), fingerprint256 }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A TLS server presenting `pair`, as a replica would. */
async function tlsServer(t: { teardown(fn: () => unknown): void }, pair: { cert: string; key: string }): Promise<https.Server & { port: number }> {
  const server = https.createServer({ cert: pair.cert, key: pair.key }, (_req, res) => res.end('ok'));
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  t.teardown(() => {
    server.closeAllConnections();
    server.close();
  });
  return Object.assign(server, { port: (server.address() as import('node:net').AddressInfo).port });
}

test('the leader creates the Secret, then writes its CA into every webhook and arms the required one; a second replica serves the same certificate', async (t) => {
  const api = await cluster(t);
  t.true(
    configuration(api).webhooks.every((w: Obj) => w.failurePolicy === 'Ignore' && w.clientConfig.caBundle === undefined),
    'shipped unarmed',
  );
  const a = await replica(api, 'replica-a', undefined, t);
  a.start();
  const pairA = await a.ready();
  const b = await replica(api, 'replica-b', undefined, t);
  b.start();
  const pairB = await b.ready();

  t.deepEqual([a.isLeader(), b.isLeader()], [true, false]);
  t.is(pairB.cert, pairA.cert);
  t.deepEqual(api.writes, ['POST secrets/sidecar-injector-tls', 'PATCH mutatingwebhookconfigurations/sidecar-injector']);
  const secret = secretOf(api);
  t.is(secret.type, 'kubernetes.io/tls');
  t.deepEqual(Object.keys(secret.data).sort(), ['ca.crt', 'ca.key', 'tls.crt', 'tls.key']);
  const ca = field(secret, 'ca.crt');
  t.deepEqual(bundles(api), [ca, ca]);
  t.deepEqual(
    configuration(api).webhooks.map((w: Obj) => [w.name, w.failurePolicy]),
    [
      ['required.sidecar-injector.io', 'Fail'],
      ['optional.sidecar-injector.io', 'Ignore'],
    ],
  );
  t.is(configuration(api).metadata.annotations[failClosedAnnotation], 'required.sidecar-injector.io');
  const cert = new X509Certificate(pairB.cert);
  t.true(cert.verify(new X509Certificate(ca).publicKey));
  for (const name of [serviceHost, `${serviceHost}.cluster.local`]) t.is(cert.checkHost(name), name);
  // Each replica's server, verified the way the API server verifies it.
  for (const pair of [pairA, pairB]) {
    const { port } = await tlsServer(t, pair);
    t.is((await handshake(port, bundles(api)[0])).status, 200);
  }
  t.is(b.status().leading, false);
  t.is(a.status().secret, 'sidecar-injector/sidecar-injector-tls');

  // The leader goes (releasing its lease): the other takes over and finds nothing to do.
  const elected = once(b, 'leading');
  await a.stop();
  await elected;
  t.true(b.isLeader());
  t.deepEqual(await b.reconcile(), { plan: 'keep', patchedWebhooks: [] });
  t.is(b.current(), pairB);
});

test('the SidecarTemplate webhook gets the CA with the pod webhooks, and is armed Fail with the required one', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.addWebhookConfiguration(shipped('MutatingWebhookConfiguration'));
  api.serviceEndpoints.set(`${namespace}/sidecar-injector`, [true]);
  const leader = await replica(api, 'leader');
  await leader.reconcile();
  const ca = field(secretOf(api), 'ca.crt');
  t.deepEqual(bundles(api), [ca, ca, ca]);
  t.deepEqual(
    configuration(api).webhooks.map((w: Obj) => [w.name, w.failurePolicy]),
    [
      ['required.sidecar-injector.io', 'Fail'],
      ['optional.sidecar-injector.io', 'Ignore'],
      ['templates.sidecar-injector.io', 'Fail'],
    ],
  );
  t.deepEqual(leader.status().failingOpen, []);
});

test("armed once, recorded: an operator's Ignore (kubectl patch) is never reverted; an apply of the manifests resets the record and is armed again; an overlay that names no fail-closed webhook is never armed", async (t) => {
  const api = await cluster(t);
  const leader = await replica(api, 'leader');
  t.is(leader.status().failingOpen, null, 'not read yet');
  await leader.reconcile();
  t.is(configuration(api).webhooks[0].failurePolicy, 'Fail');
  t.is(configuration(api).metadata.annotations[armedAnnotation], 'required.sidecar-injector.io');
  t.deepEqual(leader.status().failingOpen, [], 'armed: nothing fails open');
  // The operator sets Ignore during an incident (kubectl patch): the injector's later rounds leave it.
  const patched = structuredClone(configuration(api));
  patched.webhooks[0].failurePolicy = 'Ignore';
  api.addWebhookConfiguration(patched);
  t.deepEqual(await leader.reconcile(), { plan: 'keep', patchedWebhooks: [] });
  t.is(configuration(api).webhooks[0].failurePolicy, 'Ignore');
  // Left so, it is never forgotten: /status and the metric name it until someone sets Fail again.
  t.deepEqual(leader.status().failingOpen, ['required.sidecar-injector.io']);
  t.deepEqual(await leader.reconcile(), { plan: 'keep', patchedWebhooks: [] });
  t.deepEqual(leader.status().failingOpen, ['required.sidecar-injector.io']);
  // The optional webhook is Ignore by design: never reported.
  t.false(leader.status().failingOpen!.includes('optional.sidecar-injector.io'));
  // kubectl apply of the manifests (an upgrade): what they set comes back (Ignore, an empty
  // record), what they do not set stays (the caBundles): armed again.
  const applied = shippedPodWebhooks();
  applied.webhooks = applied.webhooks.map((w: Obj, i: number) => ({
    ...w,
    clientConfig: { ...w.clientConfig, caBundle: configuration(api).webhooks[i].clientConfig.caBundle },
  }));
  t.is(applied.metadata.annotations[armedAnnotation], '', 'the manifests ship an empty record');
  api.addWebhookConfiguration(applied);
  t.deepEqual(await leader.reconcile(), { plan: 'keep', patchedWebhooks: ['required.sidecar-injector.io'] });
  t.is(configuration(api).webhooks[0].failurePolicy, 'Fail');
  await leader.reconcile();
  t.deepEqual(leader.status().failingOpen, [], 'armed again: nothing fails open');
  // An overlay that keeps the required webhook as it says (no fail-closed webhook named): never armed, the caBundle still written.
  const declared = shippedPodWebhooks();
  declared.metadata.annotations[failClosedAnnotation] = '';
  api.addWebhookConfiguration(declared);
  t.deepEqual(await leader.reconcile(), { plan: 'keep', patchedWebhooks: ['required.sidecar-injector.io', 'optional.sidecar-injector.io'] });
  t.deepEqual(
    configuration(api).webhooks.map((w: Obj) => [w.failurePolicy, Boolean(w.clientConfig.caBundle)]),
    [
      ['Ignore', true],
      ['Ignore', true],
    ],
  );
  // The injector's writes to the configuration: caBundles, and failurePolicy Fail with its record when it arms.
  t.deepEqual(
    api.writes.filter((w) => w.startsWith('PATCH')),
    [
      'PATCH mutatingwebhookconfigurations/sidecar-injector',
      'PATCH mutatingwebhookconfigurations/sidecar-injector',
      'PATCH mutatingwebhookconfigurations/sidecar-injector',
    ],
  );
});

test('no replica ready behind the Service: the CA is trusted but the required webhook stays Ignore; armed on the first round after one is', async (t) => {
  const api = await cluster(t);
  api.serviceEndpoints.delete(`${namespace}/sidecar-injector`);
  const leader = await replica(api, 'leader');
  t.like(await leader.reconcile(), { plan: 'issue-all', patchedWebhooks: ['required.sidecar-injector.io', 'optional.sidecar-injector.io'] });
  const ca = field(secretOf(api), 'ca.crt');
  t.deepEqual(bundles(api), [ca, ca], 'trusted at once: a replica serving it is reached');
  t.deepEqual(
    configuration(api).webhooks.map((w: Obj) => w.failurePolicy),
    ['Ignore', 'Ignore'],
  );
  // Endpoints, none ready yet (the replicas' readiness probes still failing): still not armed.
  api.serviceEndpoints.set(`${namespace}/sidecar-injector`, [false, false]);
  t.deepEqual(await leader.reconcile(), { plan: 'keep', patchedWebhooks: [] });
  t.is(configuration(api).webhooks[0].failurePolicy, 'Ignore');
  t.deepEqual(leader.status().failingOpen, [], 'waiting to be armed is not failing open');
  api.serviceEndpoints.set(`${namespace}/sidecar-injector`, [false, true]);
  t.deepEqual(await leader.reconcile(), { plan: 'keep', patchedWebhooks: ['required.sidecar-injector.io'] });
  t.deepEqual(
    configuration(api).webhooks.map((w: Obj) => w.failurePolicy),
    ['Fail', 'Ignore'],
  );
  // Armed stays armed, whatever the endpoints do later (a rollout of the injector).
  api.serviceEndpoints.delete(`${namespace}/sidecar-injector`);
  t.deepEqual(await leader.reconcile(), { plan: 'keep', patchedWebhooks: [] });
  t.is(configuration(api).webhooks[0].failurePolicy, 'Fail');
});

test('renewal: the serving certificate in the last third of its life is reissued from the same CA, a CA is replaced with the old one still trusted, and every replica follows', async (t) => {
  const api = await cluster(t);
  const clock = { now: Date.now() };
  const leader = await replica(api, 'leader', clock);
  const follower = await replica(api, 'follower', clock);
  const followed: string[] = [];
  follower.on('certificate', (pair) => followed.push(pair.fingerprint256));
  t.is((await leader.reconcile()).plan, 'issue-all');
  const first = await follower.refresh();
  const ca1 = field(secretOf(api), 'ca.crt');

  // A year's serving certificate, 250 days on: less than a third left.
  clock.now += 250 * day;
  api.writes.length = 0;
  const serving = await leader.reconcile();
  t.like(serving, { plan: 'issue-serving', patchedWebhooks: [] });
  t.deepEqual(api.writes, ['PUT secrets/sidecar-injector-tls'], 'the caBundle stays');
  t.is(field(secretOf(api), 'ca.crt'), ca1);
  const second = await follower.refresh();
  t.not(second?.cert, first?.cert);
  t.true(new X509Certificate(second!.cert).verify(new X509Certificate(ca1).publicKey));
  t.true(second!.notAfter.getTime() > clock.now + 300 * day);

  // Eight years on, the ten-year CA has less than a third left: a new CA, the old one still trusted.
  clock.now += 8 * 365 * day;
  api.writes.length = 0;
  const rotated = await leader.reconcile();
  t.is(rotated.plan, 'issue-all');
  t.deepEqual(rotated.patchedWebhooks, ['required.sidecar-injector.io', 'optional.sidecar-injector.io']);
  t.deepEqual(api.writes, ['PATCH mutatingwebhookconfigurations/sidecar-injector', 'PUT secrets/sidecar-injector-tls'], 'trusted before served');
  const bundle = splitCertificates(field(secretOf(api), 'ca.crt'));
  t.is(bundle.length, 2);
  t.is(bundle[1], splitCertificates(ca1)[0]);
  t.deepEqual(bundles(api), [bundle.join(''), bundle.join('')]);
  const third = await follower.refresh();
  t.true(new X509Certificate(third!.cert).verify(new X509Certificate(bundle[0]!).publicKey));
  t.deepEqual(followed, [first!.fingerprint256, second!.fingerprint256, third!.fingerprint256]);

  // Nothing due: nothing written.
  api.writes.length = 0;
  t.deepEqual(await leader.reconcile(), { plan: 'keep', patchedWebhooks: [] });
  t.deepEqual(api.writes, []);
  t.is(await follower.refresh(), third);
});

test('a Secret that holds a valid CA and certificate is adopted; a broken one is replaced', async (t) => {
  const api = await cluster(t);
  const leader = await replica(api, 'leader');
  await leader.reconcile();
  const adopted = structuredClone(secretOf(api));
  const api2 = await cluster(t);
  api2.secrets.set(`${namespace}/sidecar-injector-tls`, adopted);
  const second = await replica(api2, 'leader');
  t.like(await second.reconcile(), { plan: 'keep', patchedWebhooks: ['required.sidecar-injector.io', 'optional.sidecar-injector.io'] });
  t.deepEqual(api2.writes, ['PATCH mutatingwebhookconfigurations/sidecar-injector']);
  t.deepEqual(bundles(api2), [field(adopted, 'ca.crt'), field(adopted, 'ca.crt')]);

  api2.secrets.get(`${namespace}/sidecar-injector-tls`)!.data['ca.key'] = Buffer.from('not a key').toString('base64');
  const replaced = await second.reconcile();
  t.is(replaced.plan, 'issue-all');
  t.regex(replaced.reason ?? '', /^the Secret holds no valid certificates: /);
  t.not(field(secretOf(api2), 'ca.crt'), field(adopted, 'ca.crt'));
  t.is(secretOf(api2).metadata.uid, adopted.metadata.uid, 'updated in place, not recreated');
});

test('the Secret deleted, or replaced with a CA of its own: every CA the webhooks trusted stays trusted, so a replica still serving from it is never refused', async (t) => {
  const api = await cluster(t);
  // One time for the replica and the operator's certificates: judged and made on the same clock.
  const clock = { now: Date.UTC(2026, 10, 27) };
  const leader = await replica(api, 'leader', clock);
  await leader.reconcile();
  const first = structuredClone(secretOf(api));
  const trusts = (servingPem: string) =>
    bundles(api).every((b: string) => splitCertificates(b).some((ca) => new X509Certificate(servingPem).verify(new X509Certificate(ca).publicKey)));
  // Deleted: a new CA, and the old one beside it in the caBundles (and the Secret's bundle) while it is valid.
  api.secrets.delete(`${namespace}/sidecar-injector-tls`);
  const remade = await leader.reconcile();
  t.is(remade.plan, 'issue-all');
  t.true(trusts(field(first, 'tls.crt')), 'the certificate replicas still serve is trusted');
  t.true(trusts(field(secretOf(api), 'tls.crt')), 'and the new one');
  t.deepEqual(splitCertificates(field(secretOf(api), 'ca.crt')).slice(1), splitCertificates(field(first, 'ca.crt')));
  // Replaced by an operator with their own CA and certificate, the bundle holding their CA only.
  const second = structuredClone(secretOf(api));
  const own = await createCa(30, 'operator CA', clock.now);
  const ownServing = await createServingCertificate(own, serviceDnsNames('sidecar-injector', namespace), [], 30, clock.now);
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  secretOf(api).data = { 'tls.crt': b64(ownServing.cert), 'tls.key': b64(ownServing.key), 'ca.crt': b64(own.cert), 'ca.key': b64(own.key) };
  const extended = await leader.reconcile();
  t.is(extended.plan, 'extend-bundle');
  t.regex(extended.reason ?? '', /^the webhooks trust 2 CAs the Secret's bundle lacks/);
  t.is(field(secretOf(api), 'tls.crt'), ownServing.cert, 'the operator’s certificate is served');
  for (const serving of [first, second].map((s) => field(s, 'tls.crt')).concat(ownServing.cert)) t.true(trusts(serving));
  t.is((await leader.reconcile()).plan, 'keep', 'and then nothing more to do');
});

test('two replicas reconciling at once write one Secret; the loser is told of the conflict and agrees next round', async (t) => {
  const api = await cluster(t);
  const [a, b] = [await replica(api, 'a'), await replica(api, 'b')];
  const results = await Promise.allSettled([a.reconcile(), b.reconcile()]);
  for (const r of results) if (r.status === 'rejected') t.regex((r.reason as Error).message, /HTTP 409/);
  t.is(api.writes.filter((w) => w.startsWith('POST secrets')).length, 1);
  t.is((await a.reconcile()).plan, 'keep');
  t.is((await b.reconcile()).plan, 'keep');
  t.is((await a.refresh())?.cert, (await b.refresh())?.cert);
});

test('without the RBAC rule the error names the verb, the object and where the rules are; without the configuration, that it is missing', async (t) => {
  const api = await cluster(t);
  const leader = await replica(api, 'leader');
  api.forbidden.add('secrets');
  const forbidden = await t.throwsAsync(leader.reconcile(), { instanceOf: CertificateControllerError });
  t.is(forbidden.code, 'ERR_SELF_MANAGED_CERTIFICATES');
  t.is(
    forbidden.message,
    'get Secret sidecar-injector/sidecar-injector-tls: forbidden (HTTP 403): the service account needs the rule for it (manifests/base/certificates-rbac.yaml)',
  );
  api.forbidden.clear();
  api.webhookConfigurations.clear();
  const missing = await t.throwsAsync(leader.reconcile(), { instanceOf: CertificateControllerError });
  t.is(missing.message, 'get MutatingWebhookConfiguration sidecar-injector: not found (HTTP 404)');
  t.is(await leader.refresh(), leader.current(), 'the Secret it made is served meanwhile');
  t.truthy(leader.current());
});

test('serve --tls-secret is refused beside --tls-cert, and outside a cluster without --kubeconfig', (t) => {
  const both = t.throws(() => loadConfig({}, ['--tls-secret', 's', '--tls-cert', 'a', '--tls-key', 'b', '--kubeconfig', 'k']), { instanceOf: ConfigError });
  t.deepEqual(both.problems, ['--tls-secret and --tls-cert/--tls-key are two sources of the serving certificate: give one']);
  const outside = t.throws(() => loadConfig({}, ['--tls-secret', 's']), { instanceOf: ConfigError });
  t.deepEqual(outside.problems, ['--tls-secret needs the cluster: run in a pod, or give --kubeconfig']);
  const names = t.throws(() => loadConfig({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }, ['--tls-secret', '__proto__', '--service', 'a.b', '--namespace', 'X']), {
    instanceOf: ConfigError,
  });
  t.deepEqual(names.problems, [
    '--tls-secret: expected a Secret name, a DNS-1123 subdomain (got "__proto__")',
    '--service: expected a Service name, a DNS-1123 label (got "a.b")',
    '--namespace / POD_NAMESPACE: expected a DNS-1123 label (got "X")',
  ]);
  t.like(loadConfig({ POD_NAMESPACE: 'team-a' }, ['--tls-secret', 's', '--kubeconfig', 'k']), {
    namespace: 'team-a',
    selfManaged: { secretName: 's', webhookConfigurationName: 'sidecar-injector', serviceName: 'sidecar-injector' },
  });
});

/**
 * `serve` with the Deployment's own arguments, outside a cluster: only --kubeconfig and --host
 * added, and ephemeral ports for its three listeners; the templates are the API server's (the
 * bundled examples). Each log line is emitted on `logs` under its message.
 */
function spawnLikeTheDeployment(t: { teardown(fn: () => unknown): void }, api: FakeApiServer, kubeconfig: string, podName: string) {
  const container = shipped('Deployment').spec.template.spec.containers[0];
  const own = (container.args as string[]).filter((a) => !/^--(port|host|metrics-port|probe-port)=/.test(a));
  applyExamples(api);
  const ports = ['--port', '0', '--metrics-port', '0', '--probe-port', '0'];
  const child = spawn(
    process.execPath,
    ['dist/src/cli/main.js', ...own, '--kubeconfig', kubeconfig, '--host', '127.0.0.1', ...ports, '--shutdown-delay-ms', '0'],
    {
      env: { ...process.env, POD_NAME: podName, POD_NAMESPACE: namespace },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  t.teardown(() => void child.kill('SIGKILL'));
  const logs = new EventEmitter();
  createInterface({ input: child.stdout! }).on('line', (line) => {
    const record = JSON.parse(line);
    logs.emit(record.msg, record);
    logs.emit('line', record);
  });
  return { child, exited, own, logs };
}

/** The same, once it listens. */
async function serveLikeTheDeployment(t: { teardown(fn: () => unknown): void }, api: FakeApiServer, kubeconfig: string, podName: string) {
  const { child, exited, own, logs } = spawnLikeTheDeployment(t, api, kubeconfig, podName);
  const listening = await new Promise<Record<string, number>>((resolve, reject) => {
    logs.once('listening', (record) => resolve(record));
    void exited.then((code) => reject(new Error(`serve exited with ${code} before listening`)));
  });
  // The three listeners of the Deployment: the webhooks, /metrics and /status, the probes.
  const ports = [listening.port!, listening.metricsPort!, listening.probePort!];
  return { child, port: listening.port!, ports, exited, own, logs };
}

test('SIGTERM while a replica waits for its certificate (the Secret cannot be written): it stops what started, releases the lease and exits 0; it never listened', async (t) => {
  const api = await cluster(t);
  api.create('default');
  api.forbidden.add('secrets');
  const kubeconfig = join(await mkdtemp(join(tmpdir(), 'sidecar-injector-certs-')), 'kubeconfig');
  await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
  const { child, exited, logs } = spawnLikeTheDeployment(t, api, kubeconfig, 'injector-a');
  const messages: string[] = [];
  logs.on('line', (record: { msg: string }) => messages.push(record.msg));
  const lease = () => api.leases.get(`${namespace}/sidecar-injector-leader`)?.spec.holderIdentity;
  await until(() => messages.includes('waiting for the serving certificate in the Secret') && lease() === 'injector-a', 'waiting, and leading');
  child.kill('SIGTERM');
  t.is(await exited, 0);
  t.false(messages.includes('listening'));
  t.true(messages.includes('stopped'));
  t.is(lease(), '', 'the lease released on the way out');
});

test("serve with the Deployment's flags runs outside a cluster: two replicas, one certificate from the Secret, trusted through the caBundle, renewals followed without a restart; SIGTERM exits 0", async (t) => {
  const api = await cluster(t);
  api.create('default');
  const kubeconfig = join(await mkdtemp(join(tmpdir(), 'sidecar-injector-certs-')), 'kubeconfig');
  await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
  const a = await serveLikeTheDeployment(t, api, kubeconfig, 'injector-a');
  const b = await serveLikeTheDeployment(t, api, kubeconfig, 'injector-b');
  t.true(a.own.includes('--tls-secret=sidecar-injector-tls'));
  const caBundle = bundles(api)[0];
  t.truthy(caBundle);
  const [readyA, readyB] = [await handshake(a.port, caBundle), await handshake(b.port, caBundle)];
  t.is(readyA.fingerprint256, readyB.fingerprint256, 'both serve the Secret’s certificate');
  t.is(readyA.fingerprint256, new X509Certificate(field(secretOf(api), 'tls.crt')).fingerprint256);
  t.is(configuration(api).webhooks[0].failurePolicy, 'Fail');

  // A renewed certificate in the Secret (from the same CA): both replicas serve it, without a restart.
  const secret = secretOf(api);
  const renewed = await createServingCertificate(
    { cert: field(secret, 'ca.crt'), key: field(secret, 'ca.key') },
    serviceDnsNames('sidecar-injector', namespace),
    [],
    365,
  );
  const followed = [a, b].map((replica) => once(replica.logs, 'serving certificate renewed from the Secret'));
  api.secrets.set(`${namespace}/sidecar-injector-tls`, {
    ...secret,
    metadata: { ...secret.metadata, resourceVersion: `${secret.metadata.resourceVersion}1` },
    data: { ...secret.data, 'tls.crt': Buffer.from(renewed.cert).toString('base64'), 'tls.key': Buffer.from(renewed.key).toString('base64') },
  });
  await Promise.all(followed);
  const fingerprint = new X509Certificate(renewed.cert).fingerprint256;
  // On every listener of both: the webhook port, the metrics port, the probe port.
  const served = [];
  for (const port of [...a.ports, ...b.ports]) served.push((await handshake(port, caBundle)).fingerprint256);
  t.deepEqual(served, Array<string>(6).fill(fingerprint));
  t.is((await handshake(a.ports[2]!, caBundle)).status, 200, '/readyz on the probe port');

  // The follower first: with no replica left to take the lease over, the leader's release is what remains.
  const lease = () => api.leases.get(`${namespace}/sidecar-injector-leader`)?.spec.holderIdentity;
  const [leader, follower] = lease() === 'injector-a' ? [a, b] : [b, a];
  follower.child.kill('SIGTERM');
  t.is(await follower.exited, 0);
  leader.child.kill('SIGTERM');
  t.is(await leader.exited, 0);
  t.is(lease(), '', 'the leader released its lease');
});

test('overlapping rounds on two replicas, renewing at once, never leave a caBundle that does not trust the Secret’s CA', async (t) => {
  const failures: string[] = [];
  for (let i = 0; i < 24; i++) {
    const api = await cluster(t);
    const [a, b] = [await replica(api, `a${i}`), await replica(api, `b${i}`)];
    await a.reconcile();
    // The Secret replaced by a broken one: both rounds plan a new CA from the same reads.
    const broken = structuredClone(secretOf(api));
    broken.data['ca.crt'] = Buffer.from('not a certificate').toString('base64');
    api.secrets.set(`${namespace}/sidecar-injector-tls`, broken);
    await Promise.allSettled([a.reconcile(), b.reconcile()]);
    // The CA that signed the Secret's serving certificate is in every webhook's caBundle.
    const serving = new X509Certificate(field(secretOf(api), 'tls.crt'));
    const signer = splitCertificates(field(secretOf(api), 'ca.crt')).find((pem) => serving.checkIssued(new X509Certificate(pem)));
    if (!signer) failures.push(`try ${i}: the Secret holds no CA of its serving certificate`);
    else if (
      !bundles(api).every((bundle: string) =>
        splitCertificates(bundle).some((pem) => new X509Certificate(pem).fingerprint256 === new X509Certificate(signer).fingerprint256),
      )
    )
      failures.push(`try ${i}: a caBundle does not trust the CA of the Secret's serving certificate`);
  }
  t.deepEqual(failures, []);
});

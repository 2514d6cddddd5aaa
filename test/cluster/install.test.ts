/**
 * The install as a user does it, on the real API server: the README's `make deploy` (the world
 * ran it before any test), the injector's pods run with the identity of its ServiceAccount, the
 * self-managed certificates made, both caBundles written, the required webhook armed.
 */
import test from 'ava';
import { X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { deploy, healthyInstall, injectorLogLines, injectorPods, joinWorld, sidecarTemplatesPath, type Json } from './helpers.js';

test('the README’s install gives a healthy install: both replicas ready behind the Service, kubectl says so', async (t) => {
  const { kube, kubectl } = joinWorld();
  const deployment = await kube.get('/apis/apps/v1/namespaces/sidecar-injector/deployments/sidecar-injector');
  t.is(deployment.spec.replicas, 2);
  t.is(deployment.status.readyReplicas, 2);
  t.true((deployment.status.conditions as Json[]).some((c) => c.type === 'Available' && c.status === 'True'));
  const rollout = await kubectl(['-n', 'sidecar-injector', 'rollout', 'status', 'deployment/sidecar-injector', '--timeout=60s']);
  t.regex(rollout.stdout, /successfully rolled out/);
  // The Service's endpoints are the two ready pods on the container port the manifests name.
  const slices = await kube.get(
    '/apis/discovery.k8s.io/v1/namespaces/sidecar-injector/endpointslices?labelSelector=kubernetes.io%2Fservice-name%3Dsidecar-injector',
  );
  const ready = (slices.items as Json[]).flatMap((s) => (s.endpoints as Json[]).filter((e) => e.conditions.ready)).length;
  t.is(ready, 2);
  t.deepEqual(
    (slices.items as Json[]).flatMap((s) => (s.ports as Json[]).map((p) => p.port)).sort((a: number, b: number) => a - b),
    [8443, 10250],
    'the webhooks and the metrics port',
  );
  const pods = await injectorPods();
  t.is(pods.length, 2);
  // Each port serves its own: the webhook port no /metrics or /status (it says where they are),
  // the metrics port no reviews; the kubelet's probes (the pods are ready) on the probe port.
  const proxied = (pod: string, port: number, path: string) =>
    kube.request('GET', `/api/v1/namespaces/sidecar-injector/pods/https:${pod}:${port}/proxy${path}`);
  const pod = pods[0]!.metadata.name as string;
  for (const path of ['/metrics', '/status']) {
    const onWebhookPort = await proxied(pod, 10250, path);
    t.is(onWebhookPort.status, 404, `${path} on the webhook port`);
    t.is(JSON.parse(onWebhookPort.text).message, `no route for GET ${path} on this port: it is served on the metrics port (--metrics-port)`);
    t.is((await proxied(pod, 8443, path)).status, 200, `${path} on the metrics port`);
  }
  for (const path of ['/healthz', '/readyz']) t.is((await proxied(pod, 10250, path)).status, 404, `${path} not on the webhook port`);
  t.is((await proxied(pod, 8081, '/readyz')).status, 200, 'the probe port');
  t.is((await proxied(pod, 8443, '/mutate')).status, 404, 'no reviews on the metrics port');
  for (const pod of pods) {
    t.is(pod.spec.serviceAccountName, 'sidecar-injector');
    t.is(pod.status.phase, 'Running');
  }
});

test('the self-managed certificates: the Secret holds a CA and a serving certificate for the Service, and both caBundles trust it', async (t) => {
  const { kube } = joinWorld();
  const secret = await kube.get('/api/v1/namespaces/sidecar-injector/secrets/sidecar-injector-tls');
  const decode = (key: string) => Buffer.from(secret.data[key], 'base64').toString('utf8');
  const ca = new X509Certificate(decode('ca.crt'));
  const serving = new X509Certificate(decode('tls.crt'));
  t.true(serving.verify(ca.publicKey), 'the serving certificate is signed by the CA in the Secret');
  t.regex(serving.subjectAltName ?? '', /DNS:sidecar-injector\.sidecar-injector\.svc\b/);
  const configuration = await kube.get('/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/sidecar-injector');
  for (const webhook of configuration.webhooks as Json[]) {
    const bundle = Buffer.from(webhook.clientConfig.caBundle, 'base64').toString('utf8');
    t.true(bundle.includes(decode('ca.crt').trim()), `${webhook.name}'s caBundle holds the Secret's CA`);
  }
  const policies = Object.fromEntries((configuration.webhooks as Json[]).map((w) => [w.name, w.failurePolicy]));
  t.deepEqual(
    policies,
    { 'required.sidecar-injector.io': 'Fail', 'optional.sidecar-injector.io': 'Ignore', 'templates.sidecar-injector.io': 'Fail' },
    'the required webhook and the SidecarTemplate one are armed, the optional one is not',
  );
});

test('the required webhook is armed only once a replica is ready behind the Service: never while no replica could answer', async (t) => {
  // The log lines of every injector pod the world ran so far (the install's own, as this suite starts with it).
  const lines = injectorLogLines()
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Json)
    .sort((a, b) => a.time - b.time);
  const armed = lines.find((l) => l.msg === 'webhook caBundle written' && (l.armed as string[] | undefined)?.includes('required.sidecar-injector.io'));
  const firstListening = lines.find((l) => l.msg === 'listening');
  const notYet = lines.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('fail-closed webhooks not armed yet'));
  t.truthy(armed, 'the leader armed the required webhook');
  t.truthy(firstListening);
  t.true(notYet.length > 0, 'the first round wrote the CA while no replica was ready, and said why it did not arm');
  t.true(notYet[0]!.time < armed!.time);
  t.true(armed!.time > firstListening!.time, 'armed after a replica was answering');
});

test('a fresh install injects nothing: a pod of an opted-in namespace came through the real chain as it was sent, until templates were applied', (t) => {
  const { file } = joinWorld();
  const fresh = file.freshInstall;
  if (!fresh) return t.fail('the world opted in no namespace');
  t.deepEqual(fresh.initContainers, []);
  t.deepEqual(fresh.containers, ['app']);
  t.false(
    Object.keys(fresh.annotations).some((k) => k.startsWith('sidecar-injector.io/')),
    'no ledger annotation',
  );
});

test('make deploy pinned the image to the pushed digest; deploying again leaves the Deployment as it is and the templates alone (the SidecarTemplates are the user’s)', async (t) => {
  const { kube, file } = joinWorld();
  const deploymentPath = '/apis/apps/v1/namespaces/sidecar-injector/deployments/sidecar-injector';
  const pushed = readFileSync(file.deploy.digestFile, 'utf8').trim();
  t.is(pushed.split('@')[0], file.deploy.image.replace(/:[^/:]*$/, ''));
  t.regex(pushed, /@sha256:[0-9a-f]{64}$/);
  const templates = async () =>
    ((await kube.get(sidecarTemplatesPath())).items as Json[]).map((o) => `${o.metadata.name}@${o.metadata.resourceVersion}`).sort();
  const before = { deployment: await kube.get(deploymentPath), templates: await templates() };
  t.is(before.deployment.spec.template.spec.containers[0].image, pushed);
  t.deepEqual(
    before.templates.map((o) => o.split('@')[0]),
    ['log-shipper', 'proxy'],
  );
  const applied = await deploy();
  t.notRegex(applied, /sidecartemplate\.sidecar-injector\.io\//, 'the install names no SidecarTemplate');
  t.regex(applied, /deployment\.apps\/sidecar-injector unchanged/);
  t.is((await kube.get(deploymentPath)).metadata.generation, before.deployment.metadata.generation);
  // The status the leader writes may move a resourceVersion: the specs are compared by generation.
  const generations = async () => ((await kube.get(sidecarTemplatesPath())).items as Json[]).map((o) => `${o.metadata.name}:${o.metadata.generation}`).sort();
  t.deepEqual(await generations(), ['log-shipper:1', 'proxy:1']);
  // The apply set the webhooks back to the shipped Ignore and emptied the armed record: the
  // injector arms the required one again (a later test must find it armed).
  await healthyInstall();
});

/** Operating it: metrics that move, template hot reload under load, /status, SIGTERM under load. */
import test from 'ava';
import { createReviewer } from '../src/admission/mutate.js';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdir, mkdtemp, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createMetrics } from '../src/metrics.js';
import { TemplateStore } from '../src/templates/store.js';
import { createApp } from '../src/app.js';
import { pino } from 'pino';
import { startServer, defaultTimeouts } from '../src/server.js';
import { createReview, decodePatch, prepareCreate } from './helpers/apiserver.js';
import { httpsCall } from './helpers/https.js';
import { startLoad } from './helpers/load.js';
import { startTestServer, testCertificates, testNamespaces } from './helpers/server.js';
import { logShipperDoc, templateSet } from './helpers/templates.js';
import { pod } from './helpers/pods.js';
import { spawnServe } from './helpers/process.js';
import { bareExampleText } from './helpers/templates.js';

const podBody = pod({ generateName: 'web-', containers: [{ name: 'web', image: 'nginx' }] });
const review = () => createReview(prepareCreate(podBody, 'shop'), { namespace: 'shop' });

function metricValue(text: string, line: string): number {
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found ? Number(found.slice(line.length + 1)) : 0;
}

test('metrics are exposed and move with reviews and errors', async (t) => {
  const server = await startTestServer({ templates: templateSet(logShipperDoc) });
  t.teardown(() => server.stop());
  const patchedLine = 'sidecar_injector_reviews_total{operation="CREATE",decision="patched",reason="injected"}';
  const before = (await server.request('GET', '/metrics')).text;
  t.is(metricValue(before, patchedLine), 0);
  for (let i = 0; i < 3; i++) await server.post(review());
  await server.request('POST', '/mutate', '{', { 'content-type': 'application/json' });
  const skipped = createReview(prepareCreate(podBody, 'plain'), { namespace: 'plain' });
  await server.post(skipped);
  const res = await server.request('GET', '/metrics');
  t.is(res.status, 200);
  t.regex(String(res.headers['content-type']), /text\/plain/);
  t.is(metricValue(res.text, patchedLine), 3);
  t.is(metricValue(res.text, 'sidecar_injector_reviews_total{operation="CREATE",decision="allowed",reason="namespace-not-enabled"}'), 1);
  t.is(metricValue(res.text, 'sidecar_injector_injections_total{template="logs"}'), 3);
  t.is(metricValue(res.text, 'sidecar_injector_review_duration_seconds_count'), 4);
  t.is(metricValue(res.text, 'sidecar_injector_errors_total{code="ERR_MALFORMED_JSON"}'), 1);
  t.regex(res.text, /sidecar_injector_process_resident_memory_bytes \d+/);
});

/** A templates directory laid out like a mounted ConfigMap: files are links into `..data`. */
async function configMapDir(files: Record<string, string>): Promise<{ dir: string; publish: (files: Record<string, string>) => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-templates-'));
  let generation = 0;
  const publish = async (next: Record<string, string>) => {
    const version = join(dir, `..2026_11_22_${++generation}`);
    await mkdir(version);
    for (const [name, text] of Object.entries(next)) await writeFile(join(version, name), text);
    await symlink(version, join(dir, '..data_tmp'));
    await rename(join(dir, '..data_tmp'), join(dir, '..data'));
    for (const name of Object.keys(next)) await symlink(join('..data', name), join(dir, name)).catch(() => undefined);
  };
  await publish(files);
  return { dir, publish };
}

const logsYaml = bareExampleText('log-shipper');
const proxyYaml = bareExampleText('proxy');
const automaticProxy = proxyYaml.replace('injection: on-request', 'injection: automatic');

test('template reload under load: a valid set is taken, a broken set is refused and the last good one kept, no request fails', async (t) => {
  const { dir, publish } = await configMapDir({ 'log-shipper.yaml': logsYaml });
  const store = await TemplateStore.load(dir);
  const { key, cert, caCert } = await testCertificates();
  const app = createApp({
    log: pino({ level: 'silent' }),
    metrics: createMetrics(),
    maxBodyBytes: 1 << 20,
    reviewer: createReviewer({ templates: () => store.current(), namespaces: testNamespaces }),
    isReady: () => true,
    status: () => ({ templates: store.status() }),
  });
  const running = await startServer(app.callback(), { host: '127.0.0.1', port: 0, key, cert, timeouts: defaultTimeouts });
  const agent = new https.Agent({ keepAlive: true, ca: caCert });
  t.teardown(async () => {
    agent.destroy();
    running.server.closeAllConnections();
    await running.close();
  });
  const post = async () => {
    const answer = await httpsCall({ port: running.port, agent, path: '/mutate', body: JSON.stringify(review()) });
    return { status: answer.status, body: JSON.parse(answer.text) };
  };
  const injectedNames = (body: any) =>
    decodePatch(body.response).flatMap((op) =>
      op.path === '/spec/initContainers' ? op.value.map((c: any) => c.name) : op.path.startsWith('/spec/containers/') && op.value?.image ? [op.value.name] : [],
    );
  const load = startLoad(4, async () => {
    const r = await post();
    return { status: r.status, names: injectedNames(r.body) };
  });
  const { results, waitFor } = load;
  await waitFor(10);
  t.is(store.generation, 1);

  const reloaded = once(store, 'reload');
  await publish({ 'log-shipper.yaml': logsYaml, 'proxy.yaml': automaticProxy });
  await store.reloadNow();
  await reloaded;
  t.is(store.generation, 2);
  await waitFor(10);
  t.deepEqual(results.at(-1)?.names.sort(), ['log-shipper', 'proxy']);

  const rejected = once(store, 'rejected');
  await publish({ 'log-shipper.yaml': logsYaml, 'proxy.yaml': automaticProxy.replace('{{ params.image }}', '{{ params.imag }}') });
  await store.reloadNow();
  await rejected;
  t.is(store.generation, 2, 'the last good set stays');
  t.regex(store.status().lastError?.message ?? '', /proxy\.yaml: initContainers\[0\]\.image: .*not declared/);
  await waitFor(10);
  t.deepEqual(results.at(-1)?.names.sort(), ['log-shipper', 'proxy']);
  const status = JSON.parse((await httpsCall({ port: running.port, agent, path: '/status' })).text);
  t.is(status.templates.generation, 2);
  t.truthy(status.templates.lastError);

  // Fixed on disk: taken again, and the error clears.
  await publish({ 'log-shipper.yaml': logsYaml });
  await rm(join(dir, 'proxy.yaml'));
  await store.reloadNow();
  t.is(store.generation, 3);
  t.is(store.status().lastError, undefined);
  await waitFor(10);
  await load.stop();
  t.deepEqual(load.failures, []);
  t.true(results.every((r) => r.status === 200));
  t.deepEqual(results.at(-1)?.names, ['log-shipper']);
});

test('SIGTERM under load: readiness stays, every answer closes its connection, every request is answered, the process exits 0', async (t) => {
  const { child, port, ca, exited } = await spawnServe([
    '--namespace-labels',
    'dev/namespaces.yaml',
    // Long enough for the closing answers to be seen on a busy machine before the server closes.
    '--shutdown-delay-ms',
    '3000',
    '--shutdown-timeout-ms',
    '5000',
  ]);
  const agent = new https.Agent({ keepAlive: true, ca, maxSockets: 8 });
  t.teardown(() => agent.destroy());
  const call = async (method: string, path: string, body?: string) => await httpsCall({ port, agent, method, path, ...(body === undefined ? {} : { body }) });
  const body = await readFile(join('dev', 'sample-review.json'), 'utf8');
  const load = startLoad(6, async () => (await call('POST', '/mutate?timeout=10s', body)).status);
  await load.waitFor(30);
  child.kill('SIGTERM');
  // Draining, /readyz keeps its answer (a terminating endpoint that serves is kube-proxy's
  // fallback) and every answer says Connection: close, so that callers reconnect elsewhere.
  let readyz = await call('GET', '/readyz');
  while (readyz.headers.connection !== 'close') readyz = await call('GET', '/readyz');
  t.is(readyz.status, 200);
  // Like endpoints: traffic moves once the replica is seen draining.
  await load.stop();
  t.is(await exited, 0);
  t.deepEqual(load.failures, []);
  t.true(load.results.length > 30);
  t.true(load.results.every((s) => s === 200));
});

test('serve --help documents every operational flag', async (t) => {
  const child = spawn(process.execPath, [join('dist', 'src', 'cli', 'main.js'), 'serve', '--help'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let text = '';
  child.stdout.on('data', (c) => (text += c));
  // 'close', not 'exit': the process can exit before its output has all been read.
  await once(child, 'close');
  for (const flag of ['--shutdown-delay-ms', '--shutdown-timeout-ms', '--template-check-interval-ms', '--namespace-source', '--tls-cert'])
    t.true(text.includes(flag), flag);
});

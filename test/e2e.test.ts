import test from 'ava';
import tls from 'node:tls';
import { applyPatchV4, createReview, decodePatch, prepareCreate, reinvocationInput } from './helpers/apiserver.js';
import { pod } from './helpers/pods.js';
import { startTestServer, testCertificates, type TestServer } from './helpers/server.js';
import { logShipperDoc, proxyDoc, templateSet } from './helpers/templates.js';

const templates = templateSet(logShipperDoc, proxyDoc);
const podBody = pod({ containers: [{ name: 'web', image: 'nginx:1.27', env: [{ name: 'DB_PASSWORD', value: 'hunter2-secret' }] }] });

let server: TestServer;
test.before(async () => {
  server = await startTestServer({ templates, maxBodyBytes: 64 * 1024, timeouts: { headersTimeoutMs: 500, requestTimeoutMs: 1000 } });
});
test.after.always(async () => {
  await server?.stop();
});

for (const version of ['v1', 'v1beta1'] as const) {
  test(`answers an AdmissionReview ${version} in ${version}, and the reinvocation with nothing`, async (t) => {
    const review = createReview(prepareCreate(podBody, 'shop'), { namespace: 'shop', version });
    const first = await server.post(review);
    t.is(first.status, 200);
    t.is(first.json.apiVersion, `admission.k8s.io/${version}`);
    t.is(first.json.kind, 'AdmissionReview');
    t.is(first.json.response.uid, review.request.uid);
    t.true(first.json.response.allowed);
    const patched = applyPatchV4(review.request.object, decodePatch(first.json.response)) as any;
    t.deepEqual(
      patched.spec.containers.map((c: any) => c.name),
      ['web', 'log-shipper'],
    );

    const second = await server.post(createReview(reinvocationInput(patched), { namespace: 'shop', version }));
    t.is(second.status, 200);
    t.deepEqual(Object.keys(second.json.response).sort(), ['allowed', 'uid']);
  });
}

test('routes on the path only: ?timeout=10s and a trailing slash reach /mutate', async (t) => {
  for (const path of ['/mutate?timeout=10s', '/mutate', '/mutate/', '/mutate?timeout=3s&x=1']) {
    const res = await server.post(createReview(prepareCreate(podBody, 'shop'), { namespace: 'shop' }), path);
    t.is(res.status, 200, path);
    t.is(res.json.response.patchType, 'JSONPatch', path);
  }
});

test('writes one log line per review with the decision, and never pod contents', async (t) => {
  const review = createReview(prepareCreate(podBody, 'shop'), { namespace: 'shop' });
  await server.post(review);
  const lines = server.logs.filter((l) => l.uid === review.request.uid);
  t.is(lines.length, 1);
  const line = lines[0]!;
  t.like(line, {
    msg: 'review',
    detail: 'injected logs',
    namespace: 'shop',
    pod: 'web-5d8f-',
    operation: 'CREATE',
    decision: 'patched',
    reason: 'injected',
    templates: ['logs'],
    patchOps: 8,
    dryRun: false,
  });
  t.is(typeof line.durationMs, 'number');
  t.false(JSON.stringify(server.logs).includes('hunter2-secret'));
  // The same pod again (another uid): remembered the second time, answered from the cache the
  // third, and logged with the same fields every time.
  const without = (l: Record<string, unknown>) => {
    const { uid: _uid, durationMs: _durationMs, time: _time, ...rest } = l;
    return rest;
  };
  for (const uid of ['again-1', 'again-2', 'again-3']) {
    await server.post({ ...review, request: { ...review.request, uid } });
    const again = server.logs.filter((l) => l.uid === uid);
    t.is(again.length, 1);
    t.deepEqual(without(again[0]!), without(line));
    t.is(typeof again[0]!.durationMs, 'number');
  }
});

// [title, method, path, body, headers, status, code]
const refusals: [string, string, string, string | Buffer, Record<string, string>, number, string][] = [
  ['malformed JSON', 'POST', '/mutate', '{"apiVersion":', { 'content-type': 'application/json' }, 400, 'ERR_MALFORMED_JSON'],
  ['an empty body', 'POST', '/mutate', '', { 'content-type': 'application/json' }, 400, 'ERR_MALFORMED_JSON'],
  ['invalid UTF-8', 'POST', '/mutate', Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x7d]), { 'content-type': 'application/json' }, 400, 'ERR_MALFORMED_JSON'],
  [
    'a review without uid',
    'POST',
    '/mutate',
    JSON.stringify({ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: {} }),
    { 'content-type': 'application/json' },
    400,
    'ERR_MALFORMED_REVIEW',
  ],
  ['a JSON array', 'POST', '/mutate', '[]', { 'content-type': 'application/json' }, 400, 'ERR_MALFORMED_REVIEW'],
  ['text/plain', 'POST', '/mutate', '{}', { 'content-type': 'text/plain' }, 415, 'ERR_UNSUPPORTED_MEDIA_TYPE'],
  ['no content type', 'POST', '/mutate', '{}', {}, 415, 'ERR_UNSUPPORTED_MEDIA_TYPE'],
  ['application/yaml', 'POST', '/mutate', 'a: 1', { 'content-type': 'application/yaml' }, 415, 'ERR_UNSUPPORTED_MEDIA_TYPE'],
  ['a body over the limit (Content-Length)', 'POST', '/mutate', 'x'.repeat(70 * 1024), { 'content-type': 'application/json' }, 413, 'ERR_BODY_TOO_LARGE'],
  ['an unknown path', 'POST', '/validate', '{}', { 'content-type': 'application/json' }, 404, 'ERR_NOT_FOUND'],
  ['GET on /mutate', 'GET', '/mutate', '', {}, 405, 'ERR_METHOD_NOT_ALLOWED'],
  ['POST on /healthz', 'POST', '/healthz', '', {}, 405, 'ERR_METHOD_NOT_ALLOWED'],
];
for (const [title, method, path, body, headers, status, code] of refusals) {
  test(`refuses ${title} with ${status} and a message`, async (t) => {
    const res = await server.request(method, path, body, headers);
    t.is(res.status, status);
    t.is(res.json?.code, code);
    t.true(typeof res.json?.message === 'string' && res.json.message.length > 10, res.text);
  });
}

test('accepts application/json with parameters', async (t) => {
  const body = JSON.stringify(createReview(prepareCreate(podBody, 'shop'), { namespace: 'shop' }));
  const res = await server.request('POST', '/mutate', body, { 'content-type': 'Application/JSON; charset=utf-8' });
  t.is(res.status, 200);
});

test('refuses a chunked body over the limit with 413', async (t) => {
  const res = await server.request('POST', '/mutate', 'x'.repeat(70 * 1024), { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
  t.is(res.status, 413);
  t.is(res.json?.code, 'ERR_BODY_TOO_LARGE');
});

test('health and readiness', async (t) => {
  const health = await server.request('GET', '/healthz');
  t.is(health.status, 200);
  t.deepEqual(health.json, { status: 'ok' });
  const ready = await server.request('GET', '/readyz');
  t.is(ready.status, 200);
  server.ready = false;
  try {
    const notReady = await server.request('GET', '/readyz');
    t.is(notReady.status, 503);
    t.deepEqual(notReady.json, { status: 'not ready' });
    // Liveness speaks for the process only.
    t.is((await server.request('GET', '/healthz')).status, 200);
  } finally {
    server.ready = true;
  }
});

test('a client that trickles its headers is cut off, and others are still served', async (t) => {
  const { caCert } = await testCertificates();
  const socket = tls.connect({ host: '127.0.0.1', port: server.port, ca: caCert, servername: 'localhost' });
  await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
  socket.write('POST /mutate HTTP/1.1\r\nHost: x\r\n');
  const received: Buffer[] = [];
  socket.on('data', (d: Buffer) => received.push(d));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  // Keep trickling a header byte now and then, never finishing the header block.
  const trickle = setInterval(() => socket.writable && socket.write('X'), 100);
  const during = await server.request('GET', '/healthz');
  t.is(during.status, 200);
  await closed;
  clearInterval(trickle);
  const answer = Buffer.concat(received).toString('utf8');
  t.true(answer === '' || answer.startsWith('HTTP/1.1 408'), answer);
});

test("the server uses a keep-alive timeout longer than Node's 5 s default", (t) => {
  t.true(server.server.keepAliveTimeout > 5000);
});

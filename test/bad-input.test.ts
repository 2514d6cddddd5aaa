/**
 * Bad input, 10,000 requests of it, generated with fast-check (seeded, so every run sends the
 * same requests): random JSON, a wrong type or a missing key at every field of a valid
 * AdmissionReview and of its Pod, truncated bodies, deep nesting, huge strings and arrays,
 * invalid UTF-8, wrong or missing content types, wrong methods and paths. Every answer must
 * be a 4xx with a message or a valid AdmissionReview — never a 5xx, a dropped connection or
 * a hang — and the server must answer a valid review correctly afterwards. Slow clients
 * are cut off by the timeouts without harming other connections.
 */
import test from 'ava';
import fc from 'fast-check';
import tls from 'node:tls';
import { loadTemplateDir } from '../src/templates/load.js';
import { applyPatchV4, createReview, decodePatch, prepareCreate } from './helpers/apiserver.js';
import { httpsCall } from './helpers/https.js';
import { startTestServer, testCertificates, type TestServer } from './helpers/server.js';

interface BadRequest {
  readonly category: string;
  readonly method: string;
  readonly path: string;
  readonly headers: Record<string, string>;
  readonly body: Buffer;
}

const json = { 'content-type': 'application/json' };
const validPod = prepareCreate(
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-', labels: { app: 'web' }, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
    spec: {
      initContainers: [{ name: 'init', image: 'busybox', command: ['true'] }],
      containers: [{ name: 'web', image: 'nginx', env: [{ name: 'A', value: '1' }], volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
      volumes: [{ name: 'data', emptyDir: {} }],
    },
  },
  'shop',
);
const validReview = createReview(validPod, { namespace: 'shop', uid: 'valid-uid' });
const validText = JSON.stringify(validReview);

/** Every path (as key lists) in a JSON value, objects and arrays included. */
function paths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [prefix];
  if (Array.isArray(value)) value.forEach((v, i) => out.push(...paths(v, [...prefix, i])));
  else if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) out.push(...paths(v, [...prefix, k]));
  return out;
}
const reviewPaths = paths(validReview).filter((p) => p.length > 0);

function mutateAt(root: unknown, path: (string | number)[], value: unknown, remove: boolean): unknown {
  const copy = structuredClone(root) as Record<string | number, unknown>;
  let node = copy;
  for (const key of path.slice(0, -1)) node = node[key] as Record<string | number, unknown>;
  const last = path[path.length - 1]!;
  if (remove) {
    if (Array.isArray(node)) node.splice(Number(last), 1);
    else delete node[last];
  } else node[last] = value;
  return copy;
}

function nested(depth: number, kind: 'array' | 'object'): string {
  return kind === 'array' ? `${'['.repeat(depth)}${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
}

const wrongValue = fc.oneof(
  fc.constant(null),
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.string({ maxLength: 20 }),
  fc.array(fc.jsonValue({ maxDepth: 1 }), { maxLength: 3 }),
  fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 3 }),
);

const post = (category: string, body: Buffer | string, headers: Record<string, string> = json): BadRequest => ({
  category,
  method: 'POST',
  path: '/mutate?timeout=10s',
  headers,
  body: Buffer.isBuffer(body) ? body : Buffer.from(body),
});

const categories: [string, number, fc.Arbitrary<BadRequest>][] = [
  ['random JSON', 1360, fc.jsonValue({ maxDepth: 6 }).map((v) => post('random JSON', JSON.stringify(v) ?? 'null'))],
  [
    'wrong type or missing key at a field',
    3000,
    fc
      .tuple(fc.constantFrom(...reviewPaths), wrongValue, fc.boolean())
      .map(([path, value, remove]) => post(`field ${path.join('.')}`, JSON.stringify(mutateAt(validReview, path, value, remove)))),
  ],
  ['truncated body', 1500, fc.integer({ min: 0, max: validText.length - 1 }).map((n) => post('truncated', validText.slice(0, n)))],
  [
    'deep nesting',
    500,
    fc
      .tuple(
        fc.integer({ min: 1000, max: 200_000 }),
        fc.constantFrom('array' as const, 'object' as const),
        fc.constantFrom('top', 'pod field', 'env value', 'label'),
      )
      .map(([depth, kind, where]) => {
        const deep = nested(depth, kind);
        if (where === 'top') return post('deep nesting', deep);
        const marker = '"__DEEP__"';
        const review = structuredClone(validReview) as any;
        if (where === 'pod field') review.request.object.spec.futureField = '__DEEP__';
        else if (where === 'env value') review.request.object.spec.containers[0].env.push({ name: 'LOG_DIR', value: '__DEEP__' });
        else review.request.object.metadata.labels.deep = '__DEEP__';
        return post('deep nesting', JSON.stringify(review).replace(marker, deep));
      }),
  ],
  [
    'unbalanced brackets',
    40,
    fc
      .tuple(fc.integer({ min: 1, max: 7_000_000 }), fc.constantFrom(']', '}', '}]'), fc.boolean())
      .map(([count, close, afterReview]) =>
        post('unbalanced brackets', `${afterReview ? validText : ''}${close.repeat(Math.ceil(count / close.length)).slice(0, count)}`),
      ),
  ],
  [
    'huge strings and arrays',
    200,
    fc
      .tuple(fc.integer({ min: 10_000, max: 1_000_000 }), fc.constantFrom('label', 'name', 'containers', 'env', 'annotation key', 'over the limit'))
      .map(([size, what]) => {
        const review = structuredClone(validReview) as any;
        const pod = review.request.object;
        if (what === 'label') pod.metadata.labels.app = 'x'.repeat(size);
        else if (what === 'name') pod.spec.containers[0].name = 'n'.repeat(size);
        else if (what === 'containers') pod.spec.containers = Array.from({ length: Math.floor(size / 100) }, (_, i) => ({ name: `c${i}`, image: 'x' }));
        else if (what === 'env') pod.spec.containers[0].env = Array.from({ length: Math.floor(size / 50) }, (_, i) => ({ name: `E${i}`, value: 'v' }));
        else if (what === 'annotation key') pod.metadata.annotations['k'.repeat(size)] = 'v';
        else return post('over the limit', Buffer.alloc(8 * 1024 * 1024, 0x20));
        return post(`huge ${what}`, JSON.stringify(review));
      }),
  ],
  [
    'JavaScript-special names and forged ledgers',
    600,
    fc
      .tuple(
        fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'),
        fc.constantFrom(
          'container',
          'init container',
          'volume',
          'env',
          'label key',
          'annotation key',
          'templates annotation',
          'ledger template',
          'ledger container',
          'request namespace',
        ),
      )
      .map(([s, where]) => {
        const review = structuredClone(validReview) as any;
        const pod = review.request.object;
        const own = (key: string, value: unknown) => JSON.parse(`{${JSON.stringify(key)}:${JSON.stringify(value)}}`);
        if (where === 'container') pod.spec.containers.push({ name: s, image: 'x' });
        else if (where === 'init container') pod.spec.initContainers[0].name = s;
        else if (where === 'volume') pod.spec.volumes.push({ name: s, emptyDir: {} });
        else if (where === 'env') pod.spec.containers[0].env.push({ name: s, value: 'v' });
        else if (where === 'label key') pod.metadata.labels = { ...pod.metadata.labels, ...own(s, 'v') };
        else if (where === 'annotation key') pod.metadata.annotations = { ...pod.metadata.annotations, ...own(s, 'v') };
        else if (where === 'templates annotation') pod.metadata.annotations['sidecar-injector.io/templates'] = s;
        else if (where === 'ledger template')
          pod.metadata.annotations['sidecar-injector.io/status'] = JSON.stringify({ v: 1, templates: own(s, { hash: 'h', containers: [s] }) });
        else if (where === 'ledger container')
          pod.metadata.annotations['sidecar-injector.io/status'] = JSON.stringify({
            v: 1,
            templates: { 'log-shipper': { hash: 'h', appContainers: own(s, { env: [s] }) } },
          });
        else review.request.namespace = s;
        return post(`special name in ${where}`, JSON.stringify(review));
      }),
  ],
  [
    'invalid UTF-8',
    1000,
    fc.tuple(fc.integer({ min: 0, max: validText.length }), fc.integer({ min: 0x80, max: 0xff })).map(([at, byte]) => {
      const bytes = Buffer.from(validText);
      return post('invalid UTF-8', Buffer.concat([bytes.subarray(0, at), Buffer.from([byte]), bytes.subarray(at)]));
    }),
  ],
  [
    'content type',
    1000,
    fc
      .oneof(
        fc.constant(undefined),
        fc.constantFrom(
          'text/plain',
          'application/jsonx',
          'application/x-www-form-urlencoded',
          'multipart/form-data; boundary=x',
          'application/yaml',
          '*/*',
          '',
        ),
        fc.string({ maxLength: 30 }),
      )
      .map((type) => {
        const headers: Record<string, string> = {};
        // Header values with control characters cannot even be sent; those are the client's own error.
        if (type !== undefined) headers['content-type'] = type.replace(/[^\x20-\x7e]/g, '');
        return post('content type', validText, headers);
      }),
  ],
  [
    'method and path',
    800,
    fc
      .tuple(
        fc.constantFrom('GET', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'POST'),
        fc.oneof(
          fc.constantFrom('/mutate', '/Mutate', '//mutate', '/mutate/x', '/mutate/../healthz', '/%00', '/', '/metrics', '/readyz', '/healthz', '/status'),
          fc.webPath(),
        ),
      )
      .filter(([method, path]) => !(method === 'POST' && /^\/mutate\/?$/.test(path)))
      .map(([method, path]) => ({
        category: 'method and path',
        method,
        path: path.startsWith('/') ? path : `/${path}`,
        headers: json,
        body: Buffer.from(method === 'GET' || method === 'HEAD' ? '' : validText),
      })),
  ],
];

const prototypeNames = Object.getOwnPropertyNames(Object.prototype).sort().join();
let server: TestServer;
test.before(async () => {
  server = await startTestServer({ templates: await loadTemplateDir('templates') });
});
test.after.always(async () => {
  await server?.stop();
});

function send(request: BadRequest) {
  return httpsCall({
    port: server.port,
    agent: server.agent,
    method: request.method,
    path: request.path,
    body: request.body,
    headers: { ...request.headers, 'content-length': String(request.body.length) },
  });
}

/** Why an answer is unacceptable, or undefined when it is a 4xx with a message or a valid review. */
function problemWith(request: BadRequest, res: { status: number; text: string }): string | undefined {
  // The one 5xx that is an answer, not a failure: more review bodies in flight than the budget.
  if (res.status === 503 && /"code":"ERR_OVERLOADED"/.test(res.text)) return undefined;
  if (res.status >= 500) return `answered ${res.status}: ${res.text.slice(0, 200)}`;
  if (request.method === 'HEAD' || request.method === 'OPTIONS') return undefined;
  // GET answers are health, readiness, status and metrics (Prometheus text, not JSON).
  if (request.method === 'GET' && res.status === 200) return undefined;
  let body: any;
  try {
    body = JSON.parse(res.text);
  } catch {
    return `answered ${res.status} with a body that is not JSON: ${res.text.slice(0, 100)}`;
  }
  if (res.status >= 400)
    return typeof body.code === 'string' && typeof body.message === 'string' && body.message.length > 0
      ? undefined
      : `answered ${res.status} without code and message`;
  if (res.status !== 200) return `answered ${res.status}`;
  if (body.kind !== 'AdmissionReview' || !/^admission\.k8s\.io\/v1(beta1)?$/.test(body.apiVersion))
    return `200 without an AdmissionReview: ${res.text.slice(0, 100)}`;
  const response = body.response;
  if (typeof response?.uid !== 'string' || typeof response.allowed !== 'boolean') return '200 with a malformed response';
  if (response.allowed === false && !(response.status?.code >= 400 && typeof response.status.message === 'string')) return 'a denial without a status';
  try {
    decodePatch(response);
  } catch (err) {
    return `a patch that does not decode: ${(err as Error).message}`;
  }
  return undefined;
}

test('10,000 generated malformed requests: every answer is a 4xx with a message or a valid AdmissionReview', async (t) => {
  const requests = categories.flatMap(([, count, arbitrary], i) => fc.sample(arbitrary, { numRuns: count, seed: 1000 + i }));
  t.is(requests.length, 10_000);
  const problems: string[] = [];
  const statuses = new Map<number, number>();
  let next = 0;
  const worker = async () => {
    while (next < requests.length) {
      const request = requests[next++]!;
      try {
        const res = await send(request);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        const problem = problemWith(request, res);
        if (problem) problems.push(`${request.category} (${request.method} ${request.path}): ${problem}`);
      } catch (err) {
        problems.push(`${request.category} (${request.method} ${request.path}): connection failed: ${(err as Error).message}`);
      }
    }
  };
  await Promise.all(Array.from({ length: 16 }, worker));
  t.deepEqual(problems.slice(0, 20), []);
  t.log(`statuses: ${JSON.stringify(Object.fromEntries([...statuses].sort((a, b) => a[0] - b[0])))}`);
  // Both kinds of answer occur: the generator reaches the admission code, not only the HTTP checks.
  t.true((statuses.get(200) ?? 0) > 1000);
  t.true((statuses.get(400) ?? 0) > 1000);

  t.is(Object.getOwnPropertyNames(Object.prototype).sort().join(), prototypeNames, 'Object.prototype is untouched');
  // And afterwards a valid review is answered correctly.
  const res = await server.post(createReview(validPod, { namespace: 'shop', uid: 'after' }));
  t.is(res.json.response.uid, 'after');
  const patched = applyPatchV4(validPod, decodePatch(res.json.response)) as any;
  t.true(patched.spec.initContainers.some((c: any) => c.name === 'log-shipper' && c.restartPolicy === 'Always'));
  t.deepEqual(
    patched.spec.containers.map((c: any) => c.name),
    ['web'],
  );
});

test('a client that trickles its body byte by byte is cut off, and other connections are served meanwhile', async (t) => {
  const { caCert } = await testCertificates();
  // A server of its own, with a shorter request timeout (5 s; the default is 10 s), long enough
  // for the other clients' handshakes and reviews on a busy machine.
  const server = await startTestServer({ templates: await loadTemplateDir('templates'), timeouts: { headersTimeoutMs: 4000, requestTimeoutMs: 5000 } });
  t.teardown(() => server.stop());
  const socket = tls.connect({ host: '127.0.0.1', port: server.port, ca: caCert, servername: 'localhost' });
  await new Promise<void>((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
  socket.write(`POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${validText.length}\r\n\r\n`);
  let sent = 0;
  const trickle = setInterval(() => {
    if (socket.writable && sent < validText.length) socket.write(validText[sent++]!);
  }, 50);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.on('error', () => undefined);
  socket.resume();
  // Each on a connection of its own: a kept-alive one may be reused just as the server's timeout sweep ends it.
  const others = await Promise.all(
    Array.from({ length: 5 }, () =>
      httpsCall({ port: server.port, ca: caCert, agent: false, path: '/mutate', body: JSON.stringify(createReview(validPod, { namespace: 'shop' })) }),
    ),
  );
  t.true(others.every((r) => r.status === 200));
  await closed;
  clearInterval(trickle);
  t.true(sent < validText.length, 'the connection was cut before the body was complete');
});

test('a review of half a million annotation keys is refused before it is parsed, and the next review is served', async (t) => {
  const pod = structuredClone(validPod);
  const keys = Array.from({ length: 500_000 }, (_, i) => `"k${i}":""`).join(',');
  // Spliced as text: JSON.stringify of such an object would be the slow path under test.
  const text = JSON.stringify(createReview(pod, { namespace: 'shop', uid: 'wide' })).replace('"annotations":{', `"annotations":{${keys},`);
  t.true(text.length > 6_000_000, `${text.length} bytes`);
  const res = await send(post('wide', text));
  t.is(res.status, 400);
  t.is(JSON.parse(res.text).code, 'ERR_MALFORMED_JSON');
  t.regex(JSON.parse(res.text).message, /an object of more than 10000 keys/);
  // Spread over many objects, the keys in all are bounded too.
  const many = Array.from({ length: 20 }, (_, o) => `"a${o}":{${Array.from({ length: 6000 }, (_, i) => `"k${i}":""`).join(',')}}`).join(',');
  const spread = await send(post('spread', JSON.stringify(createReview(pod, { namespace: 'shop', uid: 'spread' })).replace('"spec":{', `"spec":{${many},`)));
  t.is(spread.status, 400);
  t.regex(JSON.parse(spread.text).message, /more than 100000 object keys/);
  const after = await server.post(createReview(validPod, { namespace: 'shop', uid: 'after-wide' }));
  t.is(after.json.response.uid, 'after-wide');
});

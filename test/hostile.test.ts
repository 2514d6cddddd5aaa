/**
 * Hostile pods and hostile clients, each written as the attack (issue 9). Mutating webhooks
 * see pods before the API server validates them, and `kubectl create --dry-run=server` lets
 * anyone who may create a pod send us anything, as often as they like: every test sends what
 * such a person could send, over HTTPS to the real server, and checks that the injector
 * answers clearly and stays whole (Object.prototype, later reviews, /metrics, /healthz).
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerResponse } from 'node:http';
import net from 'node:net';
import tls from 'node:tls';
import { Liveness } from '../src/liveness.js';
import { loadTemplateDir } from '../src/templates/load.js';
import type { TemplateSet } from '../src/templates/set.js';
import { renderCacheSize } from '../src/templates/render.js';
import { createReview, decodePatch, prepareCreate } from './helpers/apiserver.js';
import { FakeClock } from './helpers/fake-clock.js';
import { startTestServer, testCertificates, type TestServer } from './helpers/server.js';
import { until } from './helpers/until.js';
import { httpsCall } from './helpers/https.js';
import { templateSet } from './helpers/templates.js';

const specialStrings = ['__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf'] as const;

/** An object with one own key, even "__proto__" (an object literal would set the prototype instead). */
function entry(key: string, value: unknown): Record<string, unknown> {
  return JSON.parse(`{${JSON.stringify(key)}:${JSON.stringify(value)}}`);
}

function basePod(): Record<string, any> {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-', labels: { app: 'web' }, annotations: {} },
    spec: {
      containers: [{ name: 'web', image: 'nginx', env: [{ name: 'A', value: '1' }], volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
      volumes: [{ name: 'data', emptyDir: {} }],
    },
  };
}

/** Every position a pod author controls, as a function that puts `s` there. */
const positions: Record<string, (pod: Record<string, any>, s: string) => void> = {
  'container name': (pod, s) => (pod.spec.containers[0].name = s),
  'second container name': (pod, s) => pod.spec.containers.push({ name: s, image: 'x' }),
  'init container name': (pod, s) => (pod.spec.initContainers = [{ name: s, image: 'x' }]),
  'volume name': (pod, s) => ((pod.spec.volumes[0].name = s), (pod.spec.containers[0].volumeMounts[0].name = s)),
  'env name': (pod, s) => pod.spec.containers[0].env.push({ name: s, value: 'x' }),
  'mount path': (pod, s) => pod.spec.containers[0].volumeMounts.push({ name: 'data', mountPath: `/${s}` }),
  'label key': (pod, s) => Object.assign(pod.metadata, { labels: { ...pod.metadata.labels, ...entry(s, 'x') } }),
  'label value': (pod, s) => (pod.metadata.labels['app.kubernetes.io/name'] = s),
  'annotation key': (pod, s) => (pod.metadata.annotations = entry(s, 'x')),
  'templates annotation': (pod, s) => (pod.metadata.annotations['sidecar-injector.io/templates'] = `${s},proxy`),
  'ledger template name': (pod, s) =>
    (pod.metadata.annotations['sidecar-injector.io/status'] = JSON.stringify({ v: 1, templates: entry(s, { hash: 'h', containers: [s] }) })),
  'ledger app-container key': (pod, s) =>
    (pod.metadata.annotations['sidecar-injector.io/status'] = JSON.stringify({
      v: 1,
      templates: { 'log-shipper': { hash: 'h', appContainers: entry(s, { env: [s] }) } },
    })),
  'ledger item names': (pod, s) =>
    (pod.metadata.annotations['sidecar-injector.io/status'] = JSON.stringify({
      v: 1,
      templates: {
        'log-shipper': { hash: 'h', containers: [s], volumes: [s], labels: [s], annotations: [s], appContainers: { web: { env: [s], volumeMounts: [s] } } },
      },
    })),
};

let templates: TemplateSet;
let server: TestServer;
const prototypeNames = () => [Object.prototype, Array.prototype, Function.prototype].map((p) => Object.getOwnPropertyNames(p).sort().join(',')).join('|');
const cleanPrototypes = prototypeNames();
const objectStatics = Object.getOwnPropertyNames(Object).sort().join(',');

test.before(async () => {
  templates = await loadTemplateDir('templates');
  server = await startTestServer({ templates });
});
test.after.always(() => server.stop());

function review(pod: Record<string, any>, namespace = 'shop') {
  return createReview(prepareCreate(pod, namespace), { namespace, dryRun: true });
}

test.serial('JavaScript-special strings in every pod-supplied position leave prototypes, later reviews, /metrics and /healthz unaffected', async (t) => {
  let answered = 0;
  for (const [position, put] of Object.entries(positions)) {
    for (const s of specialStrings) {
      const pod = basePod();
      put(pod, s);
      const body = review(pod);
      const { status, json } = await server.post(body);
      t.is(status, 200, `${position} = ${s}: HTTP ${status}`);
      t.is(json?.response?.uid, body.request.uid, `${position} = ${s}: uid echoed`);
      t.is(typeof json?.response?.allowed, 'boolean');
      answered++;
    }
  }
  // The request fields a direct caller controls.
  for (const s of specialStrings) {
    const body = review(basePod());
    body.request.name = s;
    body.request.namespace = s;
    t.is((await server.post(body)).status, 200);
    answered++;
  }
  t.is(answered, (Object.keys(positions).length + 1) * specialStrings.length);
  t.is(prototypeNames(), cleanPrototypes, 'no prototype gained or lost a property');
  t.is(Object.getOwnPropertyNames(Object).sort().join(','), objectStatics, 'Object itself gained no property (constructor["env"])');
  const metrics = await server.request('GET', '/metrics');
  t.is(metrics.status, 200);
  t.regex(metrics.text, /sidecar_injector_reviews_total\{operation="CREATE",decision="patched",reason="injected"\} \d+/);
  t.is((await server.request('GET', '/healthz')).status, 200);
  const after = await server.post(review(basePod()));
  t.true(
    decodePatch(after.json.response).some((op) => op.path === '/spec/initContainers'),
    'a normal pod is still injected',
  );
});

test.serial('a container named "constructor" (a valid name) gets its items, recorded under its own name', async (t) => {
  const pod = basePod();
  pod.spec.containers.push({ name: 'constructor', image: 'x' });
  const { json } = await server.post(review(pod));
  const patch = decodePatch(json.response);
  const ledger = JSON.parse(patch.find((op) => op.path === '/metadata/annotations/sidecar-injector.io~1status')?.value ?? '{}');
  t.deepEqual(ledger.templates['log-shipper'].appContainers.constructor, { env: ['LOG_DIR'], volumeMounts: ['/var/log/app'] });
  t.true(
    patch.some((op) => op.path === '/spec/containers/1/env'),
    'constructor received LOG_DIR',
  );
  t.is((Object as unknown as Record<string, unknown>).env, undefined);
});

test.serial('pods that cost work out of proportion are refused at once with a short answer, and pin nothing', async (t) => {
  const before = renderCacheSize(templates.byName.get('log-shipper')!);
  // As the API server sends them, with the creating controller's managedFields: so wide that
  // the body is refused before it is parsed (too many keys in one object), with a short 400.
  const wide: [string, Record<string, any>][] = [
    ['20,000 containers', { ...basePod(), spec: { containers: Array.from({ length: 20_000 }, (_, i) => ({ name: `c${i}`, image: 'x' })) } }],
    [
      '200,000 annotations',
      { ...basePod(), metadata: { generateName: 'p-', annotations: Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`a${i}`, ''])) } },
    ],
    [
      '200,000 labels',
      { ...basePod(), metadata: { generateName: 'p-', labels: Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`l${i}`, ''])) } },
    ],
  ];
  for (const [title, pod] of wide) {
    const { status, json } = await server.post(review(pod));
    t.is(status, 400, title);
    t.is(json.code, 'ERR_MALFORMED_JSON', title);
    t.regex(json.message, /more than 10000 keys/, title);
  }
  // Without managedFields (a client of its own, not the API server): decided, and denied.
  const bare = (pod: Record<string, any>) => {
    const text = review(pod);
    delete text.request.object.metadata.managedFields;
    return text;
  };
  const cases: [string, Record<string, any>, string, RegExp][] = [
    [
      '5,000 containers',
      bare({ ...basePod(), spec: { containers: Array.from({ length: 5000 }, (_, i) => ({ name: `c${i}`, image: 'x' })) } }),
      'pod-too-large',
      /has 5000 containers/,
    ],
  ];
  for (let i = 0; i < 5; i++) {
    cases.push([
      `a 1 MiB label value (#${i})`,
      { ...basePod(), metadata: { generateName: 'p-', labels: { 'app.kubernetes.io/name': String(i).repeat(1024 * 1024) } } },
      'invalid-pod',
      /label value must be at most 63 characters/,
    ]);
  }
  for (const [title, pod, reason, message] of cases) {
    const { status, json } = await server.post(pod.request ? pod : review(pod));
    t.is(status, 200, title);
    t.false(json.response.allowed, title);
    t.regex(json.response.status.message, message, title);
    t.true(JSON.stringify(json).length < 1500, `${title}: the answer is short`);
    const line = server.logs.at(-1)!;
    t.is(line.reason, reason, title);
    t.true(JSON.stringify(line).length < 1500, `${title}: the log line is short`);
  }
  t.deepEqual(renderCacheSize(templates.byName.get('log-shipper')!), before, 'nothing was rendered or cached for them');
});

test.serial('quoted input is cut: a 6 MiB field, a request naming 30,000 unknown templates', async (t) => {
  const huge = review(basePod());
  huge.apiVersion = 'x'.repeat(6 * 1024 * 1024);
  const answer = await server.request('POST', '/mutate', JSON.stringify(huge), { 'content-type': 'application/json' });
  t.is(answer.status, 400);
  t.true(answer.text.length < 600, `${answer.text.length} bytes`);
  t.true(JSON.stringify(server.logs.at(-1)).length < 1000);
  const pod = basePod();
  pod.metadata.annotations['sidecar-injector.io/templates'] = Array.from({ length: 30_000 }, (_, i) => `t${i}`).join(',');
  const { json } = await server.post(review(pod));
  t.false(json.response.allowed);
  t.regex(json.response.status.message, /names "t0", "t1", "t2", "t3", "t4" and 29995 more, which are not a sidecar template here/);
  t.true(json.response.status.message.length < 400);
});

test.serial('answers the API server would reject are not given: annotation budget, Windows pods, a volume named like ours', async (t) => {
  const near = basePod();
  near.metadata.annotations = { filler: 'x'.repeat(261_944 - 'filler'.length) };
  let { json } = await server.post(review(near));
  t.false(json.response.allowed);
  t.regex(json.response.status.message, /injecting log-shipper would take the pod's annotations to \d+ bytes, over the API server's limit of 262144/);

  const windows = basePod();
  windows.spec.os = { name: 'windows' };
  ({ json } = await server.post(review(windows)));
  t.true(json.response.allowed);
  t.is(json.response.patch, undefined);
  // A template's os scopes it: a Windows pod is simply not selected (said in the log's notes, not a warning).
  t.is(json.response.warnings, undefined);
  t.is(server.logs.at(-1)!.reason, 'no-template-matched');

  const secret = basePod();
  secret.spec.volumes.push({ name: 'app-logs', secret: { secretName: 'credentials' } });
  ({ json } = await server.post(review(secret)));
  t.true(json.response.allowed);
  t.is(json.response.patch, undefined, 'no mount of the Secret is added anywhere');
  t.is(server.logs.at(-1)!.reason, 'template-conflict');
  t.true(json.response.warnings.some((w: string) => w === "log-shipper not injected: its mounts would use the pod's own volume app-logs; rename that volume"));
});

test.serial('/healthz fails while a prototype is polluted, and recovers', async (t) => {
  Object.defineProperty(Object.prototype, 'polluted', { value: 1, configurable: true, enumerable: false, writable: true });
  try {
    const sick = await server.request('GET', '/healthz');
    t.is(sick.status, 503);
    t.regex(sick.json.problems[0], /prototype was modified/);
  } finally {
    delete (Object.prototype as Record<string, unknown>).polluted;
  }
  t.is((await server.request('GET', '/healthz')).status, 200);
});

test('/healthz fails after consecutive internal errors, and a canary that fails fails it too', async (t) => {
  let broken = true;
  let canaryFails = false;
  const liveness = new Liveness(async () => {
    if (canaryFails) throw new Error('sample pod: templates are unusable');
  });
  const set = await loadTemplateDir('templates');
  const own = await startTestServer({
    templates: () => {
      if (broken) throw new Error('a bug');
      return set;
    },
    liveness,
  });
  t.teardown(() => own.stop());
  for (let i = 0; i < 5; i++) t.is((await own.post(review(basePod()))).status, 500);
  const sick = await own.request('GET', '/healthz');
  t.is(sick.status, 503);
  t.deepEqual(sick.json.problems, ['the last 5 reviews failed with an internal error']);
  broken = false;
  t.is((await own.post(review(basePod()))).status, 200);
  t.is((await own.request('GET', '/healthz')).status, 200, 'one answered review clears it');
  canaryFails = true;
  t.regex((await own.request('GET', '/healthz')).json.problems[0], /a review of a sample pod failed: sample pod/);
});

/** A template whose answer is megabytes long, to test what happens to answers in transit. */
const bigAnswerTemplates = () => templateSet({ name: 'big', containers: [{ name: 'big', image: 'x:1', args: ['A'.repeat(4 * 1024 * 1024)] }] });

/** Opens a TLS connection, sends one review, and does not read the answer. */
async function sendWithoutReading(port: number, body: string): Promise<tls.TLSSocket> {
  const { caCert } = await testCertificates();
  const socket = tls.connect({ host: '127.0.0.1', port, ca: caCert, servername: 'localhost' });
  await new Promise((resolve, reject) => socket.once('secureConnect', resolve).once('error', reject));
  socket.pause();
  socket.write(`POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  return socket;
}

function connections(s: TestServer): Promise<number> {
  return new Promise((resolve, reject) => s.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
}

/**
 * The server's side of each connection to `s` from now on, found by a client socket: what the
 * server has received from that client (`bytesRead`) and whether it has closed it (`destroyed`),
 * seen at once, before the client hears of it. Ask once while the client is connected: a closed
 * socket no longer knows its port.
 */
function serverSides(s: TestServer): (client: tls.TLSSocket) => tls.TLSSocket | undefined {
  const accepted: { port: number | undefined; socket: tls.TLSSocket }[] = [];
  s.server.on('secureConnection', (socket: tls.TLSSocket) => accepted.push({ port: socket.remotePort, socket }));
  const ports = new WeakMap<tls.TLSSocket, number>();
  return (client) => {
    if (!ports.has(client) && client.localPort !== undefined) ports.set(client, client.localPort);
    return accepted.find((a) => a.port === ports.get(client))?.socket;
  };
}

test('a client that never reads its answer loses the connection after the write timeout', async (t) => {
  const clock = new FakeClock();
  const own = await startTestServer({ templates: bigAnswerTemplates(), timeouts: { writeTimeoutMs: 300 }, clock });
  t.teardown(() => own.stop());
  const answers: ServerResponse[] = [];
  own.server.on('request', (_req: unknown, res: ServerResponse) => answers.push(res));
  const sockets = await Promise.all(Array.from({ length: 5 }, () => sendWithoutReading(own.port, JSON.stringify(review(basePod())))));
  t.teardown(() => sockets.forEach((s) => s.destroy()));
  for (const s of sockets) s.on('error', () => undefined);
  await until(() => answers.length === 5 && answers.every((a) => a.writableEnded), 'the five answers written');
  // The write timeout (300 ms) and two sweeps (150 ms each) on the server's clock.
  await clock.advance(600);
  await until(async () => (await connections(own)) === 0, 'every non-reading connection closed');
  // The clock stands still now: a reader that takes its time over the 4 MB answer is not cut.
  t.is((await own.post(review(basePod()))).status, 200, 'the server serves others after');
});

test('a client that never reads cannot keep its connection by sending more requests', async (t) => {
  const clock = new FakeClock();
  const own = await startTestServer({ templates: bigAnswerTemplates(), timeouts: { writeTimeoutMs: 300 }, clock });
  t.teardown(() => own.stop());
  const answers: ServerResponse[] = [];
  own.server.on('request', (_req: unknown, res: ServerResponse) => answers.push(res));
  const serverSide = serverSides(own);
  const socket = await sendWithoutReading(own.port, JSON.stringify(review(basePod())));
  t.teardown(() => socket.destroy());
  socket.on('error', () => undefined);
  let closed = false;
  socket.once('close', () => (closed = true));
  await until(() => serverSide(socket) !== undefined, 'the connection accepted');
  // The big answer is written in full and waits, unread, in the connection.
  await until(() => answers[0]?.writableEnded === true, 'the answer written');
  // A small request every 100 ms of the clock: each would restart a clock that watched only the latest answer.
  // The server closes its side in the sweep, on the clock: seen as soon as the step that does it returns.
  let elapsed = 0;
  while (!serverSide(socket)!.destroyed && elapsed < 10_000) {
    if (!socket.destroyed) socket.write('HEAD /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n');
    await clock.advance(100);
    elapsed += 100;
  }
  // The client hears of it once it reads.
  socket.resume();
  await until(() => closed, 'the connection closed');
  // The write timeout (300 ms), then at most two sweeps (150 ms each) and the step of this loop.
  t.true(elapsed <= 700, `closed ${elapsed} ms after the answer was written`);
});

test('making room closes a client that has left its answer unread for a second before the pooled connection that reads', async (t) => {
  const clock = new FakeClock();
  const own = await startTestServer({ templates: bigAnswerTemplates(), maxConnections: 2, timeouts: { writeTimeoutMs: 60_000 }, clock });
  t.teardown(() => own.stop());
  const { caCert } = await testCertificates();
  const https = await import('node:https');
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: caCert });
  t.teardown(() => agent.destroy());
  const call = () =>
    new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
      const req = https.request(
        { host: '127.0.0.1', port: own.port, path: '/mutate', method: 'POST', servername: 'localhost', agent, headers: { 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }));
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify(review(basePod())));
    });
  t.is((await call()).status, 200, 'the pooled connection, read in full, now idle');
  const answers: ServerResponse[] = [];
  own.server.on('request', (_req: unknown, res: ServerResponse) => answers.push(res));
  const serverSide = serverSides(own);
  const stuck = await sendWithoutReading(own.port, JSON.stringify(review(basePod())));
  stuck.on('error', () => undefined);
  t.teardown(() => stuck.destroy());
  await until(() => serverSide(stuck) !== undefined && answers[0]?.writableEnded === true, 'the 4 MB answer written, unread');
  // Sweeps each second find it unread; the write timeout (a minute) is far.
  await clock.advance(2500);
  t.false(serverSide(stuck)!.destroyed);
  // A third connection at the limit of two: the non-reader goes, the pooled connection stays.
  const third = tls.connect({ host: '127.0.0.1', port: own.port, ca: caCert, servername: 'localhost' });
  third.on('error', () => undefined);
  t.teardown(() => third.destroy());
  await until(() => serverSide(stuck)!.destroyed, 'the client that does not read closed to make room');
  const again = await call();
  t.is(again.status, 200);
  t.true(again.reused, 'the pooled connection survived');
});

test('shutdown delivers an answer already written in full to a slow reader', async (t) => {
  const own = await startTestServer({ templates: bigAnswerTemplates() });
  const answers: ServerResponse[] = [];
  own.server.on('request', (_req: unknown, res: ServerResponse) => answers.push(res));
  const socket = await sendWithoutReading(own.port, JSON.stringify(review(basePod())));
  t.teardown(() => socket.destroy());
  // Once the answer is written in full and waits, unread, in the connection: shut down.
  await until(() => answers[0]?.writableEnded === true, 'the answer written');
  const closed = own.close();
  const chunks: Buffer[] = [];
  socket.on('data', (c: Buffer) => chunks.push(c));
  socket.resume();
  await new Promise((resolve) => socket.once('end', resolve));
  await closed;
  const text = Buffer.concat(chunks).toString('utf8');
  const [head, body] = [text.slice(0, text.indexOf('\r\n\r\n')), text.slice(text.indexOf('\r\n\r\n') + 4)];
  const length = Number(/content-length: (\d+)/i.exec(head)?.[1]);
  t.true(length > 4_000_000, `${length} bytes announced`);
  t.is(Buffer.byteLength(body), length, 'every byte arrived');
  t.true(decodePatch(JSON.parse(body).response).length > 0);
});

test('connections beyond the limit push out the oldest idle ones: a hoarder cannot lock others out', async (t) => {
  const own = await startTestServer({ templates: await loadTemplateDir('templates'), maxConnections: 3 });
  t.teardown(() => own.stop());
  const { caCert } = await testCertificates();
  const sockets = await Promise.all(
    Array.from({ length: 8 }, () => {
      const socket = tls.connect({ host: '127.0.0.1', port: own.port, ca: caCert, servername: 'localhost' });
      socket.on('error', () => undefined);
      return new Promise<tls.TLSSocket>((resolve) => {
        socket.once('secureConnect', () => resolve(socket));
        socket.once('close', () => resolve(socket));
      });
    }),
  );
  t.teardown(() => sockets.forEach((s) => s.destroy()));
  await until(async () => (await connections(own)) <= 3, 'at most three connections kept');
  // A new client is served at once, although eight connections are hoarded.
  t.is((await own.post(review(basePod()))).status, 200);
  await until(() => sockets.filter((s) => !s.destroyed).length <= 3, 'the oldest idle ones closed');
});

/** `count` plain TCP connections to `port` that never start TLS, from `localAddress`. */
async function silentConnections(port: number, count: number, localAddress = '127.0.0.1'): Promise<net.Socket[]> {
  const sockets: net.Socket[] = [];
  for (let i = 0; i < count; i++) {
    const socket = net.connect({ host: '127.0.0.1', port, localAddress });
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve).once('close', resolve));
    sockets.push(socket);
  }
  return sockets;
}

/** A review over a new connection (no pooled one), as a client that just arrived sends it. */
async function freshReview(s: TestServer, pod: Record<string, any>): Promise<number> {
  const { caCert } = await testCertificates();
  return (await httpsCall({ port: s.port, path: '/mutate', ca: caCert, agent: false, body: JSON.stringify(review(pod)) })).status;
}

test('a client that pipelines requests and never reads is closed at its third unanswered request, however many it packed', async (t) => {
  const own = await startTestServer({ templates: await loadTemplateDir('templates') });
  t.teardown(() => own.stop());
  const { caCert } = await testCertificates();
  const serverSide = serverSides(own);
  const socket = tls.connect({ host: '127.0.0.1', port: own.port, ca: caCert, servername: 'localhost' });
  socket.on('error', () => undefined);
  t.teardown(() => socket.destroy());
  await new Promise((resolve) => socket.once('secureConnect', resolve));
  serverSide(socket);
  // 500 requests for /metrics (14 KB each) in a few TLS records, and nothing read.
  socket.pause();
  socket.write('GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n'.repeat(500));
  await until(() => serverSide(socket)?.destroyed === true, 'the connection closed by the server');
  // At most the two answers taken before the third request came were written (each about 14 KB), not 500.
  const written = serverSide(socket)!.bytesWritten;
  t.true(written < 100_000, `${written} bytes written`);
  t.is((await own.post(review(basePod()))).status, 200, 'others are served');
});

test('silent TCP connections never lock a new client out: a thousand that never start TLS, and every new connection is still served', async (t) => {
  const own = await startTestServer({ templates: await loadTemplateDir('templates') });
  t.teardown(() => own.stop());
  const silent = await silentConnections(own.port, 1100);
  t.teardown(() => silent.forEach((s) => s.destroy()));
  // The server has seen every one of them (the listener accepts in order: a TLS client after them is seen after them).
  await until(async () => (await connections(own)) <= 512 + 1 && silent.filter((s) => s.destroyed).length >= 1100 - 512, 'the oldest handshakes closed');
  t.true(own.handshakes() <= 512, `${own.handshakes()} handshakes pending`);
  const statuses: number[] = [];
  for (let i = 0; i < 24; i++) statuses.push(await freshReview(own, basePod()));
  t.deepEqual(statuses, Array<number>(24).fill(200), 'every new connection completes its handshake and is answered');
  t.is((await own.request('GET', '/healthz')).status, 200);
});

test('a source that floods handshakes closes only its own: another source’s pending handshakes stay', async (t) => {
  const own = await startTestServer({ templates: await loadTemplateDir('templates'), maxHandshakes: 8, maxHandshakesPerSource: 4 });
  t.teardown(() => own.stop());
  const other = await silentConnections(own.port, 4, '127.0.0.2');
  const flood = await silentConnections(own.port, 40, '127.0.0.1');
  t.teardown(() => [...other, ...flood].forEach((s) => s.destroy()));
  await until(() => flood.filter((s) => s.destroyed).length >= 36, 'the flood’s own oldest closed');
  t.is(own.handshakes(), 8);
  t.is(other.filter((s) => s.destroyed).length, 0, 'the other source kept its four');
  t.deepEqual(
    flood.map((s) => s.destroyed),
    [...Array<boolean>(36).fill(true), ...Array<boolean>(4).fill(false)],
    'oldest first',
  );
  t.is(await freshReview(own, basePod()), 200);
});

test('a connection that never starts its handshake is closed after the handshake timeout', async (t) => {
  const own = await startTestServer({ templates: await loadTemplateDir('templates'), timeouts: { handshakeTimeoutMs: 200 } });
  t.teardown(() => own.stop());
  const [silent] = await silentConnections(own.port, 1);
  t.teardown(() => silent!.destroy());
  let endedByServer = false;
  silent!.once('end', () => (endedByServer = true));
  await until(() => own.handshakes() === 1, 'the connection seen by the server');
  await until(() => silent!.destroyed || silent!.readableEnded, 'closed by the server');
  await until(() => own.handshakes() === 0, 'forgotten');
  // The client never closed it: the server did. (No review over a new connection here: its own
  // handshake has 200 ms too, which a busy machine may not meet.)
  t.true(endedByServer || silent!.destroyed);
});

test('bodies held at once are bounded: a review that does not fit is refused with 503, others go on', async (t) => {
  // The clock stands still: neither upload is slower than the minimum rate, so neither may be cut for the other.
  const own = await startTestServer({ templates: await loadTemplateDir('templates'), maxBodyBytesInFlight: 200_000, clock: new FakeClock() });
  t.teardown(() => own.stop());
  const { caCert } = await testCertificates();
  // Two slow clients send 200 KB each, without finishing: 134 KB of each count (the first 64 KiB
  // of a body are free), so the second does not fit.
  const open = async () => {
    const socket = tls.connect({ host: '127.0.0.1', port: own.port, ca: caCert, servername: 'localhost' });
    await new Promise((resolve) => socket.once('secureConnect', resolve));
    socket.write(`POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 300000\r\n\r\n${' '.repeat(200_000)}`);
    return socket;
  };
  const first = await open();
  const second = await open();
  t.teardown(() => (first.destroy(), second.destroy()));
  const answer = await new Promise<string>((resolve) => {
    let text = '';
    second.on('data', (c: Buffer) => {
      text += c.toString('utf8');
      if (text.includes('}')) resolve(text);
    });
  });
  t.regex(answer, /^HTTP\/1\.1 503/);
  t.regex(answer, /"code":"ERR_OVERLOADED"/);
  first.destroy();
  // Bytes are given back when a client goes away: a review is answered once the server has seen it go.
  await until(async () => (await own.post(review(basePod()))).status === 200, 'a review answered after the client went away');
});

test('serve refuses, at start, a template that check refuses (a containerPort rendered as a string)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-test-'));
  await writeFile(
    join(dir, 'port.yaml'),
    "name: port\ncontainers:\n  - name: agent\n    image: example/agent:1\n    ports:\n      - containerPort: \"{{ pod.labels['port'] | default '80' }}\"\n",
  );
  const child = spawn(
    process.execPath,
    [join('dist', 'src', 'cli', 'main.js'), 'serve', '--templates', dir, '--port', '0', '--host', '127.0.0.1', '--dev-cert-dir', dir],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  t.is(code, 1);
  t.regex(
    stderr,
    /port\.yaml: rendered into a sample pod: does not match the Kubernetes Pod schema: spec\.containers\[2\]\.ports\[0\]\.containerPort must be integer/,
  );
});

/** Runs the render-pressure script under a capped heap and returns what it printed. */
function underCappedHeap(
  count: number,
  size: number,
): Promise<{ code: number | null; result?: { patched: number; cache: { entries: number; bytes: number }; heapUsed: number }; stderr: string }> {
  const child = spawn(
    process.execPath,
    ['--max-old-space-size=48', '--expose-gc', join('dist', 'test', 'helpers', 'render-pressure.js'), String(count), String(size)],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => (stderr += c));
  return new Promise((resolve) =>
    child.once('close', (code) => resolve({ code, stderr: stderr.slice(-500), ...(stdout ? { result: JSON.parse(stdout) } : {}) })),
  );
}

test('distinct 200 KB referenced values, 400 pods, in a 48 MB heap: all served, none cached', async (t) => {
  // Unbounded, the cache would hold 256 renderings of ≈ 0.8 MB each (the value twice, UTF-16).
  const { code, result, stderr } = await underCappedHeap(400, 200_000);
  t.is(code, 0, stderr);
  t.is(result?.patched, 400);
  t.deepEqual(result?.cache, { entries: 0, bytes: 0 });
});

test('distinct 2 KB referenced values, 5,000 pods: the cache stays within its byte bound', async (t) => {
  const { code, result, stderr } = await underCappedHeap(5000, 2000);
  t.is(code, 0, stderr);
  t.is(result?.patched, 5000);
  t.true((result?.cache.entries ?? 0) <= 256);
  t.true((result?.cache.bytes ?? Infinity) <= 4 * 1024 * 1024, `${result?.cache.bytes} bytes`);
});

test('request fields of a megabyte are cut in the log line and bounded in the metrics; a long uid is refused', async (t) => {
  const own = await startTestServer({ templates: await loadTemplateDir('templates') });
  t.teardown(() => own.stop());
  const big = 'x'.repeat(3 * 1024 * 1024);
  for (const edit of [
    (r: any) => (r.request.operation = big),
    (r: any) => (r.request.kind.kind = big),
    (r: any) => (r.request.subResource = big),
    (r: any) => (r.request.namespace = big),
    (r: any) => ((r.request.operation = 'UPDATE'), (r.request.name = big)),
  ]) {
    const body = review(basePod());
    edit(body);
    const answer = await own.request('POST', '/mutate', JSON.stringify(body), { 'content-type': 'application/json' });
    t.is(answer.status, 200);
    t.true(answer.text.length < 2000, `${answer.text.length} bytes answered`);
    t.true(JSON.stringify(own.logs.at(-1)).length < 2000, `${JSON.stringify(own.logs.at(-1)).length} bytes logged`);
  }
  const metrics = await own.request('GET', '/metrics');
  t.regex(metrics.text, /sidecar_injector_reviews_total\{operation="other",decision="allowed",reason="operation-not-create"\} 1/);
  t.true(metrics.text.length < 100_000);
  const long = review(basePod());
  long.request.uid = 'u'.repeat(257);
  const refused = await own.request('POST', '/mutate', JSON.stringify(long), { 'content-type': 'application/json' });
  t.is(refused.status, 400);
  t.regex(refused.json.message, /request.uid must be at most 256 characters/);
});

test('a body of 200,001 empty objects is refused before parsing; deep nesting is refused at any size', async (t) => {
  const many = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"x":[${Array.from({ length: 200_001 }, () => '{}').join(',')}]}}`;
  let answer = await server.request('POST', '/mutate', many, { 'content-type': 'application/json' });
  t.is(answer.status, 400);
  t.regex(answer.json.message, /holds more than 200000 objects and arrays/);
  const body = review(basePod());
  body.request.object.spec.containers[0].env[0].name = '__DEEP__';
  const deep = JSON.stringify(body).replace('"__DEEP__"', `${'['.repeat(5000)}${']'.repeat(5000)}`);
  t.true(deep.length < 64 * 1024);
  answer = await server.request('POST', '/mutate', deep, { 'content-type': 'application/json' });
  t.is(answer.status, 400);
  t.regex(answer.json.message, /nested more than 1000 levels/);
});

test('stalled large uploads cannot starve real reviews: the first 64 KiB of every body are outside the budget', async (t) => {
  const own = await startTestServer({ templates: await loadTemplateDir('templates') });
  t.teardown(() => own.stop());
  const { caCert } = await testCertificates();
  const serverSide = serverSides(own);
  const stalled: tls.TLSSocket[] = [];
  for (let i = 0; i < 3; i++) {
    const socket = tls.connect({ host: '127.0.0.1', port: own.port, ca: caCert, servername: 'localhost' });
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('secureConnect', resolve));
    serverSide(socket);
    socket.write(`POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 7000000\r\n\r\n${' '.repeat(5_592_000)}`);
    stalled.push(socket);
  }
  t.teardown(() => stalled.forEach((s) => s.destroy()));
  // Every byte sent has reached the server (and its body budget) before the real review comes.
  await until(() => stalled.every((s) => (serverSide(s)?.bytesRead ?? 0) >= 5_592_000), 'the uploads received');
  const answer = await own.post(review(basePod()));
  t.is(answer.status, 200, 'a real review is answered while 16 MiB of uploads stall');
});

test('stalled large uploads are cut for reviews that need the budget: 25 of 25 reviews of a 150 KB pod answered while three 6 MB uploads stall', async (t) => {
  const own = await startTestServer({ templates: await loadTemplateDir('templates') });
  t.teardown(() => own.stop());
  const { caCert } = await testCertificates();
  const serverSide = serverSides(own);
  const answers = new Map<tls.TLSSocket, string>();
  const stall = async () => {
    const socket = tls.connect({ host: '127.0.0.1', port: own.port, ca: caCert, servername: 'localhost' });
    socket.on('error', () => undefined);
    socket.on('data', (c: Buffer) => answers.set(socket, (answers.get(socket) ?? '') + c.toString('utf8')));
    await new Promise((resolve) => socket.once('secureConnect', resolve));
    serverSide(socket);
    socket.write(`POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 6000000\r\n\r\n${' '.repeat(5_650_000)}`);
    return socket;
  };
  const stalled = [await stall(), await stall(), await stall()];
  t.teardown(() => stalled.forEach((s) => s.destroy()));
  await until(() => stalled.every((s) => (serverSide(s)?.bytesRead ?? 0) >= 5_650_000), 'the uploads received: the budget is full');
  const pod = basePod();
  pod.metadata.annotations['example.com/config'] = 'x'.repeat(150_000);
  const statuses: number[] = [];
  for (let i = 0; i < 25; i++) statuses.push((await own.post(review(pod))).status);
  t.deepEqual(statuses, Array<number>(25).fill(200));
  // The uploads that were cut heard why.
  await until(() => [...answers.values()].filter((a) => a.includes('ERR_OVERLOADED')).length >= 1, 'a cut upload answered');
  const cut = [...answers.values()].find((a) => a.includes('ERR_OVERLOADED'))!;
  t.regex(cut, /^HTTP\/1\.1 503/);
  t.regex(cut, /cut to make room for another review/);
  t.regex(cut, /Connection: close/i);
});

test("making room evicts a hoarder's never-used connections before a pooled connection that carries reviews", async (t) => {
  const own = await startTestServer({ templates: await loadTemplateDir('templates'), maxConnections: 3 });
  t.teardown(() => own.stop());
  const { caCert } = await testCertificates();
  const https = await import('node:https');
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1, ca: caCert });
  t.teardown(() => agent.destroy());
  const serverSide = serverSides(own);
  let pooled: tls.TLSSocket | undefined;
  const call = () =>
    new Promise<{ status: number; reused: boolean }>((resolve, reject) => {
      const req = https.request(
        { host: '127.0.0.1', port: own.port, path: '/mutate', method: 'POST', servername: 'localhost', agent, headers: { 'content-type': 'application/json' } },
        (res) => {
          if (!pooled) serverSide((pooled = req.socket as tls.TLSSocket));
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0, reused: req.reusedSocket }));
        },
      );
      req.on('error', reject);
      req.end(JSON.stringify(review(basePod())));
    });
  t.is((await call()).status, 200);
  const hoarded: tls.TLSSocket[] = [];
  for (let i = 0; i < 6; i++) {
    const socket = tls.connect({ host: '127.0.0.1', port: own.port, ca: caCert, servername: 'localhost' });
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('secureConnect', resolve).once('close', resolve));
    serverSide(socket);
    hoarded.push(socket);
  }
  t.teardown(() => hoarded.forEach((s) => s.destroy()));
  // The server has taken every connection (and made room as it did), and each client has heard
  // of its connection's close: the next call sees which connection survived.
  const clients = [pooled!, ...hoarded];
  await until(() => clients.every((c) => serverSide(c) !== undefined), 'every connection accepted');
  await until(() => clients.every((c) => !serverSide(c)!.destroyed || c.destroyed), 'every close heard by its client');
  const again = await call();
  t.is(again.status, 200);
  t.true(again.reused, 'the pooled connection survived the hoarding');
});

test('the connection limit is hard: stalled uploads are closed to make room, and a real review still gets through', async (t) => {
  const own = await startTestServer({ templates: await loadTemplateDir('templates'), maxConnections: 3 });
  t.teardown(() => own.stop());
  const { caCert } = await testCertificates();
  const serverSide = serverSides(own);
  const uploads: tls.TLSSocket[] = [];
  for (let i = 0; i < 6; i++) {
    const socket = tls.connect({ host: '127.0.0.1', port: own.port, ca: caCert, servername: 'localhost' });
    socket.on('error', () => undefined);
    await new Promise((resolve) => socket.once('secureConnect', resolve).once('close', resolve));
    serverSide(socket);
    socket.write(`POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n${' '.repeat(60_000)}`);
    uploads.push(socket);
    // The server has this upload's request (a stalled upload, not an idle connection), or has closed it to make room.
    await until(
      () => {
        const side = serverSide(socket);
        return side !== undefined && (side.bytesRead >= 60_000 || side.destroyed);
      },
      `upload ${i + 1} received`,
    );
  }
  t.teardown(() => uploads.forEach((s) => s.destroy()));
  await until(async () => (await connections(own)) <= 3, 'never more than the limit');
  t.is((await own.post(review(basePod()))).status, 200, 'a real review evicts a stalled upload and is answered');
});

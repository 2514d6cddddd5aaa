/**
 * What hostile pods and clients cost the server: `serve` runs as a child
 * process on the bundled templates; this process sends the heavy reviews and the misbehaving
 * clients over loopback, and reads the server's RSS and peak RSS (VmHWM) from /proc. Each case
 * reports the worst latency of the heavy reviews and of a legitimate review sent while they
 * are in flight. Run with `npm run bench:hostile`. Figures, not pass/fail.
 */
import { readFile } from 'node:fs/promises';
import https from 'node:https';
import tls from 'node:tls';
import { createReview, prepareCreate } from '../test/helpers/apiserver.js';
import { reviewText } from './reviews.js';
import { startInjector } from './serve.js';

async function memory(pid: number): Promise<{ rssMB: number; peakMB: number }> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => Number(new RegExp(`${key}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { rssMB: Math.round(kb('VmRSS') / 102.4) / 10, peakMB: Math.round(kb('VmHWM') / 102.4) / 10 };
}

function post(port: number, ca: string, body: string, agent: https.Agent | false = false): Promise<{ status: number; ms: number; bytes: number }> {
  const started = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path: '/mutate?timeout=10s',
        method: 'POST',
        servername: 'localhost',
        ca,
        agent,
        headers: { 'content-type': 'application/json' },
      },
      (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, ms: Number(process.hrtime.bigint() - started) / 1e6, bytes }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function hostileReview(pod: Record<string, any>): string {
  return JSON.stringify(createReview(prepareCreate(pod, 'demo'), { namespace: 'demo', dryRun: true }));
}

const base = { apiVersion: 'v1', kind: 'Pod' };
const cases: [string, () => string][] = [
  [
    '20,000 containers',
    () =>
      hostileReview({
        ...base,
        metadata: { generateName: 'p-' },
        spec: { containers: Array.from({ length: 20_000 }, (_, i) => ({ name: `c${i}`, image: 'x' })) },
      }),
  ],
  [
    '200,000 annotations',
    () =>
      hostileReview({
        ...base,
        metadata: { generateName: 'p-', annotations: Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`a${i}`, ''])) },
        spec: { containers: [{ name: 'app', image: 'x' }] },
      }),
  ],
  [
    '200,000 labels',
    () =>
      hostileReview({
        ...base,
        metadata: { generateName: 'p-', labels: Object.fromEntries(Array.from({ length: 200_000 }, (_, i) => [`l${i}`, ''])) },
        spec: { containers: [{ name: 'app', image: 'x' }] },
      }),
  ],
  [
    '7 MiB of empty objects',
    () =>
      hostileReview({
        ...base,
        metadata: { generateName: 'p-' },
        spec: { containers: [{ name: 'app', image: 'x' }], tolerations: Array.from({ length: 2_200_000 }, () => ({})) },
      }),
  ],
  [
    '1 MiB label value',
    () =>
      hostileReview({
        ...base,
        metadata: { generateName: 'p-', labels: { 'app.kubernetes.io/name': 'x'.repeat(1 << 20) } },
        spec: { containers: [{ name: 'app', image: 'x' }] },
      }),
  ],
];

// The heap capped as in the Deployment (NODE_OPTIONS there).
const { child, port, ca } = await startInjector('hostile', ['--max-old-space-size=160']);
const pid = child.pid!;
const legit = reviewText('typical');
await post(port, ca, legit);
console.log(`serve pid ${pid}; after start: ${JSON.stringify(await memory(pid))}`);
for (const [title, make] of cases) {
  const body = make();
  // Eight heavy reviews in flight at once, and a legitimate one sent while they are.
  // A refused upload may be cut mid-body (EPIPE): that is an answer too, reported as status 0.
  const heavy = Array.from({ length: 8 }, () => post(port, ca, body).catch(() => ({ status: 0, ms: 0, bytes: 0 })));
  const during = post(port, ca, legit);
  const results = await Promise.all(heavy);
  const legitResult = await during;
  console.log(
    `${title} (${(body.length / 1e6).toFixed(1)} MB) ×8: worst ${Math.max(...results.map((r) => r.ms)).toFixed(0)} ms, answers ${Math.max(...results.map((r) => r.bytes))} bytes, statuses ${[...new Set(results.map((r) => r.status))].join(',')}; a legitimate review meanwhile: ${legitResult.ms.toFixed(0)} ms; ${JSON.stringify(await memory(pid))}`,
  );
}

// Eight senders of 500,000 annotation keys for 5 s, each sending again as soon as it is answered,
// while legitimate reviews go one after another: the refusals' time, and the legitimate p99.
{
  // Sent as written (no managedFields added): under the 7 MiB body limit, so the key bounds refuse it.
  const keys = JSON.stringify(
    createReview(
      {
        ...base,
        metadata: { generateName: 'p-', annotations: Object.fromEntries(Array.from({ length: 500_000 }, (_, i) => [`k${i}`, ''])) },
        spec: { containers: [{ name: 'app', image: 'x' }] },
      },
      { namespace: 'demo', dryRun: true },
    ),
  );
  const until = performance.now() + 5000;
  const refusals: number[] = [];
  const statuses = new Set<number>();
  const senders = Array.from({ length: 8 }, async () => {
    while (performance.now() < until) {
      const r = await post(port, ca, keys).catch(() => ({ status: 0, ms: 0, bytes: 0 }));
      statuses.add(r.status);
      refusals.push(r.ms);
    }
  });
  const legitimate: number[] = [];
  const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
  while (performance.now() < until) legitimate.push((await post(port, ca, legit, agent)).ms);
  await Promise.all(senders);
  agent.destroy();
  const at = (list: number[], q: number) => [...list].sort((a, b) => a - b)[Math.min(list.length - 1, Math.floor(list.length * q))] ?? 0;
  console.log(
    `500,000 annotation keys (${(keys.length / 1e6).toFixed(1)} MB) from 8 senders for 5 s: ${refusals.length} refused (statuses ${[...statuses].join(',')}), each in p50 ${at(refusals, 0.5).toFixed(0)} ms, p99 ${at(refusals, 0.99).toFixed(0)} ms (upload included); ${legitimate.length} legitimate reviews meanwhile: p50 ${at(legitimate, 0.5).toFixed(1)} ms, p99 ${at(legitimate, 0.99).toFixed(1)} ms; ${JSON.stringify(await memory(pid))}`,
  );
}

// 100 clients that send a review and never read the answer.
const stuck: tls.TLSSocket[] = [];
for (let i = 0; i < 100; i++) {
  const socket = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' });
  socket.on('error', () => undefined);
  await new Promise((resolve) => socket.once('secureConnect', resolve));
  socket.pause();
  socket.write(`POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(legit)}\r\n\r\n${legit}`);
  stuck.push(socket);
}
await new Promise((resolve) => setTimeout(resolve, 1000));
console.log(`100 clients that never read: ${JSON.stringify(await memory(pid))}`);
for (const s of stuck) s.destroy();

// 3,000 clients that send headers and 60 KB of a 1 MiB body, then stall.
const stalled: tls.TLSSocket[] = [];
for (let i = 0; i < 3000; i++) {
  const socket = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' });
  socket.on('error', () => undefined);
  const ok = await new Promise<boolean>((resolve) => {
    socket.once('secureConnect', () => resolve(true));
    socket.once('close', () => resolve(false));
  });
  if (ok) socket.write(`POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n${' '.repeat(60_000)}`);
  stalled.push(socket);
}
await new Promise((resolve) => setTimeout(resolve, 500));
const duringUploads = await post(port, ca, legit).catch(() => ({ status: 0, ms: 0, bytes: 0 }));
console.log(
  `3,000 stalled 1 MiB uploads: ${stalled.filter((s) => !s.destroyed).length} still open; a legitimate review: HTTP ${duringUploads.status} in ${duringUploads.ms.toFixed(0)} ms; ${JSON.stringify(await memory(pid))}`,
);
for (const s of stalled) s.destroy();

// 5,000 idle TLS connections (the server keeps at most 500).
const idle: tls.TLSSocket[] = [];
let held = 0;
for (let i = 0; i < 5000; i++) {
  const socket = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' });
  socket.on('error', () => undefined);
  const ok = await new Promise<boolean>((resolve) => {
    socket.once('secureConnect', () => resolve(true));
    socket.once('close', () => resolve(false));
  });
  if (ok) held++;
  idle.push(socket);
}
await new Promise((resolve) => setTimeout(resolve, 500));
const alive = idle.filter((s) => !s.destroyed).length;
const meanwhile = await post(port, ca, legit).catch((err: Error) => ({ status: 0, ms: 0, bytes: 0, err: err.message }));
console.log(
  `5,000 idle TLS connections: ${alive} held open by the server (${held} completed a handshake); a legitimate review: HTTP ${meanwhile.status}; ${JSON.stringify(await memory(pid))}`,
);
for (const s of idle) s.destroy();
child.kill('SIGTERM');

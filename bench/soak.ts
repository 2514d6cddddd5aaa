/**
 * Soak: sustained load on the real injector over HTTPS (loopback only), bounded in time and in
 * requests; reports RSS at start and end (after the warm-up) and its peak, sampled every 5 s.
 * Memory must stay flat: a leak shows as RSS growing with the request count.
 *
 * Options: --minutes N (default 3), --max-requests N (default 3,000,000), --concurrency N (16).
 */
import { readFile } from 'node:fs/promises';
import https from 'node:https';
import { parseArgs } from 'node:util';
import { reviewText } from './reviews.js';
import { startInjector } from './serve.js';

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
}

const { values } = parseArgs({ options: { minutes: { type: 'string' }, 'max-requests': { type: 'string' }, concurrency: { type: 'string' } } });
const minutes = Number(values.minutes ?? 3);
const maxRequests = Number(values['max-requests'] ?? 3_000_000);
const concurrency = Number(values.concurrency ?? 16);

const { child, port, ca } = await startInjector('soak');
const pid = child.pid!;
const agent = new https.Agent({ keepAlive: true, maxSockets: concurrency, ca });
// Every request a different pod name and uid, as in a cluster: no two reviews are the same.
const bodies = ['small', 'typical', 'large'] as const;
let sent = 0;
let failed = 0;
const send = (i: number) =>
  new Promise<void>((resolve) => {
    const body = reviewText(bodies[i % 10 === 0 ? 2 : i % 3 === 0 ? 0 : 1]!, { uid: `soak-${i}` }).replace('"generateName":"', `"generateName":"p${i % 5000}-`);
    const req = https.request(
      { host: '127.0.0.1', port, path: '/mutate?timeout=10s', method: 'POST', agent, servername: 'localhost', headers: { 'content-type': 'application/json' } },
      (res) => {
        res.resume();
        res.on('end', () => {
          if (res.statusCode !== 200) failed++;
          resolve();
        });
      },
    );
    req.on('error', () => {
      failed++;
      resolve();
    });
    req.end(body);
  });

const started = Date.now();
const deadline = started + minutes * 60_000;
const samples: { at: number; requests: number; rss: number }[] = [];
const sampler = setInterval(() => void rssMb(pid).then((rss) => samples.push({ at: (Date.now() - started) / 1000, requests: sent, rss })), 5000);
await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (Date.now() < deadline && sent < maxRequests) await send(sent++);
  }),
);
clearInterval(sampler);
samples.push({ at: (Date.now() - started) / 1000, requests: sent, rss: await rssMb(pid) });
child.kill('SIGTERM');
agent.destroy();
const afterWarmup = samples.find((s) => s.at >= 30) ?? samples[0]!;
const end = samples.at(-1)!;
console.log(
  `soak: ${sent} reviews in ${((Date.now() - started) / 1000).toFixed(0)} s at concurrency ${concurrency} (${(sent / ((Date.now() - started) / 1000)).toFixed(0)}/s), ${failed} failed`,
);
for (const s of samples) console.log(`  t=${s.at.toFixed(0).padStart(4)} s  requests=${String(s.requests).padStart(8)}  rss=${s.rss.toFixed(1)} MB`);
console.log(
  `RSS after 30 s warm-up: ${afterWarmup.rss.toFixed(1)} MB; at the end: ${end.rss.toFixed(1)} MB; peak: ${Math.max(...samples.map((s) => s.rss)).toFixed(1)} MB; growth after warm-up: ${(end.rss - afterWarmup.rss).toFixed(1)} MB over ${end.requests - afterWarmup.requests} reviews`,
);
process.exit(failed > 0 ? 1 : 0);

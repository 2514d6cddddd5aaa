/**
 * `npm run bench`: the injection micro-benchmark, then the real injector over HTTPS against
 * the limit server (bench/limit-server.ts), both as child processes, driven from this process
 * with keep-alive connections. Three pod sizes, concurrency 1 and 32, every configuration
 * twice (the machine is shared and noisy). Reports requests/s, p50, p99 and max latency, the
 * server's peak RSS, and each figure's ratio to the limit server. Loopback only; every run is
 * bounded in time.
 *
 * Options: --duration-ms N (per run, default 2500), --runs N (default 2), --skip-micro.
 */
import { readFile, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { cpus, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startChild, startInjector } from './serve.js';
import { runMicro, formatMicro } from './micro.js';
import { reviewText, type PodSize } from './reviews.js';
import { mutate } from '../src/admission/mutate.js';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';
import { loadTemplateDir } from '../src/templates/load.js';

interface RunResult {
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  readonly peakRssMb: number;
  readonly errors: number;
}

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return kb / 1024;
}

async function drive(port: number, ca: string, body: string, uid: string, concurrency: number, durationMs: number, pid: number): Promise<RunResult> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: concurrency, ca });
  const send = () =>
    new Promise<void>((resolve, reject) => {
      const req = https.request(
        {
          host: '127.0.0.1',
          port,
          path: '/mutate?timeout=10s',
          method: 'POST',
          agent,
          servername: 'localhost',
          headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            if (res.statusCode !== 200 || !text.includes(`"uid":"${uid}"`)) reject(new Error(`status ${res.statusCode}`));
            else resolve();
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  // Warm-up: connections opened, JIT compiled.
  const warmUntil = performance.now() + Math.min(1000, durationMs / 3);
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < warmUntil) await send();
    }),
  );
  let peak = await rssMb(pid);
  const sampler = setInterval(() => void rssMb(pid).then((mb) => (peak = Math.max(peak, mb))), 100);
  const latencies: number[] = [];
  let errors = 0;
  const started = performance.now();
  const until = started + durationMs;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < until) {
        const t0 = performance.now();
        try {
          await send();
          latencies.push(performance.now() - t0);
        } catch {
          errors++;
        }
      }
    }),
  );
  const elapsed = performance.now() - started;
  clearInterval(sampler);
  peak = Math.max(peak, await rssMb(pid));
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  return { rps: (latencies.length / elapsed) * 1000, p50Ms: at(0.5), p99Ms: at(0.99), maxMs: latencies.at(-1) ?? 0, peakRssMb: peak, errors };
}

const fmt = (n: number, digits = 2) => n.toFixed(digits);

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { 'duration-ms': { type: 'string' }, runs: { type: 'string' }, 'skip-micro': { type: 'boolean' } } });
  const durationMs = Number(values['duration-ms'] ?? 2500);
  const runs = Number(values.runs ?? 2);
  console.log(
    `sidecar-injector benchmark — ${new Date().toISOString()}, node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB`,
  );
  if (!values['skip-micro']) {
    console.log('\n## injection work alone (decide, render, inject, diff, encode; no HTTP, no body parsing)\n');
    console.log(formatMicro(await runMicro()));
  }

  const uid = '11111111-2222-3333-4444-555555555555';
  const injector = await startInjector('bench');
  const { dir, cert, key, ca } = injector.files;
  const limit = await startChild(['dist/bench/limit-server.js', cert, key], (r) => r.port as number | undefined);
  // The injector's own answers, computed once, for the limit server that sends the same bytes.
  const set = await loadTemplateDir('templates');
  const deps = { templates: () => set, namespaces: createLocalNamespaceSource({ shop: { 'sidecar-injector.io/injection': 'enabled' } }) };
  const patches: Record<string, string> = {};
  for (const size of ['small', 'typical', 'large'] as PodSize[]) {
    const body = reviewText(size, { uid });
    patches[String(Buffer.byteLength(body))] = (await mutate(JSON.parse(body), deps)).response.response.patch ?? '';
  }
  await writeFile(join(dir, 'patches.json'), JSON.stringify(patches));
  const limitPatch = await startChild(['dist/bench/limit-server.js', cert, key, join(dir, 'patches.json')], (r) => r.port as number | undefined);
  try {
    console.log(`\n## over HTTPS, keep-alive, ${durationMs} ms per run, ${runs} runs per configuration (injector logs at info, to a pipe)\n`);
    console.log('"limit+patch" is the limit server answering with the injector\'s own patch bytes (same answer size).\n');
    console.log('pod      body    conc  run  server       req/s    p50 ms   p99 ms   max ms  peak RSS MB  errors   ratio to limit (req/s, p99)');
    for (const size of ['small', 'typical', 'large'] as PodSize[]) {
      const body = reviewText(size, { uid });
      for (const concurrency of [1, 32]) {
        for (let run = 1; run <= runs; run++) {
          const lim = await drive(limit.port, ca, body, uid, concurrency, durationMs, limit.child.pid!);
          const limP = await drive(limitPatch.port, ca, body, uid, concurrency, durationMs, limitPatch.child.pid!);
          const inj = await drive(injector.port, ca, body, uid, concurrency, durationMs, injector.child.pid!);
          const row = (name: string, r: RunResult, ratio: string) =>
            `${size.padEnd(8)} ${String(Math.round(Buffer.byteLength(body) / 100) / 10).padStart(5)}K ${String(concurrency).padStart(5)} ${String(run).padStart(4)}  ${name.padEnd(11)} ${fmt(r.rps, 0).padStart(8)} ${fmt(r.p50Ms, 3).padStart(9)} ${fmt(r.p99Ms, 3).padStart(8)} ${fmt(r.maxMs, 1).padStart(8)} ${fmt(r.peakRssMb, 1).padStart(12)} ${String(r.errors).padStart(7)}   ${ratio}`;
          const ratio = (r: RunResult) => `${fmt((r.rps / lim.rps) * 100, 0)}% of req/s, p99 ×${fmt(r.p99Ms / lim.p99Ms, 2)}`;
          console.log(row('limit', lim, ''));
          console.log(row('limit+patch', limP, ratio(limP)));
          console.log(row('injector', inj, `${ratio(inj)}; ${fmt((inj.rps / limP.rps) * 100, 0)}% of limit+patch`));
        }
      }
    }
  } finally {
    injector.child.kill('SIGTERM');
    limit.child.kill('SIGTERM');
    limitPatch.child.kill('SIGTERM');
  }
}

await main();

/**
 * `npm run bench`: the injection micro-benchmark, then the real injector over HTTPS against
 * the limit server (bench/limit-server.ts), both as child processes, driven from this process
 * with keep-alive connections. Three pod sizes, concurrency 1 and 32, every configuration
 * twice (the machine is shared and noisy). Reports requests/s, p50, p99 and max latency, the
 * server's peak RSS, and each figure's ratio to the limit server. Loopback only; every run is
 * bounded in time.
 *
 * Then the automatic halt's look under tenants' megabyte objects (bench/halt-look.ts).
 *
 * Last, through the real API server (bench/cluster.ts, inside scripts/cluster.sh), when this
 * machine can run the test cluster (root, Go): pod creates with and without the webhooks.
 *
 * Options: --duration-ms N (per run, default 2500), --runs N (default 2), --skip-micro,
 * --skip-cluster.
 */
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { cpus, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pinCores, sendReview, startChild, startInjector } from './serve.js';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { runMicro, formatMicro } from './micro.js';
import { replicaSetReviews, reviewText, type PodSize } from './reviews.js';
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
  /** The server's CPU time (user + system) per review answered, in µs. */
  readonly cpuUs: number;
  /** Bytes the server allocated on V8's heap per review answered (bench/allocation-meter.ts), when metered. */
  readonly allocatedBytes?: number;
}

/** A server's allocation meter (bench/allocation-meter.ts): SIGUSR2 opens and closes a window; the count is written to a file. */
class AllocationMeter {
  private windows = 0;
  constructor(
    readonly pid: number,
    readonly file: string,
  ) {}

  open(): void {
    process.kill(this.pid, 'SIGUSR2');
  }

  /** Closes the window; resolves with the bytes allocated in it once the server has written them. */
  async close(): Promise<number> {
    process.kill(this.pid, 'SIGUSR2');
    const window = ++this.windows;
    for (;;) {
      const text = await readFile(this.file, 'utf8').catch(() => '');
      const record = text ? (JSON.parse(text) as { window: number; allocatedBytes: number }) : undefined;
      if (record?.window === window) return record.allocatedBytes;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }
}

/** The node arguments and environment that load the allocation meter into a server. */
function metered(dir: string, name: string): { nodeArgs: string[]; env: Record<string, string>; file: string } {
  const file = join(dir, `allocation-${name}.json`);
  return { nodeArgs: ['--import', './dist/bench/allocation-meter.js'], env: { BENCH_ALLOCATION_FILE: file }, file };
}

/** A process's CPU time so far (user + system), in ms, from /proc (clock ticks of 10 ms). */
async function cpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => '');
  // Fields after the command name (which may hold spaces) start at ")": utime and stime are the 12th and 13th after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11] ?? 0) + Number(fields[12] ?? 0)) * 10;
}

async function rssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return kb / 1024;
}

/** Drives a server with `body`, or with each of `body` in turn (pods that differ: no answer is found in the cache). */
async function drive(
  port: number,
  ca: string,
  body: string | readonly string[],
  uid: string,
  concurrency: number,
  durationMs: number,
  pid: number,
  meter?: AllocationMeter,
): Promise<RunResult> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: concurrency, ca });
  const bodies = typeof body === 'string' ? [body] : body;
  let sent = 0;
  const send = async () => {
    const { status, text } = await sendReview(agent, port, bodies[sent++ % bodies.length]!);
    if (status !== 200 || !text.includes(`"uid":"${uid}"`)) throw new Error(`status ${status}`);
  };
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
  const cpuBefore = await cpuMs(pid);
  meter?.open();
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
  const cpuAfter = await cpuMs(pid);
  const allocated = await meter?.close();
  clearInterval(sampler);
  peak = Math.max(peak, await rssMb(pid));
  agent.destroy();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0;
  const cpuUs = latencies.length > 0 ? ((cpuAfter - cpuBefore) * 1000) / latencies.length : 0;
  return {
    rps: (latencies.length / elapsed) * 1000,
    p50Ms: at(0.5),
    p99Ms: at(0.99),
    maxMs: latencies.at(-1) ?? 0,
    peakRssMb: peak,
    errors,
    cpuUs,
    ...(allocated !== undefined && latencies.length > 0 ? { allocatedBytes: allocated / latencies.length } : {}),
  };
}

/**
 * A burst: `count` reviews sent at once over `connections` kept-alive connections (the API
 * server reuses its connections), after the connections are open. Every answer is checked.
 */
async function burst(
  port: number,
  ca: string,
  body: string,
  uid: string,
  count: number,
  connections: number,
): Promise<{ p50Ms: number; p99Ms: number; maxMs: number; wrong: number }> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: connections, ca });
  const send = async () => {
    const t0 = performance.now();
    const { status, text } = await sendReview(agent, port, body);
    return status === 200 && text.includes(`"uid":"${uid}"`) && text.includes('"patchType":"JSONPatch"') ? performance.now() - t0 : -1;
  };
  // Open the connections first (and warm the JIT), as a running API server has them.
  for (let i = 0; i < 3; i++) await Promise.all(Array.from({ length: connections }, send));
  const results = await Promise.all(Array.from({ length: count }, send));
  agent.destroy();
  const ok = results.filter((ms) => ms >= 0).sort((a, b) => a - b);
  const at = (q: number) => ok[Math.min(ok.length - 1, Math.floor(q * ok.length))] ?? 0;
  return { p50Ms: at(0.5), p99Ms: at(0.99), maxMs: ok.at(-1) ?? 0, wrong: count - ok.length };
}

/** In a child process: the cluster namespace source over `count` namespaces of the in-process API server: time to ready, added RSS. */
async function namespacesChild(count: number): Promise<void> {
  const { FakeApiServer } = await import('../test/helpers/fake-apiserver.js');
  const { ClusterNamespaceSource } = await import('../src/namespaces/cluster.js');
  const { pino } = await import('pino');
  const api = new FakeApiServer();
  await api.start();
  for (let i = 0; i < count; i++)
    api.create(`team-${i}`, { 'sidecar-injector.io/injection': i % 2 ? 'enabled' : 'disabled', 'team.example.com/owner': `owner-${i % 97}` });
  const gc = (globalThis as { gc?: () => void }).gc!;
  gc();
  const before = process.memoryUsage().rss;
  const source = new ClusterNamespaceSource({ kubeConfig: await api.kubeConfig(), log: pino({ level: 'silent' }), failurePolicy: 'deny' });
  const started = performance.now();
  source.start();
  while (!source.isReady()) await new Promise((resolve) => setTimeout(resolve, 5));
  const readyMs = performance.now() - started;
  gc();
  const addedMb = (process.memoryUsage().rss - before) / 2 ** 20;
  source.stop();
  await api.stop();
  process.stdout.write(JSON.stringify({ count: source.size(), readyMs, addedMb }));
}

const fmt = (n: number, digits = 2) => n.toFixed(digits);

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { 'duration-ms': { type: 'string' }, runs: { type: 'string' }, 'skip-micro': { type: 'boolean' }, 'skip-cluster': { type: 'boolean' } },
  });
  const durationMs = Number(values['duration-ms'] ?? 2500);
  const runs = Number(values.runs ?? 2);
  const pinned = pinCores();
  console.log(
    `sidecar-injector benchmark — ${new Date().toISOString()}, node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}, ${Math.round(totalmem() / 2 ** 30)} GiB`,
  );
  if (!values['skip-micro']) {
    console.log('\n## injection work alone (decide, render, inject, diff, encode; no HTTP, no body parsing)\n');
    console.log(formatMicro(await runMicro()));
  }

  const uid = '11111111-2222-3333-4444-555555555555';
  const meterDir = await mkdtemp(join(tmpdir(), 'sidecar-injector-bench-meters-'));
  const injectorMeter = metered(meterDir, 'injector');
  const injector = await startInjector('bench', injectorMeter.nodeArgs, [], injectorMeter.env);
  const { dir, cert, key, ca } = injector.files;
  const limit = await startChild(['dist/bench/limit-server.js', cert, key], (r) => r.port as number | undefined);
  // The injector's own answers, computed once, for the limit server that sends the same bytes.
  const set = await loadTemplateDir('templates');
  const deps = { templates: () => set, namespaces: createLocalNamespaceSource({ shop: { 'sidecar-injector.io/injection': 'enabled' } }) };
  const patches: Record<string, string> = {};
  for (const size of ['small', 'typical', 'large'] as PodSize[]) {
    const body = replicaSetReviews(size, uid)[0]!;
    patches[String(Buffer.byteLength(body))] = (await mutate(JSON.parse(body), deps)).response.response.patch ?? '';
  }
  // Pods that all differ (bare pods, a DaemonSet's pods, dry runs): every review decided afresh.
  // 2,000 pods in turn, against a cache of 256 answers: each is gone before its turn comes again.
  // Their answers are one patch (the pods differ in an annotation the patch does not touch).
  const distinct = Array.from({ length: 2000 }, (_, i) => reviewText('typical', { uid, annotations: { 'bench.example.com/pod': String(i) } }));
  patches['*'] = (await mutate(JSON.parse(distinct[0]!), deps)).response.response.patch ?? '';
  await writeFile(join(dir, 'patches.json'), JSON.stringify(patches));
  const limitMeter = metered(meterDir, 'limit-patch');
  const limitPatch = await startChild(
    [...limitMeter.nodeArgs, 'dist/bench/limit-server.js', cert, key, join(dir, 'patches.json')],
    (r) => r.port as number | undefined,
    limitMeter.env,
  );
  const meters = {
    injector: new AllocationMeter(injector.child.pid!, injectorMeter.file),
    limitPatch: new AllocationMeter(limitPatch.child.pid!, limitMeter.file),
  };
  const results: { size: PodSize; concurrency: number; lim: RunResult; limP: RunResult; inj: RunResult }[] = [];
  try {
    console.log(`\n## over HTTPS, keep-alive, ${durationMs} ms per run, ${runs} runs per configuration (injector logs at info, to a pipe)\n`);
    console.log(
      pinned
        ? "Servers pinned to core 0, the load generator to core 1 (taskset). CPU: the server process's user + system time per review.\n"
        : "Not pinned (no taskset, or one core): CPU figures include the load generator's interference.\n",
    );
    console.log(
      '"limit" answers a fixed small review; "limit+patch" answers with the injector\'s own patch bytes (the same answer size): the ratios are to limit+patch, so that they are about the work between reading and answering.\n',
    );
    console.log('"alloc KB" is what the server allocated on V8\'s heap per review (bench/allocation-meter.ts; the body\'s own bytes are outside it).\n');
    console.log(
      'pod      body    conc  run  server       req/s    p50 ms   p99 ms   max ms  peak RSS MB  errors  CPU µs/review  alloc KB   ratio to limit+patch (req/s, p99, CPU)',
    );
    const allocationText = (r: RunResult) => (r.allocatedBytes === undefined ? '' : fmt(r.allocatedBytes / 1024, 1));
    for (const size of ['small', 'typical', 'large'] as PodSize[]) {
      // Pods of one ReplicaSet: the same pod, its managedFields written a second apart.
      const bodies = replicaSetReviews(size, uid);
      const body = bodies[0]!;
      for (const concurrency of [1, 32]) {
        for (let run = 1; run <= runs; run++) {
          const lim = await drive(limit.port, ca, bodies, uid, concurrency, durationMs, limit.child.pid!);
          const limP = await drive(limitPatch.port, ca, bodies, uid, concurrency, durationMs, limitPatch.child.pid!, meters.limitPatch);
          const inj = await drive(injector.port, ca, bodies, uid, concurrency, durationMs, injector.child.pid!, meters.injector);
          results.push({ size, concurrency, lim, limP, inj });
          const row = (name: string, r: RunResult, ratio: string) =>
            `${size.padEnd(8)} ${String(Math.round(Buffer.byteLength(body) / 100) / 10).padStart(5)}K ${String(concurrency).padStart(5)} ${String(run).padStart(4)}  ${name.padEnd(11)} ${fmt(r.rps, 0).padStart(8)} ${fmt(r.p50Ms, 3).padStart(9)} ${fmt(r.p99Ms, 3).padStart(8)} ${fmt(r.maxMs, 1).padStart(8)} ${fmt(r.peakRssMb, 1).padStart(12)} ${String(r.errors).padStart(7)} ${fmt(r.cpuUs, 0).padStart(14)} ${allocationText(r).padStart(9)}   ${ratio}`;
          const ratio = (r: RunResult, to: RunResult) =>
            `${fmt((r.rps / to.rps) * 100, 0)}% of req/s, p99 ×${fmt(r.p99Ms / to.p99Ms, 2)}, CPU ×${fmt(r.cpuUs / to.cpuUs, 2)}`;
          console.log(row('limit', lim, ''));
          console.log(row('limit+patch', limP, ''));
          console.log(row('injector', inj, `${ratio(inj, limP)}; CPU ×${fmt(inj.cpuUs / lim.cpuUs, 2)} of limit`));
        }
      }
    }
    const fresh: { lim: RunResult; limP: RunResult; inj: RunResult }[] = [];
    console.log('\n## every review a different typical pod (decided afresh, no answer from the cache), c=32\n');
    for (let run = 1; run <= runs; run++) {
      const lim = await drive(limit.port, ca, distinct, uid, 32, durationMs, limit.child.pid!);
      const limP = await drive(limitPatch.port, ca, distinct, uid, 32, durationMs, limitPatch.child.pid!, meters.limitPatch);
      const inj = await drive(injector.port, ca, distinct, uid, 32, durationMs, injector.child.pid!, meters.injector);
      fresh.push({ lim, limP, inj });
      console.log(
        `run ${run}: limit ${fmt(lim.rps, 0)} req/s, ${fmt(lim.cpuUs, 0)} µs CPU; limit+patch ${fmt(limP.rps, 0)} req/s, ${fmt(limP.cpuUs, 0)} µs CPU, ${allocationText(limP)} KB allocated; injector ${fmt(inj.rps, 0)} req/s (${fmt((inj.rps / limP.rps) * 100, 0)}%), p99 ${fmt(inj.p99Ms, 2)} ms, ${fmt(inj.cpuUs, 0)} µs CPU (×${fmt(inj.cpuUs / limP.cpuUs, 2)} of limit+patch, ×${fmt(inj.cpuUs / lim.cpuUs, 2)} of limit), ${allocationText(inj)} KB allocated, errors ${inj.errors}`,
      );
    }

    // The targets, each from every run of its configuration: ratios to the same-size limit server of the same run.
    const of = (size: PodSize, concurrency: number) => results.filter((r) => r.size === size && r.concurrency === concurrency);
    const cpuRatio = (r: { inj: RunResult; limP: RunResult }) => r.inj.cpuUs / r.limP.cpuUs;
    const targets: [string, string, number[], (x: number) => boolean][] = [
      ['CPU per review, typical pod again, c=32, × limit+patch', '≤ 1.50', of('typical', 32).map(cpuRatio), (x) => x <= 1.5],
      ['throughput, typical pod again, c=32, % of limit+patch', '≥ 65', of('typical', 32).map((r) => (r.inj.rps / r.limP.rps) * 100), (x) => x >= 65],
      ['CPU per review, every pod different, c=32, × limit+patch', '≤ 2.50', fresh.map(cpuRatio), (x) => x <= 2.5],
      ['p99 latency, typical pod, c=1, ms', '≤ 1.00', of('typical', 1).map((r) => r.inj.p99Ms), (x) => x <= 1],
      ['p99 latency, large pod, c=1, ms', '≤ 2.00', of('large', 1).map((r) => r.inj.p99Ms), (x) => x <= 2],
    ];
    console.log('\n## targets (every run)\n');
    console.log('target                                                    wanted   measured             met');
    for (const [name, wanted, values, ok] of targets) {
      console.log(
        `${name.padEnd(57)} ${wanted.padEnd(8)} ${values
          .map((v) => fmt(v, 2))
          .join(', ')
          .padEnd(20)} ${values.every(ok) ? 'yes' : values.some(ok) ? 'in some runs' : 'no'}`,
      );
    }
    const typical = reviewText('typical', { uid });
    console.log('\n## a burst: 1,000 reviews at once over 64 kept-alive connections (typical pod)\n');
    for (let run = 1; run <= runs; run++) {
      const b = await burst(injector.port, ca, typical, uid, 1000, 64);
      console.log(
        `run ${run}: p50 ${fmt(b.p50Ms, 1)} ms, p99 ${fmt(b.p99Ms, 1)} ms, max ${fmt(b.maxMs, 1)} ms; ${b.wrong === 0 ? 'all 1,000 answered correctly' : `${b.wrong} wrong or failed`}`,
      );
    }
    console.log('\n## the cluster namespace source over 20,000 namespaces (in-process API server)\n');
    const ns = await new Promise<string>((resolve, reject) => {
      const p = spawn(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--namespaces-child', '20000'], {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      let text = '';
      p.stdout.on('data', (c) => (text += c));
      p.on('close', (code) => (code === 0 ? resolve(text) : reject(new Error(`namespaces child exited ${code}`))));
    });
    const n = JSON.parse(ns) as { count: number; readyMs: number; addedMb: number };
    console.log(
      `${n.count} namespaces: ready in ${fmt(n.readyMs / 1000, 2)} s (target ≤ 5 s: ${n.readyMs <= 5000 ? 'met' : 'missed'}), added RSS ${fmt(n.addedMb, 1)} MB`,
    );
  } finally {
    injector.child.kill('SIGTERM');
    limit.child.kill('SIGTERM');
    limitPatch.child.kill('SIGTERM');
  }
  console.log("\n## the automatic halt's look over tenants' megabyte pods and Events (bench/halt-look.ts)\n");
  await new Promise<void>((resolve, reject) =>
    spawn(process.execPath, ['dist/bench/halt-look.js'], { stdio: 'inherit' }).on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`the halt-look benchmark exited with ${code}`)),
    ),
  );
  if (values['skip-cluster']) return;
  if (process.getuid?.() !== 0) {
    console.log('\n## through the real API server: skipped (the test cluster needs root)');
    return;
  }
  console.log('\n## through the real API server\n');
  // Alone on the machine: the servers above have stopped.
  await new Promise<void>((resolve, reject) =>
    spawn('scripts/cluster.sh', ['run', '--', process.execPath, 'dist/bench/cluster.js', '--runs', String(runs)], { stdio: 'inherit' }).on('close', (code) =>
      code === 0 ? resolve() : reject(new Error(`the cluster benchmark exited with ${code}`)),
    ),
  );
}

if (process.argv[2] === '--namespaces-child') await namespacesChild(Number(process.argv[3]));
else await main();

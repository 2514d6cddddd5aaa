/**
 * Micro-benchmark of the injection work alone: decide, render, inject, diff and encode the
 * answer, for each pod size and for 1×, 10× and 100× env vars. Body parsing is excluded (each
 * iteration gets a fresh parsed copy made outside the timed region).
 */
import { mutate, type MutateDeps } from '../src/admission/mutate.js';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { reviewText, type PodSize } from './reviews.js';

interface Result {
  readonly label: string;
  readonly bytes: number;
  readonly iterations: number;
  readonly meanUs: number;
  readonly p50Us: number;
  readonly p99Us: number;
}

async function measure(label: string, text: string, deps: MutateDeps, budgetMs: number): Promise<Result> {
  // Warm up so that the JIT has compiled the hot path.
  for (let i = 0; i < 300; i++) JSON.stringify((await mutate(JSON.parse(text), deps)).response);
  const samples: number[] = [];
  const deadline = performance.now() + budgetMs;
  while (performance.now() < deadline || samples.length < 200) {
    const body = JSON.parse(text);
    const start = process.hrtime.bigint();
    const outcome = await mutate(body, deps);
    JSON.stringify(outcome.response);
    samples.push(Number(process.hrtime.bigint() - start) / 1000);
  }
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!;
  return {
    label,
    bytes: Buffer.byteLength(text),
    iterations: samples.length,
    meanUs: samples.reduce((a, b) => a + b, 0) / samples.length,
    p50Us: at(0.5),
    p99Us: at(0.99),
  };
}

/** Runs the micro-benchmark and returns its rows. */
export async function runMicro(budgetMs = 1500): Promise<Result[]> {
  const set = await loadTemplateDir('templates');
  const deps: MutateDeps = { templates: () => set, namespaces: createLocalNamespaceSource({ shop: { 'sidecar-injector.io/injection': 'enabled' } }) };
  const rows: Result[] = [];
  for (const size of ['small', 'typical', 'large'] as PodSize[]) rows.push(await measure(`${size} pod`, reviewText(size), deps, budgetMs));
  for (const envCount of [10, 100, 1000, 10000]) rows.push(await measure(`${envCount} env vars`, reviewText('typical', { envCount }), deps, budgetMs));
  // Parameter overrides on the pod: three values read against their declarations, and rendered.
  const overrides = {
    'log-shipper.sidecar-injector.io/memoryLimit': '128Mi',
    'proxy.sidecar-injector.io/cpuRequest': '200m',
    'proxy.sidecar-injector.io/logLevel': 'debug',
  };
  rows.push(await measure('typical, 3 overrides', reviewText('typical', { annotations: overrides }), deps, budgetMs));
  return rows;
}

/** The rows as a table. */
export function formatMicro(rows: Result[]): string {
  const lines = ['case                 body bytes   runs    mean µs   p50 µs   p99 µs'];
  for (const r of rows) {
    lines.push(
      `${r.label.padEnd(20)} ${String(r.bytes).padStart(10)} ${String(r.iterations).padStart(6)} ${r.meanUs.toFixed(1).padStart(10)} ${r.p50Us.toFixed(1).padStart(8)} ${r.p99Us.toFixed(1).padStart(8)}`,
    );
  }
  return lines.join('\n');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  console.log(`injection work per review (node ${process.version}, ${new Date().toISOString().slice(0, 10)})`);
  console.log(formatMicro(await runMicro()));
}

/**
 * What a tenant's megabyte objects cost the automatic halt's look: the test API server holds
 * 100 Pending pods of about 1 MB and 100 `FailedCreate` Events with 1 MiB messages (what anyone
 * who may create pods and Events can write), and a child process with the Deployment's heap cap
 * (`--max-old-space-size=160`) runs the look three times, as a replica does once a minute while a
 * candidate exists. Reported: the child's peak heap and peak RSS, bounded (the shipped page
 * bound) and unbounded (one page holds everything, as before the bound). Figures, not pass/fail.
 * Run with `npm run bench:halt`; part of `npm run bench`.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FakeApiServer } from '../test/helpers/fake-apiserver.js';

const mib = 1024 * 1024;

if (process.argv[2] === '--child') {
  // The look itself, under the heap cap: three looks, the heap sampled every few milliseconds.
  const [, , , kubeconfigPath, templatesDir, mode] = process.argv;
  const { KubeConfig } = await import('@kubernetes/client-node');
  const { loadTemplateDir } = await import('../src/templates/load.js');
  const { lookAtCandidates } = await import('../src/rollout/look.js');
  const { defaultHaltThresholds } = await import('../src/rollout/halt.js');
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromString(await readFile(kubeconfigPath!, 'utf8'));
  const set = await loadTemplateDir(templatesDir!);
  let peak = 0;
  const sample = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 2);
  let pods = 0;
  for (let i = 0; i < 3; i++) {
    const count = await lookAtCandidates({
      kubeConfig,
      set,
      thresholds: defaultHaltThresholds,
      now: Date.now(),
      ...(mode === 'unbounded' ? { maxPageBytes: 1024 * mib } : {}),
    });
    pods = [...count.health.values()][0]?.pods ?? 0;
    peak = Math.max(peak, process.memoryUsage().heapUsed);
  }
  clearInterval(sample);
  const status = await readFile('/proc/self/status', 'utf8');
  const hwm = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
  console.log(JSON.stringify({ peakHeapMB: Math.round(peak / mib), peakRssMB: Math.round(hwm), candidatePods: pods }));
  process.exit(0);
}

const api = new FakeApiServer();
await api.start();
const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-halt-look-'));
try {
  const shipper = await readFile('templates/log-shipper.yaml', 'utf8');
  await writeFile(join(dir, 'log-shipper.yaml'), shipper);
  await writeFile(join(dir, 'log-shipper-next.yaml'), `rollout:\n  role: candidate\n  share: 100\n${shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3')}`);
  const when = new Date().toISOString();
  for (let i = 0; i < 100; i++) {
    api.addObject(
      'pods',
      { namespace: 'tenant', name: `heavy-${i}`, annotations: { note: 'x'.repeat(mib - 200) } },
      { containers: [{ name: 'app', image: 'registry.example/app:1' }] },
    );
    api.coreEvents.push({
      kind: 'Event',
      apiVersion: 'v1',
      metadata: { namespace: 'tenant', name: `heavy-${i}` },
      involvedObject: { kind: 'Job', namespace: 'tenant', name: `job-${i}` },
      reason: 'FailedCreate',
      type: 'Warning',
      message: 'x'.repeat(mib),
      lastTimestamp: when,
    });
  }
  const kubeconfigPath = join(dir, 'kubeconfig');
  await writeFile(kubeconfigPath, (await api.kubeConfig()).exportConfig());
  for (const mode of ['bounded', 'unbounded']) {
    const child = spawn(process.execPath, ['--max-old-space-size=160', 'dist/bench/halt-look.js', '--child', kubeconfigPath, dir, mode], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    const heapDeath = /heap limit|heap out of memory/i.test(err);
    console.log(
      code === 0
        ? `halt look, ${mode}, 100 × 1 MB pods and 100 × 1 MiB Events, heap cap 160 MB: ${out.trim()}`
        : `halt look, ${mode}, 100 × 1 MB pods and 100 × 1 MiB Events, heap cap 160 MB: the process died (exit ${code}${heapDeath ? ', out of heap' : ''}): ${err.trim().split('\n').slice(-1)[0] ?? ''}`,
    );
  }
} finally {
  await api.stop();
  await rm(dir, { recursive: true, force: true });
}

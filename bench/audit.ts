/**
 * The auditor at scale: the in-process API server holds N pods (real metadata: labels, the
 * ledger annotation, an owner; and a spec the metadata-only list leaves out), and the audit
 * runs in a child process so that its own peak RSS is measured, apart from the server's.
 * `npm run bench:audit [N …]` (default 10000 100000).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { loadTemplateDir } from '../src/templates/load.js';
import { FakeApiServer } from '../test/helpers/fake-apiserver.js';

/** In the child: the server's auditor synced over all pods; its added RSS and heap, after a collection. */
async function serverChild(kubeconfig: string): Promise<void> {
  const { PodAuditor } = await import('../src/audit/pod-auditor.js');
  const { pino } = await import('pino');
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const set = await loadTemplateDir('templates');
  const gc = (globalThis as { gc?: () => void }).gc!;
  gc();
  const before = process.memoryUsage();
  const started = performance.now();
  const auditor = new PodAuditor({
    kubeConfig: kc,
    log: pino({ level: 'silent' }),
    templates: () => set,
    namespaceLabels: () => ({ 'sidecar-injector.io/injection': 'enabled' }),
    gauge: { set: () => {}, remove: () => {} },
  });
  auditor.start();
  while (!auditor.status().synced) await new Promise((resolve) => setTimeout(resolve, 20));
  const ms = performance.now() - started;
  gc();
  const after = process.memoryUsage();
  const pods = auditor.status().pods;
  auditor.stop();
  process.stdout.write(JSON.stringify({ pods, ms, rssMb: (after.rss - before.rss) / 2 ** 20, heapMb: (after.heapUsed - before.heapUsed) / 2 ** 20 }));
}

/** In the child: one audit, then its time and peak RSS as JSON on stdout. */
async function child(kubeconfig: string): Promise<void> {
  const { auditCluster } = await import('../src/cli/audit.js');
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  const started = performance.now();
  const report = await auditCluster(kc, await loadTemplateDir('templates'));
  const ms = performance.now() - started;
  process.stdout.write(JSON.stringify({ pods: report.pods.length, owners: report.owners.length, ms, maxRssMb: process.resourceUsage().maxRSS / 1024 }));
}

async function measure(count: number, server: boolean): Promise<string> {
  const api = new FakeApiServer();
  await api.start();
  try {
    const set = await loadTemplateDir('templates');
    const hash = set.byName.get('log-shipper')!.hash;
    api.create('shop', { 'sidecar-injector.io/injection': 'enabled' });
    const deployments = Math.max(1, Math.floor(count / 50));
    for (let d = 0; d < deployments; d++) {
      api.addObject('replicasets', {
        namespace: 'shop',
        name: `app-${d}-5d8f`,
        ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: `app-${d}`, uid: `d${d}`, controller: true }],
      });
    }
    for (let i = 0; i < count; i++) {
      const d = i % deployments;
      const ledger =
        i % 10 === 0
          ? {}
          : {
              'sidecar-injector.io/status': JSON.stringify({
                v: 1,
                templates: { 'log-shipper': { hash: i % 7 === 0 ? '000000000000' : hash, containers: ['log-shipper'], volumes: ['app-logs'] } },
              }),
            };
      api.addObject(
        'pods',
        {
          namespace: 'shop',
          name: `app-${d}-5d8f-${i.toString(36)}`,
          labels: { app: `app-${d}`, 'app.kubernetes.io/name': `app-${d}`, 'pod-template-hash': '5d8f' },
          annotations: { 'logging.example.com/shipper': 'fluent-bit', ...ledger },
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: `app-${d}-5d8f`, uid: `rs${d}`, controller: true, blockOwnerDeletion: true }],
        },
        {
          containers: [
            { name: 'app', image: 'registry.example.com/app:1.0.0', env: Array.from({ length: 20 }, (_, k) => ({ name: `E${k}`, value: 'x'.repeat(30) })) },
          ],
        },
      );
    }
    const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-bench-audit-'));
    const kubeconfig = join(dir, 'kubeconfig');
    await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
    const out = await new Promise<string>((resolve, reject) => {
      const args = server
        ? ['--expose-gc', fileURLToPath(import.meta.url), '--server-child', kubeconfig]
        : [fileURLToPath(import.meta.url), '--child', kubeconfig];
      const p = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
      let text = '';
      p.stdout.on('data', (c) => (text += c));
      p.on('close', (code) => (code === 0 ? resolve(text) : reject(new Error(`audit child exited ${code}`))));
    });
    if (server) {
      const r = JSON.parse(out) as { pods: number; ms: number; rssMb: number; heapMb: number };
      const perPod = (mb: number) => ((mb * 2 ** 20) / r.pods).toFixed(0);
      return `${String(r.pods).padStart(8)} pods   synced in ${(r.ms / 1000).toFixed(2).padStart(5)} s   added RSS ${r.rssMb.toFixed(0).padStart(4)} MB (${perPod(r.rssMb)} B/pod)   heap ${r.heapMb.toFixed(0)} MB (${perPod(r.heapMb)} B/pod)`;
    }
    const r = JSON.parse(out) as { pods: number; owners: number; ms: number; maxRssMb: number };
    return `${String(r.pods).padStart(8)} pods ${String(r.owners).padStart(6)} workloads   ${(r.ms / 1000).toFixed(2).padStart(6)} s   peak RSS ${r.maxRssMb.toFixed(0).padStart(5)} MB`;
  } finally {
    await api.stop();
  }
}

if (process.argv[2] === '--child') await child(process.argv[3]!);
else if (process.argv[2] === '--server-child') await serverChild(process.argv[3]!);
else {
  const counts = process.argv
    .slice(2)
    .map(Number)
    .filter((n) => n > 0);
  process.stdout.write(`sidecar-injector audit (the command) against the in-process API server (node ${process.version})\n`);
  for (const count of counts.length ? counts : [10_000, 100_000]) process.stdout.write(`${await measure(count, false)}\n`);
  process.stdout.write(`the server's auditor (metadata-only list and watch of pods)\n`);
  for (const count of counts.length ? counts : [10_000, 100_000]) process.stdout.write(`${await measure(count, true)}\n`);
}

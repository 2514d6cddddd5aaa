/**
 * `sidecar-injector rollout status`: the templates directory's revisions, and the workloads
 * and pods of the cluster on each, from a metadata-only list of the in-process API server.
 */
import test from 'ava';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rollout, type RolloutReport } from '../src/cli/rollout.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { ConfigError, UsageError } from '../src/errors.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';

const shipper = await readFile('templates/log-shipper.yaml', 'utf8');
const next = `rollout:\n  role: candidate\n  share: 25\n  namespaces: [shop]\n  podSelector: {matchLabels: {tier: web}}\n${shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3')}`;
const previous = `rollout:\n  role: previous\n${shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.1')}`;

async function templatesDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'rollout-status-'));
  await writeFile(join(dir, 'log-shipper.yaml'), shipper);
  await writeFile(join(dir, 'log-shipper-next.yaml'), next);
  await writeFile(join(dir, 'log-shipper-previous.yaml'), previous);
  return dir;
}

async function run(args: string[]): Promise<{ code: number; stdout: string }> {
  let stdout = '';
  const code = await rollout(args, { stdout: { write: (s: string) => (stdout += s) } });
  return { code, stdout };
}

const ledger = (hash: string) => JSON.stringify({ v: 1, templates: { 'log-shipper': { hash, initContainers: ['log-shipper'] } } });

test('the revisions of each template, and the workloads and pods on each', async (t) => {
  const dir = await templatesDir();
  const set = await loadTemplateDir(dir);
  const { stable, candidate, previous: before } = set.rollouts!.get('log-shipper')!;
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  const kubeconfig = join(dir, '..', `${dir.split('/').pop()}.kubeconfig`);
  await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
  const owned = (kind: string, name: string) => [{ apiVersion: 'apps/v1', kind, name, uid: `u-${name}`, controller: true }];
  const pod = (name: string, owner: unknown, hash: string | undefined, labels: Record<string, string> = {}) =>
    api.addObject(
      'pods',
      { namespace: 'shop', name, labels, annotations: hash ? { 'sidecar-injector.io/status': ledger(hash) } : {}, ownerReferences: owner },
      {},
    );
  // One Deployment across two ReplicaSets (one workload), a StatefulSet, a pod with a forged ledger, a pod without sidecars.
  pod('web-1a-x', owned('ReplicaSet', 'web-1a'), candidate!.hash, { 'pod-template-hash': '1a', tier: 'web' });
  pod('web-2b-y', owned('ReplicaSet', 'web-2b'), candidate!.hash, { 'pod-template-hash': '2b', tier: 'web' });
  pod('db-0', owned('StatefulSet', 'db'), stable.hash);
  pod('db-1', owned('StatefulSet', 'db'), stable.hash);
  pod('old-0', owned('StatefulSet', 'old'), before!.hash);
  pod('forged', undefined, 'f00f00f00f00');
  pod('plain', undefined, undefined);

  const { code, stdout } = await run(['status', '--templates', dir, '--kubeconfig', kubeconfig, '-o', 'json']);
  t.is(code, 0);
  const report = JSON.parse(stdout) as RolloutReport;
  t.deepEqual(report.templates, [
    {
      template: 'log-shipper',
      stable: stable.hash,
      candidate: { revision: candidate!.hash, share: 25, namespaces: ['shop'], podSelector: 'tier=web' },
      previous: before!.hash,
    },
  ]);
  t.deepEqual(report.pods, [
    { template: 'log-shipper', revision: stable.hash, role: 'stable', workloads: 1, pods: 2 },
    { template: 'log-shipper', revision: candidate!.hash, role: 'candidate', workloads: 1, pods: 2 },
    { template: 'log-shipper', revision: before!.hash, role: 'previous', workloads: 1, pods: 1 },
    { template: 'log-shipper', revision: 'f00f00f00f00', role: 'other', workloads: 1, pods: 1 },
  ]);
  // The metadata-only list, as the audit reads pods.
  t.true(api.workloadAccepts.every((accept) => accept.includes('PartialObjectMetadataList')));

  const text = await run(['status', '--templates', dir, '--kubeconfig', kubeconfig]);
  t.regex(text.stdout, new RegExp(`^log-shipper +${stable.hash} +${candidate!.hash} +25% +namespaces shop; pods tier=web +${before!.hash}$`, 'm'));
  t.regex(text.stdout, new RegExp(`^log-shipper +${candidate!.hash} +candidate +1 +2$`, 'm'));
});

test('--offline reads no cluster; a wrong subcommand or output is a clear refusal', async (t) => {
  const dir = await templatesDir();
  const offline = await run(['status', '--templates', dir, '--offline', '-o', 'json']);
  t.is(offline.code, 0);
  t.is((JSON.parse(offline.stdout) as RolloutReport).pods, undefined);
  const plain = await run(['status', '--templates', 'templates', '--offline']);
  t.regex(plain.stdout, /^log-shipper +[0-9a-f]{12} +- +- +- +-$/m);
  await t.throwsAsync(run(['statuz', '--offline']), { instanceOf: UsageError, message: /expected the subcommand status \(got "statuz"\)/ });
  await t.throwsAsync(run(['status', '--offline', '-o', 'yaml']), { instanceOf: ConfigError, message: /-o: expected text or json/ });
  await t.throwsAsync(run(['status', '--templates', dir, '--kubeconfig', join(dir, 'missing')]), { instanceOf: ConfigError, message: /--offline shows/ });
});

/**
 * `sidecar-injector rollout status`: the templates directory's revisions, and the workloads
 * and pods of the cluster on each, from a metadata-only list of the in-process API server.
 */
import test from 'ava';
import net from 'node:net';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rollout, type RolloutReport } from '../src/cli/rollout.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { ConfigError, UsageError } from '../src/errors.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { candidateFile, rolloutWorld, serveStatus } from './helpers/rollout-world.js';
import { until } from './helpers/until.js';
import { applyExamples, bareExampleText, revisionManifestText } from './helpers/templates.js';

const shipper = bareExampleText('log-shipper');
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

/** A kubeconfig file for `api`. */
async function kubeconfigFile(api: FakeApiServer): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'rollout-status-kc-'));
  await writeFile(join(dir, 'kubeconfig'), (await api.kubeConfig()).exportConfig());
  return join(dir, 'kubeconfig');
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

test("the injector's preflight, halt and health per candidate, read from its /status through the API server's service proxy", async (t) => {
  const world = await rolloutWorld(
    t,
    {
      'log-shipper.yaml': shipper,
      'log-shipper-next.yaml': candidateFile(shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3'), 100),
    },
    { haltAfter: 1 },
  );
  const { api, chain, clock, rollout } = world;
  const kubeconfig = await kubeconfigFile(api);
  const set = world.templates.current();
  const candidate = set.rollouts!.get('log-shipper')!.candidate!.hash;
  const args = ['status', '--templates', world.dir, '--kubeconfig', kubeconfig];

  // Before the Service answers: the rest is shown, and why the injector's part is not.
  const before = await run([...args, '-o', 'json']);
  t.is(before.code, 0);
  t.regex(
    (JSON.parse(before.stdout) as RolloutReport).injector!.error!,
    /^cannot read the injector's \/status through the API server's service proxy: no endpoints available/,
  );

  // A Service the API server cannot connect to (a NetworkPolicy that keeps it off the metrics port, say): the error says what to admit.
  const closed = net.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  api.serviceProxies.set('sidecar-injector/https:sidecar-injector:8443', (closed.address() as net.AddressInfo).port);
  await new Promise<void>((resolve) => closed.close(() => resolve()));
  const unreachable = await run([...args, '-o', 'json']);
  t.regex(
    (JSON.parse(unreachable.stdout) as RolloutReport).injector!.error!,
    /^cannot read the injector's \/status through the API server's service proxy: error trying to reach service: .*ECONNREFUSED.* \(the API server must reach the Service's port 8443: where a NetworkPolicy is enforced, admit it, e\.g\. manifests\/components\/restricted-ingress\)$/,
  );

  api.serviceProxies.set('sidecar-injector/https:sidecar-injector:8443', await serveStatus(t, () => rollout.status()));
  await until(() => rollout.status().results.length === 1, 'the first preflight');
  const passed = JSON.parse((await run([...args, '-o', 'json'])).stdout) as RolloutReport;
  t.deepEqual(passed.injector, {
    from: 'sidecar-injector/sidecar-injector:8443',
    replica: 'replica-1',
    preflight: true,
    candidates: [
      {
        template: 'log-shipper',
        revision: candidate,
        takesPods: true,
        preflight: { state: 'passed', message: rollout.status().results[0]!.message, checkedAt: '2026-11-20T10:00:00.000Z' },
      },
    ],
  });

  // The chain refuses it at the next preflight; a refused ReplicaSet of a workload it takes halts it at the next look.
  chain.validators.push(() => 'image-signature policy: not signed');
  api.addObject('replicasets', { namespace: 'shop', name: 'web-7c9d' }, { template: { metadata: { labels: { app: 'web', 'pod-template-hash': '7c9d' } } } });
  api.setObjectStatus('replicasets', 'shop', 'web-7c9d', {
    conditions: [{ type: 'ReplicaFailure', status: 'True', reason: 'FailedCreate', message: 'forbidden' }],
  });
  api.coreEvents.push({
    metadata: { namespace: 'shop', name: 'web-7c9d.1' },
    involvedObject: { kind: 'ReplicaSet', namespace: 'shop', name: 'web-7c9d' },
    reason: 'FailedCreate',
    type: 'Warning',
    message: 'Error creating: forbidden',
    lastTimestamp: new Date(clock.now()).toISOString(),
  });
  // The look at one minute counts the refusal while the candidate takes pods, and halts it.
  await clock.advance(60_000);
  await until(() => rollout.status().halted.length === 1, 'the halt');
  const halted = (JSON.parse((await run([...args, '-o', 'json'])).stdout) as RolloutReport).injector!.candidates![0]!;
  t.like(halted, {
    takesPods: false,
    preflight: { state: 'passed', checkedAt: '2026-11-20T10:00:00.000Z' },
    health: { pods: 0, restarting: 0, notReady: 0, refusedWorkloads: 1, checkedAt: '2026-11-20T10:01:00.000Z' },
  });
  t.regex(
    halted.halted!,
    /^halted: 0 of 0 pods with the candidate are unhealthy and 1 of its workloads cannot create pods \(ReplicaSet shop\/web-7c9d cannot create pods: forbidden\)$/,
  );
  t.is(halted.stopped, halted.halted, 'the halt is why it takes no pod');
  // The next periodic preflight is refused by the chain: shown with its time, the halt kept.
  await clock.advance(4 * 60_000);
  await until(() => rollout.status().results[0]!.passed === false, 'the failed preflight');
  const failed = (JSON.parse((await run([...args, '-o', 'json'])).stdout) as RolloutReport).injector!.candidates![0]!;
  t.like(failed.preflight, { state: 'failed', failure: 'refused', checkedAt: '2026-11-20T10:05:00.000Z' });
  t.regex(failed.preflight.message!, /image-signature policy: not signed/);
  t.truthy(failed.halted);

  const text = (await run(args)).stdout;
  t.regex(text, /^injector sidecar-injector\/sidecar-injector:8443 \(replica replica-1\):$/m);
  t.regex(text, new RegExp(`^log-shipper +${candidate} +no +failed \\(refused\\) +2026-11-20T10:05:00\\.000Z +yes +0 +0 +0 +\\d+ +\\S+$`, 'm'));
  t.regex(text, /^log-shipper: halted: 0 of 0 pods with the candidate are unhealthy and 1 of its workloads cannot create pods/m);
  await t.throwsAsync(run([...args, '--injector', 'sidecar-injector']), { instanceOf: ConfigError, message: /--injector: expected NAMESPACE\/SERVICE/ });
});

test('an injector that runs no preflight says so', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.serviceProxies.set('ops/https:injector:8443', await serveStatus(t, () => undefined));
  const dir = await templatesDir();
  const { stdout } = await run(['status', '--templates', dir, '--kubeconfig', await kubeconfigFile(api), '--injector', 'ops/injector:8443']);
  t.regex(stdout, /^injector ops\/injector:8443: runs no preflight \(no --rollout-probe-namespace\): each candidate takes its share as soon as it is loaded$/m);
});

test("without --templates: the cluster's SidecarTemplates, and each one's status as the injector wrote it (read as untrusted text)", async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  applyExamples(api);
  api.applyTemplateText(
    revisionManifestText(bareExampleText('log-shipper').replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3'), 'log-shipper-next', { role: 'candidate', share: 25 }),
  );
  const stored = (name: string) => api.sidecarTemplates.get(name)!;
  stored('log-shipper').status = {
    template: 'log-shipper',
    role: 'stable',
    state: 'Serving',
    revision: 'abc',
    pods: { current: 7, stale: 1, missing: 0, leftOut: 0 },
  };
  stored('log-shipper-next').status = {
    template: 'log-shipper',
    role: 'candidate',
    share: '25%',
    state: 'Stopped',
    message: 'takes no pod: preflight failed\u202e (refused)',
  };
  const kubeconfig = await kubeconfigFile(api);
  const json = JSON.parse((await run(['status', '--kubeconfig', kubeconfig, '-o', 'json'])).stdout) as RolloutReport;
  t.deepEqual(
    json.templates.map((r) => [r.template, r.candidate?.share]),
    [
      ['log-shipper', 25],
      ['proxy', undefined],
    ],
  );
  t.deepEqual(
    json.objects!.map((o) => [o.name, o.role, o.state, o.pods?.current]),
    [
      ['log-shipper', 'stable', 'Serving', 7],
      ['log-shipper-next', 'candidate', 'Stopped', undefined],
      ['proxy', undefined, undefined, undefined],
    ],
  );
  const text = (await run(['status', '--kubeconfig', kubeconfig])).stdout;
  t.regex(text, /^SIDECARTEMPLATE\s+ROLE\s+SHARE\s+STATE\s+CURRENT\s+STALE\s+MISSING\s+MESSAGE$/m);
  t.regex(text, /^log-shipper-next\s+candidate\s+25%\s+Stopped\s+-\s+-\s+-\s+takes no pod: preflight failed\\u202e \(refused\)$/m);
  t.regex(text, /^proxy\s+-\s+-\s+no status yet/m);
});

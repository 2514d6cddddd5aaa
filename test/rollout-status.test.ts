/**
 * `sidecar-injector rollout status`: the templates' revisions, each SidecarTemplate's status as
 * the elected replica writes it (a candidate's preflight, halt and health), and the workloads and
 * pods of the cluster on each, from a metadata-only list of the in-process API server.
 */
import test, { type ExecutionContext } from 'ava';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { rollout, type RolloutReport } from '../src/cli/rollout.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { ConfigError, UsageError } from '../src/errors.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { pino } from 'pino';
import { TemplateObjects } from '../src/serving/template-objects.js';
import { TemplateStatusWriter } from '../src/serving/template-status.js';
import { withoutPreflight } from '../src/rollout/preflight.js';
import { candidateFile, rolloutWorld } from './helpers/rollout-world.js';
import { FakeClock } from './helpers/fake-clock.js';
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

/** The test API server holding the example templates and a 25 % candidate of log-shipper (object log-shipper-next). */
async function apiWithCandidate(t: ExecutionContext): Promise<FakeApiServer> {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  applyExamples(api);
  api.applyTemplateText(
    revisionManifestText(bareExampleText('log-shipper').replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3'), 'log-shipper-next', { role: 'candidate', share: 25 }),
  );
  return api;
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

test("each candidate's preflight, halt and health, as the elected replica writes them into its SidecarTemplate's status", async (t) => {
  const files = {
    'log-shipper.yaml': shipper,
    'log-shipper-next.yaml': candidateFile(shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3'), 100),
  };
  const world = await rolloutWorld(t, files, { haltAfter: 1 });
  const { api, chain, clock, rollout } = world;
  // The same objects in the cluster, and the leader's status writer over them with this replica's rollout.
  for (const text of Object.values(files)) api.applyTemplateText(text);
  const objects = new TemplateObjects({ kubeConfig: world.kubeConfig, log: pino({ level: 'silent' }) });
  objects.start();
  t.teardown(() => objects.stop());
  await until(() => objects.ready(), 'the objects listed');
  const writer = new TemplateStatusWriter({
    kubeConfig: world.kubeConfig,
    log: pino({ level: 'silent' }),
    clock,
    objects,
    inForce: world.inForce,
    counts: () => undefined,
    progress: () => rollout.progress(),
  });
  writer.start();
  t.teardown(() => writer.stop());
  const kubeconfig = await kubeconfigFile(api);
  const candidate = world.templates.current().rollouts!.get('log-shipper')!.candidate!.hash;
  const read = async () => {
    writer.round();
    await writer.settled();
    const report = JSON.parse((await run(['status', '--kubeconfig', kubeconfig, '-o', 'json'])).stdout) as RolloutReport;
    return report.objects!.find((o) => o.name === 'log-shipper-next')!;
  };

  await until(() => rollout.status().results.length === 1, 'the first preflight');
  const passed = await read();
  t.like(passed, { role: 'candidate', revision: candidate, state: 'Candidate' });
  t.deepEqual(passed.preflight, {
    state: 'passed',
    replica: 'replica-1',
    message: rollout.status().results[0]!.message,
    checkedAt: '2026-11-20T10:00:00.000Z',
  });
  t.is(passed.halted, undefined);
  t.is(api.sidecarTemplates.get('log-shipper')!.status.preflight, undefined, 'a stable revision has no preflight');

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
  const halted = await read();
  t.like(halted, {
    state: 'Stopped',
    preflight: { state: 'passed', checkedAt: '2026-11-20T10:00:00.000Z' },
    health: { pods: 0, restarting: 0, notReady: 0, refusedWorkloads: 1, checkedAt: '2026-11-20T10:01:00.000Z' },
  });
  t.regex(
    halted.halted!,
    /^halted: 0 of 0 pods with the candidate are unhealthy and 1 of its workloads cannot create pods \(ReplicaSet shop\/web-7c9d cannot create pods: forbidden\)$/,
  );
  // The next periodic preflight is refused by the chain: shown with its time, the halt kept.
  await clock.advance(4 * 60_000);
  await until(() => rollout.status().results[0]!.passed === false, 'the failed preflight');
  const failed = await read();
  t.like(failed.preflight, { state: 'failed', failure: 'refused', checkedAt: '2026-11-20T10:05:00.000Z' });
  t.regex(failed.preflight!.message!, /image-signature policy: not signed/);
  t.truthy(failed.halted);
  // kubectl get's column, from the stored status.
  t.is(api.sidecarTemplates.get('log-shipper-next')!.status.preflight.state, 'failed');

  const text = (await run(['status', '--kubeconfig', kubeconfig])).stdout;
  t.regex(text, /^candidates \(as replica replica-1 sees them\):$/m);
  t.regex(
    text,
    new RegExp(`^log-shipper-next +${candidate} +failed \\(refused\\) +2026-11-20T10:05:00\\.000Z +yes +0 +0 +0 +0 +2026-11-20T10:0\\d:00\\.000Z$`, 'm'),
  );
  // A halted candidate takes no workload: the look after the halt counts no refusal of its own.
  t.regex(
    text,
    /^log-shipper-next +candidate +100% +Stopped +- +- +- +takes no pod: halted: 0 of 0 pods with the candidate are unhealthy and 1 of its workloads cannot create pods/m,
  );
  await t.throwsAsync(run(['status', '--kubeconfig', kubeconfig, '--injector', 'sidecar-injector/x']), { message: /--injector/ });
});

test('an injector that runs no preflight: the candidate says it takes no pod, with no preflight of its own', async (t) => {
  const api = await apiWithCandidate(t);
  const objects = new TemplateObjects({ kubeConfig: await api.kubeConfig(), log: pino({ level: 'silent' }) });
  objects.start();
  t.teardown(() => objects.stop());
  await until(() => objects.ready(), 'the objects listed');
  const clock = new FakeClock();
  const writer = new TemplateStatusWriter({
    kubeConfig: await api.kubeConfig(),
    log: pino({ level: 'silent' }),
    clock,
    objects,
    inForce: () => withoutPreflight(objects.current()),
    counts: () => undefined,
  });
  writer.start();
  t.teardown(() => writer.stop());
  writer.round();
  await writer.settled();
  const kubeconfig = await kubeconfigFile(api);
  const report = JSON.parse((await run(['status', '--kubeconfig', kubeconfig, '-o', 'json'])).stdout) as RolloutReport;
  const next = report.objects!.find((o) => o.name === 'log-shipper-next')!;
  t.like(next, { role: 'candidate', state: 'Stopped' });
  t.is(next.preflight, undefined);
  t.regex(next.message!, /preflight not run/);
  const text = (await run(['status', '--kubeconfig', kubeconfig])).stdout;
  t.regex(text, /^candidates:$/m);
  t.regex(text, /^log-shipper-next +\S+ +- +- +no +- +- +- +- +-$/m);
});

test("without --templates: the cluster's SidecarTemplates, and each one's status as the injector wrote it (read as untrusted text)", async (t) => {
  const api = await apiWithCandidate(t);
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

test("a candidate's status written by anyone who may write it: every field read by type and bound, every cell one printable line", async (t) => {
  const api = await apiWithCandidate(t);
  api.sidecarTemplates.get('log-shipper-next')!.status = JSON.parse(
    JSON.stringify({
      role: 'candidate',
      revision: 'abc\nlog-shipper-next  forged',
      preflight: { state: 42, replica: 'r\n\u202eFAKE', failure: ['x'], message: 'm'.repeat(5000), checkedAt: '\t' },
      halted: { why: 'an object' },
      health: { pods: '9', restarting: -4, notReady: 2.7, refusedWorkloads: Infinity, checkedAt: 7 },
    }).replace('"role"', '"__proto__":{"polluted":true},"role"'),
  );
  const kubeconfig = await kubeconfigFile(api);
  const report = JSON.parse((await run(['status', '--kubeconfig', kubeconfig, '-o', 'json'])).stdout) as RolloutReport;
  const next = report.objects!.find((o) => o.name === 'log-shipper-next')!;
  t.deepEqual(next.preflight, { state: 'unknown', replica: 'r\n\u202eFAKE', message: 'm'.repeat(1000), checkedAt: '\t' });
  t.is(next.halted, undefined);
  t.deepEqual(next.health, { pods: 0, restarting: 0, notReady: 2, refusedWorkloads: 0 });
  t.is(({} as Record<string, unknown>).polluted, undefined);
  const text = (await run(['status', '--kubeconfig', kubeconfig])).stdout;
  t.notRegex(text, /^log-shipper-next {2}forged/m, 'no forged row');
  t.regex(text, /^candidates \(as replica r\\u000a\\u202eFAKE sees them\):$/m);
  t.regex(text, /^log-shipper-next +abc\\u000alog-shipper-next {2}forged +unknown +\\u0009 +no +0 +0 +2 +0 +-$/m);
});

test('in-place updates toward a revision: written into its SidecarTemplate’s status by the elected replica, and shown by rollout status', async (t) => {
  const api = await apiWithCandidate(t);
  const kubeConfig = await api.kubeConfig();
  const objects = new TemplateObjects({ kubeConfig, log: pino({ level: 'silent' }) });
  objects.start();
  t.teardown(() => objects.stop());
  await until(() => objects.ready(), 'the objects listed');
  const inForce = () => withoutPreflight(objects.current());
  const candidate = objects.current().rollouts!.get('log-shipper')!.candidate!.hash;
  const stable = objects.current().byName.get('log-shipper')!.hash;
  const progress = { updated: 7, pending: 3, waitingWorkloads: 2, recreateNeeded: 1, refused: 0, failed: 1, checkedAt: '2026-12-07T10:00:00.000Z' };
  const writer = new TemplateStatusWriter({
    kubeConfig,
    log: pino({ level: 'silent' }),
    clock: new FakeClock(),
    objects,
    inForce,
    counts: () => undefined,
    // Toward the candidate's revision; one entry for a revision no object holds, which no status shows.
    inPlace: () =>
      new Map([
        [`log-shipper@${candidate}`, progress],
        ['log-shipper@000000000000', { ...progress, updated: 99 }],
      ]),
  });
  writer.start();
  t.teardown(() => writer.stop());
  await writer.settled();
  t.deepEqual(api.sidecarTemplates.get('log-shipper-next')!.status.inPlace, progress);
  t.is(api.sidecarTemplates.get('log-shipper')!.status.inPlace, undefined, `nothing moves toward the stable revision ${stable}`);
  const kubeconfig = await kubeconfigFile(api);
  const report = JSON.parse((await run(['status', '--kubeconfig', kubeconfig, '-o', 'json'])).stdout) as RolloutReport;
  t.deepEqual(report.objects!.find((o) => o.name === 'log-shipper-next')!.inPlace, progress);
  const text = (await run(['status', '--kubeconfig', kubeconfig])).stdout;
  t.regex(
    text,
    /^in place \(pods given the revision without a new pod\):\nSIDECARTEMPLATE +REVISION +UPDATED +PENDING +WAITING +RECREATE +REFUSED +FAILED +CHECKED$/m,
  );
  t.regex(text, new RegExp(`^log-shipper-next +${candidate} +7 +3 +2 +1 +0 +1 +2026-12-07T10:00:00\\.000Z$`, 'm'));
  t.notRegex(text, /\b99\b/);
});

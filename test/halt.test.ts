/**
 * The automatic halt: pods that carry a candidate and whose sidecar crash-loops, restarts or
 * cannot start stop the candidate past the threshold; pods of the stable revision, forged
 * ledgers and healthy pods do not. A halted candidate takes no new pod until the directory
 * names another candidate revision.
 */
import test from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admitPod } from '../src/pipeline/admit.js';
import { loadConfig } from '../src/config.js';
import { ConfigError } from '../src/errors.js';
import { HealthCount } from '../src/rollout/halt.js';
import { Preflights } from '../src/rollout/preflight.js';
import { loadTemplateDir } from '../src/templates/load.js';
import type { TemplateSet } from '../src/templates/set.js';
import { optedIn, pod } from './helpers/pods.js';
import { bareExampleText } from './helpers/templates.js';

const shipper = bareExampleText('log-shipper');

async function candidateSet(tag = '3.2.3'): Promise<TemplateSet> {
  const dir = await mkdtemp(join(tmpdir(), 'halt-'));
  try {
    await writeFile(join(dir, 'log-shipper.yaml'), shipper);
    await writeFile(join(dir, 'next.yaml'), `rollout:\n  role: candidate\n  share: 100\n${shipper.replace('fluent-bit:3.2.2', `fluent-bit:${tag}`)}`);
    return await loadTemplateDir(dir);
  } finally {
    await rm(dir, { recursive: true });
  }
}

/** The log shipper as `set` injects it (the candidate at share 100, or the stable revision), and the ledger's hash. */
async function injected(set: TemplateSet): Promise<{ spec: Record<string, unknown>; hash: string }> {
  const outcome = await admitPod({ pod: pod(), namespace: 'shop', name: '' }, { templates: () => set, namespaces: optedIn('shop') });
  if (outcome.decision !== 'patched') throw new Error(outcome.message);
  const after = outcome.injection.pod as any;
  return { spec: after.spec, hash: JSON.parse(after.metadata.annotations['sidecar-injector.io/status']).templates['log-shipper'].hash };
}

/** A running pod whose ledger records `revision` of the log shipper, with `spec` and its sidecar's status (and the restarts its ledger says were the injector's). */
function running(name: string, revision: string, sidecar: Record<string, unknown>, spec: Record<string, unknown> = candidateSpec, restarts?: unknown) {
  const entry = { hash: revision, initContainers: ['log-shipper'], ...(restarts !== undefined ? { restarts } : {}) };
  const ledger = JSON.stringify({ v: 1, templates: { 'log-shipper': entry } });
  return {
    metadata: { namespace: 'shop', name, annotations: { 'sidecar-injector.io/status': ledger } },
    spec,
    status: {
      initContainerStatuses: [{ name: 'log-shipper', restartCount: 0, ready: true, state: { running: {} }, ...sidecar }],
      containerStatuses: [{ name: 'web', restartCount: 9, ready: true, state: { running: {} } }],
    },
  };
}
let candidateSpec: Record<string, unknown> = {};
let stableSpec: Record<string, unknown> = {};
test.before(async () => {
  const set = await candidateSet();
  candidateSpec = (await injected(set)).spec;
  stableSpec = (await injected(await loadTemplateDir('templates'))).spec;
});
const crashLooping = { restartCount: 4, ready: false, state: { waiting: { reason: 'CrashLoopBackOff' } } };
const pullFailing = { restartCount: 0, ready: false, state: { waiting: { reason: 'ImagePullBackOff' } } };

test('unhealthy pods of the candidate halt it past the threshold; others do not count', async (t) => {
  const set = await candidateSet();
  const stable = set.byName.get('log-shipper')!.hash;
  const candidate = set.rollouts!.get('log-shipper')!.candidate!.hash;
  const count = new HealthCount(set, { unhealthyPods: 3, restarts: 3, notReadyGraceMs: 300_000 });
  count.add(running('a', candidate, crashLooping));
  count.add(running('b', candidate, pullFailing));
  count.add(running('c', candidate, {}));
  // The app container restarting, the stable revision crash-looping, a forged ledger, garbage: none counts.
  count.add(running('d', stable, crashLooping, stableSpec));
  // A tenant's own crashing container named like the sidecar, under a ledger claiming the candidate's revision.
  count.add(
    running('forged', candidate, crashLooping, { initContainers: [{ name: 'log-shipper', image: 'busybox', restartPolicy: 'Always' }], containers: [] }),
  );
  // The stable revision's sidecar under a ledger that claims the candidate's.
  count.add(running('relabelled', candidate, crashLooping, stableSpec));
  count.add({ metadata: { annotations: { 'sidecar-injector.io/status': '{"templates":{"__proto__":{"hash":1}}}' } } });
  count.add('garbage');
  t.like(count.health.get('log-shipper'), { pods: 3, unhealthy: 2 });
  t.is(count.halts().size, 0, 'two unhealthy pods: below the threshold of three');
  count.add(running('e', candidate, { restartCount: 3, ready: true, state: { running: {} } }));
  const halts = count.halts();
  t.is(halts.get('log-shipper')?.revision, candidate);
  t.regex(
    halts.get('log-shipper')!.why,
    /^halted: 3 of 4 pods with the candidate are unhealthy \(pod shop\/a: container log-shipper is waiting: CrashLoopBackOff; pod shop\/b: container log-shipper is waiting: ImagePullBackOff; pod shop\/e: container log-shipper restarted 3 times\)$/,
  );
});

const now = Date.parse('2026-11-20T10:00:00Z');
const ago = (s: number) => new Date(now - s * 1000).toISOString();
/** The sidecar running since `startedSeconds` ago and not ready; the pod's ContainersReady False since `falseSeconds` ago. */
function notReady(name: string, revision: string, startedSeconds: number, falseSeconds = startedSeconds, spec = candidateSpec) {
  const p = running(name, revision, { ready: false, state: { running: { startedAt: ago(startedSeconds) } } }, spec) as any;
  p.status.startTime = ago(Math.max(startedSeconds, falseSeconds) + 5);
  p.status.conditions = [{ type: 'ContainersReady', status: 'False', lastTransitionTime: ago(falseSeconds) }];
  return p;
}

test('restarts an in-place update caused (recorded in the ledger) are not the sidecar’s: only those beyond count', async (t) => {
  const set = await candidateSet();
  const candidate = set.rollouts!.get('log-shipper')!.candidate!.hash;
  const count = new HealthCount(set, { unhealthyPods: 1, restarts: 3, notReadyGraceMs: 300_000 });
  const restarted = (n: number) => ({ restartCount: n, ready: true, state: { running: {} } });
  // Three in-place moves: 3 restarts, all the injector's.
  count.add(running('moved', candidate, restarted(3), candidateSpec, { 'log-shipper': 3 }));
  // A malformed record counts as none.
  count.add(running('odd', candidate, restarted(2), candidateSpec, { 'log-shipper': -5 }));
  t.like(count.health.get('log-shipper'), { pods: 2, unhealthy: 0 });
  // Three more of its own after the last move: unhealthy, and the message counts those.
  count.add(running('crashing', candidate, restarted(6), candidateSpec, { 'log-shipper': 3 }));
  t.regex(count.halts().get('log-shipper')!.why, /pod shop\/crashing: container log-shipper restarted 3 times\)$/);
});

test('a sidecar not ready past the grace makes its pod unhealthy, once; the grace, ended pods and other revisions do not', async (t) => {
  const set = await candidateSet();
  const stable = set.byName.get('log-shipper')!.hash;
  const candidate = set.rollouts!.get('log-shipper')!.candidate!.hash;
  const count = new HealthCount(set, { unhealthyPods: 3, restarts: 3, notReadyGraceMs: 300_000 }, now);
  count.add(notReady('slow', candidate, 600));
  // Ready once, not ready for 6 minutes now: the condition's transition says since when.
  count.add(notReady('flapped', candidate, 3600, 360));
  // Within the grace: a sidecar that is still starting.
  count.add(notReady('starting', candidate, 120));
  count.add(notReady('recent', candidate, 3600, 60));
  // Not ready and crash-looping: one pod, counted once (as restarting).
  const both = notReady('both', candidate, 600) as any;
  both.status.initContainerStatuses[0].restartCount = 5;
  count.add(both);
  // A pod that ran to completion, a pod being deleted, the stable revision: none counts.
  const done = notReady('done', candidate, 600) as any;
  done.status.phase = 'Succeeded';
  count.add(done);
  const leaving = notReady('leaving', candidate, 600) as any;
  leaving.metadata.deletionTimestamp = ago(10);
  count.add(leaving);
  count.add(notReady('old', stable, 600, 600, stableSpec));
  t.like(count.health.get('log-shipper'), { pods: 7, unhealthy: 3, restarting: 1, notReady: 2, refused: 0 });
  t.regex(
    count.halts().get('log-shipper')!.why,
    /^halted: 3 of 7 pods with the candidate are unhealthy \(1 restarting, 2 not ready\) \(pod shop\/slow: container log-shipper not ready for 600 s; pod shop\/flapped: container log-shipper not ready for 360 s; pod shop\/both: container log-shipper restarted 5 times\)$/,
  );
});

test("refused creations count for the workloads the candidate's share takes, once per workload", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'halt-'));
  await writeFile(join(dir, 'log-shipper.yaml'), shipper);
  await writeFile(
    join(dir, 'next.yaml'),
    `rollout:\n  role: candidate\n  share: 100\n  namespaces: [shop]\n${shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3')}`,
  );
  const set = await loadTemplateDir(dir);
  await rm(dir, { recursive: true });
  const count = new HealthCount(set, { unhealthyPods: 2, restarts: 3, notReadyGraceMs: 300_000 }, now);
  const refused = (kind: string, namespace: string, name: string, labels: Record<string, string> = {}) =>
    count.addRefused({ kind, namespace, name, labels, message: 'admission webhook "images.example.com" denied the request: unsigned image' });
  refused('ReplicaSet', 'shop', 'web-1a', { 'pod-template-hash': '1a' });
  // The same Deployment's next ReplicaSet: the same workload, counted once.
  refused('ReplicaSet', 'shop', 'web-2b', { 'pod-template-hash': '2b' });
  // Outside the candidate's namespaces: its pods get the stable revision, not the candidate's doing.
  refused('StatefulSet', 'other', 'db');
  t.like(count.health.get('log-shipper'), { refused: 1, unhealthy: 0 });
  t.is(count.halts().size, 0);
  refused('Job', 'shop', 'migrate');
  t.like(count.health.get('log-shipper'), { refused: 2 });
  t.regex(
    count.halts().get('log-shipper')!.why,
    /^halted: 0 of 0 pods with the candidate are unhealthy and 2 of its workloads cannot create pods \(ReplicaSet shop\/web-1a cannot create pods: admission webhook "images\.example\.com" denied the request: unsigned image; Job shop\/migrate cannot create pods: .*\)$/,
  );
  // A stopped candidate (preflight pending, failed, halted) takes no workload: no refusal is its.
  const stopped = new Preflights('probes', async () => ({ admitted: false, status: 0, message: 'unused' })).gate(set);
  const none = new HealthCount(stopped, { unhealthyPods: 2, restarts: 3, notReadyGraceMs: 300_000 }, now);
  none.addRefused({ kind: 'Job', namespace: 'shop', name: 'migrate', labels: {}, message: 'refused' });
  t.like(none.health.get('log-shipper'), { refused: 0 });
});

test('a halted candidate takes no pod until the directory names another candidate revision', async (t) => {
  const set = await candidateSet();
  const candidate = set.rollouts!.get('log-shipper')!.candidate!.hash;
  const preflights = new Preflights('probes', async () => ({ admitted: false, status: 0, message: 'unused' }));
  t.true(preflights.halt('log-shipper', candidate, 'halted: 3 of 3 pods with the candidate are unhealthy'));
  t.false(preflights.halt('log-shipper', candidate, 'again'), 'halted once');
  const gated = preflights.gate(set);
  t.is(gated.rollouts!.get('log-shipper')!.stopped, 'halted: 3 of 3 pods with the candidate are unhealthy');
  const p = pod();
  p.metadata.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: 'u', controller: true }];
  const outcome = await admitPod({ pod: p, namespace: 'shop', name: '' }, { templates: () => gated, namespaces: optedIn('shop') });
  t.is(outcome.templates.find((x) => x.name === 'log-shipper')?.hash, set.byName.get('log-shipper')!.hash);
  t.deepEqual(preflights.status().halted, [{ candidate: `log-shipper@${candidate}`, why: 'halted: 3 of 3 pods with the candidate are unhealthy' }]);
  // A new candidate revision (the fix) is not halted; the old halt is forgotten with the next run.
  const fixed = await candidateSet('3.2.4');
  await preflights.run(fixed);
  t.deepEqual(preflights.status().halted, []);
  t.regex(preflights.gate(fixed).rollouts!.get('log-shipper')!.stopped!, /^preflight failed/);
});

test('--rollout-halt-not-ready-ms: from 10 s to an hour, default 5 minutes', (t) => {
  t.is(loadConfig({}, []).rolloutHaltNotReadyMs, 300_000);
  t.is(loadConfig({ SIDECAR_INJECTOR_ROLLOUT_HALT_NOT_READY_MS: '20000' }, []).rolloutHaltNotReadyMs, 20_000);
  for (const bad of ['9999', '3600001', '-1', '2.5', 'soon', '1e5'])
    t.throws(() => loadConfig({}, [`--rollout-halt-not-ready-ms=${bad}`]), {
      instanceOf: ConfigError,
      message: /--rollout-halt-not-ready-ms: expected milliseconds from 10000 to 3600000/,
    });
});

test('--rollout-halt-unhealthy-pods: a whole number from 1, default 3', (t) => {
  t.is(loadConfig({}, []).rolloutHaltUnhealthyPods, 3);
  t.is(loadConfig({ SIDECAR_INJECTOR_ROLLOUT_HALT_UNHEALTHY_PODS: '10' }, []).rolloutHaltUnhealthyPods, 10);
  for (const bad of ['0', '-1', '2.5', 'many', '1e9'])
    t.throws(() => loadConfig({}, [`--rollout-halt-unhealthy-pods=${bad}`]), {
      instanceOf: ConfigError,
      message: /--rollout-halt-unhealthy-pods: expected a whole number from 1 to 100000/,
    });
});

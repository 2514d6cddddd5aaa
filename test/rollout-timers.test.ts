/**
 * serve's rollout timers end to end, on a fake clock: the periodic preflight through the test
 * API server's admission chain (which calls the injector over HTTPS) and the periodic health
 * look over its pods, Events and workloads. A candidate that passes takes pods; when the chain
 * starts refusing it, the next periodic preflight stops it (one Event, not one per run); fixed,
 * it takes pods again; a halt once restarting pods, not-ready pods and refused workloads reach
 * the threshold (one Event). No sleep: time moves only when the test moves it, and the test
 * waits on conditions.
 */
import test from 'ava';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { admitPod } from '../src/pipeline/admit.js';
import { startWebhook } from './helpers/admission-chain.js';
import { pod } from './helpers/pods.js';
import { candidateFile, rolloutWorld } from './helpers/rollout-world.js';
import { until } from './helpers/until.js';
import { bareExampleText } from './helpers/templates.js';

const shipper = bareExampleText('log-shipper');
const minute = 60_000;

type World = Awaited<ReturnType<typeof rolloutWorld>>;

/** Moves the clock five seconds at a time past the first minute, each time waiting until the not-injected preflights, tried again, have run. */
async function pastStartup(clock: World['clock'], rollout: World['rollout']): Promise<void> {
  const start = clock.now();
  while (clock.now() - start < minute) {
    const retried = rollout.status().results.some((r) => r.failure === 'not-injected');
    await clock.advance(5000);
    const due = new Date(clock.now()).toISOString();
    if (retried) await until(() => rollout.status().results.every((r) => r.checkedAt >= due), 'the retried preflights');
    await rollout.settled();
  }
  // The last retry ran at the minute's end: its failure counts (no retry follows it).
  await clock.advance(5000);
  await rollout.settled();
}

test('periodic preflight and health look on an injected clock: passes, stopped by the chain, back, then halted; one Event per transition', async (t) => {
  const world = await rolloutWorld(t, {
    'log-shipper.yaml': shipper,
    'log-shipper-next.yaml': candidateFile(shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3'), 100),
  });
  const { templates, api, chain, inForce, namespaces, clock, metrics, rollout } = world;
  let refuseCandidate = false;
  chain.validators.push((p) => {
    const images = [...(p.spec.containers ?? []), ...(p.spec.initContainers ?? [])].map((c: { image: string }) => c.image);
    return refuseCandidate && images.some((image: string) => image.endsWith(':3.2.3')) ? 'image-signature policy: fluent-bit:3.2.3 is not signed' : undefined;
  });
  const set = templates.current();
  const stable = set.byName.get('log-shipper')!.hash;
  const candidate = set.rollouts!.get('log-shipper')!.candidate!.hash;
  type Status = ReturnType<typeof rollout.status>;
  const status = (): Status => rollout.status();
  const takesPods = () => status().candidates[0]!.takesPods;
  const results = () => status().results.map((r) => `${r.passed ? 'passed' : r.failure}@${r.checkedAt}`);
  /** The revision a new pod of a StatefulSet gets from the set in force. */
  const revisionOfNewPod = async (name = 'db') => {
    const p = pod({ generateName: `${name}-` });
    p.metadata.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name, uid: `u-${name}`, controller: true }];
    const outcome = await admitPod({ pod: p, namespace: 'shop', name: '' }, { templates: inForce, namespaces });
    if (outcome.decision !== 'patched') throw new Error(outcome.message);
    return { revision: outcome.templates.find((x) => x.name === 'log-shipper')!.hash, pod: outcome.injection.pod as Record<string, any> };
  };
  const rolloutEvents = (reason: string) => [...api.kubeEvents.values()].filter((e) => e.reason === reason);
  const start = clock.now();
  const at = (ms: number) => new Date(start + ms).toISOString();

  // At start: the preflight runs at once, through the chain and our webhook, and passes.
  await until(() => results().length === 1, 'the first preflight');
  t.deepEqual(results(), [`passed@${at(0)}`]);
  t.true(takesPods());
  t.is((await revisionOfNewPod()).revision, candidate, 'passed: the candidate takes its share');

  // The chain starts refusing the candidate's image: nothing changes until the next periodic preflight.
  refuseCandidate = true;
  await clock.advance(5 * minute - 1);
  t.true(takesPods(), 'no preflight before five minutes');
  await clock.advance(1);
  await until(() => results()[0] === `refused@${at(5 * minute)}`, 'the periodic preflight at five minutes');
  await until(() => !takesPods(), 'the candidate stopped');
  t.regex(status().candidates[0]!.stopped!, /^preflight failed \(refused\): .*image-signature policy: fluent-bit:3\.2\.3 is not signed/);
  t.is((await revisionOfNewPod()).revision, stable, 'stopped: new pods get the stable revision');
  await rollout.settled();
  await until(() => rolloutEvents('RolloutPreflightFailed').length === 1, "the Event on the candidate's SidecarTemplate");
  const failed = rolloutEvents('RolloutPreflightFailed')[0]!;
  t.like(failed, {
    type: 'Warning',
    action: 'Preflight',
    reportingInstance: 'replica-1',
    // The candidate's own object; cluster-scoped, so its Events live in default.
    regarding: { apiVersion: 'sidecar-injector.io/v1alpha1', kind: 'SidecarTemplate', namespace: '', name: 'log-shipper-next' },
    metadata: { namespace: 'default' },
  });
  t.regex(
    failed.note,
    new RegExp(
      `^Candidate revision ${candidate} of template log-shipper failed its preflight \\(refused\\): .*It takes no pod; new pods get the stable revision\\. Fix the candidate, or delete its SidecarTemplate to abort`,
    ),
  );
  // Still refused five minutes later: no second Event for the same failure.
  await clock.advance(5 * minute);
  await until(() => results()[0] === `refused@${at(10 * minute)}`, 'the preflight at ten minutes');
  await rollout.settled();
  t.is(rolloutEvents('RolloutPreflightFailed').length, 1, 'one Event per transition, not per run');

  // The policy lets the image through: the next periodic preflight passes and the candidate takes pods again.
  refuseCandidate = false;
  await clock.advance(5 * minute);
  await until(() => results()[0] === `passed@${at(15 * minute)}`, 'the preflight at fifteen minutes');
  await until(() => takesPods(), 'the candidate back');
  const { pod: withCandidate } = await revisionOfNewPod();

  // Its pods: one crash-looping, one whose sidecar has not been ready for six minutes, one healthy.
  const now = () => new Date(clock.now()).toISOString();
  const six = () => new Date(clock.now() - 6 * minute).toISOString();
  const addPod = (name: string, sidecar: Record<string, unknown>, from = withCandidate) => {
    api.addObject('pods', { ...from.metadata, namespace: 'shop', name }, from.spec);
    api.setObjectStatus('pods', 'shop', name, {
      phase: 'Running',
      startTime: six(),
      initContainerStatuses: [{ name: 'log-shipper', restartCount: 0, ready: true, state: { running: { startedAt: six() } }, ...sidecar }],
      containerStatuses: [{ name: 'web', restartCount: 0, ready: true, state: { running: { startedAt: six() } } }],
    });
  };
  addPod('db-0', { restartCount: 4, ready: false, state: { waiting: { reason: 'CrashLoopBackOff' } } });
  addPod('db-1', { ready: false });
  addPod('db-2', {});
  // The next minute's look: two unhealthy pods, below the threshold of three.
  await clock.advance(minute);
  await until(() => status().health[0]?.checkedAt === now(), 'the health look');
  t.like(status().health[0], { template: 'log-shipper', revision: candidate, pods: 3, restarting: 1, notReady: 1, refusedWorkloads: 0 });
  t.true(takesPods());
  // A ReplicaSet of a Deployment the candidate takes cannot create pods (the chain's refusal, as its controller records it).
  api.addObject('replicasets', { namespace: 'shop', name: 'web-7c9d' }, { template: { metadata: { labels: { app: 'web', 'pod-template-hash': '7c9d' } } } });
  api.setObjectStatus('replicasets', 'shop', 'web-7c9d', {
    replicas: 0,
    conditions: [
      {
        type: 'ReplicaFailure',
        status: 'True',
        reason: 'FailedCreate',
        message: 'admission webhook "images.example.com" denied the request: unsigned',
        lastTransitionTime: now(),
      },
    ],
  });
  api.coreEvents.push({
    kind: 'Event',
    apiVersion: 'v1',
    metadata: { namespace: 'shop', name: 'web-7c9d.1' },
    involvedObject: { kind: 'ReplicaSet', namespace: 'shop', name: 'web-7c9d', apiVersion: 'apps/v1' },
    reason: 'FailedCreate',
    type: 'Warning',
    message: 'Error creating: admission webhook "images.example.com" denied the request: unsigned',
    lastTimestamp: now(),
    count: 4,
  });
  await clock.advance(minute);
  await until(() => !takesPods(), 'the halt');
  t.like(status().health[0], { pods: 3, restarting: 1, notReady: 1, refusedWorkloads: 1 });
  t.regex(
    status().candidates[0]!.stopped!,
    /^halted: 2 of 3 pods with the candidate are unhealthy \(1 restarting, 1 not ready\) and 1 of its workloads cannot create pods \(pod shop\/db-0: container log-shipper is waiting: CrashLoopBackOff; pod shop\/db-1: container log-shipper not ready for 480 s; ReplicaSet shop\/web-7c9d cannot create pods: admission webhook "images\.example\.com" denied the request: unsigned\)$/,
  );
  t.deepEqual(status().halted, [{ candidate: `log-shipper@${candidate}`, why: status().candidates[0]!.stopped }]);
  t.is((await revisionOfNewPod('other')).revision, stable, 'halted: new pods get the stable revision');
  // The list of FailedCreate Events was field-selected and paged; the ReplicaSet read as an object.
  t.true(api.coreEventSelectors.every((s) => s === 'reason=FailedCreate'));
  t.true(api.objectGets.includes('/apis/apps/v1/namespaces/shop/replicasets/web-7c9d'));
  await rollout.settled();
  await until(() => rolloutEvents('RolloutHalted').length === 1, 'the halt Event');
  const halted = rolloutEvents('RolloutHalted')[0]!;
  t.like(halted, { type: 'Warning', action: 'Halt', regarding: { kind: 'SidecarTemplate', name: 'log-shipper-next' } });
  t.regex(halted.note, new RegExp(`^Candidate revision ${candidate} of template log-shipper is halted: 2 of 3 pods .*Abort .*audit --restart stale\\.$`));
  // Later looks and preflights: still halted, no further Event.
  await clock.advance(3 * minute);
  await until(() => results()[0] === `passed@${at(20 * minute)}`, 'the preflight at twenty minutes');
  await rollout.settled();
  t.false(takesPods(), 'a passed preflight does not lift a halt');
  t.is(rolloutEvents('RolloutHalted').length, 1);
  t.is(rolloutEvents('RolloutPreflightFailed').length, 1);
  const metricsText = await metrics.registry.metrics();
  t.regex(metricsText, /sidecar_injector_rollout_halts_total\{template="log-shipper"\} 1/);
  t.regex(metricsText, /sidecar_injector_rollout_preflights_total\{template="log-shipper",result="refused"\} 2/);
});

test("two candidates failing in the same run are two Events, each on its candidate's SidecarTemplate and naming its template", async (t) => {
  const proxy = bareExampleText('proxy');
  // No webhook in the chain: the probes come back without the candidates' sidecars.
  const { api, clock, rollout } = await rolloutWorld(
    t,
    {
      'log-shipper.yaml': shipper,
      'log-shipper-next.yaml': candidateFile(shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3'), 10),
      'proxy.yaml': proxy,
      'proxy-next.yaml': candidateFile(proxy.replace('envoy:v1.32.3', 'envoy:v1.32.4'), 10),
    },
    { injectorInChain: false },
  );
  await until(() => rollout.status().results.length === 2, 'both preflights');
  // Not injected in the first minute is tried again every five seconds, with no Event (a replica
  // whose endpoint has not joined the Service yet); after that minute, a failure like any other.
  await rollout.settled();
  t.is(api.kubeEvents.size, 0);
  await pastStartup(clock, rollout);
  await until(() => api.kubeEvents.size === 2, 'two Events');
  const notes = [...api.kubeEvents.values()].map((e) => `${e.reason}: ${e.note}`).sort();
  t.regex(notes[0]!, /^RolloutPreflightFailed: Candidate revision \w+ of template log-shipper failed its preflight \(not-injected\)/);
  t.regex(notes[1]!, /^RolloutPreflightFailed: Candidate revision \w+ of template proxy failed its preflight \(not-injected\)/);
  await clock.advance(2 * minute);
  await rollout.settled();
  t.is(api.eventPatches.length, 0, 'no series update: each failure occurred once');
});

test('without list on Events the halt still counts the pods', async (t) => {
  const { api, inForce, namespaces, clock, rollout } = await rolloutWorld(
    t,
    { 'log-shipper.yaml': shipper, 'log-shipper-next.yaml': candidateFile(shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3'), 100) },
    { haltAfter: 1 },
  );
  api.coreEventsForbidden = true;
  await until(() => rollout.status().candidates[0]!.takesPods, 'the preflight passed');
  const outcome = await admitPod({ pod: pod(), namespace: 'shop', name: '' }, { templates: inForce, namespaces });
  if (outcome.decision !== 'patched') throw new Error(outcome.message);
  const injected = outcome.injection.pod as Record<string, any>;
  api.addObject('pods', { ...injected.metadata, namespace: 'shop', name: 'web-0' }, injected.spec);
  api.setObjectStatus('pods', 'shop', 'web-0', { phase: 'Running', initContainerStatuses: [{ name: 'log-shipper', restartCount: 7, ready: false }] });
  await clock.advance(minute);
  await until(() => rollout.status().halted.length === 1, 'the halt');
  t.regex(
    rollout.status().halted[0]!.why,
    /^halted: 1 of 1 pods with the candidate are unhealthy \(pod shop\/web-0: container log-shipper restarted 7 times\)$/,
  );
  t.true(api.coreEventSelectors.length > 0, 'the Events were asked for, and refused');
});

test('a lone replica at start: its probe is not injected until its endpoint joins the Service; tried again within seconds, it passes, with no Event', async (t) => {
  const { api, chain, injector, clock, rollout } = await rolloutWorld(
    t,
    { 'log-shipper.yaml': shipper, 'log-shipper-next.yaml': candidateFile(shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3'), 100) },
    { injectorInChain: false },
  );
  await until(() => rollout.status().results[0]?.failure === 'not-injected', 'the first preflight, not injected');
  t.false(rollout.status().candidates[0]!.takesPods);
  // The replica becomes an endpoint: the API server's calls now reach it.
  chain.webhooks.push({ name: 'all.sidecar-injector.io', port: injector.port, path: '/mutate?timeout=10s' });
  await clock.advance(5000);
  await until(() => rollout.status().results[0]?.passed === true, 'the preflight tried again');
  t.true(rollout.status().candidates[0]!.takesPods);
  await rollout.settled();
  t.is(api.kubeEvents.size, 0, 'no Warning for what was only a replica starting');
});

test('a replica starting as the one it replaces leaves: a webhook the chain cannot call in the first minute is tried again, passes, with no Event', async (t) => {
  const gone = await startWebhook(() => ({ allowed: true }));
  await gone.stop();
  const { api, chain, injector, clock, rollout } = await rolloutWorld(
    t,
    { 'log-shipper.yaml': shipper, 'log-shipper-next.yaml': candidateFile(shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3'), 100) },
    // The Service still sends the API server's calls to the replica that left: nothing listens there.
    { webhookInChainAtStart: { name: 'all.sidecar-injector.io', port: gone.port, path: '/mutate?timeout=10s' } },
  );
  await until(() => rollout.status().results[0]?.failure === 'unreachable', 'the first preflight, unreachable');
  t.false(rollout.status().candidates[0]!.takesPods);
  chain.webhooks[0] = { name: 'all.sidecar-injector.io', port: injector.port, path: '/mutate?timeout=10s' };
  await clock.advance(5000);
  await until(() => rollout.status().results[0]?.passed === true, 'the preflight tried again');
  t.true(rollout.status().candidates[0]!.takesPods);
  await rollout.settled();
  t.is(api.kubeEvents.size, 0, 'no Warning for what was only the Service changing');
});

test('fail, pass, fail again for another reason within a minute: two Events, each saying its own failure', async (t) => {
  const world = await rolloutWorld(t, {
    'log-shipper.yaml': shipper,
    'log-shipper-next.yaml': candidateFile(shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3'), 100),
  });
  const { api, chain, clock, rollout, templates, dir } = world;
  await until(() => rollout.status().results[0]?.passed === true, 'the first preflight');
  await pastStartup(clock, rollout);
  const webhook = chain.webhooks[0]!;
  // A change of the templates directory runs the preflight again at once (the clock stands still: one Event window).
  let changes = 0;
  const preflightAgain = async (expected: (r: { passed: boolean; failure?: string }) => boolean, what: string) => {
    const generation = templates.generation;
    await writeFile(
      join(dir, `other-${++changes}.yaml`),
      `name: other-${changes}\ninjection: on-request\ncontainers:\n  - name: other-${changes}\n    image: registry.example/other:1\n`,
    );
    await templates.reloadNow();
    await until(() => templates.generation > generation && expected(rollout.status().results[0]!), what);
    await rollout.settled();
  };
  chain.webhooks.length = 0;
  await preflightAgain((r) => r.failure === 'not-injected', 'not injected');
  chain.webhooks.push(webhook);
  await preflightAgain((r) => r.passed, 'passing again');
  chain.validators.push(() => 'image-signature policy: not signed');
  await preflightAgain((r) => r.failure === 'refused', 'refused');
  const notes = [...api.kubeEvents.values()].map((e) => e.note as string);
  t.is(notes.length, 2, notes.join('\n'));
  t.true(notes.some((n) => n.includes('failed its preflight (not-injected)')));
  t.true(notes.some((n) => n.includes('failed its preflight (refused)')));
});

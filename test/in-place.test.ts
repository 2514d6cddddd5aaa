/**
 * In-place updates: which revisions differ only in their sidecars' images (the shape), the plan
 * for a running pod (the images and the ledger's revision moved, nothing else), every reason a
 * pod is left to a re-create, the rollback of a stopped candidate, and when a workload's
 * updated sidecars count as taken up.
 */
import test, { type ExecutionContext } from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admitPod } from '../src/pipeline/admit.js';
import { diff } from '../src/inject/diff.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { compileTemplate } from '../src/templates/compile.js';
import { loadConfig } from '../src/config.js';
import { ConfigError } from '../src/errors.js';
import { resolveMaxUnavailable } from '../src/templates/template.js';
import { parse as parseYaml } from 'yaml';
import { stopCandidates } from '../src/templates/rollout.js';
import type { TemplateSet } from '../src/templates/set.js';
import { inPlaceNotes, planInPlace, sidecarsSettled } from '../src/rollout/in-place.js';
import { InPlaceUpdater, inPlacePolicyName } from '../src/rollout/in-place-updater.js';
import { servesPodResize } from '../src/kube-api/discovery.js';
import { pino } from 'pino';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { FakeClock } from './helpers/fake-clock.js';
import { optedIn, pod } from './helpers/pods.js';
import { bareExampleText } from './helpers/templates.js';

const shipperText = bareExampleText('log-shipper');
const oldImage = 'fluent/fluent-bit:3.2.2';
/** The bundled log shipper with another image (its `image` parameter, which only the image reads). */
const release = (tag: string, strategy = 'inPlace') => `updateStrategy: ${strategy}\n${shipperText.replace(oldImage, `fluent/fluent-bit:${tag}`)}`;
const candidate = (text: string, share = 100) => ({ 'log-shipper.yaml': shipperText, 'next.yaml': `rollout:\n  role: candidate\n  share: ${share}\n${text}` });

async function load(files: Record<string, string>): Promise<TemplateSet> {
  const dir = await mkdtemp(join(tmpdir(), 'in-place-'));
  try {
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
    return await loadTemplateDir(dir);
  } finally {
    await rm(dir, { recursive: true });
  }
}

const namespaceLabels = { 'sidecar-injector.io/injection': 'enabled', 'sidecar-injector.io/in-place-updates': 'enabled' };

/** A Deployment's running pod as the API server stores it, injected with `set`. */
async function runningPod(set: TemplateSet, name = 'web-5d8f-abcde'): Promise<Record<string, any>> {
  const created = pod({ labels: { app: 'web', 'pod-template-hash': '5d8f' } });
  created.metadata.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f', uid: 'rs-1', controller: true }];
  const outcome = await admitPod({ pod: created, namespace: 'shop', name: '' }, { templates: () => set, namespaces: optedIn('shop') });
  if (outcome.decision !== 'patched') throw new Error(`not injected: ${outcome.decision}`);
  const stored = structuredClone(outcome.injection.pod) as Record<string, any>;
  Object.assign(stored.metadata, { name, namespace: 'shop', uid: `uid-${name}`, resourceVersion: '41' });
  stored.status = { phase: 'Running' };
  return stored;
}

/** An updater against `api`, with the set and the namespaces' labels these functions give; stopped with the API server after the test. */
async function updaterFor(
  t: ExecutionContext,
  api: FakeApiServer,
  templates: () => TemplateSet,
  labels: () => Record<string, string>,
  inc: (l: { template: string; result: string }) => void = () => undefined,
  options: { policy?: boolean; maxUnsettled?: number } = {},
): Promise<InPlaceUpdater> {
  // The component's policy and binding, as the updater requires them before any update.
  if (options.policy !== false) {
    api.validatingPolicies.validatingadmissionpolicies.set(inPlacePolicyName, { metadata: { name: inPlacePolicyName } });
    api.validatingPolicies.validatingadmissionpolicybindings.set(inPlacePolicyName, { metadata: { name: inPlacePolicyName } });
  }
  const updater = new InPlaceUpdater({
    ...(options.maxUnsettled !== undefined ? { maxUnsettled: options.maxUnsettled } : {}),
    kubeConfig: await api.kubeConfig(),
    log: pino({ level: 'silent' }),
    clock: new FakeClock(),
    templates,
    namespaces: () => new Map([['shop', labels()]]),
    metrics: { inPlaceUpdates: { inc } },
  });
  t.teardown(async () => {
    updater.stop();
    await api.stop();
  });
  return updater;
}

/** updaterFor's updater, started, after its first round. */
async function startedUpdater(...args: Parameters<typeof updaterFor>): Promise<InPlaceUpdater> {
  const updater = await updaterFor(...args);
  updater.start();
  await updater.settled();
  return updater;
}

/** An updater for the opted-in namespace, counting each write's result as `template:result`. */
async function countingUpdater(t: ExecutionContext, api: FakeApiServer, templates: () => TemplateSet): Promise<{ updater: InPlaceUpdater; counted: string[] }> {
  const counted: string[] = [];
  const updater = await updaterFor(
    t,
    api,
    templates,
    () => namespaceLabels,
    (l) => counted.push(`${l.template}:${l.result}`),
  );
  return { updater, counted };
}

const ledgerOf = (p: Record<string, any>) => JSON.parse(p.metadata.annotations['sidecar-injector.io/status']);

test('a new image is the same shape: only the images differ; updateStrategy is no part of the revision', async (t) => {
  const stable = (await load({ 'a.yaml': shipperText })).byName.get('log-shipper')!;
  const next = (await load({ 'a.yaml': release('3.2.3') })).byName.get('log-shipper')!;
  const sameButStrategy = (await load({ 'a.yaml': `updateStrategy: inPlace\n${shipperText}` })).byName.get('log-shipper')!;
  const moreMemory = (await load({ 'a.yaml': release('3.2.3').replace('default: 64Mi', 'default: 96Mi') })).byName.get('log-shipper')!;
  t.not(stable.hash, next.hash);
  t.is(stable.inPlaceFacts.shape, next.inPlaceFacts.shape);
  t.is(stable.inPlaceFacts.images.get('log-shipper'), oldImage);
  t.is(next.inPlaceFacts.images.get('log-shipper'), 'fluent/fluent-bit:3.2.3');
  t.is(sameButStrategy.hash, stable.hash, 'choosing the strategy leaves every pod current');
  t.is(sameButStrategy.updateStrategy, 'inPlace');
  t.is(stable.updateStrategy, 'recreate');
  t.not(moreMemory.inPlaceFacts.shape, stable.inPlaceFacts.shape, 'a new default of an overridable parameter is more than images and resources');
});

test('an image read from an overridable parameter varies per pod: not in the facts', async (t) => {
  const text = shipperText.replace(
    `  image: ${oldImage}`,
    `  image:\n    default: ${oldImage}\n    type: enum\n    values: ["${oldImage}", "fluent/fluent-bit:3.2.3"]\n    override: pod`,
  );
  t.not(text, shipperText);
  const template = (await load({ 'a.yaml': text })).byName.get('log-shipper')!;
  t.false(template.inPlaceFacts.images.has('log-shipper'));
});

test('the plan sets the new image and the ledger revision, and nothing else of the pod', async (t) => {
  const before = await load({ 'log-shipper.yaml': shipperText });
  const stored = await runningPod(before);
  const set = await load(candidate(release('3.2.3')));
  const plan = planInPlace(stored, namespaceLabels, set)!;
  const { stable, candidate: next } = set.rollouts!.get('log-shipper')!;
  t.deepEqual(plan.moves, [
    {
      template: 'log-shipper',
      from: stable.hash,
      to: next!.hash,
      images: [{ container: 'log-shipper', list: 'initContainers', from: oldImage, to: 'fluent/fluent-bit:3.2.3' }],
      resources: [],
    },
  ]);
  t.deepEqual(plan.skipped, []);
  t.is(plan.workload, 'shop/Deployment/web');
  const changed = diff(stored, plan.updated!).map((op) => op.path);
  t.deepEqual(changed.sort(), ['/metadata/annotations/sidecar-injector.io~1status', '/spec/initContainers/0/image'].sort());
  t.is(ledgerOf(plan.updated!).templates['log-shipper'].hash, next!.hash);
  t.deepEqual(ledgerOf(plan.updated!).templates['log-shipper'].restarts, { 'log-shipper': 1 }, 'the restart the new image causes is recorded as ours');
  t.is((plan.updated as Record<string, any>).metadata.resourceVersion, '41', 'the update carries the resourceVersion it was computed from');
  t.is(stored.spec.initContainers[0].image, oldImage, 'the listed pod is not changed');
  // The updated pod is a fixed point: nothing more to move.
  t.deepEqual(planInPlace(plan.updated!, namespaceLabels, set)!.moves, []);
});

test('every reason a stale pod is left to a re-create', async (t) => {
  const stored = await runningPod(await load({ 'log-shipper.yaml': shipperText }));
  const why = async (files: Record<string, string>, p = stored, labels: Record<string, string> = namespaceLabels) =>
    planInPlace(p, labels, await load(files))!.skipped.map((s) => s.why);
  t.deepEqual(await why(candidate(release('3.2.3', 'recreate'))), ['recreate-strategy']);
  t.deepEqual(await why(candidate(release('3.2.3').replace('default: 64Mi', 'default: 96Mi'))), ['not-images-or-resources']);
  t.deepEqual(await why(candidate(release('3.2.3')), stored, { 'sidecar-injector.io/injection': 'enabled' }), ['namespace-not-opted-in']);
  const altered = structuredClone(stored);
  altered.spec.initContainers[0].image = 'fluent/fluent-bit:patched-by-hand';
  t.deepEqual(await why(candidate(release('3.2.3')), altered), ['altered']);
  // A pod at a revision the injector no longer knows (neither stable, candidate nor previous).
  const unknown = structuredClone(stored);
  const ledger = ledgerOf(unknown);
  ledger.templates['log-shipper'].hash = '000000000000';
  unknown.metadata.annotations['sidecar-injector.io/status'] = JSON.stringify(ledger);
  t.deepEqual(await why(candidate(release('3.2.3')), unknown), ['unknown-revision']);
  // Ending pods are never updated.
  const deleting = structuredClone(stored);
  deleting.metadata.deletionTimestamp = '2026-12-07T00:00:00Z';
  t.is(planInPlace(deleting, namespaceLabels, await load(candidate(release('3.2.3')))), undefined);
  const done = structuredClone(stored);
  done.status.phase = 'Succeeded';
  t.is(planInPlace(done, namespaceLabels, await load(candidate(release('3.2.3')))), undefined);
});

test('a one-shot init container whose image changes is left to a re-create: the new image would never run', async (t) => {
  const oneShot = `name: warmup\nupdateStrategy: inPlace\ninitContainers:\n  - name: warmup\n    image: busybox:1.36\n    command: [true]\n`;
  const stored = await runningPod(await load({ 'warmup.yaml': oneShot.replace('updateStrategy: inPlace\n', '') }));
  t.truthy(ledgerOf(stored).templates.warmup);
  const set = await load({
    'warmup.yaml': oneShot.replace('updateStrategy: inPlace\n', ''),
    'next.yaml': `rollout:\n  role: candidate\n  share: 100\n${oneShot.replace('1.36', '1.37')}`,
  });
  t.deepEqual(
    planInPlace(stored, namespaceLabels, set)!.skipped.map((s) => s.why),
    ['runs-once'],
  );
});

test('a stopped candidate given in place is taken back in place to the stable revision', async (t) => {
  const set = await load(candidate(release('3.2.3')));
  const onCandidate = await runningPod(set);
  const { stable, candidate: next } = set.rollouts!.get('log-shipper')!;
  t.is(ledgerOf(onCandidate).templates['log-shipper'].hash, next!.hash);
  t.deepEqual(planInPlace(onCandidate, namespaceLabels, set)!.moves, [], 'current while the candidate takes it');
  const halted = stopCandidates(set, new Map([['log-shipper', 'halted: 3 of 3 pods crash-looping']]));
  const plan = planInPlace(onCandidate, namespaceLabels, halted)!;
  t.deepEqual(
    plan.moves.map((m) => [m.from, m.to, m.images[0]!.to]),
    [[next!.hash, stable.hash, oldImage]],
  );
  // A candidate that says recreate is not rolled back in place either.
  const recreated = await load(candidate(release('3.2.3', 'recreate')));
  const onRecreated = await runningPod(recreated);
  const stoppedRecreate = stopCandidates(recreated, new Map([['log-shipper', 'halted']]));
  t.deepEqual(
    planInPlace(onRecreated, namespaceLabels, stoppedRecreate)!.skipped.map((s) => s.why),
    ['recreate-strategy'],
  );
});

test('a pod outside the candidate share is not moved; a pod without a ledger is no concern', async (t) => {
  const stored = await runningPod(await load({ 'log-shipper.yaml': shipperText }));
  const set = await load(candidate(release('3.2.3'), 0));
  t.deepEqual(planInPlace(stored, namespaceLabels, set), { moves: [], skipped: [], workload: 'shop/Deployment/web' });
  const bare = pod({ name: 'plain' });
  bare.metadata.namespace = 'shop';
  t.is(planInPlace(bare, namespaceLabels, set), undefined);
});

test('sidecars count as taken up once each is ready and, where updated, runs in another container than before', async (t) => {
  const stored = await runningPod(await load({ 'log-shipper.yaml': shipperText }));
  const status = (containerID: string, ready: boolean) => ({
    ...stored,
    status: {
      phase: 'Running',
      initContainerStatuses: [{ name: 'log-shipper', image: 'docker.io/whatever/the-runtime-says:1', containerID, ready }],
      containerStatuses: [{ name: 'web', image: 'nginx:1.27', ready: false }],
    },
  });
  t.true(sidecarsSettled(status('containerd://a', true)), 'ready, whatever the runtime calls its image; the app container is not ours to judge');
  t.false(sidecarsSettled(status('containerd://a', false)), 'not ready');
  t.false(sidecarsSettled({ ...stored, status: { phase: 'Pending' } }), 'no status yet');
  const updated = new Map([['log-shipper', 'containerd://a']]);
  t.false(sidecarsSettled(status('containerd://a', true), updated), 'updated, and the kubelet has not restarted it yet');
  t.true(sidecarsSettled(status('containerd://b', true), updated), 'restarted, and ready');
  t.false(sidecarsSettled(status('containerd://b', false), updated));
  t.true(sidecarsSettled({ ...status('containerd://a', false), status: { phase: 'Succeeded' } }), 'a finished pod holds nothing up');
});

test('the updater: one pod of a workload at a time, the next once its sidecars run the new image and are ready, through updates the API server accepts', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const before = await load({ 'log-shipper.yaml': shipperText });
  const settled = (p: Record<string, any>, containerID: string) => ({
    phase: 'Running',
    initContainerStatuses: [{ name: 'log-shipper', image: 'docker.io/fluent/fluent-bit', containerID, ready: true, restartCount: 1 }],
    containerStatuses: [{ name: 'web', image: 'docker.io/library/nginx:1.27', ready: true }],
  });
  const names = ['web-5d8f-a', 'web-5d8f-b', 'api-7c9d-a'];
  for (const name of names) {
    const p = await runningPod(before, name);
    if (name.startsWith('api')) {
      p.metadata.labels = { ...p.metadata.labels, 'pod-template-hash': '7c9d' };
      p.metadata.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'api-7c9d', uid: 'rs-2', controller: true }];
    }
    const { resourceVersion: _rv, uid: _uid, ...metadata } = p.metadata;
    api.addObject('pods', metadata, p.spec);
    api.setObjectStatus('pods', 'shop', name, settled(p, `containerd://${name}-1`));
  }
  const set = await load(candidate(release('3.2.3')));
  const { updater, counted } = await countingUpdater(t, api, () => set);
  const image = (name: string) => api.storedPod('shop', name)!.spec.initContainers[0].image;
  updater.start();
  await updater.settled();
  t.deepEqual(api.podUpdates, ['shop/web-5d8f-a', 'shop/api-7c9d-a'], 'one pod of each workload');
  t.is(image('web-5d8f-a'), 'fluent/fluent-bit:3.2.3');
  t.is(image('web-5d8f-b'), oldImage);
  t.deepEqual(counted, ['log-shipper:updated', 'log-shipper:updated']);
  t.like(updater.status().lastRound, { updated: 2, pending: 1, refused: 0, failed: 0, unsettled: 2 });
  const toward = `log-shipper@${set.rollouts!.get('log-shipper')!.candidate!.hash}`;
  // web's second pod waits for its first: web is a workload waiting.
  t.like(updater.progress().get(toward), { updated: 2, pending: 1, waitingWorkloads: 1, recreateNeeded: 0, refused: 0, failed: 0 });
  t.like(updater.status().lastRound, { waitingWorkloads: 1 });
  // The kubelet has not restarted the sidecar yet: the workload waits.
  updater.round();
  await updater.settled();
  t.is(api.podUpdates.length, 2);
  t.like(updater.status().lastRound, { updated: 0, pending: 1, waitingWorkloads: 1 });
  t.like(updater.progress().get(toward), { updated: 2, pending: 1, waitingWorkloads: 1 }, 'the count since leading stays');
  api.setObjectStatus('pods', 'shop', 'web-5d8f-a', settled({}, 'containerd://web-5d8f-a-2'));
  updater.round();
  await updater.settled();
  t.deepEqual(api.podUpdates, ['shop/web-5d8f-a', 'shop/api-7c9d-a', 'shop/web-5d8f-b']);
  t.is(updater.status().inPlaceUpdated, 3);
  // Every pod carries the candidate now: nothing to do.
  for (const name of names) api.setObjectStatus('pods', 'shop', name, settled({}, `containerd://${name}-2`));
  updater.round();
  await updater.settled();
  t.like(updater.status().lastRound, { updated: 0, pending: 0, waitingWorkloads: 0 });
  t.like(updater.progress().get(toward), { updated: 3, pending: 0 });
});

test('the updater does nothing while no revision says inPlace, and never for a namespace that is not opted in', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const before = await load({ 'log-shipper.yaml': shipperText });
  const p = await runningPod(before, 'web-5d8f-a');
  const { resourceVersion: _rv, uid: _uid, ...metadata } = p.metadata;
  api.addObject('pods', metadata, p.spec);
  let set = await load(candidate(release('3.2.3', 'recreate')));
  let labels: Record<string, string> = namespaceLabels;
  const updater = await startedUpdater(
    t,
    api,
    () => set,
    () => labels,
  );
  t.is(updater.status().lastRound, undefined, 'no round looks at pods');
  set = await load(candidate(release('3.2.3')));
  labels = { 'sidecar-injector.io/injection': 'enabled' };
  updater.round();
  await updater.settled();
  t.deepEqual(api.podUpdates, []);
  // Its pods are not even listed: the round saw nothing to do.
  t.deepEqual(updater.status().lastRound, {
    at: '2026-11-20T10:00:00.000Z',
    updated: 0,
    resized: 0,
    resizeServed: true,
    pending: 0,
    waitingWorkloads: 0,
    recreateNeeded: {},
    refused: 0,
    failed: 0,
    unsettled: 0,
  });
  labels = namespaceLabels;
  updater.round();
  await updater.settled();
  t.deepEqual(api.podUpdates, ['shop/web-5d8f-a'], 'opted in, its pod is updated');
});

test('the updater rolls a halted candidate back in place first on the pod it broke, the workload’s other pods waiting', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const set = await load(candidate(release('3.2.3')));
  const stableSet = await load({ 'log-shipper.yaml': `updateStrategy: inPlace\n${shipperText}` });
  // Pod a got the candidate and its sidecar cannot start (a broken image); pod b still runs the stable revision.
  for (const [name, from] of [
    ['web-5d8f-a', set],
    ['web-5d8f-b', stableSet],
  ] as const) {
    const p = await runningPod(from, name);
    const { resourceVersion: _rv, uid: _uid, ...metadata } = p.metadata;
    api.addObject('pods', metadata, p.spec);
    const image = p.spec.initContainers[0].image as string;
    api.setObjectStatus('pods', 'shop', name, {
      phase: 'Running',
      initContainerStatuses: [{ name: 'log-shipper', image: `docker.io/${image}`, ready: name.endsWith('b') }],
    });
  }
  let inForce = set;
  const updater = await startedUpdater(
    t,
    api,
    () => inForce,
    () => namespaceLabels,
  );
  t.deepEqual(api.podUpdates, [], 'b waits while a is not ready');
  t.like(updater.status().lastRound, { pending: 1, waitingWorkloads: 1 });
  inForce = stopCandidates(set, new Map([['log-shipper', 'halted']]));
  updater.round();
  await updater.settled();
  t.deepEqual(api.podUpdates, ['shop/web-5d8f-a'], 'a is taken back to the stable image');
  t.is(api.storedPod('shop', 'web-5d8f-a')!.spec.initContainers[0].image, oldImage);
});

/** `count` running pods of the Deployment `web` (or of `web-<i>` with `apart`), injected with `from`, added to `api` with their sidecar's status. */
async function addPods(api: FakeApiServer, from: TemplateSet, names: readonly string[], ready: (name: string) => boolean = () => true): Promise<void> {
  for (const name of names) {
    const p = await runningPod(from, name);
    const workload = name.slice(0, name.lastIndexOf('-'));
    if (workload !== 'web-5d8f') {
      const hash = workload.slice(workload.lastIndexOf('-') + 1);
      p.metadata.labels = { ...p.metadata.labels, 'pod-template-hash': hash };
      p.metadata.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: workload, uid: `rs-${workload}`, controller: true }];
    }
    const { resourceVersion: _rv, ...metadata } = p.metadata;
    api.addObject('pods', metadata, p.spec);
    api.setObjectStatus('pods', 'shop', name, {
      phase: 'Running',
      initContainerStatuses: [{ name: 'log-shipper', image: 'x', containerID: `containerd://${name}-1`, ready: ready(name), restartCount: 4 }],
    });
  }
}

test('without the policy that bounds it, the updater updates no pod and says why', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  await addPods(api, await load({ 'log-shipper.yaml': shipperText }), ['web-5d8f-a']);
  const set = await load(candidate(release('3.2.3')));
  const updater = await startedUpdater(
    t,
    api,
    () => set,
    () => namespaceLabels,
    undefined,
    { policy: false },
  );
  t.deepEqual(api.podUpdates, []);
  t.regex(updater.status().lastRound!.policyMissing!, /^ValidatingAdmissionPolicy sidecar-injector-in-place-updates is not installed/);
  // Installed (the binding too), the next round updates.
  api.validatingPolicies.validatingadmissionpolicies.set(inPlacePolicyName, {});
  updater.round();
  await updater.settled();
  t.regex(updater.status().lastRound!.policyMissing!, /^ValidatingAdmissionPolicyBinding sidecar-injector-in-place-updates is not installed/);
  api.validatingPolicies.validatingadmissionpolicybindings.set(inPlacePolicyName, {});
  updater.round();
  await updater.settled();
  t.deepEqual(api.podUpdates, ['shop/web-5d8f-a']);
  t.is(updater.status().lastRound!.policyMissing, undefined);
});

test('a refused update is counted and not sent again before the pod changes; other pods are not held up', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  await addPods(api, await load({ 'log-shipper.yaml': shipperText }), ['api-7c9d-a', 'web-5d8f-a']);
  const set = await load(candidate(release('3.2.3')));
  const results: string[] = [];
  const updater = await updaterFor(
    t,
    api,
    () => set,
    () => namespaceLabels,
    (l) => results.push(l.result),
  );
  api.podUpdateRefusal = 'ValidatingAdmissionPolicy denied request';
  updater.start();
  await updater.settled();
  t.is(api.podUpdatesRefused, 2);
  t.like(updater.status().lastRound, { refused: 2, updated: 0 });
  t.deepEqual(results, ['refused', 'refused']);
  updater.round();
  await updater.settled();
  t.is(api.podUpdatesRefused, 2, 'not sent again');
  t.like(updater.status().lastRound, { refused: 0, pending: 0 });
  // The pod changes (its status, as the kubelet writes it): tried again.
  api.podUpdateRefusal = undefined;
  api.setObjectStatus('pods', 'shop', 'web-5d8f-a', api.storedPod('shop', 'web-5d8f-a')!.status);
  updater.round();
  await updater.settled();
  t.deepEqual(api.podUpdates, ['shop/web-5d8f-a']);
});

test('across the cluster, at most maxUnsettled pods updated and not yet taken up: a broken image without a candidate stops there', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  // Four workloads of one pod each; the new image is the stable revision's (the old one kept as
  // the previous revision, which the pods carry), no candidate to halt it.
  await addPods(api, await load({ 'log-shipper.yaml': shipperText }), ['a-1111-x', 'b-2222-x', 'c-3333-x', 'd-4444-x']);
  const set = await load({ 'log-shipper.yaml': release('3.2.3'), 'previous.yaml': `rollout:\n  role: previous\n${shipperText}` });
  const updater = await startedUpdater(
    t,
    api,
    () => set,
    () => namespaceLabels,
    undefined,
    { maxUnsettled: 2 },
  );
  t.is(api.podUpdates.length, 2);
  // The kubelet never takes them up (the image cannot be pulled): nothing more, round after round.
  for (let i = 0; i < 2; i++) {
    updater.round();
    await updater.settled();
  }
  t.is(api.podUpdates.length, 2);
  t.like(updater.status().lastRound, { unsettled: 2, pending: 2, waitingWorkloads: 2 });
  // One is taken up: one more goes.
  const [first] = api.podUpdates;
  const [, name] = first!.split('/');
  api.setObjectStatus('pods', 'shop', name!, {
    phase: 'Running',
    initContainerStatuses: [{ name: 'log-shipper', image: 'x', containerID: `containerd://${name}-2`, ready: true, restartCount: 5 }],
  });
  updater.round();
  await updater.settled();
  t.is(api.podUpdates.length, 3);
});

test('a halted candidate is taken back from every broken pod of a workload in one round, whatever the bound: those pods lose nothing more', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const set = await load(candidate(release('3.2.3')));
  // Two pods of one workload broken by the candidate's image, a third on the stable revision.
  await addPods(api, set, ['web-5d8f-a', 'web-5d8f-b'], () => false);
  await addPods(api, await load({ 'log-shipper.yaml': shipperText }), ['web-5d8f-c']);
  const halted = stopCandidates(set, new Map([['log-shipper', 'halted']]));
  const updater = await startedUpdater(
    t,
    api,
    () => halted,
    () => namespaceLabels,
  );
  t.deepEqual([...api.podUpdates].sort(), ['shop/web-5d8f-a', 'shop/web-5d8f-b']);
  for (const name of ['web-5d8f-a', 'web-5d8f-b']) t.is(api.storedPod('shop', name)!.spec.initContainers[0].image, oldImage);
  t.like(updater.status().lastRound, { updated: 2, waitingWorkloads: 0 });
});

test('settled pods go one of each workload a turn: a workload whose bound is large takes no more of the cluster-wide brake than its turns', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const big = Array.from({ length: 10 }, (_, i) => `aaa-1111-${i}`);
  await addPods(api, await load({ 'log-shipper.yaml': shipperText }), [...big, 'web-5d8f-a', 'zzz-2222-a']);
  const set = await load(candidate(`inPlaceMaxUnavailable: 100%\n${release('3.2.3')}`));
  const updater = await startedUpdater(
    t,
    api,
    () => set,
    () => namespaceLabels,
  );
  // Five across the cluster (the default brake): a turn gives each workload one, the next two go to the big one.
  t.is(api.podUpdates.length, 5);
  t.true(api.podUpdates.includes('shop/web-5d8f-a') && api.podUpdates.includes('shop/zzz-2222-a'), api.podUpdates.join(' '));
  t.is(api.podUpdates.filter((p) => p.startsWith('shop/aaa-')).length, 3);
  t.like(updater.status().lastRound, { updated: 5, waitingWorkloads: 1 });
});

test('a sidecar whose pull policy was defaulted for its old image, and would be defaulted otherwise for the new one, is left to a re-create', async (t) => {
  const stored = await runningPod(await load({ 'log-shipper.yaml': shipperText }));
  // As the API server stores it: IfNotPresent, defaulted for a tagged image.
  stored.spec.initContainers[0].imagePullPolicy = 'IfNotPresent';
  const toLatest = await load(candidate(release('latest')));
  t.deepEqual(
    planInPlace(stored, namespaceLabels, toLatest)!.skipped.map((s) => s.why),
    ['pull-policy'],
  );
  t.deepEqual(planInPlace(stored, namespaceLabels, await load(candidate(release('3.2.3'))))!.skipped, []);
});

/** The log shipper with resources the same in every pod (its memory limit no longer overridable), cpu request `cpu`. */
const fixedResources = (cpu = '10m', tag = '3.2.2') =>
  `updateStrategy: inPlace\n${shipperText
    .replace(`fluent/fluent-bit:3.2.2`, `fluent/fluent-bit:${tag}`)
    .replace('memory: "{{ params.memoryLimit }}"', 'memory: 64Mi')
    .replace('cpu: 10m', `cpu: ${cpu}`)}`;
const withFixed = (cpu: string, tag = '3.2.2', share = 100) => ({
  'log-shipper.yaml': fixedResources(),
  'next.yaml': `rollout:\n  role: candidate\n  share: ${share}\n${fixedResources(cpu, tag)}`,
});
/** The kubelet's report of a pod whose sidecar runs `resources` (and `conditions`). */
const reported = (p: Record<string, any>, resources: unknown, conditions: unknown[] = []): Record<string, any> => ({
  ...p,
  status: {
    phase: 'Running',
    conditions,
    initContainerStatuses: [{ name: 'log-shipper', containerID: 'containerd://a', ready: true, restartCount: 0, resources }],
    containerStatuses: [{ name: 'web', ready: true }],
  },
});

test('new resources go first through a resize that changes only them; the update of images and ledger follows once the kubelet runs them', async (t) => {
  const stored = await runningPod(await load({ 'log-shipper.yaml': fixedResources() }));
  const set = await load(withFixed('20m', '3.2.3'));
  const { stable, candidate: next } = set.rollouts!.get('log-shipper')!;
  t.is(stable.inPlaceFacts.shape, next!.inPlaceFacts.shape, 'images and resources are outside the shape');
  t.deepEqual(stable.inPlaceFacts.resources.get('log-shipper'), { requests: { cpu: '10m', memory: '32Mi' }, limits: { cpu: '100m', memory: '64Mi' } });
  const plan = planInPlace(reported(stored, stored.spec.initContainers[0].resources), namespaceLabels, set)!;
  t.is(plan.updated, undefined, 'no update before the resize');
  t.deepEqual(
    diff(stored, { ...plan.resize!, status: stored.status }).map((op) => op.path),
    ['/spec/initContainers/0/resources/requests/cpu'],
  );
  t.is((plan.resize as Record<string, any>).metadata.resourceVersion, '41');
  t.deepEqual(plan.moves[0]!.resources, [
    { container: 'log-shipper', list: 'initContainers', from: stored.spec.initContainers[0].resources, to: next!.inPlaceFacts.resources.get('log-shipper')! },
  ]);
  // Resized, the kubelet not done yet: nothing is written, and the pod is not settled.
  const resized: Record<string, any> = { ...plan.resize!, status: stored.status };
  const working = reported(resized, stored.spec.initContainers[0].resources, [{ type: 'PodResizeInProgress', status: 'True' }]);
  const waiting = planInPlace(working, namespaceLabels, set)!;
  t.true(waiting.resizing);
  t.is(waiting.updated, undefined);
  t.is(waiting.resize, undefined);
  t.false(sidecarsSettled(working));
  // The kubelet runs them: the update sets the image and the ledger, nothing else.
  const done = reported(resized, resized.spec.initContainers[0].resources);
  t.true(sidecarsSettled(done));
  const then = planInPlace(done, namespaceLabels, set)!;
  t.deepEqual(
    diff(done, then.updated!)
      .map((op) => op.path)
      .sort(),
    ['/metadata/annotations/sidecar-injector.io~1status', '/spec/initContainers/0/image'],
  );
  t.is(ledgerOf(then.updated!).templates['log-shipper'].hash, next!.hash);
  t.deepEqual(planInPlace(then.updated!, namespaceLabels, set)!.moves, [], 'a fixed point');
});

test('resources that vary per pod move in place only where both revisions write them alike', async (t) => {
  // The bundled shipper's memory limit is overridable: its resources vary, alike in both revisions.
  const stored = await runningPod(await load({ 'log-shipper.yaml': shipperText }));
  t.false((await load({ 'a.yaml': shipperText })).byName.get('log-shipper')!.inPlaceFacts.resources.has('log-shipper'));
  t.truthy(planInPlace(stored, namespaceLabels, await load(candidate(release('3.2.3'))))!.updated, 'a new image alone still goes in place');
  const cpu = release('3.2.3').replace('cpu: 10m', 'cpu: 20m');
  t.deepEqual(
    planInPlace(stored, namespaceLabels, await load(candidate(cpu)))!.skipped.map((s) => s.why),
    ['resources-vary'],
  );
});

test('every reason new resources are left to a re-create', async (t) => {
  const stored = await runningPod(await load({ 'log-shipper.yaml': fixedResources() }));
  const why = async (p: Record<string, any>, cluster = {}) => planInPlace(p, namespaceLabels, await load(withFixed('20m')), cluster)!.skipped.map((s) => s.why);
  t.deepEqual(await why(stored, { resize: false }), ['resize-unserved']);
  // Resized by someone else (a vertical autoscaler): theirs, neither revision's.
  const autoscaled = structuredClone(stored);
  autoscaled.spec.initContainers[0].resources.requests.cpu = '15m';
  t.deepEqual(await why(autoscaled), ['altered-by-resize']);
  // The same values written otherwise are the same resources.
  const spelled = structuredClone(stored);
  spelled.spec.initContainers[0].resources.limits.cpu = '0.1';
  t.deepEqual(await why(spelled), []);
  // A resize changes cpu and memory only: a new ephemeral-storage limit needs a new pod.
  const storage = await load({
    'log-shipper.yaml': fixedResources(),
    'next.yaml': `rollout:\n  role: candidate\n  share: 100\n${fixedResources().replace(/^( *)memory: 64Mi$/m, '$1memory: 64Mi\n$1ephemeral-storage: 1Gi')}`,
  });
  t.deepEqual(
    planInPlace(stored, namespaceLabels, storage)!.skipped.map((s) => s.why),
    ['not-images-or-resources'],
  );
  const podLevel = structuredClone(stored);
  podLevel.spec.resources = { requests: { cpu: '1', memory: '512Mi' } };
  t.deepEqual(await why(podLevel), ['pod-level-resources']);
  // Resized to the target, and the kubelet cannot give it on its node.
  const set = await load(withFixed('20m'));
  const target = set.rollouts!.get('log-shipper')!.candidate!.inPlaceFacts.resources.get('log-shipper')!;
  const infeasible = structuredClone(stored);
  infeasible.spec.initContainers[0].resources = target;
  const stuck = reported(infeasible, stored.spec.initContainers[0].resources, [{ type: 'PodResizePending', status: 'True', reason: 'Infeasible' }]);
  t.deepEqual(
    planInPlace(stuck, namespaceLabels, set)!.skipped.map((s) => s.why),
    ['resize-infeasible'],
  );
  t.true(sidecarsSettled(stuck), 'a resize the kubelet will not make holds no workload up');
  // A resize that would change the pod's QoS class (the API server refuses it): the app requests
  // what it limits, and the new sidecar resources would too, making a Burstable pod Guaranteed.
  const app = structuredClone(stored);
  app.spec.containers[0].resources = { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '100m', memory: '64Mi' } };
  const guaranteedNext = await load({
    'log-shipper.yaml': fixedResources(),
    'next.yaml': `rollout:\n  role: candidate\n  share: 100\n${fixedResources('100m').replace('memory: 32Mi', 'memory: 64Mi')}`,
  });
  t.deepEqual(
    planInPlace(app, namespaceLabels, guaranteedNext)!.skipped.map((s) => s.why),
    ['qos-class'],
  );
});

test('a candidate stopped between its resize and its update is resized back in place', async (t) => {
  const stored = await runningPod(await load({ 'log-shipper.yaml': fixedResources() }));
  const set = await load(withFixed('20m'));
  const plan = planInPlace(reported(stored, stored.spec.initContainers[0].resources), namespaceLabels, set)!;
  const resized = reported({ ...plan.resize! }, (plan.resize as Record<string, any>).spec.initContainers[0].resources);
  const halted = stopCandidates(set, new Map([['log-shipper', 'halted: 2 of 2 pods not ready']]));
  const { stable } = set.rollouts!.get('log-shipper')!;
  t.is(ledgerOf(resized).templates['log-shipper'].hash, stable.hash, 'the ledger never moved');
  const back = planInPlace(resized, namespaceLabels, halted)!;
  t.deepEqual(
    back.moves.map((m) => [m.from, m.to, m.resources.map((r) => r.to)]),
    [[stable.hash, stable.hash, [stable.inPlaceFacts.resources.get('log-shipper')]]],
  );
  t.deepEqual(
    diff(resized, { ...back.resize!, status: resized.status }).map((op) => op.path),
    ['/spec/initContainers/0/resources/requests/cpu'],
  );
  // Nothing to take back on a pod that never moved.
  t.deepEqual(planInPlace(reported(stored, stored.spec.initContainers[0].resources), namespaceLabels, halted)!.moves, []);
});

test('the updater resizes through pods/resize, then updates once the kubelet reports the new resources; without pods/resize it waits for a re-create', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const p = await runningPod(await load({ 'log-shipper.yaml': fixedResources() }));
  const { resourceVersion: _rv, uid: _uid, ...metadata } = p.metadata;
  api.addObject('pods', metadata, p.spec);
  api.setObjectStatus('pods', 'shop', p.metadata.name, reported(p, p.spec.initContainers[0].resources).status);
  const set = await load(withFixed('20m', '3.2.3'));
  const { updater, counted } = await countingUpdater(t, api, () => set);
  api.resizeServed = false;
  updater.start();
  await updater.settled();
  t.deepEqual([api.podResizes, api.podUpdates], [[], []]);
  t.deepEqual(updater.status().lastRound?.recreateNeeded, { 'resize-unserved': 1 });
  api.resizeServed = true;
  updater.round();
  await updater.settled();
  const name = p.metadata.name;
  t.deepEqual([api.podResizes, api.podUpdates], [[`shop/${name}`], []]);
  const stored = () => api.storedPod('shop', name)!;
  t.is(stored().spec.initContainers[0].resources.requests.cpu, '20m');
  t.is(stored().spec.initContainers[0].image, 'fluent/fluent-bit:3.2.2', 'the image waits for the resize');
  t.is(updater.status().lastRound?.resized, 1);
  // The kubelet has not reported the new resources: nothing more.
  updater.round();
  await updater.settled();
  t.deepEqual([api.podResizes.length, api.podUpdates.length], [1, 0]);
  api.setObjectStatus('pods', 'shop', name, reported(stored(), stored().spec.initContainers[0].resources).status);
  updater.round();
  await updater.settled();
  t.deepEqual(api.podUpdates, [`shop/${name}`]);
  t.is(stored().spec.initContainers[0].image, 'fluent/fluent-bit:3.2.3');
  t.is(ledgerOf(stored()).templates['log-shipper'].hash, set.rollouts!.get('log-shipper')!.candidate!.hash);
  t.deepEqual(counted, ['log-shipper:resized', 'log-shipper:updated']);
});

test('why’s words for a running pod: moved in place, stale until recreated and why, resized by someone else', async (t) => {
  const stable = await load({ 'log-shipper.yaml': fixedResources() });
  const stored = await runningPod(stable);
  t.deepEqual(inPlaceNotes(stored, namespaceLabels, stable), new Map(), 'current, its own resources: nothing to say');
  const autoscaled = structuredClone(stored);
  autoscaled.spec.initContainers[0].resources.requests.memory = '48Mi';
  t.regex(inPlaceNotes(autoscaled, namespaceLabels, stable).get('log-shipper')!, /resized by someone else \(altered-by-resize\), and left so$/);
  const set = await load(withFixed('20m'));
  t.regex(inPlaceNotes(stored, namespaceLabels, set).get('log-shipper')!, /^being given revision [0-9a-f]{12} in place, without a new pod$/);
  t.is(
    inPlaceNotes(stored, namespaceLabels, set, { resize: false }).get('log-shipper'),
    'stays stale until the pod is recreated: the API server does not serve pods/resize (resize-unserved)',
  );
  // Without any template that says inPlace, the rules say nothing.
  t.deepEqual(inPlaceNotes(autoscaled, namespaceLabels, await load({ 'log-shipper.yaml': shipperText })), new Map());
});

test('resources managed elsewhere: any resources count as the template’s at admission, and an in-place update never resizes them', async (t) => {
  const managed = (text: string) => `resourcesManagedElsewhere: true\n${text}`;
  const own = await load({ 'log-shipper.yaml': fixedResources() });
  const elsewhere = await load({ 'log-shipper.yaml': managed(fixedResources()) });
  t.is(elsewhere.byName.get('log-shipper')!.hash, own.byName.get('log-shipper')!.hash, 'no part of the revision: declaring it leaves every pod current');
  t.true(elsewhere.byName.get('log-shipper')!.resourcesManagedElsewhere);
  // A vertical autoscaler's webhook resized the sidecar after the injection; admission runs again (reinvocation).
  const again = async (set: TemplateSet) => {
    const stored = await runningPod(set);
    stored.spec.initContainers[0].resources = { requests: { cpu: '7m', memory: '20Mi' }, limits: { cpu: '70m', memory: '40Mi' } };
    delete stored.status;
    const outcome = await admitPod({ pod: stored, namespace: 'shop', name: '' }, { templates: () => set, namespaces: optedIn('shop') });
    return { decision: outcome.decision, warnings: outcome.warnings.map((w) => w.id) };
  };
  t.deepEqual(await again(own), { decision: 'allowed', warnings: ['ledger-doubt', 'item-collision'] }, 'its own resources: the resized sidecar is doubted');
  t.deepEqual(await again(elsewhere), { decision: 'allowed', warnings: [] }, 'managed elsewhere: believed, nothing to add');
  // In place: a candidate with a new image and new resources sets the image only, over whatever resources the pod runs.
  const stored = await runningPod(elsewhere);
  stored.spec.initContainers[0].resources = { requests: { cpu: '7m', memory: '20Mi' }, limits: { cpu: '70m', memory: '40Mi' } };
  const set = await load({
    'log-shipper.yaml': managed(fixedResources()),
    'next.yaml': `rollout:\n  role: candidate\n  share: 100\n${managed(fixedResources('20m', '3.2.3'))}`,
  });
  const plan = planInPlace(stored, namespaceLabels, set)!;
  t.is(plan.resize, undefined);
  t.deepEqual(
    diff(stored, plan.updated!)
      .map((op) => op.path)
      .sort(),
    ['/metadata/annotations/sidecar-injector.io~1status', '/spec/initContainers/0/image'],
  );
  t.deepEqual(inPlaceNotes(stored, namespaceLabels, elsewhere), new Map(), 'never called altered-by-resize');
});

test('a fall back sets the images first and resizes after: a broken image never waits on a resize', async (t) => {
  // Every pod on the candidate: new image, new cpu request, the ledger at the candidate.
  const set = await load(withFixed('20m', '3.2.3'));
  const onCandidate = await runningPod(set);
  const { stable, candidate: next } = set.rollouts!.get('log-shipper')!;
  t.is(ledgerOf(onCandidate).templates['log-shipper'].hash, next!.hash);
  t.is(onCandidate.spec.initContainers[0].resources.requests.cpu, '20m');
  const halted = stopCandidates(set, new Map([['log-shipper', 'halted: 3 of 3 pods crash-looping']]));
  const listed = reported(onCandidate, onCandidate.spec.initContainers[0].resources);
  const first = planInPlace(listed, namespaceLabels, halted)!;
  t.is(first.resize, undefined, 'no resize before the image');
  t.deepEqual(
    diff(listed, first.updated!)
      .map((op) => op.path)
      .sort(),
    ['/metadata/annotations/sidecar-injector.io~1status', '/spec/initContainers/0/image'],
  );
  t.is(ledgerOf(first.updated!).templates['log-shipper'].hash, stable.hash);
  // Then the sidecar, at the stable revision with the candidate's resources, is resized back.
  const then = planInPlace(reported(first.updated!, onCandidate.spec.initContainers[0].resources), namespaceLabels, halted)!;
  t.deepEqual(
    diff(first.updated!, { ...then.resize!, status: (first.updated as Record<string, any>).status }).map((op) => op.path),
    ['/spec/initContainers/0/resources/requests/cpu'],
  );
});

test('resources that are the same in both revisions are no part of the move: a sidecar resized by someone else still gets a new image', async (t) => {
  const stored = await runningPod(await load({ 'log-shipper.yaml': fixedResources() }));
  stored.spec.initContainers[0].resources.limits.memory = '80Mi';
  const set = await load(withFixed('10m', '3.2.3'));
  const plan = planInPlace(reported(stored, stored.spec.initContainers[0].resources), namespaceLabels, set)!;
  t.deepEqual(plan.skipped, []);
  t.is(plan.resize, undefined);
  t.is((plan.updated as Record<string, any>).spec.initContainers[0].image, 'fluent/fluent-bit:3.2.3');
  t.is((plan.updated as Record<string, any>).spec.initContainers[0].resources.limits.memory, '80Mi', 'theirs, untouched');
  // Nor is it taken back: resources no revision pair states are someone else's.
  const current = await load({ 'log-shipper.yaml': fixedResources() });
  t.deepEqual(planInPlace(stored, namespaceLabels, current)!.moves, []);
});

test('after a resize the updater waits for the new resources, not for a restart: an infeasible resize holds no workload', async (t) => {
  const stored = await runningPod(await load({ 'log-shipper.yaml': fixedResources() }));
  const set = await load(withFixed('20m', '3.2.3'));
  const plan = planInPlace(reported(stored, stored.spec.initContainers[0].resources), namespaceLabels, set)!;
  const resized = plan.resize as Record<string, any>;
  // Another container's resize under way (PodResizeInProgress is the pod's) holds none of ours up once ours is done.
  const done = reported(resized, resized.spec.initContainers[0].resources, [{ type: 'PodResizeInProgress', status: 'True' }]);
  t.true(sidecarsSettled(done, new Map()));
  const infeasible = reported(resized, stored.spec.initContainers[0].resources, [{ type: 'PodResizePending', status: 'True', reason: 'Infeasible' }]);
  t.true(sidecarsSettled(infeasible, new Map()));
  const deferred = reported(resized, stored.spec.initContainers[0].resources, [{ type: 'PodResizePending', status: 'True', reason: 'Deferred' }]);
  t.false(sidecarsSettled(deferred, new Map()));
});

test('inPlaceMaxUnavailable: a number of pods or a share of a workload’s, never below one pod, and no part of the revision', async (t) => {
  const base = parseYaml(release('3.2.3')) as Record<string, unknown>;
  const compiled = (value: unknown) => compileTemplate({ ...base, inPlaceMaxUnavailable: value }, 'next.yaml');
  t.deepEqual(compiled(undefined).template!.inPlaceMaxUnavailable, { pods: 1 });
  t.deepEqual(compiled(3).template!.inPlaceMaxUnavailable, { pods: 3 });
  t.deepEqual(compiled('25%').template!.inPlaceMaxUnavailable, { percent: 25 });
  t.is(compiled('25%').template!.hash, compiled(undefined).template!.hash, 'choosing it leaves every pod current');
  for (const bad of [0, -1, 1.5, 100_001, '0%', '101%', '25', '2.5%', ' 25%', '__proto__', true, null, [1], { pods: 1 }]) {
    const { template, problems } = compiled(bad);
    t.is(template, undefined, JSON.stringify(bad));
    t.true(
      problems.some((p) => p.field === 'inPlaceMaxUnavailable' && /whole number of pods from 1 to 100000/.test(p.message)),
      JSON.stringify(problems),
    );
  }
  t.is(resolveMaxUnavailable({ pods: 2 }, 10), 2);
  t.is(resolveMaxUnavailable({ percent: 25 }, 10), 2, 'a share rounds down');
  t.is(resolveMaxUnavailable({ percent: 25 }, 3), 1, 'and is never below one pod');
  t.is(resolveMaxUnavailable({ percent: 100 }, 7), 7);
});

test('the updater gives a workload as many pods at once as inPlaceMaxUnavailable allows, pods not yet settled counted against it', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const names = ['web-5d8f-a', 'web-5d8f-b', 'web-5d8f-c', 'web-5d8f-d', 'web-5d8f-e', 'web-5d8f-f', 'web-5d8f-g', 'web-5d8f-h', 'one-1111-a', 'one-1111-b'];
  await addPods(api, await load({ 'log-shipper.yaml': shipperText }), names);
  // A share: 25 % of the eight pods of web is two; of one's two pods, still one.
  const set = await load(candidate(`inPlaceMaxUnavailable: 25%\n${release('3.2.3')}`));
  const updater = await startedUpdater(
    t,
    api,
    () => set,
    () => namespaceLabels,
    undefined,
    { maxUnsettled: 100 },
  );
  const webUpdated = () => api.podUpdates.filter((p) => p.startsWith('shop/web-'));
  t.is(webUpdated().length, 2);
  t.is(api.podUpdates.filter((p) => p.startsWith('shop/one-')).length, 1);
  // Neither has taken the update up: nothing more of either workload.
  updater.round();
  await updater.settled();
  t.is(api.podUpdates.length, 3);
  t.like(updater.status().lastRound, { updated: 0, waitingWorkloads: 2, unsettled: 3 });
  // One of web's is taken up: one more goes, never more than two unsettled.
  const [first] = webUpdated();
  const name = first!.split('/')[1]!;
  api.setObjectStatus('pods', 'shop', name, {
    phase: 'Running',
    initContainerStatuses: [{ name: 'log-shipper', image: 'x', containerID: `containerd://${name}-2`, ready: true, restartCount: 5 }],
  });
  updater.round();
  await updater.settled();
  t.is(webUpdated().length, 3);
  // A pod of web whose sidecars are not ready for another reason counts against the bound too.
  const fresh = names.find((n) => n.startsWith('web-') && !api.podUpdates.includes(`shop/${n}`))!;
  api.setObjectStatus('pods', 'shop', fresh, {
    phase: 'Running',
    initContainerStatuses: [{ name: 'log-shipper', image: 'x', containerID: `containerd://${fresh}-1`, ready: false, restartCount: 4 }],
  });
  const updatedBefore = webUpdated().length;
  updater.round();
  await updater.settled();
  // It goes itself (it takes nothing further away); no settled pod goes beside the two not settled.
  t.is(webUpdated().length, updatedBefore + 1);
  t.true(webUpdated().includes(`shop/${fresh}`));
});

test('a number of pods as inPlaceMaxUnavailable; the cluster-wide bound still holds above it', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const names = ['web-5d8f-a', 'web-5d8f-b', 'web-5d8f-c', 'web-5d8f-d', 'web-5d8f-e', 'web-5d8f-f'];
  await addPods(api, await load({ 'log-shipper.yaml': shipperText }), names);
  const set = await load(candidate(`inPlaceMaxUnavailable: 4\n${release('3.2.3')}`));
  const wide = await updaterFor(
    t,
    api,
    () => set,
    () => namespaceLabels,
    undefined,
    { maxUnsettled: 3 },
  );
  wide.start();
  await wide.settled();
  t.is(api.podUpdates.length, 3, 'the cluster-wide bound, below the workload’s');
  t.like(wide.status().lastRound, { updated: 3, waitingWorkloads: 1 });
});

test('--in-place-max-unsettled: a whole number from 1 to 1000, default 5', (t) => {
  t.is(loadConfig({}, []).inPlaceMaxUnsettled, 5);
  t.is(loadConfig({ SIDECAR_INJECTOR_IN_PLACE_MAX_UNSETTLED: '40' }, []).inPlaceMaxUnsettled, 40);
  for (const bad of ['0', '-1', '2.5', 'many', '1001', '1e3'])
    t.throws(() => loadConfig({}, [`--in-place-max-unsettled=${bad}`]), {
      instanceOf: ConfigError,
      message: /--in-place-max-unsettled: expected a whole number from 1 to 1000/,
    });
});

test('whether the API server serves pods/resize is read from its discovery (the updater’s and why’s); unreadable, it counts as not served', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const kubeConfig = await api.kubeConfig();
  t.true(await servesPodResize(kubeConfig));
  api.resizeServed = false;
  t.false(await servesPodResize(kubeConfig));
  api.resizeServed = true;
  t.true(await servesPodResize(kubeConfig));
  await api.stop();
  t.false(await servesPodResize(kubeConfig, 2_000));
});

test('pods not settled that a revision would move forward, not back, go one of a workload a round: a broken edit reaches no more of them', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  // Four pods of one workload whose sidecars are not ready, and a stable revision edited in place (no candidate to halt it).
  await addPods(api, await load({ 'log-shipper.yaml': shipperText }), ['web-5d8f-a', 'web-5d8f-b', 'web-5d8f-c', 'web-5d8f-d'], () => false);
  const set = await load({
    'log-shipper.yaml': `inPlaceMaxUnavailable: 100%\n${release('3.2.3')}`,
    'previous.yaml': `rollout:\n  role: previous\n${shipperText}`,
  });
  const updater = await startedUpdater(
    t,
    api,
    () => set,
    () => namespaceLabels,
  );
  t.is(api.podUpdates.length, 1, 'one pod not settled a round, whatever the bound');
  t.like(updater.status().lastRound, { updated: 1, pending: 3, waitingWorkloads: 0 });
  updater.round();
  await updater.settled();
  t.is(api.podUpdates.length, 2);
});

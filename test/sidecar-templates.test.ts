/**
 * Templates as SidecarTemplate objects: the manifest form (a folder's files and the API
 * server's objects), each object checked on its own (a refused one left out and named), the
 * admission that refuses a bad object before it is stored, the cluster source a replica serves
 * from (nothing, and a refusal on the required webhook, until it has listed them), and the
 * status the leader writes.
 */
import test, { type ExecutionContext } from 'ava';
import { readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import pino from 'pino';
import { answerTemplateReview, templateRefusal } from '../src/admission/validate-templates.js';
import { RequestError, TemplateError } from '../src/errors.js';
import { check, checkTemplateObjects } from '../src/pipeline/template-check.js';
import { admitPod } from '../src/pipeline/admit.js';
import { compileTemplateValue, loadTemplateDir } from '../src/templates/load.js';
import { compileTemplate } from '../src/templates/compile.js';
import { candidateKey, objectStatus, type CandidateProgress } from '../src/templates/object-status.js';
import { TemplateObjects } from '../src/serving/template-objects.js';
import { TemplateStatusWriter } from '../src/serving/template-status.js';
import { livenessCanary, livenessSet } from '../src/serving/injector.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { FakeClock } from './helpers/fake-clock.js';
import { logShipperDoc, proxyDoc, templateObject } from './helpers/templates.js';
import { optedIn } from './helpers/pods.js';
import { until } from './helpers/until.js';

const silent = pino({ level: 'silent' });
/** The fake API server holding `templates` (name → spec), and a cluster source that has listed them. */
async function listedObjects(t: ExecutionContext, templates: Record<string, Record<string, unknown>>) {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  for (const [name, spec] of Object.entries(templates)) api.applyTemplate(name, spec);
  const kubeConfig = await api.kubeConfig();
  const objects = new TemplateObjects({ kubeConfig, log: silent });
  objects.start();
  t.teardown(() => objects.stop());
  await until(() => objects.ready(), 'listed');
  return { api, kubeConfig, objects };
}

const pod = () => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { generateName: 'web-', namespace: 'shop', labels: { app: 'web' } },
  spec: { containers: [{ name: 'app', image: 'app:1' }] },
});

/** The leader's status writer over `objects`, on a fake clock (a round a second), stopped after the test. */
function startWriter(t: ExecutionContext, kubeConfig: KubeConfig, objects: TemplateObjects, counts: () => Map<string, Record<string, number>> | undefined) {
  const clock = new FakeClock();
  const writer = new TemplateStatusWriter({ kubeConfig, log: silent, clock, objects, inForce: () => objects.current(), counts, intervalMs: 1000 });
  writer.start();
  t.teardown(() => writer.stop());
  return { clock, writer };
}

test('a SidecarTemplate manifest is its spec named by its metadata: the same revision as the bare document, problems under spec.', (t) => {
  const bare = compileTemplate(logShipperDoc, 'logs.yaml');
  const object = compileTemplateValue(templateObject(logShipperDoc), 'logs.yaml');
  t.deepEqual(object.problems, []);
  t.is(object.template!.name, 'logs');
  t.is(object.template!.object, 'logs');
  t.is(object.template!.hash, bare.template!.hash);

  const typo = templateObject({ ...proxyDoc, injection: 'sometimes' });
  const problems = compileTemplateValue(typo, 'proxy.yaml').problems;
  t.true(
    problems.some((p) => p.field === 'spec.injection'),
    JSON.stringify(problems),
  );

  const wrong = (object: Record<string, unknown>) => compileTemplateValue(object, 'x.yaml').problems.map((p) => `${p.field}: ${p.message}`);
  t.regex(wrong({ ...templateObject(proxyDoc), apiVersion: 'sidecar-injector.io/v1' }).join('\n'), /^apiVersion: must be sidecar-injector\.io\/v1alpha1/);
  t.regex(wrong({ ...templateObject(proxyDoc), metadata: { name: 'Proxy' } }).join('\n'), /^metadata\.name: is required and must be a DNS-1123 label/);
  t.regex(
    wrong({ ...templateObject(proxyDoc), metadata: { name: 'proxy', namespace: 'shop' } }).join('\n'),
    /^metadata\.namespace: a SidecarTemplate is cluster-scoped/,
  );
  t.regex(wrong({ ...templateObject(proxyDoc), spec: undefined }).join('\n'), /^spec: is required/);
  t.regex(wrong({ ...templateObject(proxyDoc), spek: {} }).join('\n'), /^spek: unknown field/);
  // Another template's name belongs to a revision of it only.
  t.regex(
    wrong({ ...templateObject(proxyDoc), spec: { ...templateObject(proxyDoc).spec, name: 'other' } }).join('\n'),
    /^spec\.name: only a candidate or previous revision/,
  );
  const candidate = templateObject({ ...proxyDoc, name: 'proxy-next' });
  candidate.spec = { ...candidate.spec, name: 'proxy', rollout: { role: 'candidate', share: 10 } };
  const revision = compileTemplateValue(candidate, 'proxy-next.yaml');
  t.deepEqual(revision.problems, []);
  t.is(revision.template!.name, 'proxy');
  t.is(revision.template!.object, 'proxy-next');
});

test('check on a folder of manifests: the kustomization must apply every file as resources, cluster-scoped, never as a ConfigMap', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-templates-'));
  const manifest = (doc: { name: string } & Record<string, unknown>) => JSON.stringify(templateObject(doc));
  await writeFile(join(dir, 'logs.yaml'), manifest(logShipperDoc));
  await writeFile(join(dir, 'proxy.yaml'), manifest(proxyDoc));
  await writeFile(join(dir, 'kustomization.yaml'), 'resources:\n  - logs.yaml\n  - proxy.yaml\n');
  t.deepEqual(
    (await check(dir)).templates.map((x) => x.name),
    ['logs', 'proxy'],
  );
  t.deepEqual(
    (await loadTemplateDir(dir)).templates.map((x) => x.object),
    ['logs', 'proxy'],
  );

  await writeFile(
    join(dir, 'kustomization.yaml'),
    'namespace: sidecar-injector\nconfigMapGenerator:\n  - name: sidecar-injector-templates\n    files: [logs.yaml, proxy.yaml]\nresources:\n  - logs.yaml\n',
  );
  // Two documents in one file: named, not the YAML library's words.
  await writeFile(join(dir, 'two.yaml'), `${manifest(logShipperDoc)}\n---\n${manifest({ ...proxyDoc, name: 'proxy-2' })}\n`);
  const two = await t.throwsAsync(check(dir), { instanceOf: TemplateError });
  t.true(
    two!.problems.some((p) => p.file === 'two.yaml' && /^2 YAML documents: one SidecarTemplate per file/.test(p.message)),
    JSON.stringify(two!.problems),
  );
  await rm(join(dir, 'two.yaml'));
  const error = await t.throwsAsync(check(dir), { instanceOf: TemplateError });
  const lines = error!.problems.map((p) => `${p.file}: ${p.field}: ${p.message}`);
  t.true(
    lines.some((l) => /configMapGenerator: the injector reads SidecarTemplate objects, not a ConfigMap/.test(l)),
    lines.join('\n'),
  );
  t.true(lines.some((l) => /namespace: a SidecarTemplate is cluster-scoped/.test(l)));
  t.true(lines.some((l) => /resources: does not list proxy\.yaml: it would not reach the cluster/.test(l)));
});

test('objects are checked one by one: a refused object is left out and named, the others are served', (t) => {
  const broken = templateObject({ name: 'broken', containers: [{ name: 'b', image: '{{ params.nothing }}' }] });
  const candidateOnly = templateObject({ name: 'agent-next', containers: [{ name: 'agent', image: 'agent:2' }] });
  candidateOnly.spec = { ...candidateOnly.spec, name: 'agent', rollout: { role: 'candidate', share: 20 } };
  const { set, refused } = checkTemplateObjects([templateObject(logShipperDoc), broken, candidateOnly, templateObject(proxyDoc)]);
  t.deepEqual(
    set.templates.map((x) => x.name),
    ['logs', 'proxy'],
  );
  t.deepEqual([...refused.keys()].sort(), ['agent-next', 'broken']);
  t.regex(
    refused
      .get('broken')!
      .map((p) => p.field)
      .join(','),
    /^spec\.containers/,
  );
  t.regex(
    refused
      .get('agent-next')!
      .map((p) => p.message)
      .join(' '),
    /has no stable revision/,
  );
  // Its stable revision applied, the candidate is served beside it.
  const stable = templateObject({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const after = checkTemplateObjects([stable, candidateOnly]);
  t.is(after.refused.size, 0);
  t.is(after.set.rollouts?.get('agent')?.candidate?.object, 'agent-next');
});

test("admission refuses a bad SidecarTemplate with check's message and admits a good one, judging the object on its own", (t) => {
  const review = (object: unknown, operation = 'CREATE', kind = { group: 'sidecar-injector.io', version: 'v1alpha1', kind: 'SidecarTemplate' }) => ({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid: 'u-1', kind, operation, name: (object as any)?.metadata?.name ?? '', object },
  });
  const deps = {};
  const good = answerTemplateReview(review(templateObject(logShipperDoc)), deps);
  t.false(good.refused);
  t.deepEqual(good.response.response, { uid: 'u-1', allowed: true });

  const typo = templateObject({ ...proxyDoc, initContainers: [{ name: 'proxy', image: 'envoy', restartPolicy: 'Always', volumeMount: [] }] });
  const bad = answerTemplateReview(review(typo), deps);
  t.true(bad.refused);
  t.is(bad.response.response.status?.code, 422);
  t.regex(
    bad.response.response.status!.message,
    /^SidecarTemplate proxy is refused \(the checks of sidecar-injector check\):\n {2}spec\.initContainers\[0\]\.volumeMount: unknown field "volumeMount" \(did you mean volumeMounts\?\)/,
  );

  // What concerns the set is the replicas' to judge: a folder applied object by object passes
  // through states no order avoids (a promotion: the stable revision given its candidate's content
  // before the candidate is removed). Each object alone passes; the set leaves the candidate out.
  const next = templateObject({ name: 'agent-next', containers: [{ name: 'agent', image: 'agent:2' }] });
  next.spec = { ...next.spec, name: 'agent', rollout: { role: 'candidate', share: 20 } };
  const promoted = templateObject({ name: 'agent', containers: [{ name: 'agent', image: 'agent:2' }] });
  t.is(templateRefusal(next, 'agent-next'), undefined, 'a candidate before its stable revision');
  t.is(templateRefusal(promoted, 'agent'), undefined);
  t.regex(JSON.stringify([...checkTemplateObjects([promoted, next]).refused.get('agent-next')!]), /the same content as the stable revision/);
  // A delivery: policy template that cannot be exported is its own problem.
  const unexportable = templateObject({ name: 'pulls', delivery: 'policy', containers: [{ name: 'p', image: 'p:1' }], imagePullSecrets: [{ name: 'r' }] });
  t.regex(
    templateRefusal(unexportable, 'pulls') ?? '',
    /spec\.delivery: policy: a MutatingAdmissionPolicy cannot inject it as the webhook does: imagePullSecrets are not exported/,
  );

  // Not this webhook's: another kind, the status subresource, a delete.
  t.false(answerTemplateReview(review({}, 'CREATE', { group: '', version: 'v1', kind: 'Pod' }), deps).refused);
  t.false(answerTemplateReview({ ...review(typo), request: { ...review(typo).request, subResource: 'status' } }, deps).refused);
  t.false(answerTemplateReview(review(typo, 'DELETE'), deps).refused);
  t.throws(() => answerTemplateReview({ kind: 'AdmissionReview' }, deps), { instanceOf: RequestError });
  // An object stored before a check existed: an update that leaves its spec as stored (a label, its
  // finalizer removed while it is deleted) is admitted; one that changes the spec is judged.
  const withOld = (object: unknown, oldObject: unknown) => ({ ...review(object, 'UPDATE'), request: { ...review(object, 'UPDATE').request, oldObject } });
  const storedTypo = { ...typo, metadata: { ...typo.metadata, finalizers: ['foregroundDeletion'] } };
  const deleting = { ...typo, metadata: { ...typo.metadata, deletionTimestamp: '2026-12-07T00:00:00Z', labels: { team: 'a' } } };
  t.false(answerTemplateReview(withOld(deleting, storedTypo), deps).refused, 'the finalizer removed, the spec as stored');
  const edited = { ...typo, spec: { ...typo.spec, description: 'still broken' } };
  t.true(answerTemplateReview(withOld(edited, storedTypo), deps).refused, 'a spec change is judged');
  t.true(answerTemplateReview(withOld(typo, undefined), deps).refused, 'no stored object to compare: judged');
  // A megabyte of problems is quoted within bounds.
  const many = templateObject({ name: 'many', containers: Array.from({ length: 64 }, (_, i) => ({ name: `c${i}`, image: 'x', bogus: i })) });
  const message = templateRefusal(many, 'many')!;
  t.true(message.split('\n').length <= 32);
  t.regex(message, /\(and \d+ more\)$/);
});

test('admission refuses a SidecarTemplate create beyond the most a replica serves; an update, or a count not known yet, is judged as ever', (t) => {
  const review = (operation: string) => ({
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: 'u-2',
      kind: { group: 'sidecar-injector.io', version: 'v1alpha1', kind: 'SidecarTemplate' },
      operation,
      name: 'logs',
      object: templateObject(logShipperDoc),
    },
  });
  const full = answerTemplateReview(review('CREATE'), { stored: () => 500 });
  t.true(full.refused);
  t.is(full.response.response.status?.code, 422);
  t.is(
    full.response.response.status?.message,
    'SidecarTemplate logs is refused: the cluster holds 500 SidecarTemplates, the most the injector serves is 500; delete one first',
  );
  t.false(answerTemplateReview(review('UPDATE'), { stored: () => 500 }).refused, 'an update adds none');
  t.false(answerTemplateReview(review('CREATE'), { stored: () => 499 }).refused);
  t.false(answerTemplateReview(review('CREATE'), { stored: () => undefined }).refused, 'not listed yet: the replicas name what they leave out');
});

test('the cluster source serves nothing until listed (a refusal on the required webhook, nothing added on the optional one), then each valid object, naming a refused one', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.create('shop', { 'sidecar-injector.io/injection': 'enabled' });
  api.applyTemplate('logs', templateObject(logShipperDoc).spec);
  api.applyTemplate('broken', { failurePolicy: 'Ignore', containers: [{ name: 'b', image: '{{ pod.nmaespace }}' }] });
  api.sidecarTemplatesFailWith = 503;
  const objects = new TemplateObjects({ kubeConfig: await api.kubeConfig(), log: silent, backoffInitialMs: 10, backoffMaxMs: 20 });
  objects.start();
  t.teardown(() => objects.stop());
  const namespaces = optedIn('shop');
  const required = await admitPod({ pod: pod(), namespace: 'shop', name: '' }, { templates: () => objects.current(), namespaces });
  t.is(required.decision, 'denied');
  t.is(required.reason, 'templates-unknown');
  t.regex(required.message, /the templates in force are not known yet: the SidecarTemplates have not been listed/);
  const optional = await admitPod({ pod: pod(), namespace: 'shop', name: '' }, { templates: () => objects.current(), namespaces, failurePolicy: 'Ignore' });
  t.is(optional.decision, 'allowed');
  t.deepEqual(
    optional.warnings.map((w) => w.id),
    ['templates-unknown'],
  );
  t.false(objects.ready());
  await until(() => objects.status().unavailable?.includes('cannot be listed') === true, 'the failed list named');

  api.sidecarTemplatesFailWith = undefined;
  await until(() => objects.ready(), 'listed');
  t.deepEqual(
    objects.current().templates.map((x) => x.name),
    ['logs'],
  );
  t.deepEqual(
    objects.status().refused.map((r) => r.name),
    ['broken'],
  );
  t.regex(objects.status().refused[0]!.problems.join(' '), /pod\.nmaespace/);
  const served = await admitPod({ pod: pod(), namespace: 'shop', name: '' }, { templates: () => objects.current(), namespaces });
  t.is(served.decision, 'patched');
  t.deepEqual(
    served.templates.map((x) => x.name),
    ['logs'],
  );

  // A change is in force when its watch event arrives; a fixed object joins; a deleted one goes.
  const generation = objects.generation;
  api.applyTemplate('broken', { failurePolicy: 'Ignore', containers: [{ name: 'b', image: '{{ pod.namespace }}' }] });
  await until(() => objects.current().templates.length === 2, 'the fixed object served');
  t.true(objects.generation > generation);
  t.deepEqual(objects.status().refused, []);
  api.deleteTemplate('logs');
  await until(
    () =>
      objects
        .current()
        .templates.map((x) => x.name)
        .join() === 'broken',
    'the deleted object gone',
  );
  // A status write changes no generation: no new set.
  const before = objects.generation;
  const rewritten = api.applyTemplate('broken', { failurePolicy: 'Ignore', containers: [{ name: 'b', image: '{{ pod.namespace }}' }] });
  await until(
    () => (objects.stored().get('broken')?.metadata as { resourceVersion?: string } | undefined)?.resourceVersion === rewritten.metadata.resourceVersion,
    'the write seen through the watch',
  );
  t.is(objects.generation, before);
});

test("a SidecarTemplate's status: revision, role, share and state, pod counts, and conditions that keep their transition time", (t) => {
  const agent = templateObject({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] }, { generation: 3 });
  const next = templateObject({ name: 'agent-next', containers: [{ name: 'agent', image: 'agent:2' }] }, { generation: 1 });
  next.spec = { ...next.spec, name: 'agent', rollout: { role: 'candidate', share: 25 } };
  const { set } = checkTemplateObjects([agent, next]);
  const counts = new Map([['agent', { current: 7, stale: 2 }]]);
  const stable = objectStatus({ name: 'agent', generation: 3, set, counts, now: '2026-12-06T08:00:00Z' });
  t.like(stable, { observedGeneration: 3, template: 'agent', role: 'stable', state: 'Serving', pods: { current: 7, stale: 2, missing: 0, leftOut: 0 } });
  t.deepEqual(
    (stable.conditions as any[]).map((c) => [c.type, c.status, c.reason]),
    [
      ['Ready', 'True', 'Accepted'],
      ['RolledOut', 'False', 'PodsStale'],
    ],
  );
  const candidate = objectStatus({ name: 'agent-next', generation: 1, set, now: '2026-12-06T08:00:00Z' });
  t.like(candidate, { role: 'candidate', share: '25%', state: 'Candidate', revision: set.rollouts!.get('agent')!.candidate!.hash });
  const stopped = { ...set, rollouts: new Map([['agent', { ...set.rollouts!.get('agent')!, stopped: 'preflight failed (refused): no' }]]) };
  const halted = objectStatus({ name: 'agent-next', set: stopped, stored: candidate, now: '2026-12-06T09:00:00Z' });
  t.is(halted.state, 'Stopped');
  const conditions = new Map((halted.conditions as any[]).map((c) => [c.type, c]));
  t.like(conditions.get('Halted'), { status: 'True', reason: 'PreflightFailed', lastTransitionTime: '2026-12-06T09:00:00Z' });
  // Ready did not change: its time is the one stored.
  t.is(conditions.get('Ready').lastTransitionTime, '2026-12-06T08:00:00Z');
  const refused = objectStatus({ name: 'broken', set, refused: ['spec.containers[0].image: unknown'], now: '2026-12-06T08:00:00Z' });
  t.like(refused, { state: 'Refused' });
  t.like((refused.conditions as any[])[0], { type: 'Ready', status: 'False', reason: 'Refused' });
  const allCurrent = objectStatus({ name: 'agent', set, counts: new Map([['agent', { current: 9 }]]), now: '2026-12-06T08:00:00Z' });
  t.like((allCurrent.conditions as any[])[1], { type: 'RolledOut', status: 'True', reason: 'AllCurrent' });
});

test("a candidate's status carries the elected replica's preflight, halt and health look; the stable revision's none; quoted words are escaped and cut", (t) => {
  const agent = templateObject({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const next = templateObject({ name: 'agent-next', containers: [{ name: 'agent', image: 'agent:2' }] });
  next.spec = { ...next.spec, name: 'agent', rollout: { role: 'candidate', share: 25 } };
  const { set } = checkTemplateObjects([agent, next]);
  const revision = set.rollouts!.get('agent')!.candidate!.hash;
  const progress = new Map([
    // Another revision's progress, first: it is not this object's.
    [candidateKey('agent', 'f00f00f00f00'), { replica: 'injector-0', preflight: { state: 'passed' as const } }],
    [
      candidateKey('agent', revision),
      {
        replica: 'injector-0',
        preflight: { state: 'failed' as const, failure: 'refused', message: `denied \u202e${'x'.repeat(2000)}`, checkedAt: '2026-12-06T08:00:00Z' },
        halted: 'halted: 3 of 4 pods with the candidate are unhealthy',
        health: { pods: 4, restarting: 3, notReady: 0, refusedWorkloads: 0, checkedAt: '2026-12-06T08:01:00Z' },
      },
    ],
  ]);
  const candidate = objectStatus({ name: 'agent-next', set, progress, now: '2026-12-06T08:02:00Z' });
  const preflight = candidate.preflight as Record<string, string>;
  t.like(preflight, { state: 'failed', replica: 'injector-0', failure: 'refused', checkedAt: '2026-12-06T08:00:00Z' });
  t.true(preflight.message!.startsWith('denied \\u202exxx'), preflight.message);
  t.regex(preflight.message!, /… \(\+\d+ characters\)$/);
  t.is(candidate.halted, 'halted: 3 of 4 pods with the candidate are unhealthy');
  t.deepEqual(candidate.health, { pods: 4, restarting: 3, notReady: 0, refusedWorkloads: 0, checkedAt: '2026-12-06T08:01:00Z' });
  const stable = objectStatus({ name: 'agent', set, progress, now: '2026-12-06T08:02:00Z' });
  t.false('preflight' in stable || 'halted' in stable || 'health' in stable);
  // Pending: no result yet on that replica.
  const pending = objectStatus({
    name: 'agent-next',
    set,
    progress: new Map([[candidateKey('agent', revision), { replica: 'injector-1', preflight: { state: 'pending' as const } }]]),
    now: '2026-12-06T08:02:00Z',
  });
  t.deepEqual(pending.preflight, { state: 'pending', replica: 'injector-1' });
  t.false('health' in pending);
});

test("the leader writes each object's status once, through the status subresource, and again only when it changes", async (t) => {
  const { api, kubeConfig, objects } = await listedObjects(t, {
    logs: templateObject(logShipperDoc).spec,
    broken: { containers: [{ name: 'b', image: '{{ nothing }}' }] },
  });
  const audit: { counts?: Map<string, Record<string, number>> } = {};
  const { clock, writer } = startWriter(t, kubeConfig, objects, () => audit.counts);
  await until(() => api.templateStatusPatches.length === 2, 'both statuses written');
  await until(() => [...objects.stored().values()].every((o) => o.status), 'the writes seen through the watch');
  const logs = api.sidecarTemplates.get('logs')!.status;
  t.like(logs, { template: 'logs', role: 'stable', state: 'Serving', observedGeneration: 1 });
  t.like(api.sidecarTemplates.get('broken')!.status, { state: 'Refused' });
  // Nothing changed: a round writes nothing.
  await clock.advance(1000);
  await writer.settled();
  t.is(api.templateStatusPatches.length, 2);
  // The audit counts the pods: the stable object's status says so.
  audit.counts = new Map([['logs', { current: 4, missing: 1 }]]);
  await clock.advance(1000);
  await until(() => api.templateStatusPatches.length === 3, 'the counts written');
  t.like(api.sidecarTemplates.get('logs')!.status, { pods: { current: 4, missing: 1 } });
  // The status, and metadata only as preconditions (the status subresource writes nothing else).
  t.deepEqual(Object.keys(api.templateStatusPatches[2]!.body), ['metadata', 'status']);
  t.deepEqual(Object.keys(api.templateStatusPatches[2]!.body.metadata), ['uid', 'resourceVersion']);
});

test('a required template whose object is refused is never silently skipped: the pods it may apply to are refused, naming it; the others, and the optional webhook, are not', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.applyTemplate('logs', templateObject(logShipperDoc).spec);
  // Required (the default), scoped to pods labelled mesh=on, with a placeholder no pod has.
  api.applyTemplate('mesh', { objectSelector: { matchLabels: { mesh: 'on' } }, containers: [{ name: 'mesh', image: '{{ pod.nmaespace }}' }] });
  const objects = new TemplateObjects({ kubeConfig: await api.kubeConfig(), log: silent });
  objects.start();
  t.teardown(() => objects.stop());
  await until(() => objects.ready(), 'listed');
  const namespaces = optedIn('shop');
  const admit = (labels: Record<string, string>, failurePolicy?: 'Fail' | 'Ignore') =>
    admitPod(
      { pod: { ...pod(), metadata: { ...pod().metadata, labels } }, namespace: 'shop', name: '' },
      { templates: () => objects.current(), namespaces, ...(failurePolicy ? { failurePolicy } : {}) },
    );
  const meshed = await admit({ app: 'web', mesh: 'on' }, 'Fail');
  t.is(meshed.decision, 'denied');
  t.is(meshed.reason, 'required-template-refused');
  t.regex(
    meshed.message,
    /the required template of SidecarTemplate mesh may apply to this pod, and the injector refuses that object \(spec\.containers\[0\]\.image: .*nmaespace/,
  );
  const outside = await admit({ app: 'web' }, 'Fail');
  t.is(outside.decision, 'patched', 'outside its selector: the other required templates injected');
  t.deepEqual(
    outside.templates.map((x) => x.name),
    ['logs'],
  );
  const optional = await admit({ app: 'web', mesh: 'on' }, 'Ignore');
  t.is(optional.decision, 'allowed', 'the optional webhook (no optional template here) refuses nothing');
  t.not(optional.reason, 'required-template-refused');
  // Fixed: served, and nothing refused.
  api.applyTemplate('mesh', { objectSelector: { matchLabels: { mesh: 'on' } }, containers: [{ name: 'mesh', image: 'mesh:{{ pod.namespace }}' }] });
  await until(() => objects.current().templates.length === 2, 'the fixed object served');
  t.is((await admit({ app: 'web', mesh: 'on' }, 'Fail')).decision, 'patched');
});

test('an opted-out pod and a refused required template: its optOut read from the object (deny refuses, warn warns, allow or unreadable admits), in opted-in namespaces only', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  // Each object refused for a placeholder of its own, so that a test waits for the one it applied.
  const broken = (optOut: unknown, typo = 'nmaespace') => ({
    objectSelector: { matchLabels: { mesh: 'on' } },
    ...(optOut === undefined ? {} : { optOut }),
    containers: [{ name: 'mesh', image: `{{ pod.${typo} }}` }],
  });
  api.applyTemplate('mesh', broken('deny'));
  const objects = new TemplateObjects({ kubeConfig: await api.kubeConfig(), log: silent });
  objects.start();
  t.teardown(() => objects.stop());
  await until(() => objects.ready() && objects.current().refusedRequired?.length === 1, 'listed, the object refused');
  const admit = (labels: Record<string, string>) =>
    admitPod(
      { pod: { ...pod(), metadata: { ...pod().metadata, labels } }, namespace: 'shop', name: '' },
      { templates: () => objects.current(), namespaces: optedIn('shop'), failurePolicy: 'Fail' },
    );
  const optedOutLabels = { app: 'web', mesh: 'on', 'sidecar-injector.io/inject': 'disabled' };
  const denied = await admit(optedOutLabels);
  t.is(denied.decision, 'denied', 'optOut: deny holds while its object is refused');
  t.is(denied.reason, 'opt-out-refused');
  t.regex(
    denied.message,
    /^pod has label sidecar-injector\.io\/inject=disabled, and the required template mesh that applies to it does not let a pod opt out \(optOut: deny\); remove the label/,
  );
  // In a namespace that has not opted in, the opt-out is the pod's, as with a served template.
  const elsewhere = await admitPod(
    { pod: { ...pod(), metadata: { ...pod().metadata, labels: optedOutLabels } }, namespace: 'elsewhere', name: '' },
    { templates: () => objects.current(), namespaces: optedIn('shop'), failurePolicy: 'Fail' },
  );
  t.is(elsewhere.reason, 'pod-opted-out');
  t.deepEqual(elsewhere.warnings, []);
  // Outside its selector, the opt-out is the pod's.
  t.is((await admit({ app: 'web', 'sidecar-injector.io/inject': 'disabled' })).reason, 'pod-opted-out');

  api.applyTemplate('mesh', broken('warn'));
  await until(() => objects.current().refusedRequired?.[0]?.optOut === 'warn', 'the warn object read');
  const warned = await admit(optedOutLabels);
  t.is(warned.decision, 'allowed');
  t.is(warned.reason, 'pod-opted-out');
  t.deepEqual(
    warned.warnings.map((w) => w.id),
    ['opt-out-of-required'],
  );
  t.regex(warned.warnings[0]!.text, /^mesh: a required sidecar the pod opts out of/);

  for (const [i, optOut] of [undefined, 'allow', 'Deny'].entries()) {
    api.applyTemplate('mesh', broken(optOut, `typo${i}`));
    await until(() => objects.status().refused?.[0]?.problems.join().includes(`typo${i}`) === true, `${String(optOut)} read`);
    t.is(objects.current().refusedRequired?.[0]?.optOut, undefined);
    const admitted = await admit(optedOutLabels);
    t.is(admitted.decision, 'allowed', `optOut ${String(optOut)}: the opt-out holds`);
    t.is(admitted.reason, 'pod-opted-out');
    t.deepEqual(admitted.warnings, []);
  }
  // Not opted out: refused whatever optOut says (required means required).
  t.is((await admit({ app: 'web', mesh: 'on' })).reason, 'required-template-refused');
});

test('what concerns the set never unserves a stable revision: a candidate of a delivery: policy template, a rollout object named as its template, a refused object made optional', async (t) => {
  // A candidate of a template the MutatingAdmissionPolicy delivers: the stable keeps serving.
  const proxySpec = (parseYaml(readFileSync(join('templates', 'proxy.yaml'), 'utf8')) as { spec: Record<string, unknown> }).spec;
  const mesh = { ...templateObject({ name: 'mesh' }), spec: { ...proxySpec, delivery: 'policy' } };
  t.is(templateRefusal(mesh, 'mesh'), undefined, 'exportable on its own');
  const next = {
    ...templateObject({ name: 'mesh-next' }),
    spec: {
      ...JSON.parse(JSON.stringify(proxySpec).replace('envoy:v1.32.3', 'envoy:v1.32.4')),
      delivery: 'policy',
      name: 'mesh',
      rollout: { role: 'candidate', share: 10 },
    },
  };
  const both = checkTemplateObjects([mesh, next]);
  t.deepEqual([...both.refused.keys()], [], JSON.stringify([...both.refused]).slice(0, 600));
  t.deepEqual(
    both.set.templates.map((x) => x.name),
    ['mesh'],
  );
  // A revision must be an object of its own: refused at admission, never left to unserve the template.
  const self = templateObject({ ...proxyDoc, name: 'proxy' });
  self.spec = { ...self.spec, rollout: { role: 'candidate', share: 10 } };
  t.regex(templateRefusal(self, 'proxy') ?? '', /spec\.name: a candidate or previous revision \(spec\.rollout\) is an object of its own beside the stable one/);
  // The liveness sample never sees a refused object: the replica is not restarted for it.
  const refusedSet = { ...checkTemplateObjects([]).set, refusedRequired: [{ object: 'x', template: 'x', onRequest: false, problem: 'p' }] };
  t.is(livenessSet(refusedSet).refusedRequired, undefined);
  t.deepEqual(livenessSet({ ...refusedSet, unavailable: 'not listed' }).templates, []);

  // A refused required object made optional without fixing it: pods are no longer refused for it.
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.applyTemplate('agent', { containers: [{ name: 'agent', image: '{{ nothing }}' }] });
  const objects = new TemplateObjects({ kubeConfig: await api.kubeConfig(), log: silent });
  objects.start();
  t.teardown(() => objects.stop());
  await until(() => objects.current().refusedRequired?.length === 1, 'the required object refused');
  api.applyTemplate('agent', { failurePolicy: 'Ignore', containers: [{ name: 'agent', image: '{{ nothing }}' }] });
  await until(() => objects.current().refusedRequired === undefined, 'no longer required: nothing refused for it');
});

test('a status the object no longer has is cleared, not left beside the new one', async (t) => {
  const { api, kubeConfig, objects } = await listedObjects(t, { logs: templateObject(logShipperDoc).spec });
  const { clock, writer } = startWriter(t, kubeConfig, objects, () => new Map([['logs', { current: 1 }]]));
  await until(() => api.sidecarTemplates.get('logs')?.status?.role === 'stable', 'served');
  api.applyTemplate('logs', { containers: [{ name: 'b', image: '{{ nothing }}' }] });
  await until(() => api.sidecarTemplates.get('logs')?.status?.state === 'Refused', 'refused');
  const status = api.sidecarTemplates.get('logs')!.status;
  t.false('role' in status || 'revision' in status || 'pods' in status, JSON.stringify(status));
  // Settled (the write seen through the watch, no round under way): a round writes nothing more.
  await until(() => (objects.stored().get('logs')?.status as { state?: string } | undefined)?.state === 'Refused', 'the write seen');
  await writer.settled();
  const writes = api.templateStatusPatches.length;
  await clock.advance(1000);
  await writer.settled();
  t.is(api.templateStatusPatches.length, writes, JSON.stringify(api.templateStatusPatches.slice(-2)));
});

test("a candidate's preflight that passes after failing: the failure's fields are cleared, not left beside passed, and nothing is written again", async (t) => {
  const agent = templateObject({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] }).spec;
  const next = { name: 'agent', rollout: { role: 'candidate', share: 25 }, containers: [{ name: 'agent', image: 'agent:2' }] };
  const { api, kubeConfig, objects } = await listedObjects(t, { agent, 'agent-next': next });
  const revision = () => objects.current().rollouts!.get('agent')!.candidate!.hash;
  let preflight: CandidateProgress['preflight'] = { state: 'failed', failure: 'refused', message: 'denied by policy', checkedAt: '2026-12-06T08:00:00Z' };
  const clock = new FakeClock();
  const writer = new TemplateStatusWriter({
    kubeConfig,
    log: silent,
    clock,
    objects,
    inForce: () => objects.current(),
    counts: () => undefined,
    progress: () => new Map([[candidateKey('agent', revision()), { replica: 'injector-0', preflight }]]),
    intervalMs: 1000,
  });
  writer.start();
  t.teardown(() => writer.stop());
  await until(() => api.sidecarTemplates.get('agent-next')?.status?.preflight?.state === 'failed', 'failed written');
  preflight = { state: 'passed', message: 'injected once', checkedAt: '2026-12-06T08:05:00Z' };
  await clock.advance(1000);
  await until(() => api.sidecarTemplates.get('agent-next')?.status?.preflight?.state === 'passed', 'passed written');
  t.deepEqual(api.sidecarTemplates.get('agent-next')!.status.preflight, {
    state: 'passed',
    replica: 'injector-0',
    message: 'injected once',
    checkedAt: '2026-12-06T08:05:00Z',
  });
  await until(() => (objects.stored().get('agent-next')?.status as any)?.preflight?.state === 'passed', 'the write seen');
  await writer.settled();
  const writes = api.templateStatusPatches.length;
  await clock.advance(1000);
  await writer.settled();
  t.is(api.templateStatusPatches.length, writes, 'settled: no write');
});

test('a status write carries the uid and resourceVersion it was computed from: an object changed meanwhile is a conflict, not a write, and no failure', async (t) => {
  const { api, kubeConfig, objects } = await listedObjects(t, { logs: templateObject(logShipperDoc).spec });
  const counts = new Map<string, Record<string, number>>();
  const { writer } = startWriter(t, kubeConfig, objects, () => counts);
  await until(() => (objects.stored().get('logs')?.status as any)?.role === 'stable', 'written and seen');
  await writer.settled();
  const patch = api.templateStatusPatches.at(-1)!.body;
  t.is(patch.metadata.uid, api.sidecarTemplates.get('logs')!.metadata.uid);
  t.regex(String(patch.metadata.resourceVersion), /^\d+$/);
  // The stored object moves on without the writer seeing it; its next write is refused, quietly.
  counts.set('logs', { current: 3 });
  const stored = api.sidecarTemplates.get('logs')!;
  stored.metadata = { ...stored.metadata, resourceVersion: '999999' };
  stored.status = { ...stored.status, state: 'Tampered' };
  const before = api.templateStatusPatches.length;
  writer.round();
  await writer.settled();
  t.true(api.templateStatusPatches.length > before, 'tried');
  t.is(api.sidecarTemplates.get('logs')!.status.state, 'Tampered', 'not written over a newer object');
  t.is(writer.status().statusWriteFailures, 0);
});

test('a CRD older than the injector prunes status fields it does not know: written once, with a warning, not again every round; again after a while', async (t) => {
  const agent = templateObject({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] }).spec;
  const next = { name: 'agent', rollout: { role: 'candidate', share: 25 }, containers: [{ name: 'agent', image: 'agent:2' }] };
  const { api, kubeConfig, objects } = await listedObjects(t, { agent, 'agent-next': next });
  api.prunedStatusFields.add('preflight');
  const warned: string[] = [];
  const log = pino({ level: 'warn' }, { write: (line: string) => void warned.push(JSON.parse(line).msg) });
  const clock = new FakeClock();
  const writer = new TemplateStatusWriter({
    kubeConfig,
    log,
    clock,
    objects,
    inForce: () => objects.current(),
    counts: () => undefined,
    progress: () =>
      new Map([[candidateKey('agent', objects.current().rollouts!.get('agent')!.candidate!.hash), { replica: 'r', preflight: { state: 'pending' as const } }]]),
    intervalMs: 1000,
  });
  writer.start();
  t.teardown(() => writer.stop());
  await until(() => api.sidecarTemplates.get('agent-next')?.status?.role === 'candidate', 'written, less the pruned field');
  await until(() => (objects.stored().get('agent-next')?.status as any)?.role === 'candidate', 'the write seen');
  await writer.settled();
  const writes = api.templateStatusPatches.filter((p) => p.name === 'agent-next').length;
  t.is(writes, 1);
  t.is(warned.filter((m) => /CustomResourceDefinition older than the injector/.test(m)).length, 1);
  for (let i = 0; i < 5; i++) {
    await clock.advance(1000);
    await writer.settled();
  }
  t.is(api.templateStatusPatches.filter((p) => p.name === 'agent-next').length, 1, 'not sent again unchanged');
  // The CRD upgraded: within ten minutes the status is written whole.
  api.prunedStatusFields.clear();
  await clock.advance(10 * 60_000);
  await until(() => api.sidecarTemplates.get('agent-next')?.status?.preflight?.state === 'pending', 'written whole');
  t.is(warned.length, 1);
});

test('a change of delivery alone is a new set a replica serves (the revision stays), and /status says who delivers', async (t) => {
  // A sidecar that fits Pod Security restricted whatever the pod sets: the policy can hold it.
  const securityContext = { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } };
  const spec = { containers: [{ name: 'agent', image: 'agent:1', securityContext }] };
  const { api, objects } = await listedObjects(t, { agent: spec });
  const before = objects.current().byName.get('agent')!;
  t.is(before.delivery, 'webhook');
  t.is(objects.status().deliveredByPolicy, undefined);
  api.applyTemplate('agent', { ...spec, delivery: 'policy' });
  await until(() => objects.current().byName.get('agent')?.delivery === 'policy', 'the marked object served');
  t.is(objects.current().byName.get('agent')!.hash, before.hash, 'the same revision');
  t.deepEqual(objects.status().deliveredByPolicy, ['agent']);
});

test('a change of optOut alone is a new set a replica serves at once (the revision stays), both ways', async (t) => {
  const spec = { containers: [{ name: 'agent', image: 'agent:1' }] };
  const { api, objects } = await listedObjects(t, { agent: spec });
  const before = objects.current().byName.get('agent')!;
  t.is(before.optOut, 'allow');
  const generation = objects.generation;
  api.applyTemplate('agent', { ...spec, optOut: 'deny' });
  await until(() => objects.current().byName.get('agent')?.optOut === 'deny', 'optOut: deny served');
  t.is(objects.current().byName.get('agent')!.hash, before.hash, 'the same revision');
  t.true(objects.generation > generation);
  api.applyTemplate('agent', spec);
  await until(() => objects.current().byName.get('agent')?.optOut === 'allow', 'optOut: allow served again');
});

test('two valid required templates that want one container name: pods they both select are denied naming it, and the liveness sample is logged once, never a restart', async (t) => {
  const a = templateObject({ name: 'agent-a', containers: [{ name: 'agent', image: 'agent:1' }] });
  const b = templateObject({ name: 'agent-b', containers: [{ name: 'agent', image: 'agent:2' }] });
  // Each object alone passes admission; together they are served.
  t.is(templateRefusal(a, 'agent-a'), undefined);
  t.is(templateRefusal(b, 'agent-b'), undefined);
  const { set, refused } = checkTemplateObjects([a, b]);
  t.is(refused.size, 0);
  const outcome = await admitPod({ pod: pod(), namespace: 'shop', name: '' }, { templates: () => set, namespaces: optedIn('shop') });
  t.is(outcome.decision, 'denied');
  t.is(outcome.reason, 'required-sidecar-unavailable');
  t.regex(outcome.message, /agent/);
  const warned: string[] = [];
  const canary = livenessCanary(() => set, { warn: (_fields: unknown, msg?: string) => void warned.push(String(msg)) } as any);
  await t.notThrowsAsync(canary());
  await t.notThrowsAsync(canary());
  t.is(warned.length, 1);
  t.regex(warned[0]!, /deny the liveness sample pod .*not a reason to restart/);
  // A pipeline that cannot decide still fails it.
  await t.throwsAsync(
    livenessCanary(() => {
      throw new Error('templates unusable');
    }, silent)(),
    { message: /templates unusable/ },
  );
});

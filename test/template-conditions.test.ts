/**
 * Each pod webhook's template condition (pipeline/match-conditions.ts templateCondition) and
 * the leader's writer of it (serving/webhook-conditions.ts): evaluated with a CEL evaluator on
 * every corpus pod in many shapes, a condition is false only for pods on which that webhook
 * would do nothing at all (no patch, no refusal, no warning); the writer keeps the shipped
 * configuration's other conditions and webhooks as they are.
 */
import test, { type ExecutionContext } from 'ava';
import { run } from '@bufbuild/cel';
import pino from 'pino';
import { mutate } from '../src/admission/mutate.js';
import { matchConditions, maxTemplateConditionBytes, templateCondition, templateConditionName, type MatchCondition } from '../src/pipeline/match-conditions.js';
import { conditionsPatch, WebhookConditions } from '../src/serving/webhook-conditions.js';
import { loadTemplateDir } from '../src/templates/load.js';
import type { TemplateSet } from '../src/templates/set.js';
import type { TemplateFailurePolicy } from '../src/templates/template.js';
import { EventEmitter } from 'node:events';
import { createReview, prepareCreate } from './helpers/apiserver.js';
import { loadCorpus } from './helpers/corpus.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { FakeClock } from './helpers/fake-clock.js';
import { kustomizeObjects } from './helpers/kustomize.js';
import { optedIn } from './helpers/pods.js';
import { templateSet } from './helpers/templates.js';
import { until } from './helpers/until.js';

type Json = Record<string, any>;
const corpus = loadCorpus();
const namespaces = optedIn(...new Set(corpus.map((p) => p.namespace)));
const container = (name: string) => [{ name, image: `registry.example/${name}:1` }];

let bundled: TemplateSet;
test.before(async () => {
  bundled = await loadTemplateDir('templates');
});

/** Templates of both classes, selecting by labels the corpus has and lacks, automatic and on request. */
const mixed = () =>
  templateSet(
    { name: 'audit-agent', failurePolicy: 'Fail', objectSelector: { matchLabels: { tier: 'backend' } }, containers: container('audit-agent') },
    {
      name: 'mesh',
      failurePolicy: 'Fail',
      objectSelector: {
        matchExpressions: [
          { key: 'app', operator: 'Exists' },
          { key: 'mesh', operator: 'NotIn', values: ['off'] },
        ],
      },
      containers: container('mesh'),
    },
    { name: 'proxy', failurePolicy: 'Fail', injection: 'on-request', containers: container('proxy') },
    {
      name: 'metrics',
      failurePolicy: 'Ignore',
      objectSelector: { matchExpressions: [{ key: 'team', operator: 'In', values: ['a', 'b'] }] },
      containers: container('metrics'),
    },
    { name: 'tracer', failurePolicy: 'Ignore', injection: 'on-request', containers: container('tracer') },
  );

/** The shapes each corpus pod is tried in: labels a selector reads, removed or added, and the annotations that mention us. */
function shapes(base: Json): Json[] {
  const labelled = (labels: Record<string, string> | undefined) => {
    const pod = structuredClone(base);
    if (labels === undefined) delete pod.metadata.labels;
    else pod.metadata.labels = labels;
    return pod;
  };
  const annotated = (annotations: Record<string, string>) => {
    const pod = structuredClone(base);
    pod.metadata.annotations = { ...(pod.metadata.annotations ?? {}), ...annotations };
    return pod;
  };
  const own = base.metadata.labels ?? {};
  return [
    base,
    labelled(undefined),
    labelled({ ...own, tier: 'backend' }),
    labelled({ ...own, tier: 'frontend', app: 'x', mesh: 'off' }),
    labelled({ team: 'b' }),
    labelled({ ...own, 'logging.example.com/ship': 'false' }),
    annotated({ 'sidecar-injector.io/templates': 'proxy' }),
    annotated({ 'sidecar-injector.io/templates': 'tracer, no-such-template' }),
    annotated({ 'sidecar-injector.io/status': '{"v":1,"templates":{"proxy":{"hash":"0"}}}' }),
  ];
}

/** Pods a webhook's condition keeps from it although the webhook would patch, refuse or warn. */
async function wronglySkipped(
  set: TemplateSet,
  failurePolicy: TemplateFailurePolicy,
  condition: MatchCondition,
): Promise<{ skipped: string[]; acted: number }> {
  const skipped: string[] = [];
  let acted = 0;
  for (const entry of corpus)
    for (const [i, shape] of shapes(prepareCreate(entry.body, entry.namespace)).entries()) {
      const outcome = await mutate(createReview(shape, { namespace: entry.namespace }), { templates: () => set, namespaces, failurePolicy });
      const response = outcome.response.response as Json;
      const acts = !response.allowed || response.patch !== undefined || (response.warnings ?? []).length > 0;
      if (!acts) continue;
      acted++;
      if (run(condition.expression, { object: shape as never }) !== true) skipped.push(`${entry.name} shape ${i}: ${outcome.reason}`);
    }
  return { skipped, acted };
}

const conditionOf = (set: TemplateSet, failurePolicy: TemplateFailurePolicy): MatchCondition => {
  const wanted = templateCondition(set, failurePolicy);
  if ('none' in wanted) throw new Error(`no condition: ${wanted.none}`);
  return wanted;
};

for (const [name, set] of [
  ['the bundled templates', () => bundled],
  ['templates of both classes selecting by labels', mixed],
] as const)
  for (const failurePolicy of ['Fail', 'Ignore'] as const)
    test(`${name}: the ${failurePolicy === 'Fail' ? 'required' : 'optional'} webhook's condition skips no pod it would patch, refuse or warn`, async (t) => {
      const condition = conditionOf(set(), failurePolicy);
      const { skipped, acted } = await wronglySkipped(set(), failurePolicy, condition);
      t.deepEqual(skipped, []);
      t.true(acted > 20, `the corpus exercises the webhook (${acted} pods acted on)`);
    });

test('the check can fail: a condition that leaves out a selector is caught', async (t) => {
  const set = mixed();
  const full = conditionOf(set, 'Fail');
  // The same condition without its last selector (mesh's): pods only mesh selects are wrongly skipped.
  const cut = { name: full.name, expression: full.expression.slice(0, full.expression.lastIndexOf(' || (')) };
  t.not(cut.expression, full.expression);
  const { skipped } = await wronglySkipped(set, 'Fail', cut);
  t.true(skipped.length > 10, skipped.join('\n'));
});

test('the typical pod skips the required webhook of the bundled templates (the proxy is on request) and reaches the optional one', (t) => {
  const pod = { metadata: { labels: { app: 'web', 'pod-template-hash': '5d8f9c7b6d' } }, spec: { containers: container('web') } };
  t.is(run(conditionOf(bundled, 'Fail').expression, { object: pod as never }), false);
  t.is(run(conditionOf(bundled, 'Ignore').expression, { object: pod as never }), true);
  const requesting = { ...pod, metadata: { ...pod.metadata, annotations: { 'sidecar-injector.io/templates': 'proxy' } } };
  t.is(run(conditionOf(bundled, 'Fail').expression, { object: requesting as never }), true);
  // No labels and no annotations at all: nothing to read, no error (an error would refuse the pod).
  t.is(run(conditionOf(mixed(), 'Fail').expression, { object: { metadata: {}, spec: {} } as never }), false);
});

test('the same set always writes the same text; each selector once', (t) => {
  const twice = templateSet(
    { name: 'a', failurePolicy: 'Ignore', objectSelector: { matchLabels: { team: 'a' } }, containers: container('a') },
    { name: 'b', failurePolicy: 'Ignore', objectSelector: { matchLabels: { team: 'a' } }, containers: container('b') },
  );
  const condition = conditionOf(twice, 'Ignore');
  t.is(condition.expression, conditionOf(twice, 'Ignore').expression);
  t.is(condition.expression.split("'team'").length - 1, 2, 'one selector: the key is read twice (in, and the value)');
  t.is(condition.name, templateConditionName);
});

test('no condition (every pod sent) when a template selects every pod, the templates are unknown, a refused required template has an unknown scope, or an optional template adds what the required condition reads', (t) => {
  const none = (set: TemplateSet, failurePolicy: TemplateFailurePolicy) => {
    const wanted = templateCondition(set, failurePolicy);
    return 'none' in wanted ? wanted.none : 'a condition';
  };
  t.is(none(templateSet({ name: 'all', failurePolicy: 'Fail', containers: container('all') }), 'Fail'), 'a-template-selects-every-pod');
  t.is(none(templateSet({ name: 'all', failurePolicy: 'Fail', containers: container('all') }), 'Ignore'), 'a condition', 'the other class is unaffected');
  t.is(none({ ...mixed(), unavailable: 'not listed yet' }, 'Ignore'), 'templates-unknown');
  const refused = (objectSelector?: unknown) => ({
    ...mixed(),
    refusedRequired: [{ object: 'x', template: 'x', onRequest: false, problem: 'bad', ...(objectSelector ? { objectSelector } : {}) }],
  });
  t.is(none(refused() as TemplateSet, 'Fail'), 'a-refused-template-of-unknown-scope');
  t.is(none(refused() as TemplateSet, 'Ignore'), 'a condition');
  const withRefused = conditionOf(refused({ requirements: [{ key: 'refused-scope', operator: 'Exists', values: [] }] }) as TemplateSet, 'Fail');
  t.true(withRefused.expression.includes("'refused-scope'"), 'a refused required template with a known selector is in the condition');
  const labelling = templateSet(
    { name: 'audit-agent', failurePolicy: 'Fail', objectSelector: { matchLabels: { tier: 'backend' } }, containers: container('audit-agent') },
    { name: 'tagger', failurePolicy: 'Ignore', labels: { tier: 'backend' }, containers: container('tagger') },
  );
  t.is(none(labelling, 'Fail'), 'another-class-adds-what-it-reads');
  t.is(none(labelling, 'Ignore'), 'a-template-selects-every-pod');
  const requesting = templateSet(
    { name: 'proxy', failurePolicy: 'Fail', injection: 'on-request', containers: container('proxy') },
    {
      name: 'asker',
      failurePolicy: 'Ignore',
      objectSelector: { matchLabels: { a: 'b' } },
      annotations: { 'sidecar-injector.io/templates': 'proxy' },
      containers: container('asker'),
    },
  );
  t.is(none(requesting, 'Fail'), 'another-class-adds-what-it-reads');
  const long = templateSet(
    ...Array.from({ length: 120 }, (_, i) => ({
      name: `t${i}`,
      failurePolicy: 'Ignore',
      objectSelector: { matchLabels: { [`team-with-a-rather-long-label-key-${i}`]: `value-${i}` } },
      containers: container(`c${i}`),
    })),
  );
  t.is(none(long, 'Ignore'), 'too-long', `over ${maxTemplateConditionBytes} bytes`);
});

test("every revision counts: a candidate's wider selector and a previous revision's are in the condition", (t) => {
  const stable = mixed();
  const candidate = templateSet({
    name: 'metrics',
    failurePolicy: 'Ignore',
    objectSelector: { matchLabels: { canary: 'yes' } },
    containers: container('metrics'),
  }).templates[0]!;
  const previous = templateSet({
    name: 'metrics',
    failurePolicy: 'Ignore',
    objectSelector: { matchLabels: { older: 'yes' } },
    containers: container('metrics'),
  }).templates[0]!;
  const set: TemplateSet = { ...stable, rollouts: new Map([['metrics', { name: 'metrics', stable: stable.byName.get('metrics')!, candidate, previous }]]) };
  const condition = conditionOf(set, 'Ignore');
  for (const labels of [{ canary: 'yes' }, { older: 'yes' }, { team: 'a' }])
    t.is(run(condition.expression, { object: { metadata: { labels } } as never }), true);
  t.is(run(condition.expression, { object: { metadata: { labels: { other: 'x' } } } as never }), false);
});

// ---------------------------------------------------------------------------------------------
// The writer.

const shippedConfiguration = (): Json => structuredClone(kustomizeObjects('manifests').find((o) => o.kind === 'MutatingWebhookConfiguration')!);

test("the patch sets only the pod webhooks' own condition, by name; nothing when it is there; a delete when the set asks for none", (t) => {
  const configuration = shippedConfiguration();
  const change = conditionsPatch(configuration, (fp) => templateCondition(bundled, fp))!;
  t.deepEqual(
    (change.patch.webhooks as Json[]).map((w) => w.name),
    ['required.sidecar-injector.io', 'optional.sidecar-injector.io'],
  );
  for (const entry of change.patch.webhooks as Json[]) t.deepEqual(Object.keys(entry).sort(), ['matchConditions', 'name']);
  // Applied as the API server merges it: the condition is there, so nothing more to write.
  for (const entry of change.patch.webhooks as Json[]) {
    const hook = configuration.webhooks.find((w: Json) => w.name === entry.name);
    hook.matchConditions = [...hook.matchConditions, ...entry.matchConditions];
  }
  t.is(
    conditionsPatch(configuration, (fp) => templateCondition(bundled, fp)),
    undefined,
  );
  const everyPod = conditionsPatch(configuration, () => ({ none: 'templates-unknown' }))!;
  t.deepEqual((everyPod.patch.webhooks as Json[])[0]!.matchConditions, [{ name: templateConditionName, $patch: 'delete' }]);
  t.is(everyPod.changes[0]!.why, 'templates-unknown');
});

class Source extends EventEmitter {
  generation = 0;
  constructor(public set: TemplateSet) {
    super();
  }
  current() {
    return this.set;
  }
  status() {
    return {};
  }
  replace(set: TemplateSet) {
    this.set = set;
    this.generation++;
    this.emit('reload', set);
  }
}

/** A fake API server holding `configuration`, and a started writer on it (both stopped after the test). */
async function writerOn(
  t: ExecutionContext,
  configuration: Json,
  extra: { source?: Source; clock?: FakeClock; enabled?: boolean } = {},
): Promise<{ api: FakeApiServer; writer: WebhookConditions }> {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.addWebhookConfiguration(configuration);
  const writer = new WebhookConditions({
    kubeConfig: await api.kubeConfig(),
    log: pino({ level: 'silent' }),
    clock: extra.clock ?? new FakeClock(),
    templates: extra.source ?? new Source(bundled),
    configurationName: 'sidecar-injector',
    ...(extra.enabled !== undefined ? { enabled: extra.enabled } : {}),
  });
  writer.start();
  t.teardown(() => writer.stop());
  return { api, writer };
}

test('the leader writes each condition, follows a new set, removes its own when the set asks for none, and keeps the mirror-pod condition', async (t) => {
  const clock = new FakeClock();
  const source = new Source(bundled);
  const { api, writer } = await writerOn(t, shippedConfiguration(), { clock, source });
  const hooks = () => api.webhookConfigurations.get('sidecar-injector')!.webhooks as Json[];
  const conditionsOf = (name: string) => hooks().find((w) => w.name === name)!.matchConditions as Json[] | undefined;
  await until(() => conditionsOf('required.sidecar-injector.io')?.length === 2, 'the conditions written');
  await writer.settled();
  t.deepEqual(conditionsOf('required.sidecar-injector.io'), [...matchConditions, conditionOf(bundled, 'Fail')]);
  t.deepEqual(conditionsOf('optional.sidecar-injector.io'), [...matchConditions, conditionOf(bundled, 'Ignore')]);
  t.is(conditionsOf('templates.sidecar-injector.io'), undefined);
  t.is(api.writes.filter((w) => w.startsWith('PATCH mutatingwebhookconfigurations')).length, 1, 'both in one write');
  // Another round with the same set writes nothing.
  clock.advance(60_000);
  await writer.settled();
  t.is(api.writes.filter((w) => w.startsWith('PATCH mutatingwebhookconfigurations')).length, 1);
  // A required template that selects every pod: the required webhook is sent every pod again.
  const everyPod = templateSet({ name: 'all', failurePolicy: 'Fail', containers: container('all') });
  source.replace(everyPod);
  await until(() => conditionsOf('required.sidecar-injector.io')?.length === 1, 'the condition removed');
  await writer.settled();
  t.deepEqual(conditionsOf('required.sidecar-injector.io'), [...matchConditions]);
  t.deepEqual(writer.status().everyPodSentTo, { Fail: 'a-template-selects-every-pod' });
  t.is(writer.status().conditionWriteFailures, 0);
});

test('a write the API server refuses is counted, said in the status, and tried again next round', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.addWebhookConfiguration(shippedConfiguration());
  api.forbidden.add('mutatingwebhookconfigurations');
  const clock = new FakeClock();
  const writer = new WebhookConditions({
    kubeConfig: await api.kubeConfig(),
    log: pino({ level: 'silent' }),
    clock,
    templates: new Source(bundled),
    configurationName: 'sidecar-injector',
  });
  writer.start();
  t.teardown(() => writer.stop());
  await until(() => writer.status().conditionWriteFailures === 1, 'the failure counted');
  t.regex(writer.status().lastError ?? '', /403|forbidden/i);
  api.forbidden.delete('mutatingwebhookconfigurations');
  clock.advance(60_000);
  await until(() => writer.status().conditionWrites === 1, 'written next round');
  await writer.settled();
  t.is(writer.status().lastError, undefined);
});

test('turned off (--match-conditions off), the leader removes the entries it wrote: every pod is sent again', async (t) => {
  const configuration = shippedConfiguration();
  for (const hook of configuration.webhooks.slice(0, 2)) hook.matchConditions = [...hook.matchConditions, conditionOf(bundled, 'Fail')];
  const { api, writer } = await writerOn(t, configuration, { enabled: false });
  await until(() => writer.status().conditionWrites === 1, 'the entries removed');
  for (const hook of api.webhookConfigurations.get('sidecar-injector')!.webhooks.slice(0, 2)) t.deepEqual(hook.matchConditions, [...matchConditions]);
  t.deepEqual(writer.status().everyPodSentTo, { Fail: 'turned-off', Ignore: 'turned-off' });
});

test('a condition the API server refuses to add (64 conditions already) is not left narrower than the set: the entries are removed, and /status says why', async (t) => {
  const configuration = shippedConfiguration();
  // Someone else's 63 conditions beside the mirror one fill the required webhook's list (64):
  // ours cannot be added there. The optional webhook holds an older, narrower condition of ours.
  const others = Array.from({ length: 63 }, (_, i) => ({ name: `team-${i}`, expression: 'true' }));
  configuration.webhooks[0].matchConditions = [...configuration.webhooks[0].matchConditions, ...others];
  configuration.webhooks[1].matchConditions = [
    ...configuration.webhooks[1].matchConditions,
    { name: templateConditionName, expression: "has(object.metadata.labels) && 'old' in object.metadata.labels" },
  ];
  const { api, writer } = await writerOn(t, configuration);
  await until(() => writer.status().conditionWriteFailures === 1, 'the refusal counted');
  await writer.settled();
  t.regex(writer.status().lastError ?? '', /HTTP 422/);
  const [required, optional] = api.webhookConfigurations.get('sidecar-injector')!.webhooks as Json[];
  t.is(required!.matchConditions.length, 64, 'the required webhook as it was: ours could not be added');
  t.false(
    (optional!.matchConditions as Json[]).some((c) => c.name === templateConditionName),
    'the old, narrower condition removed',
  );
  t.deepEqual(writer.status().everyPodSentTo, { Fail: 'write-refused', Ignore: 'write-refused' });
});

test('the patch carries the resourceVersion it was made from: a leader that lost the lease never writes over its successor', (t) => {
  const configuration = shippedConfiguration();
  configuration.metadata.resourceVersion = '4711';
  const change = conditionsPatch(configuration, (fp) => templateCondition(bundled, fp))!;
  t.deepEqual(change.patch.metadata, { resourceVersion: '4711' });
});

/**
 * The webhook's matchConditions are the code's (src/pipeline/match-conditions.ts), and each is
 * safe: evaluated with a CEL evaluator (@bufbuild/cel) on every corpus pod as the API server
 * sends it, a condition excludes only pods the injector would leave unchanged anyway.
 */
import test from 'ava';
import { run } from '@bufbuild/cel';
import { mutate, type MutateDeps } from '../src/admission/mutate.js';
import { matchConditions, type MatchCondition } from '../src/pipeline/match-conditions.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { createReview, prepareCreate } from './helpers/apiserver.js';
import { loadCorpus } from './helpers/corpus.js';
import { optedIn } from './helpers/pods.js';
import { kustomizeObjects } from './helpers/kustomize.js';

const corpus = loadCorpus();
let deps: MutateDeps;
test.before(async () => {
  const set = await loadTemplateDir('templates');
  deps = { templates: () => set, namespaces: optedIn(...new Set(corpus.map((p) => p.namespace))) };
});

function evaluate(expression: string, object: unknown): unknown {
  return run(expression, { object: object as never });
}

/** Corpus pods a condition keeps from the injector although the injector would patch them. */
async function wrongfullyExcluded(conditions: readonly MatchCondition[]): Promise<{ excluded: string[]; patched: number }> {
  const excluded: string[] = [];
  let patched = 0;
  for (const entry of corpus) {
    for (const requests of [undefined, 'proxy']) {
      const pod = prepareCreate(entry.body, entry.namespace);
      if (requests) pod.metadata.annotations = { ...(pod.metadata.annotations ?? {}), 'sidecar-injector.io/templates': requests };
      const outcome = await mutate(createReview(pod, { namespace: entry.namespace }), deps);
      if (outcome.decision !== 'patched') continue;
      patched++;
      for (const condition of conditions) if (evaluate(condition.expression, pod) !== true) excluded.push(`${condition.name}: ${entry.name}`);
    }
  }
  return { excluded, patched };
}

test('both pod webhooks of the manifest hold exactly the conditions the code declares; the SidecarTemplate one has none', (t) => {
  const rendered = kustomizeObjects('manifests');
  const hooks = rendered.find((o) => o.kind === 'MutatingWebhookConfiguration')!.webhooks;
  t.deepEqual(
    hooks.map((w: { name: string }) => w.name),
    ['required.sidecar-injector.io', 'optional.sidecar-injector.io', 'templates.sidecar-injector.io'],
  );
  for (const webhook of hooks.slice(0, 2)) t.deepEqual(webhook.matchConditions, matchConditions, webhook.name);
  t.is(hooks[2].matchConditions, undefined);
});

test('no condition keeps from the injector a corpus pod it would patch', async (t) => {
  const { excluded, patched } = await wrongfullyExcluded(matchConditions);
  t.deepEqual(excluded, []);
  t.true(patched > 20, `the corpus exercises injection (${patched} pods patched)`);
});

test('the check can fail: a condition that excludes served pods is caught', async (t) => {
  const { excluded } = await wrongfullyExcluded([
    { name: 'labelled-only', expression: "has(object.metadata.labels) && 'nothing-has-this' in object.metadata.labels" },
  ]);
  t.true(excluded.length > 20);
});

test('a mirror pod is not sent to us; on a server without matchConditions it is allowed unchanged', async (t) => {
  for (const entry of corpus) {
    const mirror = prepareCreate(entry.body, entry.namespace);
    mirror.metadata.annotations = { ...(mirror.metadata.annotations ?? {}), 'kubernetes.io/config.mirror': 'a1b2c3' };
    t.is(evaluate(matchConditions[0]!.expression, mirror), false, entry.name);
    const outcome = await mutate(createReview(mirror, { namespace: entry.namespace }), deps);
    t.is(outcome.reason, 'mirror-pod', entry.name);
    t.is(outcome.response.response.patch, undefined);
  }
});

/**
 * Answers remembered for pods of one ReplicaSet equal answers decided afresh: for random pods
 * (labels, annotations, requested templates, overrides, containers, resources) sent twice with
 * different uids and managedFields, the cached answer is the fresh one with the uid of its own
 * request; a change of state (templates, namespace labels, version) is never answered from an
 * older state; and the cache stays within its bounds.
 */
import test from 'ava';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { AnswerCache } from '../src/admission/answer-cache.js';
import { mutate, type MutateDeps } from '../src/admission/mutate.js';
import { decideVersion } from '../src/k8s/version.js';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { createReview, prepareCreate } from './helpers/apiserver.js';
import { templateSet } from './helpers/templates.js';

const enabled = { 'sidecar-injector.io/injection': 'enabled' };

const podArbitrary = fc
  .record({
    labels: fc.dictionary(
      fc.constantFrom('app', 'logging.example.com/ship', 'sidecar-injector.io/inject', 'tier'),
      fc.constantFrom('web', 'false', 'disabled', 'x'),
      { maxKeys: 3 },
    ),
    request: fc.option(fc.constantFrom('proxy', 'nosuch', 'proxy,log-shipper'), { nil: undefined }),
    memory: fc.option(fc.constantFrom('64Mi', '128Mi', '2Gi', 'lots'), { nil: undefined }),
    names: fc.uniqueArray(fc.constantFrom('web', 'worker', 'proxy', 'log-shipper'), { minLength: 1, maxLength: 3 }),
    budget: fc.boolean(),
    generateName: fc.constantFrom('web-5d8f-', 'api-7c9d-'),
  })
  .map((g) => {
    const annotations: Record<string, string> = {};
    if (g.request) annotations['sidecar-injector.io/templates'] = g.request;
    if (g.memory) annotations['log-shipper.sidecar-injector.io/memoryLimit'] = g.memory;
    return {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { generateName: g.generateName, labels: g.labels, annotations },
      spec: {
        containers: g.names.map((name) => ({ name, image: `example/${name}:1`, resources: { requests: { cpu: '100m' } } })),
        ...(g.budget ? { resources: { requests: { cpu: '1', memory: '1Gi' } } } : {}),
      },
    };
  });

/** The same pod as another CREATE of its ReplicaSet: another uid, other managedFields timestamps. */
function again(pod: Record<string, any>, n: number): Record<string, any> {
  const copy = structuredClone(pod);
  copy.metadata.managedFields = [
    { manager: 'kube-controller-manager', operation: 'Update', time: `2026-11-22T00:00:0${n}Z`, fieldsType: 'FieldsV1', fieldsV1: {} },
  ];
  return copy;
}

test('property: a cached answer is the fresh answer, with the uid of its own request', async (t) => {
  const set = await loadTemplateDir('templates');
  const namespaces = createLocalNamespaceSource({ shop: enabled });
  const cached: MutateDeps = { templates: () => set, namespaces, answers: new AnswerCache() };
  const fresh: MutateDeps = { templates: () => set, namespaces };
  await fc.assert(
    fc.asyncProperty(podArbitrary, async (body) => {
      const pod = prepareCreate(body, 'shop');
      for (let n = 0; n < 3; n++) {
        const review = createReview(again(pod, n), { namespace: 'shop', uid: `uid-${n}-${Math.random()}` });
        const a = await mutate(structuredClone(review), cached, { cacheable: true });
        const b = await mutate(structuredClone(review), fresh);
        const { events: ea, ...ra } = a;
        const { events: eb, ...rb } = b;
        if (!isDeepStrictEqual(ra, rb)) throw new Error(`differs:\n${JSON.stringify(ra)}\n${JSON.stringify(rb)}`);
        if (!isDeepStrictEqual(ea?.(), eb?.())) throw new Error('events differ');
      }
    }),
    { numRuns: 150, seed: 2026 },
  );
  // The second and third sending of each pod were answered from the cache.
  t.true(cached.answers!.hits >= 250, `hits ${cached.answers!.hits}`);
});

test('a change of state is never answered from the old one: templates, namespace labels, version', async (t) => {
  const answers = new AnswerCache<never>() as unknown as MutateDeps['answers'];
  let set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  let namespaces = createLocalNamespaceSource({ shop: enabled });
  let version = decideVersion({ flag: { major: 1, minor: 33 } });
  const deps = (): MutateDeps => ({ templates: () => set, namespaces, answers, kubernetesVersion: () => version });
  const review = () =>
    createReview(prepareCreate({ metadata: { generateName: 'p-' }, spec: { containers: [{ name: 'app', image: 'a' }] } }, 'shop'), { namespace: 'shop' });
  const image = async () => {
    const outcome = await mutate(review(), deps(), { cacheable: true });
    return outcome.decision === 'patched'
      ? Buffer.from(outcome.response.response.patch!, 'base64')
          .toString()
          .match(/"image":"([^"]+)"/)?.[1]
      : outcome.reason;
  };
  t.is(await image(), 'agent:1');
  t.is(await image(), 'agent:1');
  set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:2' }] });
  t.is(await image(), 'agent:2');
  namespaces = createLocalNamespaceSource({ shop: {} });
  t.is(await image(), 'namespace-not-enabled');
  namespaces = createLocalNamespaceSource({ shop: enabled });
  version = decideVersion({ flag: { major: 1, minor: 28 } });
  t.is(await image(), 'agent:2');
  t.true(answers!.hits >= 1);
});

test('bounded: entries and bytes; a body not marked cacheable is never remembered', async (t) => {
  const cache = new AnswerCache<string>(3, 1024 * 1024);
  for (let i = 0; i < 10; i++) cache.set(`k${i}`, 'v', 100);
  t.is(cache.size().entries, 3);
  t.is(cache.get('k0'), undefined);
  t.is(cache.get('k9'), 'v');
  const big = new AnswerCache<string>(100, 1000);
  big.set('x'.repeat(200), 'v', 10);
  t.is(big.size().entries, 0, 'an entry over an eighth of the bytes is not kept');
  const set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const deps: MutateDeps = { templates: () => set, namespaces: createLocalNamespaceSource({ shop: enabled }), answers: new AnswerCache() };
  await mutate(
    createReview(prepareCreate({ metadata: { generateName: 'p-' }, spec: { containers: [{ name: 'app', image: 'a' }] } }, 'shop'), { namespace: 'shop' }),
    deps,
  );
  t.is(deps.answers!.size().entries, 0);
});

test('only bodies whose numbers JSON writes back as sent make keys: no 1e400, no -0', async (t) => {
  const { keyFaithful } = await import('../src/admission/answer-cache.js');
  const ok = (text: string) => keyFaithful(Buffer.from(text));
  t.true(ok('{"a":1,"b":-1,"c":0.5,"d":-0.5,"e":"1e400","f":true,"g":false,"h":-10,"i":"-0"}'));
  for (const text of ['{"a":1e400}', '{"a":1E3}', '{"a":-0}', '{"a":-0.0}', '{"a":[-0]}', '{"a":2.5e-3}']) t.false(ok(text), text);
  t.true(ok('{"a":-0.01}'));
  // And over HTTPS: a body with such a number is decided afresh, never answered for another.
  const { startTestServer } = await import('./helpers/server.js');
  const set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const server = await startTestServer({ templates: set, namespaces: createLocalNamespaceSource({ shop: enabled }) });
  t.teardown(() => server.stop());
  const body = (value: string) =>
    JSON.stringify(
      createReview(prepareCreate({ metadata: { generateName: 'p-' }, spec: { containers: [{ name: 'app', image: 'a' }], priority: 0 } }, 'shop'), {
        namespace: 'shop',
      }),
    ).replace('"priority":0', `"priority":${value}`);
  for (const value of ['1e400', '1e400']) {
    const res = await server.request('POST', '/mutate', body(value), { 'content-type': 'application/json' });
    t.is(res.status, 200);
  }
});

test('a namespace no namespace can have is never a key', async (t) => {
  const answers = new AnswerCache();
  // Every namespace opted in: the decision goes on, and only the key is in question.
  const namespaces = { ...createLocalNamespaceSource({ shop: enabled }), labelsOf: async () => ({ 'sidecar-injector.io/injection': 'enabled' }) };
  const set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const deps: MutateDeps = { templates: () => set, namespaces, answers: answers as MutateDeps['answers'] };
  for (const namespace of ['.', '', '..', 'a/b']) {
    const review = createReview(prepareCreate({ metadata: { generateName: 'p-' }, spec: { containers: [{ name: 'app', image: 'a' }] } }, 'shop'), {
      namespace: 'shop',
    });
    review.request.namespace = namespace;
    await mutate(review, deps, { cacheable: true });
  }
  // No key was made (the decision itself reads its own namespace, as without a cache).
  t.is(answers.size().entries, 0);
  t.is(answers.misses, 0);
});

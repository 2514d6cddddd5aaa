/**
 * Answers remembered for pods of one ReplicaSet equal answers decided afresh: for random pods
 * (labels, annotations, requested templates, overrides, containers, resources) sent again with
 * other uids, managedFields and timestamps, the cached answer is the fresh one with the uid of
 * its own request, byte for byte; a change of state (templates, namespace labels, version) is
 * never answered from an older state; a body that only looks like a remembered one (not JSON,
 * a uid the parser refuses, escaped or repeated keys) is never answered from the cache; and the
 * cache stays within its bounds.
 */
import test from 'ava';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { AnswerCache, reviewKeyPaths, withAnswerCache, type CachingReviewer, type RememberedAnswer } from './index.js';
import { sameJsonShape } from './key.js';
import { createReviewer, mutate, type Answered, type MutateDeps } from '../mutate.js';
import { RequestError } from '../../errors.js';
import { jsonBody } from '../../http/body.js';
import { decideVersion } from '../../k8s/version.js';
import { createLocalNamespaceSource, type NamespaceLabelSource } from '../../namespaces/source.js';
import { loadTemplateDir } from '../../templates/load.js';
import { controllerManagedFields, createReview, prepareCreate } from '../../../test/helpers/apiserver.js';
import { templateSet } from '../../../test/helpers/templates.js';

/** A review's text as the body reader hands it on. */
const bodyOf = (text: string) => jsonBody(Buffer.from(text), reviewKeyPaths);

/**
 * Deps whose state is held still (the set, the namespace source and version never change), and
 * a reviewer over them with an answer cache: the generation is fixed.
 */
function cached(deps: MutateDeps, cache = new AnswerCache<RememberedAnswer>()): CachingReviewer & { readonly answers: AnswerCache<RememberedAnswer> } {
  const reviewer = withAnswerCache(createReviewer(deps), { namespaces: deps.namespaces, generation: () => 'fixed' }, cache);
  return Object.assign(reviewer, { answers: reviewer.cache });
}

/** One body answered through the `all` webhook. */
const answerReview = (body: ReturnType<typeof bodyOf>, reviewer: CachingReviewer): Promise<Answered> => reviewer.answer(body, 'all');

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

/** The same pod as another CREATE of its ReplicaSet: other managedFields timestamps, a creation time, a uid. */
function again(pod: Record<string, any>, n: number): Record<string, any> {
  const copy = structuredClone(pod);
  // The creating controller's full field set, escaped `k:` keys and all, at another time.
  copy.metadata.managedFields = controllerManagedFields(copy, `2026-11-22T00:00:0${n}Z`);
  copy.metadata.creationTimestamp = n === 0 ? null : `2026-11-22T00:00:0${n}Z`;
  copy.metadata.uid = `pod-uid-${n}`;
  return copy;
}

test('property: a cached answer is the fresh answer, with the uid of its own request, byte for byte', async (t) => {
  const set = await loadTemplateDir('templates');
  const namespaces = createLocalNamespaceSource({ shop: enabled });
  const fresh: MutateDeps = { templates: () => set, namespaces };
  const reviewer = cached(fresh);
  await fc.assert(
    fc.asyncProperty(podArbitrary, fc.boolean(), async (body, dryRun) => {
      const pod = prepareCreate(body, 'shop');
      for (let n = 0; n < 4; n++) {
        const text = JSON.stringify(createReview(again(pod, n), { namespace: 'shop', uid: `uid-${n}-${Math.random()}`, dryRun }));
        const a = await answerReview(bodyOf(text), reviewer);
        const b = await mutate(JSON.parse(text), fresh);
        const { events: ea, remembered: _remembered, ...ra } = a.outcome;
        const { events: eb, ...rb } = b;
        if (!isDeepStrictEqual(ra, rb)) throw new Error(`differs:\n${JSON.stringify(ra)}\n${JSON.stringify(rb)}`);
        if (!isDeepStrictEqual(ea?.(), eb?.())) throw new Error('events differ');
        if (!a.answer.equals(Buffer.from(JSON.stringify(b.response)))) throw new Error(`answer bytes differ:\n${a.answer}\n${JSON.stringify(b.response)}`);
      }
    }),
    { numRuns: 150, seed: 2026 },
  );
  // The third and fourth sending of each pod were answered from the cache (the second is remembered).
  t.true(reviewer.answers.hits >= 250, `hits ${reviewer.answers.hits}`);
});

test('a change of state is never answered from the old one: templates, namespace labels, version', async (t) => {
  let set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  let version = decideVersion({ flag: { major: 1, minor: 33 } });
  // Each source says when what it holds changes, as serve's do: a generation of its own.
  let generations = { set: 1, labels: 1, version: 1 };
  let labels = createLocalNamespaceSource({ shop: enabled });
  const namespaces: NamespaceLabelSource = {
    kind: 'changing',
    isReady: () => true,
    status: () => ({}),
    labelsOf: (namespace) => labels.labelsOf(namespace),
    overridesOf: (namespace) => labels.overridesOf!(namespace),
    generationOf: () => generations.labels,
  };
  const reviewer = withAnswerCache(createReviewer({ templates: () => set, namespaces, kubernetesVersion: () => version }), {
    namespaces,
    generation: () => `${generations.set}/${generations.version}`,
  });
  const review = () =>
    createReview(prepareCreate({ metadata: { generateName: 'p-' }, spec: { containers: [{ name: 'app', image: 'a' }] } }, 'shop'), { namespace: 'shop' });
  const image = async () => {
    const { outcome } = await answerReview(bodyOf(JSON.stringify(review())), reviewer);
    return outcome.decision === 'patched'
      ? Buffer.from(outcome.response.response.patch!, 'base64')
          .toString()
          .match(/"image":"([^"]+)"/)?.[1]
      : outcome.reason;
  };
  // Three times: remembered at the second, answered from the cache at the third.
  for (let n = 0; n < 3; n++) t.is(await image(), 'agent:1');
  t.is(reviewer.cache.hits, 1);
  set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:2' }] });
  generations = { ...generations, set: 2 };
  for (let n = 0; n < 3; n++) t.is(await image(), 'agent:2');
  t.is(reviewer.cache.hits, 2);
  labels = createLocalNamespaceSource({ shop: {} });
  generations = { ...generations, labels: 2 };
  t.is(await image(), 'namespace-not-enabled');
  labels = createLocalNamespaceSource({ shop: enabled });
  generations = { ...generations, labels: 3 };
  version = decideVersion({ flag: { major: 1, minor: 28 } });
  generations = { ...generations, version: 2 };
  t.is(await image(), 'agent:2');
  t.is(reviewer.cache.hits, 2, 'no answer of an older state was used');
});

test('a source that names no generation, or a state that changes while a pod is decided, has nothing remembered', async (t) => {
  const set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const local = createLocalNamespaceSource({ shop: enabled });
  const { generationOf: _generationOf, ...withoutGenerations } = local;
  const text = JSON.stringify(
    createReview(prepareCreate({ metadata: { generateName: 'p-' }, spec: { containers: [{ name: 'app', image: 'a' }] } }, 'shop'), { namespace: 'shop' }),
  );
  const silent = withAnswerCache(createReviewer({ templates: () => set, namespaces: withoutGenerations }), {
    namespaces: { generationOf: () => undefined },
    generation: () => 'g',
  });
  for (let n = 0; n < 4; n++) t.is((await answerReview(bodyOf(text), silent)).outcome.decision, 'patched');
  t.deepEqual([silent.cache.hits, silent.cache.size().entries], [0, 0]);
  // The generation moves on during every decision (a reload lands mid-review): never remembered.
  let generation = 0;
  const moving = withAnswerCache(createReviewer({ templates: () => set, namespaces: local }), { namespaces: local, generation: () => String(generation++) });
  for (let n = 0; n < 4; n++) t.is((await answerReview(bodyOf(text), moving)).outcome.decision, 'patched');
  t.deepEqual([moving.cache.hits, moving.cache.size().entries], [0, 0]);
});

test('a review as the API server sends it, managedFields with escaped keys and all, is answered from the cache', async (t) => {
  const set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const deps = cached({ templates: () => set, namespaces: createLocalNamespaceSource({ shop: enabled }) });
  const body = {
    metadata: { generateName: 'web-5d8f-', labels: { app: 'web', 'pod-template-hash': '5d8f' } },
    spec: { containers: [{ name: 'app', image: 'a:1', env: [{ name: 'LOG_LEVEL', value: 'info' }], ports: [{ containerPort: 8080 }] }] },
  };
  const texts = [0, 1, 2].map((n) =>
    JSON.stringify(createReview(prepareCreate(body, 'shop', { managedAt: `2026-11-20T10:00:0${n}Z` }), { namespace: 'shop', uid: `uid-${n}` })),
  );
  t.true(texts[0]!.includes('"k:{\\"name\\":\\"app\\"}"'), 'the controller wrote k: keys with escaped quotes');
  t.not(texts[0], texts[1], 'each pod has its own managedFields time');
  for (const text of texts) t.is((await answerReview(bodyOf(text), deps)).outcome.decision, 'patched');
  t.is(deps.answers.hits, 1, 'the third pod of the ReplicaSet was answered from the cache');
  // The same escape beside managedFields, in what the decision reads: never a key.
  const escaped = texts[2]!.replace('"uid":"uid-2"', '"uid":"uid-3"').replace('"labels":{"app"', '"labels":{"\\u0061pp"');
  const before = deps.answers.hits;
  for (let n = 0; n < 3; n++) await answerReview(bodyOf(escaped), deps);
  t.is(deps.answers.hits, before);
});

test('bounded: entries and bytes; a body over the size limit is never remembered', async (t) => {
  const text = (t: string) => ({ view: Buffer.from(t), kept: [0, Buffer.byteLength(t)], namespace: 'shop', uid: [0, 0] as const, others: [] });
  const key = (n: number) => ({ digest: `d${n}`, text: text(`k${n}`) });
  const cache = new AnswerCache<string>(3, 1024 * 1024);
  for (let i = 0; i < 10; i++) cache.set(key(i), 'v', 100);
  t.is(cache.size().entries, 3);
  const get = (k: ReturnType<typeof key>) => cache.use(k, (v) => v);
  t.is(get(key(0)), undefined);
  t.is(get(key(9)), 'v');
  t.is(get({ digest: 'd9', text: text('other') }), undefined, 'a digest that collides is a miss');
  t.is(
    cache.use(key(9), () => undefined),
    undefined,
    'a value refused is a miss',
  );
  t.deepEqual([cache.hits, cache.misses], [1, 3]);
  const big = new AnswerCache<string>(100, 1000);
  big.set({ digest: 'd', text: text('x'.repeat(200)) }, 'v', 10);
  t.is(big.size().entries, 0, 'an entry over an eighth of the bytes is not kept');
  const set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const deps = cached({ templates: () => set, namespaces: createLocalNamespaceSource({ shop: enabled }) }, new AnswerCache(256, 16 * 1024 * 1024, 2000));
  const pod = prepareCreate(
    { metadata: { generateName: 'p-', annotations: { note: 'x'.repeat(2000) } }, spec: { containers: [{ name: 'app', image: 'a' }] } },
    'shop',
  );
  const { outcome } = await answerReview(bodyOf(JSON.stringify(createReview(pod, { namespace: 'shop' }))), deps);
  t.is(outcome.decision, 'patched');
  t.is(deps.answers.size().entries, 0);
});

/** A deps with a cache, a pod's review text, and the answer the first sending left in the cache. */
async function remembered(): Promise<{ deps: ReturnType<typeof cached>; text: string }> {
  const set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const deps = cached({ templates: () => set, namespaces: createLocalNamespaceSource({ shop: enabled }) });
  // As Kubernetes 1.33 and older send it: a creationTimestamp of null, a value the cache cuts out.
  const pod = prepareCreate({ metadata: { generateName: 'p-' }, spec: { containers: [{ name: 'app', image: 'a' }] } }, 'shop', { before134: true });
  const text = JSON.stringify(createReview(pod, { namespace: 'shop', uid: 'first' }));
  // Remembered the second time its key comes.
  await answerReview(bodyOf(text), deps);
  expectEntries(deps, 0);
  await answerReview(bodyOf(text), deps);
  expectEntries(deps, 1);
  return { deps, text };
}
function expectEntries(deps: ReturnType<typeof cached>, n: number): void {
  if (deps.answers.size().entries !== n) throw new Error(`expected ${n} entries, found ${deps.answers.size().entries}`);
}

test('a body that matches a remembered one only where values were cut out is answered only when it is a review', async (t) => {
  const { deps, text } = await remembered();
  const answer = async (body: string | Buffer) => {
    try {
      const { outcome, answer } = await answerReview(jsonBody(Buffer.from(body), reviewKeyPaths), deps);
      return { uid: outcome.uid, decision: outcome.decision, sent: JSON.parse(answer.toString()).response.uid as string };
    } catch (err) {
      return err instanceof RequestError ? `${err.status} ${err.code}` : String(err);
    }
  };
  // Another uid and other volatile values: answered from the cache.
  const hits = deps.answers.hits;
  t.deepEqual(await answer(text.replace('"uid":"first"', '"uid":"second"').replace('"creationTimestamp":null', '"creationTimestamp":"2026-11-22T10:00:00Z"')), {
    uid: 'second',
    decision: 'patched',
    sent: 'second',
  });
  t.is(deps.answers.hits, hits + 1);
  // A uid the parser refuses, or values that are not JSON: refused as without a cache, never answered.
  t.is(await answer(text.replace('"uid":"first"', '"uid":42')), '400 ERR_MALFORMED_REVIEW');
  t.is(await answer(text.replace('"uid":"first"', '"uid":""')), '400 ERR_MALFORMED_REVIEW');
  t.is(await answer(text.replace('"uid":"first"', `"uid":"${'u'.repeat(300)}"`)), '400 ERR_MALFORMED_REVIEW');
  t.is(await answer(text.replace('"uid":"first"', '"uid":"a","b"')), '400 ERR_MALFORMED_JSON');
  // Quotes inside what looks like one string: two strings, or a string and an object.
  t.is(await answer(text.replace('"uid":"first"', '"uid":"x"{"allowed":false}"y"')), '400 ERR_MALFORMED_JSON');
  t.is(await answer(text.replace('"creationTimestamp":null', '"creationTimestamp":"a" "b"')), '400 ERR_MALFORMED_JSON');
  t.is(await answer(text.replace('"creationTimestamp":null', '"creationTimestamp":"a"[1,2]"b"')), '400 ERR_MALFORMED_JSON');
  t.is(await answer(text.replace('"creationTimestamp":null', '"creationTimestamp":nul')), '400 ERR_MALFORMED_JSON');
  t.is(await answer(text.replace('"creationTimestamp":null', '"creationTimestamp":[}')), '400 ERR_MALFORMED_JSON');
  // A byte order mark before a value cut out: JSON.parse refuses the body, and so does the cache.
  for (const [field, value] of [
    ['uid', '"first"'],
    ['creationTimestamp', 'null'],
  ]) {
    const [head, tail] = text.split(`"${field}":${value}`);
    t.is(
      await answer(Buffer.concat([Buffer.from(`${head}"${field}":`), Buffer.of(0xef, 0xbb, 0xbf), Buffer.from(`${value}${tail}`)])),
      '400 ERR_MALFORMED_JSON',
    );
  }
  // Bytes that are not UTF-8 where a value was cut out.
  const [before, after] = text.split('"creationTimestamp":null');
  t.is(await answer(Buffer.concat([Buffer.from(`${before}"creationTimestamp":"`), Buffer.of(0xff), Buffer.from(`"${after}`)])), '400 ERR_MALFORMED_JSON');
  t.is(deps.answers.hits, hits + 1, 'none of them was answered from the cache');
});

test('a repeated or escaped key never makes a key: the answer names the uid the parser reads', async (t) => {
  const { deps, text } = await remembered();
  const hits = deps.answers.hits;
  const sent = async (body: string) => JSON.parse((await answerReview(bodyOf(body), deps)).answer.toString()).response.uid as string;
  // JSON.parse keeps the last of a repeated key.
  t.is(await sent(text.replace('"uid":"first"', '"uid":"one","uid":"two"')), 'two');
  // An escaped key is the same key to the parser: the second request wins.
  const escaped = text.replace(/}$/, `,"requ\\u0065st":${JSON.stringify({ ...JSON.parse(text).request, uid: 'three' })}}`);
  t.is(await sent(escaped), 'three');
  t.is(await sent(escaped.replace('"uid":"first"', '"uid":"four"')), 'three');
  // A namespace written with an escape is not read for a key.
  t.is(await sent(text.replace('"namespace":"shop"', '"namespace":"sh\\u006fp"').replace('"uid":"first"', '"uid":"five"')), 'five');
  t.is(deps.answers.hits, hits);
  t.is(deps.answers.size().entries, 1, 'none of them was remembered');
});

test('a namespace no namespace can have is never a key', async (t) => {
  // Every namespace opted in: the decision goes on, and only the key is in question.
  const namespaces = { ...createLocalNamespaceSource({ shop: enabled }), labelsOf: async () => ({ 'sidecar-injector.io/injection': 'enabled' }) };
  const set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const deps = cached({ templates: () => set, namespaces });
  const { answers } = deps;
  for (const namespace of ['.', '', '..', 'a/b', 'Shop']) {
    const review = createReview(prepareCreate({ metadata: { generateName: 'p-' }, spec: { containers: [{ name: 'app', image: 'a' }] } }, 'shop'), {
      namespace: 'shop',
    });
    review.request.namespace = namespace;
    await answerReview(bodyOf(JSON.stringify(review)), deps);
  }
  // No key was made (the decision itself reads its own namespace, as without a cache).
  t.is(answers.size().entries, 0);
  t.is(answers.misses, 0);
});

test('only pod CREATEs are remembered', async (t) => {
  const set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const deps = cached({ templates: () => set, namespaces: createLocalNamespaceSource({ shop: enabled }) });
  const { answers } = deps;
  const review = createReview(prepareCreate({ metadata: { generateName: 'p-' }, spec: { containers: [{ name: 'app', image: 'a' }] } }, 'shop'), {
    namespace: 'shop',
  });
  review.request.operation = 'UPDATE';
  const { outcome } = await answerReview(bodyOf(JSON.stringify(review)), deps);
  t.is(outcome.reason, 'operation-not-create');
  t.is(answers.size().entries, 0);
});

test('pods that differ only far into their text keep answers of their own', async (t) => {
  const set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  const deps = cached({ templates: () => set, namespaces: createLocalNamespaceSource({ shop: enabled }) });
  // Same length, same first several KiB; only a late value differs.
  const text = (last: string) =>
    JSON.stringify(
      createReview(
        prepareCreate(
          { metadata: { generateName: 'p-', annotations: { note: 'n'.repeat(4000) } }, spec: { containers: [{ name: 'app', image: `a:${last}` }] } },
          'shop',
        ),
        { namespace: 'shop', uid: `u-${last}` },
      ),
    );
  for (let round = 0; round < 3; round++) for (const last of ['1', '2']) await answerReview(bodyOf(text(last)), deps);
  t.is(deps.answers.size().entries, 2);
  t.deepEqual([deps.answers.hits, deps.answers.misses], [2, 4]);
});

test('an answer is remembered the second time its key comes; keys seen once are bounded', (t) => {
  const cache = new AnswerCache<string>(4, 1024 * 1024, 64 * 1024, 3);
  const key = (n: number) => ({ digest: `d${n}`, text: { view: Buffer.from(`k${n}`), kept: [0, 2], namespace: 'shop', uid: [0, 0] as const, others: [] } });
  t.false(cache.admits(key(1)));
  t.true(cache.admits(key(1)));
  t.false(cache.admits(key(1)), 'admitted once: seen afresh after');
  for (const n of [2, 3, 4, 5]) t.false(cache.admits(key(n)));
  // Only the three latest are remembered as seen: 1 went first.
  t.false(cache.admits(key(1)));
  t.true(cache.admits(key(5)));
});

test('the cache never looks a namespace up: a body the fresh path refuses costs no look-up, and one it decides costs the fresh path’s one', async (t) => {
  const set = templateSet({ name: 'agent', containers: [{ name: 'agent', image: 'agent:1' }] });
  // A source like the cluster's: a namespace is held only once looked up.
  const held = new Map<string, number>();
  let lookups = 0;
  const namespaces: NamespaceLabelSource = {
    kind: 'lookups',
    isReady: () => true,
    status: () => ({}),
    labelsOf: async (namespace) => {
      lookups++;
      held.set(namespace, 1);
      return { ...enabled, 'kubernetes.io/metadata.name': namespace };
    },
    generationOf: (namespace) => held.get(namespace),
  };
  const reviewer = cached({ templates: () => set, namespaces });
  const review = createReview(prepareCreate({ metadata: { generateName: 'p-' }, spec: { containers: [{ name: 'app', image: 'a' }] } }, 'fresh'), {
    namespace: 'fresh',
  });
  const text = JSON.stringify(review);
  // Not JSON, not a CREATE, not a pod: refused or allowed with no look-up at all.
  const junk = text.slice(0, -1);
  await t.throwsAsync(answerReview(bodyOf(junk), reviewer), { instanceOf: RequestError });
  const deletion = JSON.stringify({ ...review, request: { ...review.request, operation: 'DELETE' } });
  t.is((await answerReview(bodyOf(deletion), reviewer)).outcome.reason, 'operation-not-create');
  const configMap = JSON.stringify({ ...review, request: { ...review.request, kind: { group: '', version: 'v1', kind: 'ConfigMap' } } });
  t.is((await answerReview(bodyOf(configMap), reviewer)).outcome.reason, 'not-a-pod');
  t.is(lookups, 0);
  // A pod: the fresh path looks its namespace up once; held from then on, the pod is remembered.
  for (let n = 0; n < 4; n++) t.is((await answerReview(bodyOf(text), reviewer)).outcome.decision, 'patched');
  t.is(reviewer.answers.hits, 1, 'looked up at the first, seen at the second, remembered at the third, answered at the fourth');
});

test('property: a value the byte walk takes for one JSON value (sameJsonShape) is one, and strings changed for plain ones are taken', async (t) => {
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  const parses = (bytes: Buffer) => {
    try {
      JSON.parse(utf8.decode(bytes));
      return true;
    } catch {
      return false;
    }
  };
  // Any edit of a JSON value's bytes: never taken for JSON when it is not.
  fc.assert(
    fc.property(
      fc.jsonValue({ maxDepth: 3 }),
      fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 3 }),
      (value, edits) => {
        const known = Buffer.from(JSON.stringify(value));
        const text = Buffer.from(known);
        for (const [at, byte] of edits) if (text.length > 0) text[at % text.length] = byte;
        return !sameJsonShape(known, text) || parses(text);
      },
    ),
    { numRuns: 20_000, seed: 21 },
  );
  // Insertions and deletions too (lengths differ).
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 3 }), fc.nat(), fc.uint8Array({ maxLength: 4 }), fc.nat({ max: 3 }), (value, at, inserted, removed) => {
      const known = Buffer.from(JSON.stringify(value));
      const cut = at % (known.length + 1);
      const text = Buffer.concat([known.subarray(0, cut), Buffer.from(inserted), known.subarray(Math.min(known.length, cut + removed))]);
      return !sameJsonShape(known, text) || parses(text);
    }),
    { numRuns: 20_000, seed: 22 },
  );
  // managedFields of two pods of one ReplicaSet: only the times differ, and the walk takes them.
  const fields = (time: string) => Buffer.from(JSON.stringify(controllerManagedFields({ spec: { containers: [{ name: 'app', image: 'a' }] } }, time)));
  t.true(sameJsonShape(fields('2026-11-22T00:00:01Z'), fields('2026-11-23T10:11:12Z')));
  t.true(sameJsonShape(Buffer.from('"a\\"b\\u00e9"'), Buffer.from('"plain"')));
  t.false(sameJsonShape(Buffer.from('"é"'), Buffer.from([0x22, 0xc3, 0x78, 0x22])), 'half a character');
  t.false(sameJsonShape(Buffer.from('["a"]'), Buffer.from('["a" ]')), 'whitespace is a parse away');
  t.false(sameJsonShape(Buffer.from('"ab"'), Buffer.from('"a"b"')));
  // A difference inside a \u escape's hex digits: never taken, whatever follows.
  for (const [known, text] of [
    ['"\\u0041"', '"\\uZ041"'],
    ['"\\u0041"', '"\\u"'],
    ['"\\u0041"', '"\\u00"'],
    ['"aa\\u0041"', '"aa\\uu0041"'],
    [' {"a":"\\u00e9x"} ', ' {"a":"\\u00zzzzzzz"} '],
  ])
    t.false(sameJsonShape(Buffer.from(known!), Buffer.from(text!)), `${known} → ${text}`);
  // Any edit of a value holding \u escapes: never taken for JSON when it is not.
  const escaped = fc.stringMatching(/^([a-z]|\\u[0-9a-f]{4}|\\["\\/nt])*$/).map((inner) => `"${inner}"`);
  fc.assert(
    fc.property(
      fc.array(escaped, { minLength: 1, maxLength: 4 }),
      fc.nat(),
      fc.uint8Array({ maxLength: 3 }),
      fc.nat({ max: 2 }),
      (strings, at, inserted, removed) => {
        const known = Buffer.from(`[${strings.join(',')}]`);
        const cut = at % (known.length + 1);
        const text = Buffer.concat([known.subarray(0, cut), Buffer.from(inserted), known.subarray(Math.min(known.length, cut + removed))]);
        return !sameJsonShape(known, text) || parses(text);
      },
    ),
    { numRuns: 30_000, seed: 23 },
  );
});

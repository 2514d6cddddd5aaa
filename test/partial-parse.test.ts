/**
 * A review is parsed without what no decision reads (its pod's managedFields): the answer is
 * the answer of the whole parse, byte for byte, over the corpus and generated pods; the byte
 * check that stands in for the parse of a value left out (isOneJsonValue) takes exactly what
 * JSON.parse takes; and a body is refused exactly when the whole parse refuses it, with the
 * same message.
 */
import test from 'ava';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { createReviewer, mutate, unreadPaths, type MutateDeps } from '../src/admission/mutate.js';
import { RequestError } from '../src/errors.js';
import { jsonBody, maxJsonDepth, parseJsonBytesWithout } from '../src/http/body.js';
import { compileKeyPaths, isOneJsonValue, spansAt } from '../src/k8s/json.js';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { controllerManagedFields, createReview, prepareCreate } from './helpers/apiserver.js';
import { loadCorpus } from './helpers/corpus.js';

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** What the whole parse makes of bytes: the value, or the refusal's message. */
function wholeParse(bytes: Uint8Array): { value?: unknown; refusal?: string } {
  try {
    return { value: jsonBody(Buffer.from(bytes)).json() };
  } catch (err) {
    if (err instanceof RequestError) return { refusal: err.message };
    throw err;
  }
}

const parsesAsJson = (bytes: Uint8Array, start: number, end: number): boolean => {
  try {
    JSON.parse(utf8.decode(bytes.subarray(start, end)));
    return true;
  } catch {
    return false;
  }
};

const paths = compileKeyPaths(unreadPaths);

test('property: the byte check takes a value for one JSON value exactly when JSON.parse does', (t) => {
  // JSON.parse's view of the bytes, beyond UTF-8 (which the caller checks): a span of ASCII and of valid UTF-8 text.
  const agrees = (bytes: Uint8Array) => {
    let utf8Ok = true;
    try {
      utf8.decode(bytes);
    } catch {
      utf8Ok = false;
    }
    if (!utf8Ok) return true;
    return isOneJsonValue(bytes, 0, bytes.length, maxJsonDepth) === parsesAsJson(bytes, 0, bytes.length);
  };
  // Edits of JSON values, byte by byte.
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 4 }), fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 127 })), { maxLength: 3 }), (value, edits) => {
      const bytes = Buffer.from(` ${JSON.stringify(value, null, value === null ? 0 : 1)}\n`);
      for (const [at, byte] of edits) bytes[at % bytes.length] = byte;
      return agrees(bytes);
    }),
    { numRuns: 30_000, seed: 38 },
  );
  // Insertions and deletions of JSON's own characters.
  const piece = fc.constantFrom('{', '}', '[', ']', ',', ':', '"', '\\', '\\u', '0', '-', '.', 'e', '+', 'true', 'nul', ' ', '\t', '\u0001', 'é');
  fc.assert(
    fc.property(fc.jsonValue({ maxDepth: 3 }), fc.nat(), fc.array(piece, { maxLength: 3 }), fc.nat({ max: 3 }), (value, at, inserted, removed) => {
      const text = JSON.stringify(value);
      const cut = at % (text.length + 1);
      return agrees(Buffer.from(text.slice(0, cut) + inserted.join('') + text.slice(cut + removed)));
    }),
    { numRuns: 30_000, seed: 39 },
  );
  // Numbers and literals, the grammar's corners.
  for (const text of [
    '0',
    '-0',
    '01',
    '-',
    '1.',
    '.5',
    '1e',
    '1e+',
    '1E-2',
    '-0.0e0',
    '00',
    '1.5e3',
    'tru',
    'true',
    'truee',
    'nulll',
    '"\\u12"',
    '"\\uabcd"',
    '"\\x"',
    '[]',
    '{}',
    '[,]',
    '{"a"}',
    '{"a":1,}',
    '[1 2]',
    ' ',
    '',
  ]) {
    t.is(isOneJsonValue(Buffer.from(text), 0, text.length, maxJsonDepth), parsesAsJson(Buffer.from(text), 0, text.length), JSON.stringify(text));
  }
  // Nothing past the span is read: a value cut short is not one, whatever follows it.
  const text = Buffer.from('[{"a":"bc"},12] trailing');
  for (let end = 0; end <= 15; end++) t.is(isOneJsonValue(text, 0, end, maxJsonDepth), end === 15, `ends at ${end}`);
  t.false(isOneJsonValue(Buffer.from('[[[1]]]'), 0, 7, 2), 'deeper than allowed');
});

/** Reviews as the API server sends them: a pod with its controller's managedFields. */
function review(body: Record<string, any>, namespace: string, uid = 'partial-parse'): Buffer {
  const pod = prepareCreate(body, namespace);
  return Buffer.from(JSON.stringify(createReview(pod, { namespace, uid })));
}

test('property: left out, the managedFields read as null, and every edit of them is refused exactly as the whole parse refuses it', (t) => {
  const corpus = loadCorpus();
  const bodies = corpus.map((p) => review(p.body, p.namespace));
  let leftOut = 0;
  for (const bytes of bodies) {
    const scan = jsonBody(bytes, paths).scan;
    const spans = spansAt(scan, paths, unreadPaths);
    if (spans.length > 0) leftOut++;
    const partial = parseJsonBytesWithout(bytes, spans) as Record<string, any>;
    const whole = wholeParse(bytes).value as Record<string, any>;
    whole.request.object.metadata.managedFields = null;
    t.deepEqual(partial, whole);
  }
  t.is(leftOut, bodies.length, 'every corpus review has managedFields, and each was left out');
  // Edits anywhere in a review (in managedFields most often): the same value or the same refusal.
  fc.assert(
    fc.property(
      fc.nat({ max: bodies.length - 1 }),
      fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 3 }),
      fc.boolean(),
      (which, edits, inManagedFields) => {
        const bytes = Buffer.from(bodies[which]!);
        const [start, end] = spansAt(jsonBody(bytes, paths).scan, paths, unreadPaths);
        for (const [at, byte] of edits) bytes[inManagedFields ? start! + (at % (end! - start!)) : at % bytes.length] = byte;
        const scan = (() => {
          try {
            return jsonBody(bytes, paths).scan;
          } catch {
            return undefined;
          }
        })();
        if (!scan) return true;
        const whole = wholeParse(bytes);
        let partial: { value?: unknown; refusal?: string };
        try {
          partial = { value: parseJsonBytesWithout(bytes, spansAt(scan, paths, unreadPaths)) };
        } catch (err) {
          partial = { refusal: (err as Error).message };
        }
        if (whole.refusal !== undefined) return partial.refusal === whole.refusal;
        const expected = whole.value as Record<string, any>;
        // The scan found the managedFields where the parse does, unless the edit moved them.
        const request = (expected as any)?.request;
        const found = (partial.value as any)?.request?.object?.metadata;
        if (found && request?.object?.metadata && found.managedFields === null && Object.hasOwn(request.object.metadata, 'managedFields'))
          request.object.metadata.managedFields = null;
        return isDeepStrictEqual(partial.value, expected);
      },
    ),
    { numRuns: 3_000, seed: 40 },
  );
});

test('property: the answer from the parse without managedFields is the answer from the whole parse, byte for byte', async (t) => {
  const set = await loadTemplateDir('templates');
  const corpus = loadCorpus();
  const labels = Object.fromEntries(['shop', ...corpus.map((p) => p.namespace)].map((ns) => [ns, { 'sidecar-injector.io/injection': 'enabled' }]));
  const deps: MutateDeps = { templates: () => set, namespaces: createLocalNamespaceSource(labels) };
  const reviewer = createReviewer(deps);
  let compared = 0;
  let patched = 0;
  const compare = async (bytes: Buffer) => {
    const body = jsonBody(bytes, reviewer.keyPaths);
    t.true(spansAt(body.scan, reviewer.keyPaths!, unreadPaths).length > 0);
    const partial = await reviewer.answer(body, 'all');
    const whole = await mutate(JSON.parse(bytes.toString('utf8')), deps);
    if (!partial.answer.equals(Buffer.from(JSON.stringify(whole.response)))) t.fail(`answer differs:\n${partial.answer}\n${JSON.stringify(whole.response)}`);
    const { events: ea, ...ra } = partial.outcome;
    const { events: eb, ...rb } = whole;
    if (!isDeepStrictEqual(ra, rb) || !isDeepStrictEqual(ea?.(), eb?.())) t.fail('outcome or events differ');
    compared++;
    if (whole.decision === 'patched') patched++;
  };
  for (const { body, namespace } of corpus) {
    await compare(review(body, namespace));
    await compare(
      review({ ...body, metadata: { ...body.metadata, annotations: { ...body.metadata?.annotations, 'sidecar-injector.io/templates': 'proxy' } } }, namespace),
    );
  }
  // Generated pods: labels, annotations (the ledger and overrides among them), containers, resources.
  const pods = fc
    .record({
      labels: fc.dictionary(fc.constantFrom('app', 'logging.example.com/ship', 'sidecar-injector.io/inject'), fc.constantFrom('web', 'false', 'disabled'), {
        maxKeys: 3,
      }),
      annotations: fc.dictionary(
        fc.constantFrom('sidecar-injector.io/templates', 'log-shipper.sidecar-injector.io/memoryLimit', 'sidecar-injector.io/status', 'note'),
        fc.constantFrom('proxy', 'log-shipper', '128Mi', 'lots', '{"v":1,"templates":{}}', 'é\\"x'),
        { maxKeys: 3 },
      ),
      names: fc.uniqueArray(fc.constantFrom('web', 'worker', 'proxy', 'log-shipper'), { minLength: 1, maxLength: 3 }),
      memory: fc.option(fc.constantFrom('64Mi', '1Gi'), { nil: undefined }),
    })
    .map((g) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { generateName: 'web-5d8f-', labels: g.labels, annotations: g.annotations },
      spec: {
        containers: g.names.map((name) => ({
          name,
          image: `example/${name}:1`,
          ...(g.memory ? { resources: { requests: { cpu: '100m', memory: g.memory }, limits: { cpu: '100m', memory: g.memory } } } : {}),
        })),
      },
    }));
  await fc.assert(
    fc.asyncProperty(pods, fc.constantFrom('2026-11-22T00:00:01Z', '2026-11-27T10:11:12Z'), async (body, time) => {
      const pod = prepareCreate(body, 'shop');
      pod.metadata.managedFields = controllerManagedFields(pod, time);
      await compare(Buffer.from(JSON.stringify(createReview(pod, { namespace: 'shop', uid: `uid-${time}` }))));
    }),
    { numRuns: 300, seed: 41 },
  );
  t.true(compared >= 2 * corpus.length + 300, `compared ${compared}`);
  t.true(patched > compared / 3, `${patched} of ${compared} patched`);
});

test('a value left out that is shorter than null loses nothing of the body: bytes after the document are refused at every size', (t) => {
  // `"managedFields":1` is replaced by four bytes where one stood: the text grows by three.
  for (const size of [1_000, 65_533, 65_536, 140_000, 200_000, 300_000]) {
    for (const [value, tail] of [
      ['1', 'abc'],
      ['[]', '\u00a0'],
      ['"a"', '\u000b'],
      ['[1]', 'x'],
    ] as const) {
      const head = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"shop","object":{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"web-","annotations":{"pad":"`;
      const rest = `"},"managedFields":${value}},"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}${tail}`;
      const bytes = Buffer.from(head + 'p'.repeat(Math.max(0, size - head.length - rest.length)) + rest);
      const spans = spansAt(jsonBody(bytes, paths).scan, paths, unreadPaths);
      t.is(spans.length, 2, `the value was found (${size} bytes)`);
      const whole = wholeParse(bytes);
      t.truthy(whole.refusal, 'the whole parse refuses bytes after the document');
      t.throws(() => parseJsonBytesWithout(bytes, spans), { message: whole.refusal }, `${size} bytes, ${JSON.stringify(value)} then ${JSON.stringify(tail)}`);
    }
  }
});

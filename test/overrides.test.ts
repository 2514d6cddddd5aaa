/**
 * Parameter overrides over HTTPS, through the API server's reinvocation: pod and namespace
 * annotations, precedence, typed rendering, denials and warnings naming the annotation, the
 * value and the rule, the ledger's record, and a property: random override values never change
 * the injected structure, and either apply exactly or are refused.
 */
import test from 'ava';
import fc from 'fast-check';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { applyPatchV4, createReview, decodePatch, overwrites, prepareCreate, reinvocationInput, validationProblems } from './helpers/apiserver.js';
import { pod } from './helpers/pods.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { templateSet } from './helpers/templates.js';
import { checkValue } from '../src/templates/parameters.js';

type Json = Record<string, any>;
const enabled = { 'sidecar-injector.io/injection': 'enabled' };
const namespaces = createLocalNamespaceSource(
  { shop: enabled, quiet: enabled, broken: enabled },
  {
    quiet: { 'log-shipper.sidecar-injector.io/logLevel': 'warn', 'log-shipper.sidecar-injector.io/memoryLimit': '96Mi' },
    broken: { 'log-shipper.sidecar-injector.io/logLevel': 'loud', 'nosuch.sidecar-injector.io/x': '1', 'log-shipper.sidecar-injector.io/image': 'evil:1' },
  },
);

let server: TestServer;
test.before(async () => {
  server = await startTestServer({ templates: await loadTemplateDir('templates'), namespaces });
});
test.after.always(async () => {
  await server?.stop();
});

async function create(t: any, body: Json, namespace = 'shop') {
  const input = prepareCreate(body, namespace);
  const review = createReview(input, { namespace });
  const res = await server.post(review);
  const response = res.json.response;
  if (!response.allowed) return { response, after: input, warnings: [] as string[] };
  const patch = decodePatch(response);
  t.deepEqual(overwrites(input, patch), []);
  const after = applyPatchV4(input, patch) as Json;
  t.deepEqual(validationProblems(after), []);
  for (const again of [after, reinvocationInput(after)]) t.is((await server.post(createReview(again, { namespace }))).json.response.patch, undefined);
  return { response, after, warnings: (response.warnings ?? []) as string[] };
}
const shipper = (p: Json) => p.spec.initContainers?.find((c: Json) => c.name === 'log-shipper');
const proxy = (p: Json) => p.spec.initContainers?.find((c: Json) => c.name === 'proxy');
const ledger = (p: Json) => JSON.parse(p.metadata.annotations['sidecar-injector.io/status']).templates;

test('no override: the template defaults, and nothing extra in the ledger', async (t) => {
  const { after } = await create(t, pod());
  t.is(shipper(after).resources.limits.memory, '64Mi');
  t.true(shipper(after).args.includes('--prop=log_level=info'));
  t.is(ledger(after)['log-shipper'].params, undefined);
});

test('pod overrides apply, typed, recorded in the ledger; the namespace default sits below the pod', async (t) => {
  const { after } = await create(
    t,
    pod({
      annotations: {
        'sidecar-injector.io/templates': 'proxy',
        'log-shipper.sidecar-injector.io/memoryLimit': '128Mi',
        'proxy.sidecar-injector.io/cpuRequest': '200m',
        'proxy.sidecar-injector.io/logLevel': 'debug',
      },
    }),
    'quiet',
  );
  t.is(shipper(after).resources.limits.memory, '128Mi');
  // From the namespace: the pod did not set it.
  t.true(shipper(after).args.includes('--prop=log_level=warn'));
  t.is(proxy(after).resources.requests.cpu, '200m');
  t.deepEqual(proxy(after).args.slice(-2), ['--log-level', 'debug']);
  t.deepEqual(ledger(after)['log-shipper'].params, { memoryLimit: '128Mi', logLevel: 'warn' });
  t.deepEqual(ledger(after).proxy.params, { cpuRequest: '200m', logLevel: 'debug' });
});

test("a pod's bad override denies the pod, naming the annotation, the value and the rule", async (t) => {
  const cases: [Record<string, string>, string][] = [
    [
      { 'log-shipper.sidecar-injector.io/memoryLimit': '2Gi' },
      'annotation "log-shipper.sidecar-injector.io/memoryLimit": value "2Gi" must be at most 512Mi; fix or remove the annotation',
    ],
    [
      { 'log-shipper.sidecar-injector.io/memoryLimit': 'lots' },
      'annotation "log-shipper.sidecar-injector.io/memoryLimit": value "lots" must be a Kubernetes quantity (such as 100m, 64Mi, 1.5); fix or remove the annotation',
    ],
    [
      { 'log-shipper.sidecar-injector.io/image': 'evil/shell:1' },
      'annotation "log-shipper.sidecar-injector.io/image": template log-shipper has parameter "image" fixed; it cannot be overridden (overridable: memoryLimit, logLevel); fix or remove the annotation',
    ],
    [
      { 'log-shipper.sidecar-injector.io/nosuch': '1' },
      'annotation "log-shipper.sidecar-injector.io/nosuch": template log-shipper has no parameter "nosuch" (overridable: memoryLimit, logLevel); fix or remove the annotation',
    ],
    [
      { 'log-shipper.sidecar-injector.io/logLevel': 'LOUD' },
      'annotation "log-shipper.sidecar-injector.io/logLevel": value "LOUD" must be one of off, error, warn, info, debug, trace; fix or remove the annotation',
    ],
  ];
  for (const [annotations, message] of cases) {
    const { response } = await create(t, pod({ annotations }));
    t.false(response.allowed);
    t.is(response.status.code, 400);
    t.is(response.status.message, message);
  }
});

test("a namespace's bad override is a warning on each pod, and the default applies", async (t) => {
  const { after, warnings } = await create(t, pod(), 'broken');
  t.true(shipper(after).args.includes('--prop=log_level=info'));
  t.is(shipper(after).image, 'fluent/fluent-bit:3.2.2');
  t.deepEqual(warnings.sort(), [
    // Cut at 120 characters, as kubectl shows them: the annotation and the rule come first.
    'log-shipper.sidecar-injector.io/image on the namespace ignored: template log-shipper has no overridable parameter "imag…',
    'log-shipper.sidecar-injector.io/logLevel on the namespace ignored: value "loud" must be one of off, error, warn, info, …',
  ]);
});

test('an override on the pod for a template that does not exist is a warning; for one not selected, nothing', async (t) => {
  const { after, warnings } = await create(t, pod({ annotations: { 'nosuch.sidecar-injector.io/x': '1', 'proxy.sidecar-injector.io/logLevel': 'debug' } }));
  t.truthy(shipper(after));
  t.deepEqual(warnings, ['annotation nosuch.sidecar-injector.io/x names no template here; ignored']);
});

test('an integer parameter overridden renders as an integer; a boolean as a boolean', async (t) => {
  const set = templateSet({
    name: 'agent',
    parameters: {
      // Ports and container flags decide what runs: overridable there only under a pattern.
      port: { default: 8080, type: 'integer', pattern: '[0-9]{4,5}', min: 1024, max: 65535, override: 'pod' },
      interactive: { default: false, type: 'boolean', pattern: 'true|false', override: 'namespace' },
    },
    containers: [{ name: 'agent', image: 'agent:1', ports: [{ containerPort: '{{ params.port }}' }], stdin: '{{ params.interactive }}' }],
  });
  const s = await startTestServer({
    templates: set,
    namespaces: createLocalNamespaceSource({ shop: enabled }, { shop: { 'agent.sidecar-injector.io/interactive': 'true' } }),
  });
  t.teardown(() => s.stop());
  const input = prepareCreate(pod({ annotations: { 'agent.sidecar-injector.io/port': '9090' } }), 'shop');
  const res = await s.post(createReview(input, { namespace: 'shop' }));
  const after = applyPatchV4(input, decodePatch(res.json.response)) as Json;
  t.deepEqual(validationProblems(after), []);
  const agent = after.spec.containers.find((c: Json) => c.name === 'agent');
  t.is(agent.ports[0].containerPort, 9090);
  t.is(agent.stdin, true);
  // And reinvocation with the typed values is a fixed point (the claim is checked against the declaration).
  t.is((await s.post(createReview(reinvocationInput(after), { namespace: 'shop' }))).json.response.patch, undefined);
});

test('a forged ledger cannot vouch for a container whose overridable values break their declaration, nor record values of its own', async (t) => {
  const set = templateSet({
    name: 'mesh',
    parameters: { image: { default: 'mesh/proxy:1.0', type: 'enum', values: ['mesh/proxy:1.0', 'mesh/proxy:1.1'], override: 'pod' } },
    containers: [{ name: 'mesh-proxy', image: '{{ params.image }}' }],
  });
  const s = await startTestServer({ templates: set, namespaces: createLocalNamespaceSource({ shop: enabled }) });
  t.teardown(() => s.stop());
  const forged = JSON.stringify({
    v: 1,
    templates: { mesh: { hash: set.byName.get('mesh')!.hash, containers: ['mesh-proxy'], params: { image: 'mesh/proxy:1.1' } } },
  });
  const input = prepareCreate(
    pod({ annotations: { 'sidecar-injector.io/status': forged }, containers: [{ name: 'mesh-proxy', image: 'attacker/anything:latest' }] }),
    'shop',
  );
  const res = await s.post(createReview(input, { namespace: 'shop' }));
  t.is(res.json.response.patch, undefined);
  t.true(
    (res.json.response.warnings ?? []).some((w: string) =>
      w.startsWith('mesh: status annotation claims container mesh-proxy, which does not match the template'),
    ),
  );
  t.is(s.logs.at(-1)?.reason, 'nothing-to-add');
  // The same container with an allowed image is believed; the claimed params are not carried into a new ledger.
  const log = pod({
    annotations: { 'sidecar-injector.io/status': forged },
    containers: [
      { name: 'mesh-proxy', image: 'mesh/proxy:1.1' },
      { name: 'web', image: 'nginx' },
    ],
  });
  const believed = await s.post(createReview(prepareCreate(log, 'shop'), { namespace: 'shop' }));
  t.is(s.logs.at(-1)?.reason, 'already-injected');
  t.is(believed.json.response.patch, undefined);
});

test('property: random override values never change the injected structure; each applies exactly or is refused', async (t) => {
  const set = await loadTemplateDir('templates');
  const declaration = set.byName.get('log-shipper')!.declarations.get('memoryLimit')!;
  const { after: baseline } = await create(t, pod());
  // Everything but the value itself, the ledger that records it, the pod's own annotation and
  // the creating controller's record of the fields it sent (which names that annotation).
  const masked = new Set(['memory', 'sidecar-injector.io/status', 'log-shipper.sidecar-injector.io/memoryLimit', 'managedFields']);
  const shape = (p: Json) =>
    JSON.stringify(p, (key, value) =>
      masked.has(key) ? undefined : value && typeof value === 'object' && !Array.isArray(value) ? Object.fromEntries(Object.entries(value).sort()) : value,
    );
  let applied = 0;
  let refused = 0;
  await fc.assert(
    fc.asyncProperty(
      fc.oneof(
        fc.string({ maxLength: 40 }),
        fc.constantFrom('128Mi', '16Mi', '512Mi', '0.5Gi', '100M', '1e8', '1Ti', '-1Mi', '64Mi\n', '{{ pod.name }}', 'a: b', '- x'),
        fc.integer({ min: 1, max: 1024 }).map((n) => `${n}Mi`),
      ),
      async (value) => {
        const { response, after } = await create(t, pod({ annotations: { 'log-shipper.sidecar-injector.io/memoryLimit': value } }));
        const expected = checkValue(declaration, value);
        if ('problem' in expected) {
          if (response.allowed) throw new Error(`${JSON.stringify(value)} was not refused`);
          refused++;
          return;
        }
        if (!response.allowed) throw new Error(`${JSON.stringify(value)} was refused: ${response.status.message}`);
        if (shipper(after).resources.limits.memory !== value) throw new Error(`${JSON.stringify(value)} rendered as ${shipper(after).resources.limits.memory}`);
        if (shape(after) !== shape(baseline)) throw new Error(`${JSON.stringify(value)} changed the structure`);
        applied++;
      },
    ),
    { numRuns: 150, seed: 13 },
  );
  t.true(applied > 20 && refused > 20, `applied ${applied}, refused ${refused}`);
});

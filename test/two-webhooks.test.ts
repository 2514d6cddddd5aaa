/**
 * Required and optional templates, two webhooks (CONTRACT R-01: mutating webhooks are called in
 * order, and with IfNeeded each again after the others): over HTTPS, /mutate/required injects
 * only failurePolicy Fail templates and /mutate/optional only Ignore ones; together, in either
 * order and re-invoked, they inject each template exactly once and reach the same pod as the
 * single /mutate path.
 */
import test from 'ava';
import { loadTemplateDir } from '../src/templates/load.js';
import {
  applyDefaults,
  applyPatchV4,
  applyServiceAccountPlugin,
  createReview,
  decodePatch,
  overwrites,
  prepareCreate,
  reinvocationInput,
  tokenMountPath,
  validationProblems,
} from './helpers/apiserver.js';
import { loadCorpus } from './helpers/corpus.js';
import { optedIn, pod } from './helpers/pods.js';
import { startTestServer, type TestServer } from './helpers/server.js';

type Json = Record<string, any>;
const corpus = loadCorpus();
let server: TestServer;
test.before(async () => {
  server = await startTestServer({ templates: await loadTemplateDir('templates'), namespaces: optedIn('shop', ...new Set(corpus.map((p) => p.namespace))) });
});
test.after.always(async () => {
  await server?.stop();
});

/** One call of one webhook as the API server makes it: the patch applied (only adds), the pod valid. */
async function call(
  t: any,
  path: string,
  input: Json,
  namespace: string,
): Promise<{ pod: Json; patched: boolean; reason: string; detail: string; warnings: string[] }> {
  const review = createReview(input, { namespace });
  const res = await server.post(review, `${path}?timeout=5s`);
  t.is(res.status, 200);
  t.true(res.json.response.allowed, JSON.stringify(res.json.response.status));
  const patch = decodePatch(res.json.response);
  t.deepEqual(overwrites(input, patch), []);
  const output = applyPatchV4(input, patch) as Json;
  t.deepEqual(validationProblems(output), []);
  // Tests run concurrently on one server: the review's own log line, by uid.
  const line = server.logs.find((l) => l.uid === review.request.uid)!;
  t.is(line.webhook, path === '/mutate' ? 'all' : path.slice('/mutate/'.length));
  return { pod: output, patched: patch.length > 0, reason: line.reason as string, detail: line.detail as string, warnings: res.json.response.warnings ?? [] };
}

const sidecars = (p: Json) =>
  [...(p.spec.initContainers ?? []), ...p.spec.containers].map((c: Json) => c.name).filter((n: string) => n === 'proxy' || n === 'log-shipper');

test('each path injects only its own class; a pod whose templates are all of the other class is left to the other webhook', async (t) => {
  const body = prepareCreate(pod({ annotations: { 'sidecar-injector.io/templates': 'proxy' } }), 'shop');
  const required = await call(t, '/mutate/required', body, 'shop');
  t.deepEqual(sidecars(required.pod), ['proxy']);
  const optional = await call(t, '/mutate/optional', body, 'shop');
  t.deepEqual(sidecars(optional.pod), ['log-shipper']);
  // Only the log shipper applies: the required webhook has nothing to do and says why.
  const plain = prepareCreate(pod(), 'shop');
  const none = await call(t, '/mutate/required', plain, 'shop');
  t.false(none.patched);
  t.is(none.reason, 'other-webhook');
  t.is(none.detail, 'log-shipper is injected by the other webhook (this one injects failurePolicy Fail templates)');
});

for (const { name, namespace, body } of corpus) {
  test(`${name}: both webhooks in either order, re-invoked, equal the single path and inject each template once`, async (t) => {
    const start = prepareCreate(body, namespace);
    // The required proxy declares a port: a pod on the node's network that asks for it is refused (qos.test.ts).
    if (start.spec.hostNetwork !== true) start.metadata.annotations = { ...(start.metadata.annotations ?? {}), 'sidecar-injector.io/templates': 'proxy' };
    const single = (await call(t, '/mutate', start, namespace)).pod;
    const finals: Json[] = [];
    for (const order of [
      ['/mutate/required', '/mutate/optional'],
      ['/mutate/optional', '/mutate/required'],
    ]) {
      let current = start;
      for (const path of order) current = (await call(t, path, current, namespace)).pod;
      // Reinvocation: the plugins and defaulting run again, then each webhook again, in order.
      current = reinvocationInput(current);
      for (const path of order) {
        const again = await call(t, path, current, namespace);
        t.false(again.patched, `${path} patched on reinvocation after ${order.join(' → ')}`);
      }
      finals.push(current);
    }
    // Each sidecar once, whatever the order.
    for (const final of finals) {
      const names = sidecars(final);
      t.is(names.filter((n: string) => n === 'log-shipper').length, 1);
      t.true(names.filter((n: string) => n === 'proxy').length <= 1);
    }
    // The same pod as one webhook for all, up to the order in which annotations and volumes
    // were added (a map, and a list keyed by name: the order means nothing to the kubelet).
    const normalised = (p: Json) => ({
      ...p,
      metadata: { ...p.metadata, annotations: Object.fromEntries(Object.entries(p.metadata.annotations ?? {}).sort()) },
      spec: { ...p.spec, volumes: [...(p.spec.volumes ?? [])].sort((a: Json, b: Json) => (a.name < b.name ? -1 : 1)) },
    });
    t.deepEqual(normalised(reinvocationInput(finals[0]!)), normalised(reinvocationInput(finals[1]!)));
    t.deepEqual(normalised(reinvocationInput(finals[0]!)), normalised(reinvocationInput(single)));
  });
}

const ledgerContainers = (p: Json): Set<string> => {
  const ledger = JSON.parse(p.metadata.annotations?.['sidecar-injector.io/status'] ?? '{"templates":{}}');
  return new Set(Object.values(ledger.templates as Record<string, Json>).flatMap((e) => [...(e.containers ?? []), ...(e.initContainers ?? [])]));
};

/** The pod without the token mounts the injector gave its sidecars: what the plugin would have mounted into. */
function withoutOurTokenMounts(p: Json): Json {
  const out = structuredClone(p);
  const ours = ledgerContainers(out);
  for (const c of [...(out.spec.initContainers ?? []), ...out.spec.containers]) {
    if (!ours.has(c.name)) continue;
    c.volumeMounts = (c.volumeMounts ?? []).filter((m: Json) => m.mountPath !== tokenMountPath);
    if (c.volumeMounts.length === 0) delete c.volumeMounts;
  }
  return out;
}

// The sidecars carry the ServiceAccount plugin's token mount (k8s/service-account-token.ts): its
// run after the webhooks changes nothing, so the API server calls neither webhook again for it,
// and the pod is the one that run would have made from the sidecars without the mount.
let tokenMounts = 0;
for (const { name, namespace, body } of corpus) {
  test.serial(`${name}: after both webhooks the ServiceAccount plugin changes nothing, and the pod is the one it would have made`, async (t) => {
    const start = prepareCreate(body, namespace);
    if (start.spec.hostNetwork !== true) start.metadata.annotations = { ...(start.metadata.annotations ?? {}), 'sidecar-injector.io/templates': 'proxy' };
    let stored = start;
    for (const path of ['/mutate/required', '/mutate/optional']) stored = applyDefaults((await call(t, path, stored, namespace)).pod);
    t.deepEqual(applyServiceAccountPlugin(structuredClone(stored)), stored);
    t.deepEqual(applyDefaults(applyServiceAccountPlugin(withoutOurTokenMounts(stored))), stored);
    const ours = ledgerContainers(stored);
    for (const c of [...(stored.spec.initContainers ?? []), ...stored.spec.containers])
      if (ours.has(c.name) && (c.volumeMounts ?? []).some((m: Json) => m.mountPath === tokenMountPath)) tokenMounts++;
  });
}

test.serial('the corpus exercises the token mount: sidecars carry the mount the plugin gives', (t) => {
  t.log(`${tokenMounts} sidecars of the corpus carry the token mount`);
  t.true(tokenMounts >= 20);
});

test('a template declares its class; anything but Fail or Ignore is refused at load', async (t) => {
  const { compileTemplate } = await import('../src/templates/compile.js');
  const base = { name: 'a', containers: [{ name: 'a', image: 'a' }] };
  t.is(compileTemplate(base, 'a.yaml').template?.failurePolicy, 'Fail');
  t.is(compileTemplate({ ...base, failurePolicy: 'Ignore' }, 'a.yaml').template?.failurePolicy, 'Ignore');
  t.deepEqual(
    compileTemplate({ ...base, failurePolicy: 'ignore' }, 'a.yaml').problems.map((p) => `${p.field}: ${p.message}`),
    ['failurePolicy: must be "Fail" (required: pods wait for the injector) or "Ignore" (optional)'],
  );
});

test('the ledger a second webhook writes keeps the parameters the first one recorded: each call records the overrides of every template it keeps', async (t) => {
  const start = prepareCreate(
    pod({
      annotations: {
        'sidecar-injector.io/templates': 'proxy',
        'proxy.sidecar-injector.io/cpuRequest': '100m',
        'log-shipper.sidecar-injector.io/memoryLimit': '128Mi',
      },
    }),
    'shop',
  );
  const ledger = (p: Json) => JSON.parse(p.metadata.annotations['sidecar-injector.io/status']);
  const single = ledger((await call(t, '/mutate', start, 'shop')).pod);
  t.deepEqual(single.templates.proxy.params, { cpuRequest: '100m' });
  t.deepEqual(single.templates['log-shipper'].params, { memoryLimit: '128Mi' });
  for (const order of [
    ['/mutate/required', '/mutate/optional'],
    ['/mutate/optional', '/mutate/required'],
  ]) {
    let current = start;
    for (const path of order) current = (await call(t, path, current, 'shop')).pod;
    t.is(current.metadata.annotations['sidecar-injector.io/status'], JSON.stringify(single), order.join(' → '));
  }
});

test('a ledger entry is written in one key order, whichever webhook wrote it last: the call that injects adds keys as it goes, the other rebuilds them', async (t) => {
  const { serializeLedger } = await import('../src/inject/ledger.js');
  const asInjected = {
    hash: 'h',
    params: { a: '1' },
    initContainers: ['i'],
    containers: ['c'],
    annotations: ['x'],
    volumes: ['v'],
    appContainers: { app: { env: ['E'] } },
  };
  const asRebuilt = {
    hash: 'h',
    containers: ['c'],
    initContainers: ['i'],
    volumes: ['v'],
    annotations: ['x'],
    appContainers: { app: { env: ['E'] } },
    params: { a: '1' },
  };
  const text = serializeLedger({ v: 1, templates: { t: asInjected } });
  t.is(serializeLedger({ v: 1, templates: { t: asRebuilt } }), text);
  t.is(
    text,
    '{"v":1,"templates":{"t":{"hash":"h","params":{"a":"1"},"initContainers":["i"],"containers":["c"],"volumes":["v"],"annotations":["x"],"appContainers":{"app":{"env":["E"]}}}}}',
  );
});

import test from 'ava';
import fc from 'fast-check';
import { mutate, type MutateDeps } from '../src/admission/mutate.js';
import { labelKeyProblem } from '../src/k8s/label-syntax.js';
import { optedIn } from './helpers/pods.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { applyPatchV4, createReview, decodePatch, overwrites, prepareCreate, reinvocationInput, validationProblems } from './helpers/apiserver.js';

const namespaces = optedIn('shop');

// Pools that collide on purpose with what the bundled templates add.
const containerNames = ['app', 'web', 'log-shipper', 'proxy', 'worker', 'istio-proxy', 'istio-init'];
const envNames = ['LOG_DIR', 'PORT', 'A', 'POD_NAME'];
const mountPaths = ['/var/log/app', '/data', '/tmp', '/etc/envoy'];
const volumeNames = ['app-logs', 'data', 'proxy-tmp', 'cache'];

const unknownFields = fc.dictionary(fc.constantFrom('x-unknown', 'resizePolicy', 'futureField', 'a/b~c'), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 2 });

const podArbitrary = fc
  .record({
    names: fc.uniqueArray(fc.constantFrom(...containerNames), { minLength: 1, maxLength: 5 }),
    initFlags: fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
    volumes: fc.uniqueArray(fc.constantFrom(...volumeNames), { maxLength: 4 }),
    envs: fc.array(fc.uniqueArray(fc.constantFrom(...envNames), { maxLength: 4 }), { minLength: 5, maxLength: 5 }),
    mounts: fc.array(fc.uniqueArray(fc.constantFrom(...mountPaths), { maxLength: 3 }), { minLength: 5, maxLength: 5 }),
    restartAlways: fc.array(fc.boolean(), { minLength: 5, maxLength: 5 }),
    labels: fc.dictionary(
      fc.constantFrom('app', 'logging.example.com/ship', 'sidecar-injector.io/inject', 'proxy.example.com/injected', 'app.kubernetes.io/name'),
      fc.constantFrom('web', 'false', 'disabled', 'true', ''),
      { maxKeys: 4 },
    ),
    annotations: fc.dictionary(
      // Annotation keys are qualified names (a "~" would make the pod invalid; unknown fields above carry it).
      fc.constantFrom('sidecar-injector.io/templates', 'example.com/a_b.c', 'logging.example.com/shipper', 'sidecar-injector.io/status', 'note'),
      fc.oneof(
        fc.constantFrom('proxy', 'proxy, log-shipper', '', '{"v":1,"templates":{}}', '{"v":1,"templates":{"proxy":{"hash":"x","initContainers":["proxy"]}}}'),
        fc.string({ maxLength: 20 }),
      ),
      { maxKeys: 4 },
    ),
    named: fc.boolean(),
    unknownSpec: unknownFields,
    unknownContainer: unknownFields,
  })
  .map((g) => {
    const init: any[] = [];
    const containers: any[] = [];
    g.names.forEach((name, i) => {
      const container: any = { name, image: `example/${name}:1`, ...g.unknownContainer };
      if (g.envs[i]!.length > 0) container.env = g.envs[i]!.map((e) => ({ name: e, value: 'v' }));
      const mounts = g.volumes.length > 0 ? g.mounts[i]!.map((path, k) => ({ name: g.volumes[k % g.volumes.length]!, mountPath: path })) : [];
      if (mounts.length > 0) container.volumeMounts = mounts;
      const isInit = g.initFlags[i]! && i < g.names.length - 1;
      if (isInit && g.restartAlways[i]) container.restartPolicy = 'Always';
      (isInit ? init : containers).push(container);
    });
    const annotations = { ...g.annotations };
    // A pod can only request templates that exist, or it is denied (tested elsewhere).
    const requested = annotations['sidecar-injector.io/templates'];
    if (requested !== undefined && !/^(proxy|proxy, log-shipper|)$/.test(requested)) delete annotations['sidecar-injector.io/templates'];
    const pod: any = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: g.named ? { name: 'pod-0' } : { generateName: 'pod-abc12-' },
      spec: { ...g.unknownSpec, containers },
    };
    if (Object.keys(g.labels).length > 0) pod.metadata.labels = g.labels;
    if (Object.keys(annotations).length > 0) pod.metadata.annotations = annotations;
    if (init.length > 0) pod.spec.initContainers = init;
    if (g.volumes.length > 0) pod.spec.volumes = g.volumes.map((name) => ({ name, emptyDir: {} }));
    return pod;
  });

let deps: MutateDeps;
test.before(async () => {
  const set = await loadTemplateDir('templates');
  deps = { templates: () => set, namespaces };
});

test('for random pods: the patch applies, only adds, leaves a valid pod, and is a fixed point', async (t) => {
  let patchedCount = 0;
  let deniedCount = 0;
  await fc.assert(
    fc.asyncProperty(podArbitrary, async (body) => {
      const pod = prepareCreate(body, 'shop');
      const before = structuredClone(pod);
      t.deepEqual(validationProblems(pod), [], 'the generated pod itself is valid');
      const first = await mutate(createReview(pod, { namespace: 'shop' }), deps);
      if (!first.response.response.allowed) {
        // A pod whose own container bears the required proxy's name cannot get the proxy: refused, saying so.
        const message = first.response.response.status?.message ?? '';
        const own = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].some((c: any) => c.name === 'proxy');
        if (own && /^required sidecar proxy cannot be injected: proxy not injected: the pod has its own container proxy/.test(message)) {
          deniedCount++;
          return;
        }
        throw new Error(`denied: ${message}`);
      }
      const patch = decodePatch(first.response.response);
      if (patch.length > 0) patchedCount++;
      const overwritten = overwrites(pod, patch);
      if (overwritten.length > 0) throw new Error(`changed what was there: ${overwritten.join('; ')}`);
      const patched = applyPatchV4(pod, patch) as any;
      const problems = validationProblems(patched);
      if (problems.length > 0) throw new Error(`invalid pod after patch: ${problems.join('; ')}`);
      if (JSON.stringify(pod) !== JSON.stringify(before)) throw new Error('the review object was mutated');
      for (const [label, again] of [
        ['same pod', patched],
        ['after reinvocation plugins and defaulting', reinvocationInput(patched)],
      ] as const) {
        const second = await mutate(createReview(again, { namespace: 'shop' }), deps);
        if (second.response.response.patch !== undefined) {
          throw new Error(`${label}: second call patched ${JSON.stringify(decodePatch(second.response.response))}`);
        }
      }
    }),
    { numRuns: 400, seed: 20261122 },
  );
  // The generator must exercise injection, not only skips.
  t.true(patchedCount > 100, `only ${patchedCount} of 400 pods were patched`);
  t.true(deniedCount < 200, `${deniedCount} of 400 pods were refused`);
});

test('hostile label and annotation values never break the patch or the fixed point', async (t) => {
  let validKeys = 0;
  await fc.assert(
    fc.asyncProperty(fc.string({ unit: 'binary', maxLength: 300 }), fc.string({ maxLength: 80 }), async (value, key) => {
      const body: any = {
        metadata: {
          generateName: 'p-',
          labels: { 'app.kubernetes.io/name': 'ok' },
          annotations: { [key || 'k']: value, 'sidecar-injector.io/templates': 'proxy' },
        },
        spec: { containers: [{ name: 'app', image: 'x', env: [{ name: 'V', value }] }] },
      };
      const pod = prepareCreate(body, 'shop');
      const first = await mutate(createReview(pod, { namespace: 'shop' }), deps);
      // A key the API server would refuse is refused before any work, naming the key.
      if (labelKeyProblem((key || 'k').toLowerCase())) {
        if (first.response.response.allowed || first.reason !== 'invalid-pod') throw new Error(`invalid annotation key ${JSON.stringify(key)} was not refused`);
        return;
      }
      validKeys++;
      const patched = applyPatchV4(pod, decodePatch(first.response.response)) as any;
      if (decodePatch(first.response.response).length === 0) throw new Error('nothing injected');
      if (validationProblems(patched).length > 0) throw new Error('invalid pod');
      if (patched.spec.containers[0].env[0].value !== value) throw new Error('user env changed');
      const second = await mutate(createReview(reinvocationInput(patched), { namespace: 'shop' }), deps);
      if (second.response.response.patch !== undefined) throw new Error('not a fixed point');
    }),
    { numRuns: 200, seed: 7 },
  );
  t.true(validKeys > 20, `only ${validKeys} of 200 keys were valid`);
});

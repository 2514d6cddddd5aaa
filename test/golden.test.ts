/**
 * Golden patches: for a handful of real pods and the bundled templates, the exact patch and
 * warnings, pretty-printed in test/golden/. Refresh with UPDATE_GOLDEN=1 after a deliberate
 * change, and read the diff.
 */
import test from 'ava';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { mutate, type MutateDeps } from '../src/admission/mutate.js';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { applyPatchV4, createReview, decodePatch, prepareCreate, reinvocationInput } from './helpers/apiserver.js';
import { loadCorpus } from './helpers/corpus.js';
import { optedIn, pod } from './helpers/pods.js';

const cases: { pod: string; requests?: string }[] = [
  { pod: 'istio-hello-deployment' },
  { pod: 'istio-two-container', requests: 'proxy' },
  { pod: 'istio-multi-init', requests: 'proxy' },
  { pod: 'istio-native-sidecar', requests: 'proxy' },
  { pod: 'istio-proxy-override' },
  { pod: 'istio-already-injected-large', requests: 'proxy' },
  { pod: 'k8s-examples-cassandra-statefulset' },
  // On the node's network: the required proxy (it declares its admin port) would refuse it, so it asks for none.
  { pod: 'k8s-examples-sysdig-daemonset' },
];

const corpus = new Map(loadCorpus().map((p) => [p.name, p]));
const goldenDir = join('test', 'golden');
let deps: MutateDeps;
test.before(async () => {
  const set = await loadTemplateDir('templates');
  const labels = Object.fromEntries([...corpus.values()].map((p) => [p.namespace, { 'sidecar-injector.io/injection': 'enabled' }]));
  deps = { templates: () => set, namespaces: createLocalNamespaceSource(labels) };
});

for (const { pod: name, requests } of cases) {
  const file = join(goldenDir, `${name}${requests ? `+${requests}` : ''}.patch.json`);
  test(`golden: ${file}`, async (t) => {
    const entry = corpus.get(name);
    if (!entry) return t.fail(`${name} is not in the corpus`);
    const pod = prepareCreate(entry.body, entry.namespace);
    if (requests) pod.metadata.annotations = { ...(pod.metadata.annotations ?? {}), 'sidecar-injector.io/templates': requests };
    const outcome = await mutate(createReview(pod, { namespace: entry.namespace, uid: 'golden' }), deps);
    const patch = decodePatch(outcome.response.response);
    const actual = `${JSON.stringify({ warnings: outcome.response.response.warnings ?? [], patch }, null, 2)}\n`;
    if (process.env.UPDATE_GOLDEN === '1' || !existsSync(file)) {
      if (process.env.CI && !existsSync(file)) return t.fail(`${file} is missing; run UPDATE_GOLDEN=1 npm test and commit it`);
      writeFileSync(file, actual);
    }
    t.is(actual, readFileSync(file, 'utf8'));
    t.true(patch.length > 0);
    const patched = applyPatchV4(pod, patch) as any;
    const second = await mutate(createReview(reinvocationInput(patched), { namespace: entry.namespace }), deps);
    t.is(second.response.response.patch, undefined);
  });
}

// Template features beyond the two bundled templates (test/fixtures/feature-templates): a plain
// container placed first, envFrom with a prefix, a pull secret, a label; and collisions with
// the pod's own items (its container of the same name wins, its env of the same name wins,
// its equal volume is shared, its different volume keeps the template out).
const featureCases: [string, Record<string, any>][] = [
  [
    'agent-first-envfrom',
    pod({
      containers: [
        { name: 'web', image: 'nginx:1.27' },
        { name: 'worker', image: 'worker:1' },
      ],
    }),
  ],
  [
    'agent-collisions',
    pod({
      containers: [
        {
          name: 'web',
          image: 'nginx:1.27',
          env: [{ name: 'AGENT_SOCKET', value: '/run/mine.sock' }],
          envFrom: [{ configMapRef: { name: 'agent-settings' }, prefix: 'AGENT_' }],
        },
      ],
      initContainers: [{ name: 'agent', image: 'mine/agent:1' }],
      volumes: [{ name: 'agent-state', emptyDir: {} }],
    }),
  ],
  ['agent-foreign-volume', pod({ volumes: [{ name: 'agent-state', secret: { secretName: 'agent-credentials' } }] })],
];

let featureDeps: MutateDeps;
test.before(async () => {
  const set = await loadTemplateDir(join('test', 'fixtures', 'feature-templates'));
  featureDeps = { templates: () => set, namespaces: optedIn('shop') };
});

for (const [name, body] of featureCases) {
  const file = join(goldenDir, `feature-${name}.patch.json`);
  test(`golden: ${file}`, async (t) => {
    const pod = prepareCreate(body, 'shop');
    const outcome = await mutate(createReview(pod, { namespace: 'shop', uid: 'golden' }), featureDeps);
    const patch = decodePatch(outcome.response.response);
    const actual = `${JSON.stringify({ reason: outcome.reason, warnings: outcome.response.response.warnings ?? [], patch }, null, 2)}\n`;
    if (process.env.UPDATE_GOLDEN === '1' || !existsSync(file)) {
      if (process.env.CI && !existsSync(file)) return t.fail(`${file} is missing; run UPDATE_GOLDEN=1 npm test and commit it`);
      writeFileSync(file, actual);
    }
    t.is(actual, readFileSync(file, 'utf8'));
    const patched = applyPatchV4(pod, patch) as any;
    const second = await mutate(createReview(reinvocationInput(patched), { namespace: 'shop' }), featureDeps);
    t.is(second.response.response.patch, undefined, 'a fixed point');
  });
}

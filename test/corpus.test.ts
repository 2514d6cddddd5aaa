import test from 'ava';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { applyPatchV4, createReview, decodePatch, overwrites, prepareCreate, reinvocationInput, validationProblems } from './helpers/apiserver.js';
import { loadCorpus } from './helpers/corpus.js';
import { startTestServer, type TestServer } from './helpers/server.js';

const corpus = loadCorpus();
let server: TestServer;
test.before(async () => {
  // Every namespace the corpus uses is opted in.
  const labels = Object.fromEntries(corpus.map((p) => [p.namespace, { 'sidecar-injector.io/injection': 'enabled' }]));
  server = await startTestServer({ templates: await loadTemplateDir('templates'), namespaces: createLocalNamespaceSource(labels) });
});
test.after.always(async () => {
  await server?.stop();
});

test('the corpus is there and not empty', (t) => {
  t.true(corpus.length >= 30, `found ${corpus.length} pods`);
});

for (const { name, namespace, body } of corpus) {
  for (const requestProxy of [false, true]) {
    test(`${name}${requestProxy ? ' (requesting proxy)' : ''}: valid review, patch applies and only adds, second call is empty`, async (t) => {
      const pod = prepareCreate(body, namespace);
      if (requestProxy) pod.metadata.annotations = { ...(pod.metadata.annotations ?? {}), 'sidecar-injector.io/templates': 'proxy' };
      const review = createReview(pod, { namespace });
      const res = await server.post(review);
      t.is(res.status, 200);
      t.is(res.json.apiVersion, 'admission.k8s.io/v1');
      t.is(res.json.kind, 'AdmissionReview');
      t.is(res.json.response.uid, review.request.uid);
      t.true(res.json.response.allowed, JSON.stringify(res.json.response.status));
      const patch = decodePatch(res.json.response);
      t.deepEqual(overwrites(pod, patch), []);
      const patched = applyPatchV4(pod, patch) as any;
      t.deepEqual(validationProblems(patched), []);
      const warnings: string[] = res.json.response.warnings ?? [];
      t.true(patched.spec.containers.some((c: any) => c.name === 'log-shipper'));
      if (requestProxy) {
        // The bundled proxy template excludes kube-public by its namespaceSelector, and says so.
        if (namespace === 'kube-public') t.deepEqual(warnings, ['proxy: namespace kube-public does not match its namespaceSelector']);
        else t.true((patched.spec.initContainers ?? []).some((c: any) => c.name === 'proxy'));
      }
      // The same pod again, and after reinvocation's plugins and defaulting: nothing to do.
      for (const again of [patched, reinvocationInput(patched)]) {
        const second = await server.post(createReview(again, { namespace }));
        t.is(second.status, 200);
        t.deepEqual(
          Object.keys(second.json.response).filter((k) => k.startsWith('patch')),
          [],
        );
      }
    });
  }
}

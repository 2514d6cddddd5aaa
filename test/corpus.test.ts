import test from 'ava';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { applyPatchV4, createReview, decodePatch, overwrites, prepareCreate, reinvocationInput, validationProblems } from './helpers/apiserver.js';
import { loadCorpus } from './helpers/corpus.js';
import { parsePod, runsToCompletion as partsRunToCompletion } from '../src/k8s/pod.js';

const runsToCompletion = (pod: unknown) => partsRunToCompletion(parsePod(pod)) !== undefined;
import { startTestServer, type TestServer } from './helpers/server.js';

const corpus = loadCorpus();
/** The corpus runs on a server that knows no version (current features), and at 1.28 and 1.33 (R-70). */
const versions = ['current', '1.28', '1.33'] as const;
const servers = new Map<(typeof versions)[number], TestServer>();
test.before(async () => {
  // Every namespace the corpus uses is opted in.
  const labels = Object.fromEntries(corpus.map((p) => [p.namespace, { 'sidecar-injector.io/injection': 'enabled' }]));
  const templates = await loadTemplateDir('templates');
  for (const version of versions) {
    const kubernetesVersion = version === 'current' ? undefined : { major: 1, minor: Number(version.split('.')[1]) };
    servers.set(
      version,
      await startTestServer({ templates, namespaces: createLocalNamespaceSource(labels), ...(kubernetesVersion ? { kubernetesVersion } : {}) }),
    );
  }
});
test.after.always(async () => {
  for (const server of servers.values()) await server.stop();
});

test('the corpus is there and not empty', (t) => {
  t.true(corpus.length >= 30, `found ${corpus.length} pods`);
});

for (const { name, namespace, body } of corpus) {
  for (const [version, requestProxy] of versions.flatMap((v) => [false, true].map((r) => [v, r] as const))) {
    test(`${name}${requestProxy ? ' (requesting proxy)' : ''}${version === 'current' ? '' : ` at ${version}`}: valid review, patch applies and only adds, second call is empty`, async (t) => {
      const server = servers.get(version)!;
      const pod = prepareCreate(body, namespace);
      if (requestProxy) pod.metadata.annotations = { ...(pod.metadata.annotations ?? {}), 'sidecar-injector.io/templates': 'proxy' };
      const review = createReview(pod, { namespace });
      const res = await server.post(review);
      t.is(res.status, 200);
      t.is(res.json.apiVersion, 'admission.k8s.io/v1');
      t.is(res.json.kind, 'AdmissionReview');
      t.is(res.json.response.uid, review.request.uid);
      const completes = runsToCompletion(pod);
      if (requestProxy && version === '1.28' && completes && namespace !== 'kube-public') {
        // The proxy is required: below 1.29 a pod that runs to completion cannot get it (as an
        // ordinary container it would never let the pod finish), so the pod is refused, saying why.
        t.false(res.json.response.allowed);
        t.is(res.json.response.status.code, 403);
        t.regex(res.json.response.status.message, /^required sidecar proxy cannot be injected: proxy not injected: no native sidecars on Kubernetes 1\.28/);
        return;
      }
      if (requestProxy && pod.spec.hostNetwork === true && namespace !== 'kube-public') {
        // The proxy declares its admin port: on the node's network that port is the node's, and
        // the required proxy cannot be injected there, so the pod is refused, saying why.
        t.false(res.json.response.allowed);
        t.is(res.json.response.status.code, 403);
        t.regex(
          res.json.response.status.message,
          /^required sidecar proxy cannot be injected: proxy not injected: a hostNetwork pod, and its container proxy declares port 9901\/TCP/,
        );
        return;
      }
      t.true(res.json.response.allowed, JSON.stringify(res.json.response.status));
      const patch = decodePatch(res.json.response);
      t.deepEqual(overwrites(pod, patch), []);
      const patched = applyPatchV4(pod, patch) as any;
      t.deepEqual(validationProblems(patched), []);
      const warnings: string[] = res.json.response.warnings ?? [];
      const sidecarIn = (list: 'containers' | 'initContainers', name: string) => (patched.spec[list] ?? []).find((c: any) => c.name === name);
      // The log shipper is a native sidecar; below 1.29 an ordinary container, and never one in a pod that runs to completion.
      if (version !== '1.28') t.is(sidecarIn('initContainers', 'log-shipper')?.restartPolicy, 'Always');
      else if (completes) {
        t.falsy(sidecarIn('containers', 'log-shipper') ?? sidecarIn('initContainers', 'log-shipper'));
        t.true(warnings.some((w) => w.startsWith('log-shipper not injected: no native sidecars on Kubernetes 1.28')));
      } else t.truthy(sidecarIn('containers', 'log-shipper'));
      if (requestProxy) {
        // The bundled proxy template excludes kube-public by its namespaceSelector, and says so.
        if (namespace === 'kube-public') t.true(warnings.includes('proxy: namespace kube-public does not match its namespaceSelector'));
        else if (version !== '1.28') t.true((patched.spec.initContainers ?? []).some((c: any) => c.name === 'proxy' && c.restartPolicy === 'Always'));
        else {
          // Below 1.29 the proxy is an ordinary container, first, and kubectl still defaults to the pod's own.
          t.false((patched.spec.initContainers ?? []).some((c: any) => c.name === 'proxy'));
          t.is(patched.spec.containers[0].name, 'proxy');
          t.is(patched.spec.containers[0].restartPolicy, undefined);
          const own = pod.spec.containers[0].name;
          t.is(
            patched.metadata.annotations['kubectl.kubernetes.io/default-container'],
            pod.metadata.annotations?.['kubectl.kubernetes.io/default-container'] ?? own,
          );
        }
      }
      // The same pod again, and after reinvocation's plugins and defaulting: nothing to do.
      // The same pod again, on the same version. And where a version change between the calls
      // finds only templates already injected, on the next version too: the ledger keeps the form.
      const skippedForVersion = warnings.some((w) => w.includes('no native sidecars'));
      const next = servers.get(versions[(versions.indexOf(version) + 1) % versions.length]!)!;
      for (const [again, on] of [
        [patched, server],
        [reinvocationInput(patched), server],
        ...(skippedForVersion ? [] : [[reinvocationInput(patched), next] as const]),
      ] as const) {
        const second = await on.post(createReview(again, { namespace }));
        t.is(second.status, 200);
        t.deepEqual(
          Object.keys(second.json.response).filter((k) => k.startsWith('patch')),
          [],
        );
      }
    });
  }
}

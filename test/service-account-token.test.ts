/**
 * The ServiceAccount plugin's token mount, added with each sidecar only where the plugin's next
 * run would add it (the corpus through both webhooks: two-webhooks.test.ts).
 */
import test from 'ava';
import { serviceAccountTokenMount } from '../src/k8s/service-account-token.js';
import { parsePod } from '../src/k8s/pod.js';
import { prepareCreate, tokenMountPath } from './helpers/apiserver.js';
import { pod } from './helpers/pods.js';

type Json = Record<string, any>;
test("where the pod does not show the plugin's first run mounting the token, the injector adds nothing and leaves it to the plugin", (t) => {
  const base = prepareCreate(pod(), 'shop');
  t.deepEqual(serviceAccountTokenMount(parsePod(base)), {
    name: 'kube-api-access-x7k2q',
    readOnly: true,
    mountPath: tokenMountPath,
  });
  // The pod opts out.
  const optedOut = prepareCreate(pod(), 'shop');
  optedOut.spec.automountServiceAccountToken = false;
  t.is(serviceAccountTokenMount(parsePod(optedOut)), undefined);
  // The ServiceAccount opts out (the plugin added nothing): a container without the mount, though a volume of that name is there.
  const saOptedOut = structuredClone(base);
  for (const c of saOptedOut.spec.containers) c.volumeMounts = (c.volumeMounts ?? []).filter((m: Json) => m.mountPath !== tokenMountPath);
  t.is(serviceAccountTokenMount(parsePod(saOptedOut)), undefined);
  // A volume of the plugin's name that is the pod author's (a Secret, a hostPath, a token for another audience, one more source):
  // no sidecar is given it, whoever mounts it.
  for (const source of [
    { secret: { secretName: 'chosen' } },
    { hostPath: { path: '/var/run/secrets/kubernetes.io/serviceaccount' } },
    {
      projected: {
        ...base.spec.volumes[0].projected,
        sources: [{ serviceAccountToken: { path: 'token', audience: 'vault' } }, ...base.spec.volumes[0].projected.sources.slice(1)],
      },
    },
    { projected: { ...base.spec.volumes[0].projected, sources: [...base.spec.volumes[0].projected.sources, { secret: { name: 'extra' } }] } },
  ]) {
    const authored = structuredClone(base);
    const name = authored.spec.volumes[0].name;
    authored.spec.volumes[0] = { name, ...structuredClone(source) };
    t.is(serviceAccountTokenMount(parsePod(authored)), undefined, JSON.stringify(source).slice(0, 80));
  }
  // A mount at the path that is not the plugin's (a subPath, writable): the author's.
  const subPath = structuredClone(base);
  subPath.spec.containers[0].volumeMounts = subPath.spec.containers[0].volumeMounts.map((m: Json) =>
    m.mountPath === tokenMountPath ? { ...m, subPath: 'token' } : m,
  );
  t.is(serviceAccountTokenMount(parsePod(subPath)), undefined);
  // No token volume: the plugin's next run names a new one at random; nothing to predict.
  const noVolume = structuredClone(base);
  noVolume.spec.volumes = noVolume.spec.volumes.filter((v: Json) => !v.name.startsWith('kube-api-access-'));
  t.is(serviceAccountTokenMount(parsePod(noVolume)), undefined);
});

test('a sidecar that mounts the token path itself keeps its own mount, as the plugin leaves it', async (t) => {
  const { templateSet } = await import('./helpers/templates.js');
  const { injectPod } = await import('../src/pipeline/inject-pod.js');
  const set = templateSet(
    {
      name: 'own-token',
      containers: [{ name: 'own-token', image: 'x', volumeMounts: [{ name: 'mine', mountPath: tokenMountPath }] }],
      volumes: [{ name: 'mine', emptyDir: {} }],
    },
    { name: 'plain', containers: [{ name: 'plain', image: 'x' }] },
  );
  const start = prepareCreate(pod(), 'shop');
  const out = injectPod(start, set.templates, set, { namespace: 'shop', namespaceLabels: {} }).pod as Json;
  const mounts = (n: string) => out.spec.containers.find((c: Json) => c.name === n).volumeMounts;
  t.deepEqual(mounts('own-token'), [{ name: 'mine', mountPath: tokenMountPath }]);
  t.deepEqual(mounts('plain'), [{ name: 'kube-api-access-x7k2q', readOnly: true, mountPath: tokenMountPath }]);
});

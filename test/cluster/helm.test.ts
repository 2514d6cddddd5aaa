/**
 * The Helm chart installed into the real cluster, as docs/helm.md says: the kustomize install
 * the world made is deleted first (both own the same cluster-wide objects), the Namespace
 * applied, then `helm install` with the bundled examples; the install becomes healthy (both
 * replicas ready, caBundles written, the required webhook armed) and a pod of an opted-in
 * namespace gets its sidecars. It runs last: nothing after it needs the kustomize install.
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { containerNames, eventually, everyReplica, healthyInstall, joinWorld, optedInNamespace, plainPod } from './helpers.js';

const run = promisify(execFile);

test('helm install of the chart gives a healthy install that injects, where the kustomize install was', async (t) => {
  const { file, kube, kubectl } = joinWorld();
  await kubectl(['delete', '-k', 'manifests', '--wait=true']);
  await kubectl(['delete', 'configmap', '-n', 'sidecar-injector', 'sidecar-injector-templates', '--ignore-not-found']);
  await eventually('the namespace sidecar-injector gone', async () => (await kube.find('/api/v1/namespaces/sidecar-injector')) === undefined);
  await kubectl(['apply', '-f', 'manifests/base/namespace.yaml']);
  const installed = await run(
    join(file.bin, 'helm'),
    ['install', 'sidecar-injector', 'charts/sidecar-injector', '-n', 'sidecar-injector', '--set', 'exampleTemplates={log-shipper,proxy}'],
    {
      env: {
        ...process.env,
        KUBECONFIG: file.admin.kubeconfig,
        HELM_CACHE_HOME: join(file.state, 'helm', 'cache'),
        HELM_CONFIG_HOME: join(file.state, 'helm', 'config'),
      },
    },
  );
  t.regex(installed.stdout, /STATUS: deployed/);
  await healthyInstall();
  await everyReplica(
    (status) => (status.templates.templates as string[]).map((s) => s.split('@')[0]).join() === 'log-shipper,proxy',
    'every replica of the chart serving the examples',
  );
  const deployment = await kube.get('/apis/apps/v1/namespaces/sidecar-injector/deployments/sidecar-injector');
  t.is(deployment.metadata.labels['app.kubernetes.io/part-of'], 'sidecar-injector');
  t.is(deployment.metadata.annotations['meta.helm.sh/release-name'], 'sidecar-injector', 'Helm owns it');
  const namespace = await optedInNamespace(t, 'helm');
  const pod = await kube.create(`/api/v1/namespaces/${namespace}/pods`, plainPod('web'));
  t.deepEqual(containerNames(pod), { init: ['log-shipper'], app: ['app'] });
});

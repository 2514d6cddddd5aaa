/**
 * The Helm chart installed into the real cluster, as docs/helm.md says: the kustomize install
 * the world made is deleted first (both own the same cluster-wide objects), the Namespace
 * applied, then `helm install` with the bundled examples; the install becomes healthy (both
 * replicas ready, caBundles written, the required webhook armed) and a pod of an opted-in
 * namespace gets its sidecars; then `helm upgrade` as the docs say it. It runs last: nothing
 * after it needs the kustomize install.
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { containerNames, everyReplica, healthyInstall, joinWorld, optedInNamespace, plainPod, type Json } from './helpers.js';

const run = promisify(execFile);

test('helm install of the chart gives a healthy install that injects, where the kustomize install was; helm upgrade keeps it so', async (t) => {
  const { file, kube, kubectl } = joinWorld();
  // The move as docs/helm.md writes it: its kubectl lines, run as written, before helm install.
  const doc = await readFile(join('docs', 'helm.md'), 'utf8');
  const block = /## From the kustomize install to the chart[^]*?```sh\n([^]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error('docs/helm.md shows no commands for the move from kustomize');
  const lines = block.split('\n').map((l) => l.replace(/\s+#.*$/, '').trim());
  const moveCommands = lines.slice(
    0,
    lines.findIndex((l) => l.startsWith('helm install')),
  );
  t.deepEqual(moveCommands, [
    'kubectl delete -k manifests/',
    'kubectl wait --for=delete namespace/sidecar-injector --timeout=5m',
    'kubectl apply -f manifests/base/namespace.yaml',
  ]);
  for (const line of moveCommands) await kubectl(line.split(' ').slice(1));
  t.truthy(await kube.find('/api/v1/namespaces/sidecar-injector'), 'the namespace made again');
  const env = {
    ...process.env,
    KUBECONFIG: file.admin.kubeconfig,
    HELM_CACHE_HOME: join(file.state, 'helm', 'cache'),
    HELM_CONFIG_HOME: join(file.state, 'helm', 'config'),
  };
  const helm = (args: string[]) =>
    run(join(file.bin, 'helm'), args, { env }).then(
      ({ stdout }) => ({ ok: true, out: stdout }),
      (err: { stdout?: string; stderr?: string }) => ({ ok: false, out: `${err.stdout ?? ''}${err.stderr ?? ''}` }),
    );
  const pushed = readFileSync(file.deploy.digestFile, 'utf8').trim();
  const installed = await helm([
    'install',
    'sidecar-injector',
    'charts/sidecar-injector',
    '-n',
    'sidecar-injector',
    '--set',
    'exampleTemplates={log-shipper,proxy}',
    // The image `make push` pushed, pinned to its digest, as docs/helm.md says.
    '--set',
    `image.repository=${pushed.split('@')[0]}`,
    '--set',
    `image.digest=${pushed.split('@')[1]}`,
  ]);
  t.true(installed.ok, installed.out);
  t.regex(installed.out, /STATUS: deployed/);
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

  // An upgrade, as docs/helm.md says it: the injector has armed the required webhook (its own
  // patch owns failurePolicy and the record annotation), so Helm's server-side apply takes the
  // fields back with --force-conflicts, and the injector arms the webhook again.
  const plain = await helm(['upgrade', 'sidecar-injector', 'charts/sidecar-injector', '-n', 'sidecar-injector', '--reuse-values']);
  t.false(plain.ok, 'without --force-conflicts the upgrade conflicts with the injector’s own fields');
  t.regex(plain.out, /conflicts with \\?"sidecar-injector\\?"/);
  t.regex(plain.out, /webhooks\[name=\\?"required\.sidecar-injector\.io\\?"\]\.failurePolicy/);
  const upgraded = await helm(['upgrade', 'sidecar-injector', 'charts/sidecar-injector', '-n', 'sidecar-injector', '--reuse-values', '--force-conflicts']);
  t.true(upgraded.ok, upgraded.out);
  t.regex(upgraded.out, /STATUS: deployed/);
  await healthyInstall();
  const again = await kube.create(`/api/v1/namespaces/${namespace}/pods`, plainPod('web-2'));
  t.deepEqual(containerNames(again), { init: ['log-shipper'], app: ['app'] });

  // A template with a typo in the values: the upgrade is refused by the API server with check's
  // message, and no replica restarts (nothing reached them).
  const replicas = async () =>
    ((await kube.get('/api/v1/namespaces/sidecar-injector/pods?labelSelector=app.kubernetes.io%2Fname%3Dsidecar-injector')).items as Json[])
      .filter((p) => !p.metadata.deletionTimestamp)
      .map((p) => `${p.metadata.name}:${(p.status.containerStatuses ?? []).map((c: Json) => c.restartCount).join()}`)
      .sort();
  const before = await replicas();
  const typo = await helm([
    'upgrade',
    'sidecar-injector',
    'charts/sidecar-injector',
    '-n',
    'sidecar-injector',
    '--reuse-values',
    '--force-conflicts',
    '--set-json',
    'templates={"agent":{"injection":"automatic","containers":[{"name":"agent","image":"registry.example/agent:{{ pod.nmaespace }}"}]}}',
  ]);
  t.false(typo.ok, typo.out);
  t.regex(
    typo.out,
    /admission webhook \\?"templates\.sidecar-injector\.io\\?" denied the request: SidecarTemplate agent is refused \(the checks of sidecar-injector check\)/,
  );
  t.regex(typo.out, /spec\.containers\[0\]\.image: .*nmaespace/);
  t.is(await kube.find('/apis/sidecar-injector.io/v1alpha1/sidecartemplates/agent'), undefined);
  t.deepEqual(await replicas(), before, 'no replica restarted');
});

/**
 * `sidecar-injector why` on the real cluster, run as a ServiceAccount holding exactly the
 * permissions docs/why.md lists: a Deployment's next pod gets the installed log-shipper and not
 * the on-request proxy; its pod created before the namespace opted in lacks log-shipper, and
 * `why` says so, dates it before the namespace's labels changed, and gives the restart that fixes
 * it; every read succeeds with the docs' permissions (a refused read is an error, never an answer).
 */
import test from 'ava';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeKubeconfig } from './world/pki.js';
import { cli, eventually, joinWorld, testFolder, testNamespace, type Json } from './helpers.js';

/** The docs' RBAC, bound to the ServiceAccount `why-reader` of `namespace` instead of the group. */
async function docsRbac(namespace: string): Promise<string> {
  const doc = await readFile(join('docs', 'why.md'), 'utf8');
  const block = /## The permissions it needs[^]*?```yaml\n([^]*?)```/.exec(doc)?.[1];
  if (!block) throw new Error('docs/why.md shows no RBAC block');
  const group = '  - apiGroup: rbac.authorization.k8s.io\n    kind: Group\n    name: platform-team\n';
  if (block.split(group).length !== 2) throw new Error('docs/why.md: the RBAC block binds the group once');
  return block.replaceAll(group, `  - kind: ServiceAccount\n    name: why-reader\n    namespace: ${namespace}\n`);
}

test("why, with the docs' read-only permissions: a workload's next pod, and a pod created before its namespace opted in", async (t) => {
  const { kube, kubectl, file } = joinWorld();
  const namespace = await testNamespace(t, 'why');
  await kube.create(`/apis/apps/v1/namespaces/${namespace}/deployments`, {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web' },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: 'web' } },
      template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'registry.example/web:1' }] } },
    },
  });
  const pod = await eventually('the pod of web', async () => (await kube.get(`/api/v1/namespaces/${namespace}/pods?labelSelector=app%3Dweb`)).items[0] as Json);
  // The API server's times are whole seconds: the namespace opts in once the server's own clock
  // (the creation time of a dry-run object) has passed the pod's.
  await eventually('the API server past the second the pod was created', async () => {
    const probe = await kube.create(`/api/v1/namespaces/${namespace}/configmaps?dryRun=All`, {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { generateName: 'clock-' },
    });
    return (probe.metadata.creationTimestamp as string) > (pod.metadata.creationTimestamp as string);
  });
  await kube.mergePatch(`/api/v1/namespaces/${namespace}`, { metadata: { labels: { 'sidecar-injector.io/injection': 'enabled' } } });

  // The reader: a ServiceAccount with the docs' RBAC, and a token for it.
  await kube.create(`/api/v1/namespaces/${namespace}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'why-reader' } });
  const token = (
    await kube.create(`/api/v1/namespaces/${namespace}/serviceaccounts/why-reader/token`, {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      spec: { expirationSeconds: 3600 },
    })
  ).status.token as string;
  const kubeconfig = join(await testFolder(t, 'why'), 'kubeconfig');
  writeKubeconfig(kubeconfig, file.server, file.caFile, `system:serviceaccount:${namespace}:why-reader`, token);
  // Without the permissions, a refused read is an error that says what could not be read.
  const refused = await cli(['why', '-n', namespace, 'deployment/web', '--kubeconfig', kubeconfig]);
  t.not(refused.code, 0);
  t.regex(refused.stderr, /cannot read|forbidden/);
  await kubectl(['apply', '-f', '-'], await docsRbac(namespace));
  t.teardown(async () => {
    await kubectl(['delete', '--ignore-not-found', '-f', '-'], await docsRbac(namespace));
  });
  const why = async (...args: string[]) => {
    const run = await cli(['why', '-n', namespace, ...args, '-o', 'json', '--kubeconfig', kubeconfig]);
    t.is(run.code, 0, run.stderr);
    return Object.fromEntries((JSON.parse(run.stdout).templates as Json[]).map((a) => [a.template, a])) as Record<string, Json>;
  };

  // The next pod of web: log-shipper injected, the on-request proxy not.
  const next = await eventually('why answers as the reader', async () => {
    const run = await cli(['why', '-n', namespace, 'deployment/web', '-o', 'json', '--kubeconfig', kubeconfig]);
    return run.code === 0 ? run : undefined;
  });
  const forNext = Object.fromEntries((JSON.parse(next.stdout).templates as Json[]).map((a) => [a.template, a])) as Record<string, Json>;
  t.is(forNext['log-shipper']!.state, 'injected');
  t.like(forNext.proxy, { state: 'not-applicable', reason: 'proxy is on request and the pod does not name it in sidecar-injector.io/templates' });

  // The running pod, created before the namespace opted in.
  const running = await why(`pod/${pod.metadata.name as string}`);
  t.like(running['log-shipper'], { state: 'missing', fix: `kubectl -n ${namespace} rollout restart deployment/web` });
  t.regex(running['log-shipper']!.reason as string, /before its namespace's labels last changed \(.*\), so the namespace may not have been opted in then/);

  // The templates were read from the cluster's SidecarTemplates: a 403 on any read is an error, not an answer.
  t.is(JSON.parse(next.stdout).templatesFrom, "the cluster's SidecarTemplates");
});

test('a namespace labelled one domain away from the opt-in: why names the near miss and the fix; a misspelled override on a Deployment: why says it and its ReplicaSet gets a SidecarOverrideIgnored Event', async (t) => {
  const { kube, kubectl, file } = joinWorld();
  const deployment = (name: string, annotations: Record<string, string> = {}) => ({
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: name } },
      template: { metadata: { labels: { app: name }, annotations }, spec: { containers: [{ name: 'web', image: 'registry.example/web:1' }] } },
    },
  });
  const mislabelled = await testNamespace(t, 'why-near', { 'sidecar-injector/injection': 'enabled' });
  await kube.create(`/apis/apps/v1/namespaces/${mislabelled}/deployments`, deployment('web'));
  const near = await cli(['why', '-n', mislabelled, 'deployment/web', '--kubeconfig', file.admin.kubeconfig]);
  t.is(near.code, 0, near.stderr);
  t.regex(
    near.stdout,
    new RegExp(
      `\\n {2}log-shipper: not-applicable — namespace ${mislabelled} does not have label sidecar-injector\\.io/injection=enabled; it has sidecar-injector/injection=enabled, a near miss: did you mean sidecar-injector\\.io/injection=enabled\\?\\n {4}fix: kubectl label namespace ${mislabelled} sidecar-injector\\.io/injection=enabled\\n`,
    ),
  );
  // The fix works: opted in, a new pod of it gets log-shipper.
  await kubectl(['label', 'namespace', mislabelled, 'sidecar-injector.io/injection=enabled']);
  t.regex((await cli(['why', '-n', mislabelled, 'deployment/web', '--kubeconfig', file.admin.kubeconfig])).stdout, /\n {2}log-shipper: injected — /);

  const opted = await testNamespace(t, 'why-override', { 'sidecar-injector.io/injection': 'enabled' });
  await kube.create(`/apis/apps/v1/namespaces/${opted}/deployments`, deployment('api', { 'log-shiper.sidecar-injector.io/memoryLimit': '1Gi' }));
  const said = await cli(['why', '-n', opted, 'deployment/api', '--kubeconfig', file.admin.kubeconfig]);
  t.regex(
    said.stdout,
    /\n {2}note: override ignored: annotation log-shiper\.sidecar-injector\.io\/memoryLimit names no template here \(did you mean log-shipper\?\); ignored\n/,
  );
  const event = await eventually('the SidecarOverrideIgnored Event on the ReplicaSet', async () => {
    const { stdout } = await kubectl(['get', 'events', '-n', opted, '--field-selector', 'reason=SidecarOverrideIgnored', '-o', 'json']);
    return (JSON.parse(stdout).items as Json[])[0];
  });
  t.is(event.involvedObject.kind, 'ReplicaSet');
  t.regex(event.message, /^1 override annotation\(s\) ignored \(did you mean log-shipper\?\): sidecar-injector why names them \(pod api-[a-z0-9]+-\)$/);
});

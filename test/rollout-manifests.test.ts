/**
 * The manifests' part of the rollout: serve reads the cluster's SidecarTemplates, may write
 * Events about them (a failed preflight, a halt) and their status, and, with the
 * rollout-preflight component, may list the FailedCreate Events the halt counts.
 */
import test from 'ava';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { loadConfig } from '../src/config.js';
import { ConfigError } from '../src/errors.js';
import { kustomizeObjects, type KubeObject } from './helpers/kustomize.js';
import { schemaProblems } from './helpers/kube-schema.js';

/** True when one of `roles`' rules grants `verb` on `resource` of `group`. */
const grants = (roles: KubeObject[], group: string, resource: string, verb: string) =>
  roles.some((role) => role.rules.some((r: KubeObject) => r.apiGroups.includes(group) && r.resources.includes(resource) && r.verbs.includes(verb)));

test("serve reads the cluster's SidecarTemplates (no volume), and may write Events about them", (t) => {
  const base = kustomizeObjects('manifests');
  const deployment = base.find((o) => o.kind === 'Deployment')!;
  const args = deployment.spec.template.spec.containers[0].args as string[];
  t.true(args.includes('--template-source=cluster'));
  t.false(args.some((a) => a.startsWith('--templates')));
  t.deepEqual(deployment.spec.template.spec.volumes ?? [], []);
  // The examples are SidecarTemplates, cluster-scoped.
  const examples = kustomizeObjects('templates');
  t.true(examples.length > 0 && examples.every((o) => o.kind === 'SidecarTemplate' && o.metadata.namespace === undefined));
  const account = deployment.spec.template.spec.serviceAccountName;
  const bound = base
    .filter((o) => o.kind === 'ClusterRoleBinding' && o.subjects.some((s: KubeObject) => s.name === account))
    .map((b) => base.find((o) => o.kind === 'ClusterRole' && o.metadata.name === b.roleRef.name)!);
  t.true(grants(bound, 'events.k8s.io', 'events', 'create'));
  t.true(grants(bound, 'events.k8s.io', 'events', 'patch'));
  t.true(grants(bound, 'sidecar-injector.io', 'sidecartemplates', 'watch'));
  t.true(grants(bound, 'sidecar-injector.io', 'sidecartemplates/status', 'patch'));
  t.false(grants(bound, 'sidecar-injector.io', 'sidecartemplates', 'update'), 'the injector writes only the status');
  // The halt reads the workloads a FailedCreate Event names.
  for (const [group, resource] of [
    ['apps', 'replicasets'],
    ['apps', 'statefulsets'],
    ['apps', 'daemonsets'],
    ['batch', 'jobs'],
  ] as const)
    t.true(grants(bound, group, resource, 'get'), `get ${resource}`);
  t.false(grants(bound, '', 'events', 'list'), 'the base lists no Events: the component adds it');
});

test('the rollout-preflight component lets the halt list FailedCreate Events cluster-wide, and nothing more', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-rollout-'));
  const root = relative(dir, process.cwd());
  await writeFile(
    join(dir, 'kustomization.yaml'),
    `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${join(root, 'manifests')}\ncomponents:\n  - ${join(root, 'manifests', 'components', 'rollout-preflight')}\n`,
  );
  const objects = kustomizeObjects(dir);
  t.deepEqual(await schemaProblems(objects), []);
  const role = objects.find((o) => o.kind === 'ClusterRole' && o.metadata.name === 'sidecar-injector-rollout-health')!;
  t.deepEqual(role.rules, [{ apiGroups: [''], resources: ['events'], verbs: ['list'] }]);
  const binding = objects.find((o) => o.kind === 'ClusterRoleBinding' && o.metadata.name === 'sidecar-injector-rollout-health')!;
  const deployment = objects.find((o) => o.kind === 'Deployment')!;
  t.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: deployment.spec.template.spec.serviceAccountName, namespace: deployment.metadata.namespace }]);
  const args = deployment.spec.template.spec.containers[0].args as string[];
  t.true(args.includes('--rollout-probe-namespace=sidecar-injector-probes'));
  t.true(args.includes('--template-source=cluster'));
});

test('--template-source: the cluster in a pod without --templates, else the folder; never both', (t) => {
  t.is(loadConfig({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }, []).templateSource, 'cluster');
  t.is(loadConfig({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }, ['--templates', 'x']).templateSource, 'folder');
  t.is(loadConfig({}, []).templateSource, 'folder');
  t.throws(() => loadConfig({}, ['--template-source=cluster', '--templates=x', '--kubeconfig=k']), {
    instanceOf: ConfigError,
    message: /--templates DIR and --template-source cluster/,
  });
  t.throws(() => loadConfig({}, ['--template-source=cluster', '--namespace-source=local']), { instanceOf: ConfigError, message: /needs the cluster/ });
  t.throws(() => loadConfig({}, ['--template-source=configmap']), { instanceOf: ConfigError, message: /expected cluster, folder or auto/ });
});

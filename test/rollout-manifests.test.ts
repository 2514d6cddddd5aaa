/**
 * The manifests' part of the rollout: serve is told the templates ConfigMap a templates folder
 * makes (for the Events of a failed preflight and a halt), may write those Events there, and,
 * with the rollout-preflight component, may list the FailedCreate Events the halt counts.
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

test('serve is told the templates ConfigMap your templates folder makes (templates/ for the examples), and may write Events on it', (t) => {
  const base = kustomizeObjects('manifests');
  const deployment = base.find((o) => o.kind === 'Deployment')!;
  const args = deployment.spec.template.spec.containers[0].args as string[];
  const configMap = kustomizeObjects('templates').find((o) => o.kind === 'ConfigMap')!;
  t.true(args.includes(`--templates-configmap=${configMap.metadata.name}`));
  // The ConfigMap sits in the injector's own namespace, where the flag's bare name points.
  t.is(configMap.metadata.namespace, deployment.metadata.namespace);
  t.is(deployment.spec.template.spec.volumes.find((v: KubeObject) => v.name === 'templates').configMap.name, configMap.metadata.name);
  const account = deployment.spec.template.spec.serviceAccountName;
  const bound = base
    .filter((o) => o.kind === 'ClusterRoleBinding' && o.subjects.some((s: KubeObject) => s.name === account))
    .map((b) => base.find((o) => o.kind === 'ClusterRole' && o.metadata.name === b.roleRef.name)!);
  t.true(grants(bound, 'events.k8s.io', 'events', 'create'));
  t.true(grants(bound, 'events.k8s.io', 'events', 'patch'));
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
  t.true(args.includes('--templates-configmap=sidecar-injector-templates'));
});

test('--templates-configmap: a name in the injector namespace, or namespace/name', (t) => {
  t.deepEqual(loadConfig({ POD_NAMESPACE: 'injector' }, ['--templates-configmap', 'templates']).templatesConfigMap, {
    namespace: 'injector',
    name: 'templates',
  });
  t.deepEqual(loadConfig({ SIDECAR_INJECTOR_TEMPLATES_CONFIGMAP: 'ops/sidecar-templates' }, []).templatesConfigMap, {
    namespace: 'ops',
    name: 'sidecar-templates',
  });
  t.is(loadConfig({}, []).templatesConfigMap, undefined);
  for (const bad of ['Templates', 'a/b/c', '/x', 'ns/', 'n_s/x'])
    t.throws(() => loadConfig({}, [`--templates-configmap=${bad}`]), {
      instanceOf: ConfigError,
      message: /--templates-configmap: expected a ConfigMap name, or namespace\/name/,
    });
});

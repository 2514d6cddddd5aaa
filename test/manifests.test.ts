/**
 * The install: `kubectl kustomize` renders the base and each overlay (offline), every object
 * validates against the Kubernetes schemas, and the webhook configuration has the safety
 * properties the README promises — one test per property.
 */
import test from 'ava';
import { X509Certificate } from 'node:crypto';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { certs } from '../src/cli/certs.js';
import { check } from '../src/pipeline/template-check.js';
import { TemplateError } from '../src/errors.js';
import { failClosedAnnotation } from '../src/certs/plan.js';
import { isTemplateFileName, parseTemplateText } from '../src/templates/load.js';
import { schemaProblems } from './helpers/kube-schema.js';
import { kustomizeObjects } from './helpers/kustomize.js';

type Obj = Record<string, any>;

const kustomize = kustomizeObjects;

const base = kustomize('manifests');
const certManager = kustomize(join('manifests', 'overlays', 'cert-manager'));
let generated: Obj[] = [];
let generatedDir = '';
test.before(async () => {
  generatedDir = join(await mkdtemp(join(tmpdir(), 'sidecar-injector-certs-')), 'overlay');
  await certs(['--out', generatedDir, '--base', join('manifests', 'base')]);
  generated = kustomize(generatedDir);
});

const find = (objects: Obj[], kind: string) => objects.filter((o) => o.kind === kind);
const one = (objects: Obj[], kind: string): Obj => {
  const found = find(objects, kind);
  if (found.length !== 1) throw new Error(`expected one ${kind}, found ${found.length}`);
  return found[0]!;
};
const named = (objects: Obj[], kind: string, name: string): Obj => {
  const found = find(objects, kind).find((o) => o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name}`);
  return found;
};
/** The two pod webhooks (required, optional); the SidecarTemplate webhook is tested on its own. */
const webhooks = (): Obj[] => one(base, 'MutatingWebhookConfiguration').webhooks.filter((w: Obj) => w.name !== 'templates.sidecar-injector.io');
const templatesWebhook = (objects: Obj[] = base): Obj =>
  one(objects, 'MutatingWebhookConfiguration').webhooks.find((w: Obj) => w.name === 'templates.sidecar-injector.io');
/** The required webhook; every field test below runs on both (see `for (const which …)`). */
const webhook = () => webhooks()[0]!;
const deployment = () => one(base, 'Deployment');
const injector = () => deployment().spec.template.spec.containers[0];
const arg = (name: string) => (injector().args as string[]).find((a) => a.startsWith(`--${name}=`))?.split('=')[1];

test('every object of the base and of both overlays validates against the Kubernetes schemas', async (t) => {
  t.deepEqual(await schemaProblems(base), []);
  t.deepEqual(await schemaProblems(certManager), []);
  t.deepEqual(await schemaProblems(generated), []);
  t.deepEqual(base.map((o) => o.kind).sort(), [
    'ClusterRole',
    'ClusterRole',
    'ClusterRoleBinding',
    'ClusterRoleBinding',
    'CustomResourceDefinition',
    'Deployment',
    'MutatingWebhookConfiguration',
    'Namespace',
    'NetworkPolicy',
    'PodDisruptionBudget',
    'ResourceQuota',
    'Role',
    'Role',
    'Role',
    'RoleBinding',
    'RoleBinding',
    'RoleBinding',
    'Service',
    'ServiceAccount',
  ]);
});

test('a broken object is caught by the schema validation (the check can fail)', async (t) => {
  const broken = structuredClone(deployment());
  broken.spec.template.spec.containers[0].ports[0].containerPort = 'https';
  t.is((await schemaProblems([broken])).length, 1);
});

test('webhook: only pod CREATE is intercepted', (t) => {
  t.deepEqual(webhook().rules, [{ operations: ['CREATE'], apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], scope: 'Namespaced' }]);
});

test('webhook: only opted-in namespaces, never the system namespaces or our own', (t) => {
  const expressions = webhook().namespaceSelector.matchExpressions as Obj[];
  t.deepEqual(
    expressions.find((e) => e.key === 'sidecar-injector.io/injection'),
    { key: 'sidecar-injector.io/injection', operator: 'In', values: ['enabled'] },
  );
  const excluded = expressions.find((e) => e.key === 'kubernetes.io/metadata.name');
  t.is(excluded?.operator, 'NotIn');
  for (const ns of ['kube-system', 'kube-public', 'kube-node-lease', deployment().metadata.namespace]) t.true(excluded?.values.includes(ns), ns);
});

test('webhook: the pod opt-out label is excluded by the objectSelector', (t) => {
  t.deepEqual(webhook().objectSelector, { matchExpressions: [{ key: 'sidecar-injector.io/inject', operator: 'NotIn', values: ['disabled'] }] });
});

test('webhook: reinvocationPolicy IfNeeded', (t) => t.is(webhook().reinvocationPolicy, 'IfNeeded'));
test('the SidecarTemplate webhook is called again when a webhook after it changed the object', (t) => {
  const templates = (one(base, 'MutatingWebhookConfiguration').webhooks as Obj[]).find((w) => w.name === 'templates.sidecar-injector.io')!;
  t.is(templates.reinvocationPolicy, 'IfNeeded');
});
test('webhook: sideEffects NoneOnDryRun (an Event is the one side effect, never for a dry run)', (t) => t.is(webhook().sideEffects, 'NoneOnDryRun'));
test('webhook: admissionReviewVersions v1 then v1beta1', (t) => t.deepEqual(webhook().admissionReviewVersions, ['v1', 'v1beta1']));
test('webhook: matchPolicy Equivalent', (t) => t.is(webhook().matchPolicy, 'Equivalent'));
test('webhook: an explicit timeoutSeconds below the 10 s default', (t) => t.true(webhook().timeoutSeconds >= 1 && webhook().timeoutSeconds < 10));

test('two webhooks: required (armed Fail by the injector) on /mutate/required and optional (Ignore) on /mutate/optional, each with its reason written beside it', async (t) => {
  // Both are shipped Ignore: with an empty caBundle a Fail webhook would refuse every pod it
  // matches. The annotation names the one the injector arms once the caBundle holds its CA.
  t.deepEqual(
    webhooks().map((w) => [w.name, w.failurePolicy, w.clientConfig.service.path]),
    [
      ['required.sidecar-injector.io', 'Ignore', '/mutate/required'],
      ['optional.sidecar-injector.io', 'Ignore', '/mutate/optional'],
    ],
  );
  t.is(one(base, 'MutatingWebhookConfiguration').metadata.annotations[failClosedAnnotation], 'required.sidecar-injector.io,templates.sidecar-injector.io');
  t.true(
    webhooks().every((w) => w.clientConfig.caBundle === undefined),
    'the base ships no caBundle: the injector writes it',
  );
  t.deepEqual(
    one(certManager, 'MutatingWebhookConfiguration')
      .webhooks.map((w: Obj) => [w.name, w.failurePolicy])
      .sort(),
    [
      ['optional.sidecar-injector.io', 'Ignore'],
      ['required.sidecar-injector.io', 'Fail'],
      ['templates.sidecar-injector.io', 'Fail'],
    ],
  );
  const source = await readFile(join('manifests', 'base', 'mutatingwebhookconfiguration.yaml'), 'utf8');
  const lines = source.split('\n');
  for (const [policy, reason] of [
    ['Ignore', 'Fail: '],
    ['Ignore', 'Ignore: '],
  ] as const) {
    const at = lines.findIndex(
      (l, i) =>
        l.trim() === `failurePolicy: ${policy}` &&
        lines
          .slice(Math.max(0, i - 8), i)
          .join('\n')
          .includes(`# ${reason}`),
    );
    t.true(at > 0, `a failurePolicy with its reason "# ${reason}" above it`);
  }
});

test('two webhooks: everything but name, path and failurePolicy is the same in both', (t) => {
  const strip = (w: Obj) => {
    const { name: _name, failurePolicy: _policy, clientConfig, ...rest } = w;
    const { path: _path, ...service } = clientConfig.service;
    return { ...rest, clientConfig: { ...clientConfig, service } };
  };
  const [required, optional] = webhooks();
  t.deepEqual(strip(optional!), strip(required!));
});

test('webhook: calls the Service on its path, and the Service reaches the container port', (t) => {
  const service = one(base, 'Service');
  t.deepEqual(webhook().clientConfig.service, { name: service.metadata.name, namespace: service.metadata.namespace, path: '/mutate/required', port: 443 });
  t.is(service.spec.ports[0].port, 443);
  const port = injector().ports.find((p: Obj) => p.name === service.spec.ports[0].targetPort);
  t.is(port?.containerPort, 10250);
  t.is(arg('port'), '10250');
  t.like(service.spec.selector, deployment().spec.selector.matchLabels);
});

test('deployment: two replicas spread across zones and nodes, and a PodDisruptionBudget', (t) => {
  const spec = deployment().spec;
  t.is(spec.replicas, 2);
  const spread = spec.template.spec.topologySpreadConstraints as Obj[];
  t.deepEqual(
    spread.map((c) => c.topologyKey),
    ['topology.kubernetes.io/zone', 'kubernetes.io/hostname'],
  );
  for (const c of spread) t.deepEqual(c.labelSelector.matchLabels, spec.selector.matchLabels);
  const pdb = one(base, 'PodDisruptionBudget');
  t.is(pdb.spec.minAvailable, 1);
  t.deepEqual(pdb.spec.selector.matchLabels, spec.selector.matchLabels);
});

test('deployment: readiness on /readyz and liveness on /healthz over HTTPS, on the probe port; /metrics and /status on the metrics port; each port a flag of serve', (t) => {
  t.like(injector().readinessProbe.httpGet, { path: '/readyz', port: 'probes', scheme: 'HTTPS' });
  t.like(injector().livenessProbe.httpGet, { path: '/healthz', port: 'probes', scheme: 'HTTPS' });
  const ports = Object.fromEntries((injector().ports as Obj[]).map((p) => [p.name, p.containerPort]));
  t.deepEqual(ports, { https: 10250, metrics: 8443, probes: 8081 });
  t.is(arg('port'), String(ports.https));
  t.is(arg('metrics-port'), String(ports.metrics));
  t.is(arg('probe-port'), String(ports.probes));
  // The Service: the webhooks on 443, /metrics and /status (the ServiceMonitor, rollout status) on 8443.
  const service = one(base, 'Service');
  t.deepEqual(
    (service.spec.ports as Obj[]).map((p) => [p.name, p.port, p.targetPort]),
    [
      ['https', 443, 'https'],
      ['metrics', 8443, 'metrics'],
    ],
  );
});

test('deployment: resource requests and limits', (t) => {
  t.truthy(injector().resources.requests.cpu);
  t.truthy(injector().resources.requests.memory);
  t.truthy(injector().resources.limits.memory);
});

test('deployment: restricted pod security', (t) => {
  const pod = deployment().spec.template.spec;
  t.true(pod.securityContext.runAsNonRoot);
  t.is(pod.securityContext.seccompProfile.type, 'RuntimeDefault');
  t.like(injector().securityContext, { allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, runAsNonRoot: true });
  t.deepEqual(injector().securityContext.capabilities.drop, ['ALL']);
  t.is(one(base, 'Namespace').metadata.labels['pod-security.kubernetes.io/enforce'], 'restricted');
});

test('the SidecarTemplate resource and its admission: cluster-scoped, status written apart, every create and update checked before it is stored, armed Fail', (t) => {
  const crd = one(base, 'CustomResourceDefinition');
  t.is(crd.metadata.name, 'sidecartemplates.sidecar-injector.io');
  t.is(crd.spec.scope, 'Cluster');
  const [version] = crd.spec.versions;
  t.deepEqual(version.subresources, { status: {} });
  // Nothing of the spec pruned before the injector's admission sees it: an unknown field gets check's did-you-mean.
  t.true(version.schema.openAPIV3Schema.properties.spec['x-kubernetes-preserve-unknown-fields']);
  t.deepEqual(
    version.additionalPrinterColumns.map((c: Obj) => c.name),
    ['Template', 'Revision', 'Role', 'Share', 'State', 'Preflight', 'Current', 'Stale', 'Missing', 'Age'],
  );
  const webhook = templatesWebhook();
  t.deepEqual(webhook.rules, [
    { operations: ['CREATE', 'UPDATE'], apiGroups: ['sidecar-injector.io'], apiVersions: ['v1alpha1'], resources: ['sidecartemplates'], scope: 'Cluster' },
  ]);
  t.is(webhook.clientConfig.service.path, '/validate/sidecartemplates');
  t.is(webhook.sideEffects, 'None');
  t.is(webhook.failurePolicy, 'Ignore', 'shipped Ignore, armed Fail once the caBundle is written');
  t.is(templatesWebhook(certManager).failurePolicy, 'Fail');
  // The install reads the templates from the cluster: no volume, no ConfigMap, no template of its own.
  t.true((injector().args as string[]).includes('--template-source=cluster'));
  t.is(deployment().spec.template.spec.volumes, undefined);
  for (const objects of [base, certManager, generated]) {
    t.deepEqual(find(objects, 'ConfigMap'), []);
    t.deepEqual(find(objects, 'SidecarTemplate'), [], 'applying the install never touches the templates');
  }
});

/** The problems `sidecar-injector check DIR` reports (none: it accepts the folder). */
async function checkProblems(dir: string): Promise<unknown[]> {
  try {
    await check(dir);
    return [];
  } catch (err) {
    if (err instanceof TemplateError) return [...err.problems];
    throw err;
  }
}

test('the bundled examples apply on their own (kubectl apply -k templates/): every file of templates/, each a valid SidecarTemplate', async (t) => {
  const objects = kustomize('templates');
  t.true(objects.every((o) => o.kind === 'SidecarTemplate' && o.metadata.namespace === undefined));
  const files = (await readdir('templates')).filter(isTemplateFileName).sort();
  t.deepEqual(objects.map((o) => `${o.metadata.name}.yaml`).sort(), files, 'templates/kustomization.yaml lists every template file');
  for (const file of files) t.deepEqual(parseTemplateText(await readFile(join('templates', file), 'utf8'), file).problems, []);
  t.deepEqual(await checkProblems('templates'), []);
});

test('your own templates in your own repository: the documented folder gives exactly your SidecarTemplates, and check accepts it', async (t) => {
  const doc = await readFile(join('docs', 'templates-in-your-repo.md'), 'utf8');
  const block = /```yaml\n(# kustomization\.yaml\n[\s\S]*?)```/.exec(doc)?.[1];
  if (!block) return t.fail('docs/templates-in-your-repo.md shows no kustomization.yaml block');
  const listed = [...block.matchAll(/^ {2}- (\S+\.ya?ml)$/gm)].map((m) => m[1]!);
  t.true(listed.length > 0, 'the block lists template files');
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-own-templates-'));
  await writeFile(join(dir, 'kustomization.yaml'), block);
  for (const [i, file] of listed.entries())
    await writeFile(
      join(dir, file),
      `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: agent-${i}\nspec:\n  injection: automatic\n  containers: [{ name: agent-${i}, image: "registry.example/agent:1" }]\n`,
    );
  const objects = kustomize(dir);
  t.deepEqual(
    objects.map((o) => [o.kind, o.metadata.name, o.metadata.namespace]),
    listed.map((_, i) => ['SidecarTemplate', `agent-${i}`, undefined]),
    'your SidecarTemplates alone: your folder never touches the install',
  );
  t.deepEqual(await checkProblems(dir), []);
  // A file added but not listed would never reach the cluster: check says so.
  await writeFile(join(dir, 'forgotten.yaml'), 'name: forgotten\ncontainers: [{ name: f, image: "registry.example/f:1" }]\n');
  t.regex(JSON.stringify(await checkProblems(dir)), /does not list forgotten\.yaml: it would not reach the cluster/);
});

test('deployment: self-managed certificates from the Secret, no certificate path needed to start', (t) => {
  t.is(arg('tls-secret'), 'sidecar-injector-tls');
  t.is(arg('tls-cert'), undefined);
  t.false(
    (deployment().spec.template.spec.volumes ?? []).some((v: Obj) => v.secret),
    'no Secret is mounted',
  );
  t.deepEqual(
    injector().env.find((e: Obj) => e.name === 'POD_NAMESPACE').valueFrom,
    { fieldRef: { fieldPath: 'metadata.namespace' } },
    'the Secret and lease namespace is the pod namespace',
  );
});

test('rbac: self-managed certificates may get and update their Secret, create Secrets, and get and patch their webhook configuration, nothing more', (t) => {
  const role = named(base, 'Role', 'sidecar-injector-certificates');
  t.is(role.metadata.namespace, deployment().metadata.namespace);
  t.deepEqual(role.rules, [
    { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
    { apiGroups: [''], resources: ['secrets'], resourceNames: [arg('tls-secret')], verbs: ['get', 'update'] },
  ]);
  t.deepEqual(named(base, 'ClusterRole', 'sidecar-injector-webhook-ca').rules, [
    {
      apiGroups: ['admissionregistration.k8s.io'],
      resources: ['mutatingwebhookconfigurations'],
      resourceNames: [one(base, 'MutatingWebhookConfiguration').metadata.name],
      verbs: ['get', 'patch'],
    },
  ]);
  const account = { kind: 'ServiceAccount', name: deployment().spec.template.spec.serviceAccountName, namespace: deployment().metadata.namespace };
  t.deepEqual(named(base, 'RoleBinding', 'sidecar-injector-certificates').subjects, [account]);
  t.deepEqual(named(base, 'ClusterRoleBinding', 'sidecar-injector-webhook-ca').subjects, [account]);
  for (const [kind, name] of [
    ['Role', 'sidecar-injector-certificates'],
    ['RoleBinding', 'sidecar-injector-certificates'],
    ['ClusterRole', 'sidecar-injector-webhook-ca'],
    ['ClusterRoleBinding', 'sidecar-injector-webhook-ca'],
  ] as const) {
    t.false(
      find(certManager, kind).some((o) => o.metadata.name === name),
      `the cert-manager overlay removes ${kind} ${name}`,
    );
  }
});

test('rbac: every install may list the EndpointSlices of its own namespace (the handover on shutdown, arming the required webhook), nothing more', (t) => {
  const account = { kind: 'ServiceAccount', name: deployment().spec.template.spec.serviceAccountName, namespace: deployment().metadata.namespace };
  for (const objects of [base, certManager]) {
    const role = named(objects, 'Role', 'sidecar-injector-service');
    t.is(role.metadata.namespace, deployment().metadata.namespace);
    t.deepEqual(role.rules, [{ apiGroups: ['discovery.k8s.io'], resources: ['endpointslices'], verbs: ['list'] }]);
    t.deepEqual(named(objects, 'RoleBinding', 'sidecar-injector-service').subjects, [account]);
  }
});

test('cert-manager overlay: mounts the TLS Secret where --tls-cert and --tls-key point', (t) => {
  const deployment = () => one(certManager, 'Deployment');
  const injector = () => deployment().spec.template.spec.containers[0];
  const arg = (name: string) => (injector().args as string[]).find((a) => a.startsWith(`--${name}=`))?.split('=')[1];
  t.is(arg('tls-secret'), undefined);
  // Every other argument as the base has it (the patch replaces the whole list).
  const others = (args: string[]) => args.filter((a) => !/^--tls-/.test(a));
  t.deepEqual(others(injector().args), others(one(base, 'Deployment').spec.template.spec.containers[0].args));
  const certDir = dirname(arg('tls-cert') ?? '');
  t.is(dirname(arg('tls-key') ?? ''), certDir);
  const mount = injector().volumeMounts.find((m: Obj) => m.mountPath === certDir);
  const volume = deployment().spec.template.spec.volumes.find((v: Obj) => v.name === mount?.name);
  t.is(volume?.secret?.secretName, 'sidecar-injector-tls');
  t.is(arg('tls-cert'), `${certDir}/tls.crt`);
  t.is(arg('tls-key'), `${certDir}/tls.key`);
});

test("rbac: read namespaces, nodes, pods, the workloads that hold pod templates and the SidecarTemplates; create and patch on events; write SidecarTemplate status and the webhooks' conditions of one configuration; nothing more, bound to the Deployment's service account", (t) => {
  t.deepEqual(named(base, 'ClusterRole', 'sidecar-injector').rules, [
    { apiGroups: [''], resources: ['namespaces', 'nodes'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: [''], resources: ['replicationcontrollers'], verbs: ['get'] },
    { apiGroups: ['apps'], resources: ['replicasets', 'statefulsets', 'daemonsets'], verbs: ['get'] },
    { apiGroups: ['batch'], resources: ['jobs'], verbs: ['get'] },
    { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
    { apiGroups: ['sidecar-injector.io'], resources: ['sidecartemplates'], verbs: ['get', 'list', 'watch'] },
    { apiGroups: ['sidecar-injector.io'], resources: ['sidecartemplates/status'], verbs: ['get', 'patch', 'update'] },
    { apiGroups: ['admissionregistration.k8s.io'], resources: ['mutatingwebhookconfigurations'], resourceNames: ['sidecar-injector'], verbs: ['get', 'patch'] },
    {
      apiGroups: ['admissionregistration.k8s.io'],
      resources: ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'],
      resourceNames: ['sidecar-injector-exported'],
      verbs: ['get'],
    },
  ]);
  // The one leader election's Lease (certificates and audit): in its own namespace, by name.
  const leader = find(base, 'Role').find((r) => r.metadata.name === 'sidecar-injector-leader')!;
  t.is(leader.metadata.namespace, 'sidecar-injector');
  t.deepEqual(leader.rules[1].resourceNames, ['sidecar-injector-leader']);
  t.false(
    find(base, 'Role').some((r) => r.metadata.name !== 'sidecar-injector-leader' && r.rules.some((rule: Obj) => rule.resources.includes('leases'))),
    'no other Role touches leases',
  );
  const binding = named(base, 'ClusterRoleBinding', 'sidecar-injector');
  t.deepEqual(binding.subjects, [
    { kind: 'ServiceAccount', name: deployment().spec.template.spec.serviceAccountName, namespace: deployment().metadata.namespace },
  ]);
  t.is(binding.roleRef.name, 'sidecar-injector');
  t.is(arg('namespace-source'), 'cluster');
});

test('cert-manager overlay: the serving Certificate fills the mounted Secret and its CA is injected into the webhook', (t) => {
  const serving = find(certManager, 'Certificate').find((c) => !c.spec.isCA);
  t.is(serving?.spec.secretName, 'sidecar-injector-tls');
  t.true(serving?.spec.dnsNames.includes('sidecar-injector.sidecar-injector.svc'));
  const hook = one(certManager, 'MutatingWebhookConfiguration');
  t.is(hook.metadata.annotations['cert-manager.io/inject-ca-from'], `${serving?.metadata.namespace}/${serving?.metadata.name}`);
});

test('certs overlay: a TLS Secret and the CA in caBundle; the certificate is for the Service name and signed by that CA', async (t) => {
  const secret = one(generated, 'Secret');
  t.is(secret.type, 'kubernetes.io/tls');
  t.is(secret.metadata.name, 'sidecar-injector-tls');
  t.is(secret.metadata.namespace, 'sidecar-injector');
  const ca = await readFile(join(generatedDir, 'ca.crt'), 'utf8');
  for (const hook of one(generated, 'MutatingWebhookConfiguration').webhooks) t.is(hook.clientConfig.caBundle, Buffer.from(ca).toString('base64'), hook.name);
  const cert = new X509Certificate(Buffer.from(secret.data['tls.crt'], 'base64'));
  t.true(cert.verify(new X509Certificate(ca).publicKey));
  t.is(cert.checkHost('sidecar-injector.sidecar-injector.svc'), 'sidecar-injector.sidecar-injector.svc');
});

test('certs: a second run keeps the CA and issues a new serving certificate', async (t) => {
  const dir = join(await mkdtemp(join(tmpdir(), 'sidecar-injector-certs-')), 'o');
  const first = await certs(['--out', dir, '--base', join('manifests', 'base'), '--days', '30']);
  const ca1 = await readFile(join(dir, 'ca.crt'), 'utf8');
  const tls1 = await readFile(join(dir, 'tls.crt'), 'utf8');
  const second = await certs(['--out', dir, '--base', join('manifests', 'base')]);
  t.false(first.reusedCa);
  t.true(second.reusedCa);
  t.is(await readFile(join(dir, 'ca.crt'), 'utf8'), ca1);
  t.not(await readFile(join(dir, 'tls.crt'), 'utf8'), tls1);
});

test('a NetworkPolicy admits traffic to the injector pods per port: the webhooks from any source, the metrics port from the monitoring namespace, the probe port', (t) => {
  const policy = one(base, 'NetworkPolicy');
  t.deepEqual(policy.spec.podSelector.matchLabels, deployment().spec.template.metadata.labels);
  t.deepEqual(policy.spec.policyTypes, ['Ingress']);
  const port = (name: string) => (injector().ports as Obj[]).find((p) => p.name === name)!.containerPort;
  t.deepEqual(
    (policy.spec.ingress as Obj[]).map((rule) => [rule.ports, rule.from]),
    [
      [[{ protocol: 'TCP', port: port('https') }], undefined],
      [[{ protocol: 'TCP', port: port('metrics') }], [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }]],
      [[{ protocol: 'TCP', port: port('probes') }], undefined],
    ],
  );
  t.is(policy.metadata.namespace, 'sidecar-injector');
});

test('the restricted-ingress component narrows each port to outside the pod network, plus Prometheus on the metrics port', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-netpol-'));
  const root = relative(dir, process.cwd());
  await writeFile(
    join(dir, 'kustomization.yaml'),
    `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${join(root, 'manifests', 'overlays', 'cert-manager')}\ncomponents:\n  - ${join(root, 'manifests', 'components', 'restricted-ingress')}\n`,
  );
  const objects = kustomize(dir);
  t.deepEqual(await schemaProblems(objects), []);
  const outside = { ipBlock: { cidr: '0.0.0.0/0', except: ['10.244.0.0/16'] } };
  t.deepEqual(
    (one(objects, 'NetworkPolicy').spec.ingress as Obj[]).map((rule) => rule.from),
    [[outside], [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'monitoring' } } }, outside], [outside]],
    'the webhooks and the probes from outside the pod network; the metrics port from Prometheus and the API server',
  );
  // The cert-manager overlay serves each port as the base does.
  const args = (one(objects, 'Deployment').spec.template.spec.containers[0].args as string[]).filter((a) => a.includes('port'));
  t.deepEqual(args, ['--port=10250', '--metrics-port=8443', '--probe-port=8081']);
});

test('deployment: the system-cluster-critical priority class, with a quota that admits it where clusters require one', (t) => {
  t.is(deployment().spec.template.spec.priorityClassName, 'system-cluster-critical');
  const quota = one(base, 'ResourceQuota');
  t.is(quota.metadata.namespace, 'sidecar-injector');
  t.deepEqual(quota.spec.scopeSelector.matchExpressions, [{ operator: 'In', scopeName: 'PriorityClass', values: ['system-cluster-critical'] }]);
});

test('the autoscaling component adds an HPA on the Deployment that never goes below the two replicas', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-hpa-'));
  const root = relative(dir, process.cwd());
  await writeFile(
    join(dir, 'kustomization.yaml'),
    `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${join(root, 'manifests', 'overlays', 'cert-manager')}\ncomponents:\n  - ${join(root, 'manifests', 'components', 'autoscaling')}\n`,
  );
  const objects = kustomize(dir);
  t.deepEqual(await schemaProblems(objects), []);
  const hpa = one(objects, 'HorizontalPodAutoscaler');
  t.deepEqual(hpa.spec.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: one(objects, 'Deployment').metadata.name });
  t.is(hpa.spec.minReplicas, 2);
  t.true(hpa.spec.maxReplicas <= Number(one(objects, 'ResourceQuota').spec.hard.pods), 'the quota admits every replica the HPA may make');
});

test('the audit-restart component: an hourly CronJob running audit --restart missing, with its own account that may patch workloads; the base may not', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-audit-'));
  const root = relative(dir, process.cwd());
  await writeFile(
    join(dir, 'kustomization.yaml'),
    `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${join(root, 'manifests', 'overlays', 'cert-manager')}\ncomponents:\n  - ${join(root, 'manifests', 'components', 'audit-restart')}\n`,
  );
  const objects = kustomize(dir);
  t.deepEqual(await schemaProblems(objects), []);
  const cron = one(objects, 'CronJob');
  const pod = cron.spec.jobTemplate.spec.template.spec;
  t.is(pod.serviceAccountName, 'sidecar-injector-auditor');
  t.deepEqual(pod.containers[0].args.slice(0, 1), ['audit']);
  t.true(pod.containers[0].args.includes('--restart=missing'));
  t.is(pod.containers[0].image, deployment().spec.template.spec.containers[0].image);
  // The templates in force: the cluster's SidecarTemplates, which its account may list.
  t.is(pod.volumes, undefined);
  t.false((pod.containers[0].args as string[]).some((a) => a.startsWith('--templates')));
  const role = find(objects, 'ClusterRole').find((r) => r.metadata.name === 'sidecar-injector-auditor')!;
  t.true(role.rules.some((r: Obj) => r.verbs.includes('patch') && r.resources.includes('deployments')));
  t.true(role.rules.some((r: Obj) => r.verbs.includes('list') && r.resources.includes('sidecartemplates')));
  // The base's own role never writes workloads (it patches events only).
  t.false(find(base, 'ClusterRole').some((role) => role.rules.some((r: Obj) => r.verbs.includes('patch') && r.apiGroups.includes('apps'))));
});

test('the rollout-preflight component: an opted-in probe namespace, create on pods there only, and serve told to use it', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-preflight-'));
  const root = relative(dir, process.cwd());
  await writeFile(
    join(dir, 'kustomization.yaml'),
    `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${join(root, 'manifests')}\ncomponents:\n  - ${join(root, 'manifests', 'components', 'rollout-preflight')}\n`,
  );
  const objects = kustomize(dir);
  t.deepEqual(await schemaProblems(objects), []);
  const probes = find(objects, 'Namespace').find((n) => n.metadata.name === 'sidecar-injector-probes')!;
  t.is(probes.metadata.labels['sidecar-injector.io/injection'], 'enabled');
  const role = find(objects, 'Role').find((r) => r.metadata.name === 'sidecar-injector-rollout-probe')!;
  t.is(role.metadata.namespace, 'sidecar-injector-probes');
  t.deepEqual(role.rules, [{ apiGroups: [''], resources: ['pods'], verbs: ['create'] }]);
  const binding = find(objects, 'RoleBinding').find((r) => r.metadata.name === 'sidecar-injector-rollout-probe')!;
  const injector = one(objects, 'Deployment');
  t.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: injector.spec.template.spec.serviceAccountName, namespace: injector.metadata.namespace }]);
  t.true(injector.spec.template.spec.containers[0].args.includes('--rollout-probe-namespace=sidecar-injector-probes'));
  // The base never creates pods.
  t.false(find(base, 'Role').some((r) => r.rules.some((rule: Obj) => rule.resources.includes('pods') && rule.verbs.includes('create'))));
});

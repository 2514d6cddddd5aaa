/**
 * Workloads as users create them, through the real API server and its controllers: every pod a
 * Deployment, StatefulSet, DaemonSet, Job, a CronJob's Job and a bare pod makes in an opted-in
 * namespace is stored with its sidecars exactly once, and equals what `render` gives offline
 * for the same manifest (the rendered pod template created through the same API server, where
 * no webhook runs, so both meet the same defaulting and ServiceAccount plugin). Then the same
 * with a MutatingAdmissionPolicy and a second webhook that edit pods, which makes the API
 * server call the injector a second time.
 */
import test, { type ExecutionContext } from 'ava';
import { parseAllDocuments } from 'yaml';
import { auditEvents, cli, eventually, joinWorld, optedInNamespace, templateConditionsWritten, testNamespace, type Json } from './helpers.js';
import { annotatingWebhook, inForce } from './second-webhook.js';

const image = 'registry.example/app:1.0';
const container = { name: 'app', image, ports: [{ containerPort: 8080 }] };

/** One of each workload kind, each labelled `workload: <its name>` on its pods. */
function workloads(): Json[] {
  const template = (name: string, extra: Json = {}) => ({
    metadata: { labels: { workload: name }, ...(extra.metadata ?? {}) },
    spec: { containers: [container], ...(extra.spec ?? {}) },
  });
  const selector = (name: string) => ({ matchLabels: { workload: name } });
  return [
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      // The proxy on request (a required template) beside the automatic log shipper (optional).
      spec: { replicas: 2, selector: selector('web'), template: template('web', { metadata: { annotations: { 'sidecar-injector.io/templates': 'proxy' } } }) },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'db' },
      spec: { replicas: 2, podManagementPolicy: 'Parallel', serviceName: 'db', selector: selector('db'), template: template('db') },
    },
    { apiVersion: 'apps/v1', kind: 'DaemonSet', metadata: { name: 'agent' }, spec: { selector: selector('agent'), template: template('agent') } },
    {
      apiVersion: 'batch/v1',
      kind: 'Job',
      metadata: { name: 'batch' },
      spec: { template: template('batch', { spec: { restartPolicy: 'Never' } }), backoffLimit: 0 },
    },
    {
      apiVersion: 'batch/v1',
      kind: 'CronJob',
      metadata: { name: 'nightly' },
      spec: { schedule: '0 3 * * *', jobTemplate: { spec: { template: template('nightly', { spec: { restartPolicy: 'OnFailure' } }) } } },
    },
    { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'bare', labels: { workload: 'bare' } }, spec: { containers: [container] } },
  ];
}

const expectedPods: Record<string, number> = { web: 2, db: 2, agent: 1, batch: 1, nightly: 1, bare: 1 };

/** The pod template of a workload as `render` wrote it (a Pod's own spec for a Pod). */
function podTemplate(object: Json): Json {
  if (object.kind === 'Pod') return { metadata: object.metadata, spec: object.spec };
  if (object.kind === 'CronJob') return object.spec.jobTemplate.spec.template;
  return object.spec.template;
}

/**
 * What injection decides in a stored pod: containers, volumes, annotations. Aside: the
 * ServiceAccount volume's random suffix, and the order of volumes and of each container's mounts,
 * which tells only whether the ServiceAccount plugin ran before the injection (in the chain) or
 * after it (the rendered pod), and means nothing to the kubelet.
 */
function injectedParts(pod: Json, previewName?: { readonly as: string }): Json {
  const byKey = (key: string) => (a: Json, b: Json) => String(a[key]).localeCompare(String(b[key]));
  const container = (c: Json) => ({ ...c, ...(c.volumeMounts ? { volumeMounts: [...c.volumeMounts].sort(byKey('mountPath')) } : {}) });
  const parts = {
    initContainers: (pod.spec.initContainers ?? []).map(container),
    containers: pod.spec.containers.map(container),
    volumes: [...(pod.spec.volumes ?? [])].sort(byKey('name')),
    // kubectl apply's own record of what it applied is no part of injection.
    annotations: Object.fromEntries(Object.entries(pod.metadata.annotations ?? {}).filter(([k]) => k !== 'kubectl.kubernetes.io/last-applied-configuration')),
  };
  let text = JSON.stringify(parts).replace(/kube-api-access-[a-z0-9]{5}/g, 'kube-api-access-*');
  // The name the pod had at admission, shown by render as the workload's (its warning pod-name-previewed).
  const admissionName = pod.metadata.generateName ? String(pod.metadata.generateName).replace(/-+$/, '') : String(pod.metadata.name);
  if (previewName) text = text.split(admissionName).join(previewName.as);
  return JSON.parse(text);
}

/** Every container name of a pod once, and every volume name once: the sidecars are there exactly once. */
function assertOnce(t: ExecutionContext, pod: Json, sidecars: string[]) {
  const names = [...(pod.spec.initContainers ?? []), ...pod.spec.containers].map((c: Json) => c.name);
  t.deepEqual(names.length, new Set(names).size, `${pod.metadata.name}: no container twice`);
  for (const sidecar of sidecars) t.is(names.filter((n) => n === sidecar).length, 1, `${pod.metadata.name}: ${sidecar} once`);
  const volumes = (pod.spec.volumes ?? []).map((v: Json) => v.name);
  t.is(volumes.length, new Set(volumes).size, `${pod.metadata.name}: no volume twice`);
  t.truthy(pod.metadata.annotations?.['sidecar-injector.io/status'], `${pod.metadata.name}: the ledger`);
}

async function podsOf(namespace: string, workload: string): Promise<Json[]> {
  const { kube } = joinWorld();
  return (await kube.get(`/api/v1/namespaces/${namespace}/pods?labelSelector=workload%3D${workload}`)).items;
}

/** Creates the workloads in `namespace` (the CronJob's Job from the CronJob, as `kubectl create job --from` does) and waits for all their pods. */
async function createWorkloads(namespace: string): Promise<Record<string, Json[]>> {
  const { kubectl } = joinWorld();
  await kubectl(
    ['apply', '-n', namespace, '-f', '-'],
    workloads()
      .map((w) => JSON.stringify(w))
      .join('\n'),
  );
  await kubectl(['create', 'job', '-n', namespace, 'nightly-manual', '--from=cronjob/nightly']);
  const pods: Record<string, Json[]> = {};
  for (const [workload, count] of Object.entries(expectedPods))
    pods[workload] = await eventually(`${count} pods of ${workload}`, async () => {
      const found = await podsOf(namespace, workload);
      return found.length >= count ? found : undefined;
    });
  return pods;
}

/** `render` of the workloads offline, for `namespace` opted in, at the cluster's version. */
async function renderOffline(namespace: string): Promise<{ objects: Map<string, Json>; explanation: string }> {
  const { file } = joinWorld();
  const minor = file.kubernetesVersion.replace(/^v(\d+\.\d+).*/, '$1');
  const rendered = await cli(
    [
      'render',
      '--explain',
      '-f',
      '-',
      '--templates',
      'templates',
      '--namespace',
      namespace,
      '--namespace-label',
      `${namespace}:sidecar-injector.io/injection=enabled`,
      '--kubernetes-version',
      minor,
    ],
    {
      input: workloads()
        .map((w) => JSON.stringify(w))
        .join('\n---\n'),
    },
  );
  if (rendered.code !== 0) throw new Error(`render failed: ${rendered.stderr}`);
  return {
    objects: new Map(
      parseAllDocuments(rendered.stdout)
        .map((d) => d.toJS() as Json)
        .map((o) => [o.metadata.name as string, o]),
    ),
    explanation: rendered.stderr,
  };
}

/** The rendered pod template as the API server stores it: created (dry run) where no webhook runs. */
async function storedForm(plainNamespace: string, template: Json, name: string): Promise<Json> {
  const { kube } = joinWorld();
  return kube.create(`/api/v1/namespaces/${plainNamespace}/pods?dryRun=All`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { ...template.metadata, name, namespace: plainNamespace },
    spec: template.spec,
  });
}

test('every workload kind: each stored pod has its sidecars exactly once and equals render offline', async (t) => {
  const namespace = await optedInNamespace(t, 'workloads');
  const plain = await testNamespace(t, 'plain');
  // The leader writes each pod webhook's template condition once it has read the templates.
  await templateConditionsWritten();
  const pods = await createWorkloads(namespace);
  const rendered = await renderOffline(namespace);
  const kinds = new Map(workloads().map((w) => [w.metadata.name as string, w.kind as string]));
  for (const [workload, stored] of Object.entries(pods)) {
    const offline = await storedForm(plain, podTemplate(rendered.objects.get(workload)!), `offline-${workload}`);
    // Where the controller names pods after something render cannot know, render shows the workload's name and says so.
    const renamed = ['Deployment', 'StatefulSet', 'CronJob'].includes(kinds.get(workload)!) ? { as: workload } : undefined;
    for (const pod of stored) {
      assertOnce(t, pod, workload === 'web' ? ['proxy', 'log-shipper'] : ['log-shipper']);
      t.deepEqual(injectedParts(pod, renamed), injectedParts(offline), `${pod.metadata.name} equals render's ${workload}`);
    }
  }
  t.regex(rendered.explanation, /proxy read pod\.name, and a Deployment's pods are named web-<pod-template-hash>-<random> after their ReplicaSet/);
  // Calls per create, counted from the audit log. The leader keeps each webhook's matchConditions
  // to the pods a template may apply to, so the required webhook is not called for a pod that
  // does not request the proxy (its only template is on request): one call, the optional
  // webhook's. The web pods request it: round 0 the required webhook and the optional one;
  // round 1 (the in-tree plugins run again) the required one only, because the optional one
  // changed the pod after it. The ServiceAccount plugin's second run finds its token mount in
  // the sidecars already and changes nothing, so nothing changes in round 1.
  const creates = auditEvents().filter(
    (e) => e.verb === 'create' && e.objectRef?.namespace === namespace && e.objectRef?.resource === 'pods' && !e.objectRef?.subresource,
  );
  t.true(creates.length >= 8);
  const perCreate: string[] = [];
  for (const event of creates) {
    const calls = Object.entries((event.annotations ?? {}) as Record<string, string>)
      .filter(([key]) => key.startsWith('mutation.webhook.admission.k8s.io/'))
      .map(([key, value]) => ({ round: Number(/round_(\d+)/.exec(key)![1]), ...JSON.parse(value) }))
      .filter((c) => c.configuration === 'sidecar-injector');
    perCreate.push(calls.map((c) => `${c.round}:${c.webhook}${c.mutated ? '*' : ''}`).join(' '));
  }
  // The audit log at level Metadata does not name a generated pod: the shapes are counted instead.
  const requesting = ['0:required.sidecar-injector.io* 0:optional.sidecar-injector.io* 1:required.sidecar-injector.io'];
  const plainCreate = '0:optional.sidecar-injector.io*';
  t.deepEqual(
    perCreate.filter((line) => line !== plainCreate),
    Array.from({ length: pods.web!.length }, () => requesting[0]),
    `the web pods (they request the proxy) take three calls, every other pod one:\n${perCreate.join('\n')}`,
  );
  t.is(perCreate.filter((line) => line === plainCreate).length, creates.length - pods.web!.length);
  t.log(`webhook calls per create (round:webhook, * changed the pod):\n${perCreate.join('\n')}`);
});

test('a MutatingAdmissionPolicy and a second webhook that edit pods: the sidecars still exactly once', async (t) => {
  const { kube } = joinWorld();
  const namespace = await optedInNamespace(t, 'reinvoke');
  const policy = `label-pods-${namespace}`;
  await kube.create('/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies', {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingAdmissionPolicy',
    metadata: { name: policy },
    spec: {
      matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }] },
      failurePolicy: 'Fail',
      reinvocationPolicy: 'IfNeeded',
      mutations: [
        {
          patchType: 'ApplyConfiguration',
          applyConfiguration: { expression: 'Object{metadata: Object.metadata{labels: {"edited-by": "policy"}}}' },
        },
      ],
    },
  });
  await kube.create('/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings', {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'MutatingAdmissionPolicyBinding',
    metadata: { name: policy },
    spec: { policyName: policy, matchResources: { namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': namespace } } } },
  });
  t.teardown(async () => {
    await kube.delete(`/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings/${policy}`);
    await kube.delete(`/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies/${policy}`);
  });
  await inForce(namespace, (pod) => pod.metadata.labels?.['edited-by'] === 'policy', 'the mutating policy');
  const second = await annotatingWebhook(t, namespace, 'second.example/seen');
  const pods = await createWorkloads(namespace);
  for (const [workload, stored] of Object.entries(pods))
    for (const pod of stored) {
      assertOnce(t, pod, workload === 'web' ? ['proxy', 'log-shipper'] : ['log-shipper']);
      t.is(pod.metadata.labels['edited-by'], 'policy');
      t.is(pod.metadata.annotations['second.example/seen'], 'seen');
    }
  t.true(second.seen.length >= 8, 'the second webhook saw every pod');
  t.true(
    second.seen.every((pod) => pod.metadata.annotations?.['sidecar-injector.io/status']),
    'after the injector (its configuration name sorts first)',
  );
});

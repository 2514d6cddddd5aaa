/**
 * The proof of `policies --mutating` on the real API server: every case (the corpus pods, cases
 * written from the rules, the decision matrix's cells) created in two namespaces, one served by
 * the webhooks only, one by the exported MutatingAdmissionPolicy only (with its guard and the
 * required templates' policies, all in Deny). The stored pods must be identical (spec, labels,
 * annotations with the ledger), refused alike, and fixed points under reinvocation (a second
 * policy that edits every pod makes the API server call both again); a pod of 240 containers
 * is among them (the CEL cost limits). Then a deliberately changed patch is shown to be caught.
 * A second test runs the hybrid install: one template by the policy, the others by the webhook.
 * The time a create takes with each is measured by bench/cluster.ts, not here.
 */
import test, { type ExecutionContext } from 'ava';
import { readFile, writeFile, copyFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { loadCorpus } from '../helpers/corpus.js';
import { loadTemplateDir } from '../../src/templates/load.js';
import { mutatingPolicies, mutatingPolicyOldestMinor, type MutatingPolicyApiVersion } from '../../src/manifests/mutating-policies.js';
import { parseKubernetesVersion } from '../../src/k8s/version.js';
import { requiredPolicies } from '../../src/manifests/required-policies.js';
import type { TemplateSet } from '../../src/templates/set.js';
import {
  auditEvents,
  cli,
  createCorpusServiceAccounts,
  eventually,
  everyReplica,
  joinWorld,
  optedInNamespace,
  sidecarTemplatesPath,
  someReplica,
  testFolder,
  testNamespace,
  warnings,
  withTemplate,
  type Json,
} from './helpers.js';

/** MutatingAdmissionPolicy's version here: v1 from 1.36; before, the beta (the world turns on its feature gate there, as a provider may). */
const minor = parseKubernetesVersion(joinWorld().file.kubernetesVersion)!.minor;
const mapApi: MutatingPolicyApiVersion = minor >= 36 ? 'v1' : 'v1beta1';
/** Where the API server can run the export (1.35 on): the proofs; before, the test of its refusal. */
const exportTest = minor >= mutatingPolicyOldestMinor ? test.serial : test.serial.skip;
const refusalTest = minor < mutatingPolicyOldestMinor ? test.serial : test.serial.skip;

/** The tutorial's template (docs/first-template.md), as the tutorial writes it. */
async function tutorialTemplate(): Promise<string> {
  const text = await readFile('docs/first-template.md', 'utf8');
  const start = text.indexOf("cat > my-templates/otel-agent.yaml <<'EOF'\n");
  return text.slice(text.indexOf('\n', start) + 1, text.indexOf('\nEOF\n', start) + 1);
}

/** A stored (or dry-run) pod without what differs between any two creates: identity, time, history, and its namespace's name. */
function comparable(pod: Json, namespace: string): string {
  const { uid: _u, resourceVersion: _r, creationTimestamp: _c, managedFields: _m, namespace: _n, name, ...metadata } = pod.metadata;
  const text = JSON.stringify({ metadata: { ...metadata, ...(pod.metadata.generateName ? {} : { name }) }, spec: pod.spec });
  // The ServiceAccount plugin names the token volume at random.
  return text
    .split(namespace)
    .join('NAMESPACE')
    .replace(/kube-api-access-[a-z0-9]{5}/g, 'kube-api-access-XXXXX');
}

const pod = (name: string, extra: { metadata?: Json; spec?: Json } = {}): Json => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, ...extra.metadata },
  spec: { containers: [{ name: 'app', image: 'registry.example/app:1' }], ...extra.spec },
});
const limited = { resources: { limits: { cpu: '500m', memory: '256Mi' } } };
const otel = { 'telemetry.example.com/agent': 'enabled' };

/** The decision's rules and the shapes peers test, beside the corpus. */
const cases: { name: string; body: Json }[] = [
  { name: 'plain', body: pod('plain') },
  { name: 'generate-name', body: { ...pod(''), metadata: { generateName: 'web-' } } },
  { name: 'named-app', body: pod('named', { metadata: { labels: { 'app.kubernetes.io/name': 'shop' } } }) },
  { name: 'proxy-requested', body: pod('proxied', { metadata: { annotations: { 'sidecar-injector.io/templates': 'proxy' } } }) },
  { name: 'proxy-requested-spaced', body: pod('spaced', { metadata: { annotations: { 'sidecar-injector.io/templates': ' log-shipper , proxy ' } } }) },
  {
    name: 'overrides-valid',
    body: pod('overrides', {
      metadata: {
        annotations: {
          'sidecar-injector.io/templates': 'proxy',
          'log-shipper.sidecar-injector.io/memoryLimit': '128Mi',
          'log-shipper.sidecar-injector.io/logLevel': 'debug',
          'proxy.sidecar-injector.io/cpuRequest': '100m',
          'proxy.sidecar-injector.io/memoryLimit': '256Mi',
        },
      },
    }),
  },
  { name: 'override-too-large', body: pod('too-large', { metadata: { annotations: { 'log-shipper.sidecar-injector.io/memoryLimit': '10Gi' } } }) },
  { name: 'override-not-quantity', body: pod('not-quantity', { metadata: { annotations: { 'log-shipper.sidecar-injector.io/memoryLimit': 'lots' } } }) },
  { name: 'override-unknown', body: pod('unknown', { metadata: { annotations: { 'log-shipper.sidecar-injector.io/colour': 'blue' } } }) },
  { name: 'override-fixed', body: pod('fixed', { metadata: { annotations: { 'log-shipper.sidecar-injector.io/image': 'evil/image' } } }) },
  {
    name: 'override-namespace-only',
    body: pod('ns-only', { metadata: { labels: otel, annotations: { 'otel-agent.sidecar-injector.io/logLevel': 'debug' } } }),
  },
  { name: 'override-bad-enum', body: pod('bad-enum', { metadata: { annotations: { 'log-shipper.sidecar-injector.io/logLevel': 'loud' } } }) },
  { name: 'opted-out-of-one', body: pod('no-ship', { metadata: { labels: { 'logging.example.com/ship': 'false' } } }) },
  { name: 'otel', body: pod('otel', { metadata: { labels: { ...otel, 'app.kubernetes.io/name': 'checkout' } } }) },
  { name: 'otel-override', body: pod('otel-mem', { metadata: { labels: otel, annotations: { 'otel-agent.sidecar-injector.io/memoryLimit': '512Mi' } } }) },
  { name: 'all-three', body: pod('all', { metadata: { labels: otel, annotations: { 'sidecar-injector.io/templates': 'proxy' } } }) },
  {
    name: 'two-apps-and-init',
    body: pod('two', {
      metadata: { labels: otel, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
      spec: {
        initContainers: [{ name: 'setup', image: 'registry.example/setup:1' }],
        containers: [
          { name: 'app', image: 'registry.example/app:1', env: [{ name: 'LOG_DIR', value: '/elsewhere' }] },
          { name: 'worker', image: 'registry.example/worker:1', volumeMounts: [{ name: 'data', mountPath: '/data' }] },
        ],
        volumes: [{ name: 'data', emptyDir: {} }],
      },
    }),
  },
  {
    name: 'guaranteed',
    body: pod('guaranteed', {
      metadata: { labels: otel, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
      spec: { containers: [{ name: 'app', image: 'a', ...limited }] },
    }),
  },
  {
    name: 'guaranteed-requests-equal',
    body: pod('guaranteed-eq', {
      spec: {
        containers: [{ name: 'app', image: 'a', resources: { requests: { cpu: '0.5', memory: '256Mi' }, limits: { cpu: '500m', memory: '268435456' } } }],
      },
    }),
  },
  {
    name: 'burstable',
    body: pod('burstable', { spec: { containers: [{ name: 'app', image: 'a', resources: { requests: { cpu: '100m' }, limits: { cpu: '1' } } }] } }),
  },
  { name: 'runs-to-completion', body: pod('job-like', { metadata: { labels: otel }, spec: { restartPolicy: 'Never' } }) },
  {
    name: 'on-failure',
    body: pod('on-failure', { metadata: { labels: otel, annotations: { 'sidecar-injector.io/templates': 'proxy' } }, spec: { restartPolicy: 'OnFailure' } }),
  },
  { name: 'host-network-port', body: pod('host-net', { metadata: { labels: otel }, spec: { hostNetwork: true } }) },
  {
    name: 'name-conflict-optional',
    body: pod('conflict', {
      spec: {
        containers: [
          { name: 'app', image: 'a' },
          { name: 'log-shipper', image: 'mine' },
        ],
      },
    }),
  },
  {
    name: 'name-conflict-required',
    body: pod('conflict-req', {
      metadata: { annotations: { 'sidecar-injector.io/templates': 'proxy' } },
      spec: {
        containers: [
          { name: 'app', image: 'a' },
          { name: 'proxy', image: 'mine' },
        ],
      },
    }),
  },
  { name: 'volume-conflict', body: pod('vol-conflict', { spec: { volumes: [{ name: 'app-logs', configMap: { name: 'logs' } }] } }) },
  { name: 'volume-same', body: pod('vol-same', { spec: { volumes: [{ name: 'app-logs', emptyDir: { sizeLimit: '256Mi' } }] } }) },
  {
    name: 'label-present',
    body: pod('label-present', { metadata: { labels: { 'proxy.example.com/injected': 'no' }, annotations: { 'sidecar-injector.io/templates': 'proxy' } } }),
  },
  { name: 'annotation-present', body: pod('ann-present', { metadata: { annotations: { 'logging.example.com/shipper': 'mine' } } }) },
  {
    name: 'mount-present',
    body: pod('mount-present', { spec: { containers: [{ name: 'app', image: 'a', volumeMounts: [{ name: 'app-logs', mountPath: '/var/log/app' }] }] } }),
  },
  { name: 'windows', body: pod('windows', { metadata: { labels: otel }, spec: { os: { name: 'windows' } } }) },
  { name: 'service-account', body: pod('sa', { spec: { serviceAccountName: 'default' } }) },
  // Where CEL and the webhook read a pod differently unless the export takes care: quantities, retired ledger entries, sameness, refusals.
  { name: 'override-go-only-quantity', body: pod('go-quantity', { metadata: { annotations: { 'log-shipper.sidecar-injector.io/memoryLimit': '4e0008' } } }) },
  {
    name: 'ledger-of-a-retired-template',
    body: pod('retired', {
      metadata: { annotations: { 'sidecar-injector.io/status': '{"v":1,"templates":{"old-agent":{"hash":"x","containers":["old-agent"]}}}' } },
      spec: {
        containers: [
          { name: 'app', image: 'a' },
          { name: 'old-agent', image: 'registry.example/old-agent:1' },
        ],
      },
    }),
  },
  { name: 'volume-same-in-bytes', body: pod('vol-bytes', { spec: { volumes: [{ name: 'app-logs', emptyDir: { sizeLimit: '268435456' } }] } }) },
  { name: 'unknown-template-requested', body: pod('typo', { metadata: { annotations: { 'sidecar-injector.io/templates': 'proxy,typo' } } }) },
  // White space is Go's to both (U+0085 is, U+FEFF is not), and a quantity finer than 1n rounds up alike.
  { name: 'requested-name-ending-in-next-line', body: pod('nel', { metadata: { annotations: { 'sidecar-injector.io/templates': 'proxy\u0085' } } }) },
  { name: 'requested-name-ending-in-bom', body: pod('bom', { metadata: { annotations: { 'sidecar-injector.io/templates': 'proxy\ufeff' } } }) },
  {
    name: 'override-finer-than-nano-at-the-bound',
    body: pod('finer', { metadata: { annotations: { 'log-shipper.sidecar-injector.io/memoryLimit': '33554431.9999999999' } } }),
  },
  { name: 'too-many-labels', body: pod('labels', { metadata: { labels: Object.fromEntries(Array.from({ length: 2001 }, (_, i) => [`l${i}`, 'x'])) } }) },
  {
    name: 'required-look-alike',
    body: pod('look-alike', {
      metadata: { annotations: { 'sidecar-injector.io/templates': 'proxy' } },
      spec: { initContainers: [{ name: 'proxy', image: 'envoyproxy/envoy:v1.33.0', restartPolicy: 'Always' }] },
    }),
  },
  // Known to differ (knownDifferences): the webhook grows the pod's budget, the policy cannot and the guard refuses the pod.
  {
    name: 'pod-level-resources',
    body: pod('pod-budget', { spec: { resources: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '2', memory: '2Gi' } } } }),
  },
  {
    // The cost limits: every template applies to a pod of 240 containers (with its sidecars, near the injector's bound of 250).
    name: 'many-containers',
    body: pod('many', {
      metadata: { labels: otel, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
      spec: {
        containers: Array.from({ length: 240 }, (_, i) => ({
          name: `c${i}`,
          image: 'registry.example/app:1',
          env: [{ name: 'A', value: 'a' }, ...(i % 2 ? [{ name: 'LOG_DIR', value: '/mine' }] : [])],
          volumeMounts: i % 3 ? [] : [{ name: 'data', mountPath: '/data' }],
        })),
        volumes: [{ name: 'data', emptyDir: {} }],
      },
    }),
  },
];

// --- The decision matrix's axes (test/decision-matrix.test.ts): template classes × pod kinds × Pod Security levels.

interface TemplateClass {
  readonly required: boolean;
  readonly onRequest: boolean;
  readonly native: boolean;
}
const classes: TemplateClass[] = [];
for (const required of [true, false]) for (const onRequest of [false, true]) for (const native of [true, false]) classes.push({ required, onRequest, native });
const agentName = (c: TemplateClass) => `agent-${c.required ? 'r' : 'o'}${c.onRequest ? 'q' : 'a'}${c.native ? 'n' : 'c'}`;

/** The matrix's agent in each class, fitting Pod Security restricted on its own (what export needs). */
function agentTemplate(c: TemplateClass): string {
  const name = agentName(c);
  const container = [
    `  - name: ${name}`,
    '    image: example.com/agent:1.0',
    ...(c.native ? ['    restartPolicy: Always'] : []),
    '    resources: { limits: { cpu: 50m, memory: 32Mi } }',
    '    securityContext:',
    '      allowPrivilegeEscalation: false',
    '      runAsNonRoot: true',
    '      capabilities: { drop: [ALL] }',
    '      seccompProfile: { type: RuntimeDefault }',
  ];
  return [
    `name: ${name}`,
    `injection: ${c.onRequest ? 'on-request' : 'automatic'}`,
    `failurePolicy: ${c.required ? 'Fail' : 'Ignore'}`,
    // The native agents start first: sidecars of both classes in both placements, whose order is by name.
    ...(c.native ? ['placement: first'] : []),
    "objectSelector: { matchLabels: { 'map-export-test/matrix': 'true' } }",
    c.native ? 'initContainers:' : 'containers:',
    ...container,
    '',
  ].join('\n');
}

const podKinds = [
  'Deployment',
  'StatefulSet',
  'DaemonSet',
  'Job',
  'CronJob',
  'bare-Always',
  'bare-Never',
  'bare-OnFailure',
  'mirror',
  'Windows',
  'Windows-beta-label',
  'Windows-affinity',
] as const;
type PodKind = (typeof podKinds)[number];
const levels = ['none', 'baseline', 'restricted'] as const;

/** A pod of `kind` as its controller creates it, asking for every on-request agent. */
function matrixPod(kind: PodKind): Json {
  const app = {
    name: 'app',
    image: 'example.com/app:2.1',
    securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } },
  };
  const spec: Json = { containers: [app], securityContext: { runAsNonRoot: true } };
  if (kind === 'Job' || kind === 'CronJob' || kind === 'bare-Never') spec.restartPolicy = 'Never';
  if (kind === 'bare-OnFailure') spec.restartPolicy = 'OnFailure';
  if (kind === 'Windows') spec.os = { name: 'windows' };
  if (kind === 'Windows-beta-label') spec.nodeSelector = { 'beta.kubernetes.io/os': 'windows' };
  if (kind === 'Windows-affinity')
    spec.affinity = {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['windows'] }] }],
        },
      },
    };
  if (kind.startsWith('Windows')) spec.containers = [{ name: 'app', image: 'example.com/app:2.1-windows' }];
  const annotations: Json = {
    'sidecar-injector.io/templates': classes
      .filter((c) => c.onRequest)
      .map(agentName)
      .join(','),
  };
  if (kind === 'mirror') annotations['kubernetes.io/config.mirror'] = 'abc123';
  const ref = (apiVersion: string, k: string, n: string) => ({ apiVersion, kind: k, name: n, uid: `0000-${k.toLowerCase()}-${n}`, controller: true });
  const owner: Record<string, Json> = {
    Deployment: ref('apps/v1', 'ReplicaSet', 'web-5d8f'),
    StatefulSet: ref('apps/v1', 'StatefulSet', 'db'),
    DaemonSet: ref('apps/v1', 'DaemonSet', 'node-agent'),
    Job: ref('batch/v1', 'Job', 'migrate'),
    CronJob: ref('batch/v1', 'Job', 'nightly-29010'),
  };
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: `m-${kind.toLowerCase()}`,
      labels: { app: kind.toLowerCase(), 'map-export-test/matrix': 'true' },
      annotations,
      ...(owner[kind] ? { ownerReferences: [owner[kind]] } : {}),
    },
    spec,
  };
}

/** Where the policy is known to answer otherwise than the webhook (docs/map-export.md), with the refusal it must give. */
const knownDifferences = new Map([['pod-level-resources', /cannot grow the pod-level resources \(spec\.resources\)/]]);

interface Side {
  readonly namespace: string;
  status: number;
  body: Json;
}

/**
 * Where a stored pod's sidecars are not in their order: in each list, those placed first ahead of
 * the pod's own containers and those placed last after them, each group in template-name order
 * (whoever added them). `grouped` counts the lists holding two sidecars of one placement.
 */
function orderProblems(name: string, pod: Json, set: TemplateSet, counts: { grouped: number }): string[] {
  const ledger = JSON.parse(pod.metadata.annotations?.['sidecar-injector.io/status'] ?? '{"templates":{}}');
  const problems: string[] = [];
  for (const list of ['initContainers', 'containers'] as const) {
    const owners = new Map<string, string>();
    for (const [template, entry] of Object.entries(ledger.templates as Record<string, Json>)) for (const c of entry[list] ?? []) owners.set(c, template);
    const keys = ((pod.spec[list] ?? []) as Json[]).map((c) => {
      const owner = owners.get(c.name);
      const placement = owner === undefined ? undefined : set.byName.get(owner)?.placement;
      return { container: c.name as string, key: owner === undefined ? '1' : `${placement === 'first' ? '0' : '2'}${owner}`, placement };
    });
    for (let i = 1; i < keys.length; i++)
      if (keys[i - 1]!.key > keys[i]!.key) problems.push(`${name}: ${list} ${keys.map((k) => k.container).join(', ')}: ${keys[i]!.container} out of order`);
    for (const placement of ['first', 'last']) if (new Set(keys.filter((k) => k.placement === placement).map((k) => k.key)).size > 1) counts.grouped++;
  }
  return problems;
}

async function createBoth(webhookNs: string, policyNs: string, body: Json): Promise<[Side, Side]> {
  const { kube } = joinWorld();
  const out: Side[] = [];
  for (const namespace of [webhookNs, policyNs]) {
    const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, body);
    out.push({ namespace, status: answer.status, body: answer.body });
  }
  return out as [Side, Side];
}

/** The difference between the two sides, in a sentence; undefined when they agree. */
function difference(name: string, [webhook, policy]: [Side, Side]): string | undefined {
  if ((webhook.status === 201) !== (policy.status === 201))
    return `${name}: webhook ${webhook.status} ${webhook.status === 201 ? '' : webhook.body.message}; policy ${policy.status} ${policy.status === 201 ? '' : policy.body.message}`;
  if (webhook.status !== 201) return undefined;
  const a = comparable(webhook.body, webhook.namespace);
  const b = comparable(policy.body, policy.namespace);
  if (a === b) return undefined;
  let at = 0;
  while (a[at] === b[at]) at++;
  const ledger = (s: Side) => s.body.metadata.annotations?.['sidecar-injector.io/status'];
  if (ledger(webhook) !== ledger(policy)) return `${name}: the ledgers differ: ${ledger(webhook)} vs ${ledger(policy)}`;
  return `${name}: the pods differ at …${a.slice(Math.max(0, at - 120), at + 160)}… vs …${b.slice(Math.max(0, at - 120), at + 160)}…`;
}

async function apply(kube: ReturnType<typeof joinWorld>['kube'], t: ExecutionContext, object: Json): Promise<void> {
  const plural = `${object.kind.toLowerCase()}s`.replace(/ys$/, 'ies');
  const apis = `/apis/${object.apiVersion}`;
  await kube.create(`${apis}/${plural}`, object);
  t.teardown(() => kube.delete(`${apis}/${plural}/${object.metadata.name}`));
}

exportTest('the exported policy stores the pods the webhook stores, refuses the pods it refuses, and stays a fixed point under reinvocation', async (t) => {
  const { kube } = joinWorld();
  // The templates the injector serves: the bundled ones, the tutorial's, and the decision matrix's agents.
  const dir = await testFolder(t, 'map-export');
  for (const file of await readdir('templates')) if (file !== 'kustomization.yaml') await copyFile(join('templates', file), join(dir, file));
  const added = [['otel-agent', await tutorialTemplate()] as const, ...classes.map((c) => [agentName(c), agentTemplate(c)] as const)];
  for (const [name, text] of added) {
    await writeFile(join(dir, `${name}.yaml`), text);
    await withTemplate(t, name, text);
  }
  const set = await loadTemplateDir(dir);
  const exported = mutatingPolicies(set, undefined, mapApi);
  t.deepEqual(exported.refused, []);
  // The command against this cluster writes the version it serves, found in its discovery.
  const printed = await cli(['policies', '--mutating']);
  t.is(printed.code, 0, printed.stderr);
  t.regex(printed.stdout, new RegExp(`^apiVersion: admissionregistration\\.k8s\\.io/${mapApi}\\nkind: MutatingAdmissionPolicy\\n`, 'm'));
  t.deepEqual(
    exported.exported.filter((n) => !n.startsWith('agent-')),
    ['proxy', 'log-shipper', 'otel-agent'],
    'the bundled templates and the tutorial one export',
  );

  const id = Math.random().toString(16).slice(2, 8);
  // A namespace override for the agent, and one for the log shipper that only Go reads as a quantity (the webhook ignores it).
  const annotations = { 'otel-agent.sidecar-injector.io/logLevel': 'warn', 'log-shipper.sidecar-injector.io/memoryLimit': '4e0008' };
  const webhookNs = await optedInNamespace(t, 'map-webhook');
  const policyNs = await testNamespace(t, 'map-policy', { 'map-export-test': id });
  for (const ns of [webhookNs, policyNs]) {
    await kube.mergePatch(`/api/v1/namespaces/${ns}`, { metadata: { annotations } });
    await createCorpusServiceAccounts(ns);
  }
  // A pair per Pod Security level, for the matrix.
  const pairs: { level: string; webhookNs: string; policyNs: string }[] = [];
  for (const level of levels) {
    const enforce: Record<string, string> = level === 'none' ? {} : { 'pod-security.kubernetes.io/enforce': level };
    pairs.push({
      level,
      webhookNs: await optedInNamespace(t, `map-w-${level}`, enforce),
      policyNs: await testNamespace(t, `map-p-${level}`, { 'map-export-test': id, ...enforce }),
    });
  }
  // The generated objects with bindings of their own: the policy namespace only (the generated ones select opted-in namespaces).
  const onlyPolicyNs = { namespaceSelector: { matchLabels: { 'map-export-test': id } } };
  const generated: Json[] = [...exported.objects, ...requiredPolicies(set, { validationActions: ['Deny'] }).flatMap((p) => [p.policy, p.binding])];
  const policies = generated.filter((o) => !String(o.kind).endsWith('Binding'));
  for (const object of generated) {
    // Each binding as generated (its pod selector, its actions), for the policy namespaces only.
    const bound = String(object.kind).endsWith('Binding')
      ? { ...object, spec: { ...object.spec, matchResources: { ...object.spec.matchResources, ...onlyPolicyNs } } }
      : object;
    await apply(kube, t, bound);
  }
  // A second policy that edits every pod in both namespaces: the API server then calls the webhook and the exported policy again.
  await apply(kube, t, {
    apiVersion: `admissionregistration.k8s.io/${mapApi}`,
    kind: 'MutatingAdmissionPolicy',
    metadata: { name: `map-export-touch-${id}` },
    spec: {
      failurePolicy: 'Fail',
      reinvocationPolicy: 'IfNeeded',
      matchConstraints: { resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'], scope: 'Namespaced' }] },
      mutations: [
        {
          patchType: 'JSONPatch',
          jsonPatch: {
            expression:
              "has(object.metadata.labels) && 'map-export-test/touched' in object.metadata.labels ? [] : (has(object.metadata.labels) ? [] : [JSONPatch{op: 'add', path: '/metadata/labels', value: {}}]) + [JSONPatch{op: 'add', path: '/metadata/labels/map-export-test~1touched', value: 'true'}]",
          },
        },
      ],
    },
  });
  await apply(kube, t, {
    apiVersion: `admissionregistration.k8s.io/${mapApi}`,
    kind: 'MutatingAdmissionPolicyBinding',
    metadata: { name: `map-export-touch-${id}` },
    spec: {
      policyName: `map-export-touch-${id}`,
      matchResources: {
        namespaceSelector: {
          matchExpressions: [
            { key: 'kubernetes.io/metadata.name', operator: 'In', values: [webhookNs, policyNs, ...pairs.flatMap((p) => [p.webhookNs, p.policyNs])] },
          ],
        },
      },
    },
  });
  // The API server reloads policies about every second: wait until both sides inject and touch.
  let last: [Side, Side] | undefined;
  await eventually('the policies in force', async () => {
    const [w, p] = (last = await createBoth(webhookNs, policyNs, pod('probe')));
    const ready = (s: Side) =>
      s.status === 201 && s.body.metadata.labels?.['map-export-test/touched'] === 'true' && s.body.metadata.annotations?.['sidecar-injector.io/status'];
    return ready(w) && ready(p);
  }).catch((err: Error) => {
    throw new Error(
      `${err.message}: last answers ${JSON.stringify(last?.map((s) => [s.status, s.body.message ?? s.body.metadata?.annotations]))}`.slice(0, 3000),
    );
  });

  const all = [
    ...loadCorpus().map((c) => ({ name: `corpus/${c.name}`, body: structuredClone(c.body), webhookNs, policyNs })),
    ...cases.map((c) => ({ ...c, webhookNs, policyNs })),
    ...pairs.flatMap((p) =>
      podKinds.map((kind) => ({ name: `matrix/${kind}/${p.level}`, body: matrixPod(kind), webhookNs: p.webhookNs, policyNs: p.policyNs })),
    ),
  ];
  for (const c of all) delete c.body.metadata.namespace;
  const differences: string[] = [];
  const refusedNames: string[] = [];
  const knownSeen: string[] = [];
  const ordered = { grouped: 0 };
  let injected = 0;
  for (const c of all) {
    const sides = await createBoth(c.webhookNs, c.policyNs, c.body);
    const known = knownDifferences.get(c.name);
    if (known) {
      // The webhook injects; the policy side refuses the pod, saying why.
      if (sides[0].status !== 201 || sides[1].status === 201 || !known.test(String(sides[1].body.message)))
        differences.push(
          `${c.name}: expected the webhook to inject and the policy side to refuse (${known}): ${sides[0].status}, ${sides[1].status} ${sides[1].body.message}`,
        );
      else knownSeen.push(c.name);
      continue;
    }
    const problem = difference(c.name, sides);
    if (problem) differences.push(problem);
    if (sides[0].status === 201) differences.push(...orderProblems(c.name, sides[0].body, set, ordered));
    if (sides[0].status !== 201) refusedNames.push(`${c.name} (${sides[0].status})`);
    else if (sides[0].body.metadata.annotations?.['sidecar-injector.io/status']) injected++;
    // The policy's pod created again comes back unchanged: a fixed point.
    if (sides[1].status === 201) {
      const again = structuredClone(sides[1].body);
      for (const field of ['resourceVersion', 'uid', 'creationTimestamp', 'managedFields']) delete again.metadata[field];
      if (again.metadata.generateName) delete again.metadata.name;
      const second = await kube.request('POST', `/api/v1/namespaces/${c.policyNs}/pods?dryRun=All`, again);
      if (second.status !== 201 || comparable(second.body, c.policyNs) !== comparable(sides[1].body, c.policyNs))
        differences.push(`${c.name}: the policy's pod is not a fixed point`);
    }
  }
  t.log(
    `${all.length} cases compared (${loadCorpus().length} corpus pods, ${cases.length} rule cases, ${all.length - loadCorpus().length - cases.length} matrix cells): ${injected} injected, ${refusedNames.length} refused alike (${refusedNames.join(', ')}), ${differences.length} differences; known to differ: ${knownSeen.join(', ') || 'none'}`,
  );
  for (const d of differences) t.log(d);
  t.deepEqual(differences, []);
  t.deepEqual(knownSeen, [...knownDifferences.keys()]);
  t.true(injected > 30 && refusedNames.length >= 5, 'the cases inject and refuse');
  t.log(`${ordered.grouped} container lists hold sidecars of two templates placed alike, each in template-name order`);
  t.true(ordered.grouped >= 10, 'the order is seen where it can go wrong');

  // The guard names in the audit log the rule that left a template out (ResponseComplete carries the annotations).
  const annotated = (name: string, key: string) =>
    auditEvents().find(
      (e) =>
        e.verb === 'create' && e.objectRef?.namespace === policyNs && e.objectRef?.name === name && e.annotations?.[`sidecar-injector-exported-guard/${key}`],
    )?.annotations?.[`sidecar-injector-exported-guard/${key}`];
  t.is(await eventually('the guard’s audit annotation', () => annotated('conflict', 'log-shipper')), 'name-conflict');
  t.is(annotated('vol-conflict', 'log-shipper'), 'volume-conflict');
  t.is(annotated('host-net', 'otel-agent'), 'host-network-port');
  t.is(annotated('plain', 'log-shipper'), undefined, 'injected: nothing to say');

  // The proof can fail: a deliberately changed patch (another image for the log shipper) is caught.
  const changed = structuredClone(policies[0]!);
  const path = `/apis/admissionregistration.k8s.io/${mapApi}/mutatingadmissionpolicies/${changed.metadata.name}`;
  const current = await kube.call('GET', path);
  changed.metadata.resourceVersion = current.metadata.resourceVersion;
  changed.spec.mutations = changed.spec.mutations.map((m: Json) => ({
    ...m,
    jsonPatch: { expression: m.jsonPatch.expression.replaceAll('fluent/fluent-bit:3.2.2', 'fluent/fluent-bit:3.2.3') },
  }));
  await kube.call('PUT', path, changed);
  const caught = await eventually('the changed policy in force', async () => {
    const sides = await createBoth(webhookNs, policyNs, pod('changed'));
    return difference('changed', sides);
  });
  t.regex(caught, /fluent-bit:3\.2\.[23]/);
});

exportTest(
  'hybrid: a template marked delivery: policy is injected by the policy and left alone by the webhook, the others by the webhook; each sidecar once, the ledger whole, a fixed point',
  async (t) => {
    const { kube } = joinWorld();
    // The installed log shipper, marked for the policy; restored after the test.
    const path = sidecarTemplatesPath('log-shipper');
    const original = await readFile('templates/log-shipper.yaml', 'utf8');
    const marked = original.replace(/^ {2}failurePolicy: Ignore$/m, '  failurePolicy: Ignore\n  delivery: policy');
    t.not(marked, original);
    const dir = await testFolder(t, 'map-hybrid');
    for (const file of await readdir('templates')) if (file !== 'kustomization.yaml') await copyFile(join('templates', file), join(dir, file));
    await writeFile(join(dir, 'log-shipper.yaml'), marked);
    // A webhook-delivered native sidecar placed last whose name comes before the log shipper's: the
    // policy adds the log shipper first, and the webhook still puts its sidecar ahead of it.
    const auditAgent = [
      'name: audit-agent',
      'failurePolicy: Ignore',
      "objectSelector: { matchLabels: { 'map-export-test/order': 'true' } }",
      'initContainers:',
      '  - name: audit-agent',
      '    image: example.com/audit-agent:1.0',
      '    restartPolicy: Always',
      '',
    ].join('\n');
    await writeFile(join(dir, 'audit-agent.yaml'), auditAgent);
    await withTemplate(t, 'audit-agent', auditAgent);
    const set = await loadTemplateDir(dir);
    const hash = set.byName.get('log-shipper')!.hash;
    t.is(hash, (await loadTemplateDir('templates')).byName.get('log-shipper')!.hash, 'marked, its revision is the one installed: no pod goes stale');
    // The revision is the same marked or not (delivery is no part of it): /status says who delivers it.
    const serves = (status: Json) =>
      (status.templates.templates as string[]).includes(`log-shipper@${hash}`) &&
      ((status.templates.deliveredByPolicy ?? []) as string[]).includes('log-shipper');
    await kube.mergePatch(path, { spec: { delivery: 'policy' } });
    t.teardown(async () => {
      await kube.mergePatch(path, { spec: { delivery: null } });
      await everyReplica((status) => !serves(status), 'every replica serving the log shipper as installed');
    });
    await everyReplica(serves, 'every replica serving the log shipper marked delivery: policy');
    const exported = mutatingPolicies(set, undefined, mapApi);
    t.deepEqual(exported.exported, ['log-shipper'], 'the marked template only');
    const id = Math.random().toString(16).slice(2, 8);
    const namespace = await optedInNamespace(t, 'map-hybrid', { 'map-export-test': id });
    await createCorpusServiceAccounts(namespace);
    const create = (body: Json) => kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, body);
    const missedByPolicy = (answer: { headers: Record<string, string | string[] | undefined> }) =>
      warnings(answer).some((w) => /^log-shipper: not injected by the MutatingAdmissionPolicy \(delivery: policy\); the webhook decides it instead$/.test(w));
    // No policy applied yet: the webhook injects the marked template itself, and says why.
    const early = await create(pod('before-policy'));
    t.is(early.status, 201);
    t.true(
      (early.body.spec.initContainers as Json[] | undefined)?.some((c) => c.name === 'log-shipper'),
      'never silently missing',
    );
    t.true(missedByPolicy(early), 'the warning names the policy');
    // The leader says so too, with the command that fixes it.
    const absent = await someReplica((status) => status.exportedPolicy?.state === 'absent', "the leader's /status: the exported policy absent");
    t.regex(
      absent.exportedPolicy.problem,
      /^the MutatingAdmissionPolicy sidecar-injector-exported does not exist: the webhooks inject log-shipper \(delivery: policy\) instead; sidecar-injector policies --mutating \| kubectl apply -f -$/,
    );
    for (const object of exported.objects) {
      const bound = String(object.kind).endsWith('Binding')
        ? { ...object, spec: { ...(object.spec as Json), matchResources: { namespaceSelector: { matchLabels: { 'map-export-test': id } } } } }
        : object;
      await apply(kube, t, bound);
    }
    await eventually('the policy in force', async () => {
      const answer = await create(pod('probe'));
      return answer.status === 201 && answer.body.spec.initContainers?.some((c: Json) => c.name === 'log-shipper') && !missedByPolicy(answer);
    });
    await someReplica((status) => status.exportedPolicy?.state === 'current', "the leader's /status: the exported policy current");
    const all = [
      ...loadCorpus().map((c) => ({ name: `corpus/${c.name}`, body: structuredClone(c.body) })),
      { name: 'plain', body: pod('plain') },
      {
        name: 'proxy-requested',
        body: pod('proxied', { metadata: { annotations: { 'sidecar-injector.io/templates': 'proxy', 'proxy.sidecar-injector.io/cpuRequest': '100m' } } }),
      },
      { name: 'ordered', body: pod('ordered', { metadata: { labels: { 'map-export-test/order': 'true' } } }) },
      {
        name: 'ordered-job',
        body: pod('ordered-job', {
          metadata: { labels: { 'map-export-test/order': 'true' }, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
          spec: { restartPolicy: 'Never' },
        }),
      },
      { name: 'opted-out-of-one', body: pod('no-ship', { metadata: { labels: { 'logging.example.com/ship': 'false' } } }) },
    ];
    const problems: string[] = [];
    const ordered = { grouped: 0 };
    let both = 0;
    for (const c of all) {
      delete c.body.metadata.namespace;
      const answer = await create(c.body);
      if (answer.status !== 201) {
        problems.push(`${c.name}: ${answer.status} ${answer.body.message}`);
        continue;
      }
      const stored = answer.body;
      if (missedByPolicy(answer)) problems.push(`${c.name}: the webhook, not the policy, injected the log shipper`);
      const names = [...(stored.spec.initContainers ?? []), ...stored.spec.containers].map((x: Json) => x.name as string);
      if (names.length !== new Set(names).size) problems.push(`${c.name}: a container twice: ${names.join(', ')}`);
      const ledger = JSON.parse(stored.metadata.annotations?.['sidecar-injector.io/status'] ?? '{"templates":{}}');
      for (const [name, entry] of Object.entries(ledger.templates as Record<string, Json>)) {
        if (!names.includes(name)) problems.push(`${c.name}: ${name} in the ledger, not in the pod`);
        if (entry.hash !== set.byName.get(name)?.hash) problems.push(`${c.name}: ${name} recorded with hash ${entry.hash}`);
      }
      for (const name of ['log-shipper', 'proxy'])
        if (names.includes(name) && !ledger.templates[name]) problems.push(`${c.name}: ${name} in the pod, not in the ledger`);
      // The policy's sidecar is no app container for the webhook: it gets no item of the proxy or of itself.
      const shipper = (stored.spec.initContainers ?? []).find((x: Json) => x.name === 'log-shipper');
      if (shipper && (shipper.env ?? []).some((e: Json) => e.name === 'LOG_DIR')) problems.push(`${c.name}: the log shipper got the app containers' items`);
      if (ledger.templates['log-shipper'] && ledger.templates.proxy) both++;
      problems.push(...orderProblems(c.name, stored, set, ordered));
      if (c.name.startsWith('ordered')) {
        const sidecars = (stored.spec.initContainers as Json[]).map((x) => x.name as string).filter((n) => ['audit-agent', 'log-shipper', 'proxy'].includes(n));
        if (JSON.stringify(sidecars) !== JSON.stringify(c.name === 'ordered' ? ['audit-agent', 'log-shipper'] : ['proxy', 'audit-agent', 'log-shipper']))
          problems.push(`${c.name}: sidecars ${sidecars.join(', ')}, not in the webhook's order`);
      }
      const again = structuredClone(stored);
      for (const field of ['resourceVersion', 'uid', 'creationTimestamp', 'managedFields']) delete again.metadata[field];
      if (again.metadata.generateName) delete again.metadata.name;
      const second = await create(again);
      if (second.status !== 201 || comparable(second.body, namespace) !== comparable(stored, namespace)) problems.push(`${c.name}: not a fixed point`);
    }
    t.log(`${all.length} pods through the policy and the webhook together; ${both} carry both templates; ${problems.length} problems`);
    t.deepEqual(problems, []);
    t.true(both >= 1);
    t.true(ordered.grouped >= 2, 'sidecars of two templates placed alike, one by the policy and one by the webhook');
  },
);

refusalTest(
  'before 1.35 the API server refuses the export (its CEL has no flatten or lists.range for new policies), and policies --mutating says so, printing nothing',
  async (t) => {
    const { kube } = joinWorld();
    const dir = await testFolder(t, 'map-export-old');
    for (const file of await readdir('templates')) if (file !== 'kustomization.yaml') await copyFile(join('templates', file), join(dir, file));
    const [policy] = mutatingPolicies(await loadTemplateDir(dir), undefined, mapApi).objects;
    const refused = await kube.request('POST', `/apis/admissionregistration.k8s.io/${mapApi}/mutatingadmissionpolicies?dryRun=All`, policy);
    t.is(refused.status, 422);
    t.regex(String(refused.body.message), /undeclared reference to 'flatten'/);
    const printed = await cli(['policies', '--mutating']);
    t.not(printed.code, 0);
    t.is(printed.stdout, '');
    t.regex(printed.stderr, new RegExp(`this API server is Kubernetes 1\\.${minor}: it takes no exported templates`));
  },
);

/**
 * `sidecar-injector why` against the in-process API server: per template, the decision for a
 * workload's next pod and for a running pod, the selector requirement that failed with the value
 * seen and where it lives, what most likely happened to a pod that lacks a sidecar, and the fix;
 * templates from the cluster's SidecarTemplates or a folder; clear refusals.
 */
import test from 'ava';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { why, type WhyReport } from '../src/cli/why.js';
import { ClusterError, ConfigError } from '../src/errors.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';

const agent = `name: metrics-agent
objectSelector:
  matchLabels:
    metrics: enabled
containers:
  - name: metrics-agent
    image: agent:1
`;
const shipper = `name: log-shipper
namespaceSelector:
  matchExpressions:
    - key: team
      operator: In
      values: [payments, shop]
containers:
  - name: log-shipper
    image: shipper:1
`;

async function world(t: { teardown: (fn: () => unknown) => void }) {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  const dir = await mkdtemp(join(tmpdir(), 'why-'));
  await writeFile(join(dir, 'metrics-agent.yaml'), agent);
  await writeFile(join(dir, 'log-shipper.yaml'), shipper);
  const set = await loadTemplateDir(dir);
  api.applyTemplateText(agent, '2026-11-23T12:00:00Z');
  api.applyTemplateText(shipper, '2026-11-20T00:00:00Z');
  api.create('shop', { 'sidecar-injector.io/injection': 'enabled', team: 'shop' });
  api.create('plain', { 'sidecar-injector.io/injection': 'enabled' });
  const kubeconfig = join(dir, 'kubeconfig');
  const kc = await api.kubeConfig();
  await writeFile(kubeconfig, kc.exportConfig());
  const run = async (...args: string[]) => {
    let out = '';
    const code = await why([...args, '--kubeconfig', kubeconfig], { stdout: { write: (s: string) => (out += s) } });
    return { code, out };
  };
  const json = async (...args: string[]) => JSON.parse((await run(...args, '-o', 'json')).out) as WhyReport;
  return { api, set, run, json, dir };
}

const byTemplate = (report: WhyReport) => Object.fromEntries(report.templates.map((t) => [t.template, t]));

test("a workload: its next pod's decision per template, the failed requirement with the value seen, and a label left on the Deployment", async (t) => {
  const { api, json, run } = await world(t);
  api.addObject(
    'deployments',
    { namespace: 'shop', name: 'web', labels: { metrics: 'enabled' } },
    { template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'nginx' }] } } },
  );
  const report = await json('-n', 'shop', 'deploy/web');
  t.is(report.subject, 'Deployment shop/web');
  t.is(report.templatesFrom, "the cluster's SidecarTemplates");
  const answers = byTemplate(report);
  t.is(answers['log-shipper']!.state, 'injected');
  t.like(answers['metrics-agent'], { state: 'not-applicable' });
  t.is(
    answers['metrics-agent']!.reason,
    "pod labels do not match its objectSelector: it needs metrics=enabled, and the pod template has no label metrics; the Deployment's own labels meet it, but its pods get only spec.template.metadata.labels: put the label there",
  );
  // The same in text, one line per template.
  const { code, out } = await run('-n', 'shop', 'deployment/web');
  t.is(code, 0);
  t.regex(out, /^Deployment shop\/web: 2 template\(s\) in force, from the cluster's SidecarTemplates\n/);
  t.regex(out, /\n {2}log-shipper: injected — admission injects it into a new pod of this Deployment \(revision [0-9a-f]{12}\)\n/);
  // In another namespace the namespaceSelector fails, with the namespace's value.
  api.addObject(
    'deployments',
    { namespace: 'plain', name: 'api' },
    { template: { metadata: { labels: { metrics: 'enabled' } }, spec: { containers: [{ name: 'a', image: 'a' }] } } },
  );
  const plain = byTemplate(await json('-n', 'plain', 'deployments/api'));
  t.is(
    plain['log-shipper']!.reason,
    'namespace plain does not match its namespaceSelector: it needs team in (payments,shop), and the namespace has no label team',
  );
  t.is(plain['metrics-agent']!.state, 'injected');
});

test('a running pod: current, and a missing sidecar explained from when the pod was created, with the fix for its Deployment', async (t) => {
  const { api, set, json } = await world(t);
  api.addObject(
    'deployments',
    { namespace: 'shop', name: 'web' },
    { template: { metadata: { labels: { metrics: 'enabled' } }, spec: { containers: [{ name: 'web', image: 'nginx' }] } } },
  );
  api.addObject(
    'replicasets',
    {
      namespace: 'shop',
      name: 'web-5d8f',
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: 'uid-deployments-shop-web', controller: true }],
    },
    { template: { metadata: { labels: { metrics: 'enabled', 'pod-template-hash': '5d8f' } }, spec: { containers: [{ name: 'web', image: 'nginx' }] } } },
  );
  const owner = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f', uid: 'uid-replicasets-shop-web-5d8f', controller: true }];
  const ledger = JSON.stringify({ v: 1, templates: { 'log-shipper': { hash: set.byName.get('log-shipper')!.hash, containers: ['log-shipper'] } } });
  // Created after the templates last changed, with one of two sidecars: another selection then.
  api.addObject(
    'pods',
    {
      namespace: 'shop',
      name: 'web-5d8f-a',
      creationTimestamp: '2026-11-24T00:00:00Z',
      labels: { metrics: 'enabled', 'pod-template-hash': '5d8f' },
      annotations: { 'sidecar-injector.io/status': ledger },
      ownerReferences: owner,
    },
    {
      containers: [
        { name: 'web', image: 'nginx' },
        { name: 'log-shipper', image: 'shipper:1' },
      ],
    },
  );
  const a = byTemplate(await json('-n', 'shop', 'pod/web-5d8f-a'));
  t.like(a['log-shipper'], { state: 'current' });
  t.like(a['metrics-agent'], { state: 'missing', fix: 'kubectl -n shop rollout restart deployment/web' });
  t.regex(a['metrics-agent']!.reason, /though it carries other templates of ours: it was created 2026-11-24T00:00:00Z with another selection/);
  // Created before the templates last changed, with nothing of ours.
  api.addObject(
    'pods',
    {
      namespace: 'shop',
      name: 'web-5d8f-b',
      creationTimestamp: '2026-11-22T00:00:00Z',
      labels: { metrics: 'enabled', 'pod-template-hash': '5d8f' },
      ownerReferences: owner,
    },
    { containers: [{ name: 'web', image: 'nginx' }] },
  );
  const b = byTemplate(await json('-n', 'shop', 'po/web-5d8f-b'));
  t.regex(
    b['metrics-agent']!.reason,
    /created 2026-11-22T00:00:00Z, before the templates last changed \(2026-11-23T12:00:00Z\), so the template did not exist or did not select it then/,
  );
  // Created after, with nothing of ours: the injector did not answer.
  api.addObject(
    'pods',
    {
      namespace: 'shop',
      name: 'web-5d8f-c',
      creationTimestamp: '2026-11-25T00:00:00Z',
      labels: { metrics: 'enabled', 'pod-template-hash': '5d8f' },
      ownerReferences: owner,
    },
    { containers: [{ name: 'web', image: 'nginx' }] },
  );
  const c = byTemplate(await json('-n', 'shop', 'pod/web-5d8f-c'));
  // A required template (failurePolicy: Fail, the default) is not lost to an unreachable injector: its webhook did not see the pod.
  t.regex(
    c['log-shipper']!.reason,
    /carries nothing of ours: it was created 2026-11-25T00:00:00Z, after the templates and the namespace's labels last changed, and the template is required \(failurePolicy: Fail\), so the injector's required webhook did not see it/,
  );
  // A stale revision.
  api.addObject(
    'pods',
    {
      namespace: 'shop',
      name: 'web-5d8f-d',
      labels: { metrics: 'enabled' },
      annotations: {
        'sidecar-injector.io/status': JSON.stringify({ v: 1, templates: { 'log-shipper': { hash: '000000000000', containers: ['log-shipper'] } } }),
      },
      ownerReferences: owner,
    },
    { containers: [{ name: 'web', image: 'nginx' }] },
  );
  const d = byTemplate(await json('-n', 'shop', 'pod/web-5d8f-d'));
  t.like(d['log-shipper'], { state: 'stale', fix: 'kubectl -n shop rollout restart deployment/web' });
  t.regex(d['log-shipper']!.reason, /^carries revision 000000000000; the revision in force is [0-9a-f]{12}/);
});

test('a manifest with -f, templates from a folder, and clear refusals', async (t) => {
  const { api, run, json, dir } = await world(t);
  const manifest = join(await mkdtemp(join(tmpdir(), 'why-manifest-')), 'job.yaml');
  await writeFile(
    manifest,
    'apiVersion: batch/v1\nkind: Job\nmetadata: {name: once, namespace: shop}\nspec:\n  template:\n    metadata: {labels: {metrics: enabled}}\n    spec:\n      restartPolicy: Never\n      containers: [{name: job, image: busybox}]\n',
  );
  const answers = byTemplate(await json('-f', manifest, '--templates', dir, '--kubernetes-version', '1.28'));
  // A required template (failurePolicy: Fail) that a rule keeps out: the Job's pods would be refused.
  t.is(answers['metrics-agent']!.state, 'would-deny');
  t.regex(answers['metrics-agent']!.reason, /^runs-to-completion: /);
  t.truthy(answers['metrics-agent']!.fix);
  // No SidecarTemplate: nothing is in force, and it says so.
  api.clearTemplates();
  const none = await json('-f', manifest);
  t.deepEqual(none.templates, []);
  t.deepEqual(none.notes, ["no template is in force (the cluster's SidecarTemplates (none: no template is in force))"]);
  await t.throwsAsync(run('deployment'), { instanceOf: ConfigError, message: /expected KIND\/NAME with KIND pod or a workload kind/ });
  await t.throwsAsync(run('service/web'), { instanceOf: ConfigError, message: /expected KIND\/NAME/ });
  await t.throwsAsync(run('-n', 'shop', 'deploy/nope'), { instanceOf: ClusterError, message: /^Deployment shop\/nope not found$/ });
  await t.throwsAsync(run('deploy/a', '-f', manifest), { instanceOf: ConfigError, message: /give one object/ });
  t.truthy(await readFile(manifest, 'utf8'));
});

test('what a review found: names that are no names, several documents, owners not confirmed, a folder tells no story, NotIn advice', async (t) => {
  const { api, run, json, dir, set } = await world(t);
  for (const target of ['pod/..', 'pod/.', 'deploy/a/b'])
    await t.throwsAsync(run('-n', 'shop', target), { instanceOf: ConfigError, message: /not the name of a/ }, target);
  await t.throwsAsync(run('-n', '..', 'pod/x'), { instanceOf: ConfigError, message: /-n: "\.\." is not a namespace name/ });
  const manifests = await mkdtemp(join(tmpdir(), 'why-docs-'));
  const two = join(manifests, 'two.yaml');
  await writeFile(
    two,
    '---\n# Source: chart\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: a, image: a}]}\n---\napiVersion: v1\nkind: Pod\nmetadata: {name: b}\n',
  );
  await t.throwsAsync(run('-f', two), { instanceOf: ConfigError, message: /2 documents; why answers for one object/ });
  // kubectl's KIND.GROUP form.
  api.addObject(
    'deployments',
    { namespace: 'shop', name: 'web' },
    { template: { metadata: { labels: { metrics: 'enabled' } }, spec: { containers: [{ name: 'web', image: 'nginx' }] } } },
  );
  t.is((await json('-n', 'shop', 'deployment.apps/web')).subject, 'Deployment shop/web');
  // A pod naming a ReplicaSet of another uid: not its owner; decided for the pod itself, and the fix is for a bare pod.
  api.addObject(
    'replicasets',
    { namespace: 'shop', name: 'other-1' },
    { template: { metadata: { labels: {} }, spec: { containers: [{ name: 'x', image: 'x' }] } } },
  );
  api.addObject(
    'pods',
    {
      namespace: 'shop',
      name: 'forged',
      labels: { metrics: 'enabled' },
      ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'other-1', uid: 'not-its-uid', controller: true }],
    },
    { containers: [{ name: 'app', image: 'app' }] },
  );
  const forged = await json('-n', 'shop', 'pod/forged');
  t.true(forged.notes.some((n) => n.startsWith('its owner ReplicaSet other-1 could not be confirmed')));
  t.is(byTemplate(forged)['metrics-agent']!.fix, 'recreate pod forged (a bare pod: delete it and create it again)');
  // With a folder, no story about when the pod was created.
  const folder = byTemplate(await json('-n', 'shop', 'pod/forged', '--templates', dir));
  t.regex(folder['metrics-agent']!.reason, /with the folder's templates \(--templates\); whether the cluster's have it/);
  t.truthy(set);
});

test('render --explain and why: a NotIn requirement is not told to move the label to the pod template', async (t) => {
  const { api, json } = await world(t);
  api.clearTemplates();
  api.applyTemplateText(
    'name: a\nobjectSelector:\n  matchExpressions:\n    - {key: canary, operator: DoesNotExist}\ncontainers:\n  - name: a\n    image: a:1\n',
  );
  api.addObject(
    'deployments',
    { namespace: 'shop', name: 'web' },
    { template: { metadata: { labels: { canary: 'true' } }, spec: { containers: [{ name: 'web', image: 'nginx' }] } } },
  );
  const reason = byTemplate(await json('-n', 'shop', 'deploy/web')).a!.reason;
  t.is(reason, 'pod labels do not match its objectSelector: it needs no label canary, and the pod template has canary="true"');
});

test('tenant text with controls, bidi overrides and line separators is printed escaped, in text and in JSON', async (t) => {
  const { run, json } = await world(t);
  const manifest = join(await mkdtemp(join(tmpdir(), 'why-controls-')), 'pod.yaml');
  const hostile = 'log-shipper\u202e\u0085\u2028\u001b[2J\u007f';
  await writeFile(
    manifest,
    `apiVersion: v1\nkind: Pod\nmetadata:\n  name: tricky\n  namespace: shop\n  annotations: {sidecar-injector.io/templates: ${JSON.stringify(hostile)}}\nspec:\n  containers: [{name: app, image: busybox}]\n`,
  );
  const { out } = await run('-f', manifest);
  t.regex(out, /\\u202e/, 'the override is shown as an escape');
  // eslint-disable-next-line no-control-regex -- raw controls are what it looks for
  t.notRegex(out, /[\u202e\u0085\u2028\u001b\u007f]/, 'no raw control reaches the terminal');
  const raw = (await run('-f', manifest, '-o', 'json')).out;
  // eslint-disable-next-line no-control-regex -- raw controls are what it looks for
  t.notRegex(raw, /[\u202e\u0085\u2028\u001b\u007f]/);
  // The JSON still parses to the same values.
  t.truthy(await json('-f', manifest));
});

test('near misses: a namespace label one typo, a domain or a name part away from the opt-in, a pod label value one typo away; the fix; overrides that take no effect', async (t) => {
  const { api, json, run } = await world(t);
  const deployment = (namespace: string, labels: Record<string, string> = { app: 'web' }, annotations?: Record<string, string>) =>
    api.addObject(
      'deployments',
      { namespace, name: 'web' },
      { template: { metadata: { labels, ...(annotations ? { annotations } : {}) }, spec: { containers: [{ name: 'web', image: 'nginx' }] } } },
    );
  for (const [namespace, labels, near] of [
    ['near-a', { injection: 'enable' }, 'it has injection=enable, a near miss: did you mean sidecar-injector.io/injection=enabled?'],
    [
      'near-b',
      { 'sidecar-injector.io/inject': 'enabled' },
      'it has sidecar-injector.io/inject=enabled, a near miss: did you mean sidecar-injector.io/injection=enabled?',
    ],
    [
      'near-c',
      { 'sidecar-injector/injection': 'enabled' },
      'it has sidecar-injector/injection=enabled, a near miss: did you mean sidecar-injector.io/injection=enabled?',
    ],
    ['near-d', { 'sidecar-injector.io/injection': 'Enabled' }, 'its value "Enabled" is a near miss of "enabled"'],
  ] as const) {
    api.create(namespace, labels);
    deployment(namespace);
    const shipper = byTemplate(await json('-n', namespace, 'deploy/web'))['log-shipper']!;
    t.is(shipper.reason, `namespace ${namespace} does not have label sidecar-injector.io/injection=enabled; ${near}`, namespace);
    const overwrite = namespace === 'near-d' ? ' --overwrite' : '';
    t.is(shipper.fix, `kubectl label namespace ${namespace} sidecar-injector.io/injection=enabled${overwrite}`);
  }
  // No near miss: the plain sentence, still with the fix.
  api.create('far', { team: 'x' });
  deployment('far');
  t.like(byTemplate(await json('-n', 'far', 'deploy/web'))['log-shipper'], {
    reason: 'namespace far does not have label sidecar-injector.io/injection=enabled',
    fix: 'kubectl label namespace far sidecar-injector.io/injection=enabled',
  });
  // A pod label value one typo away from the template's objectSelector, in text.
  api.addObject(
    'deployments',
    { namespace: 'shop', name: 'typo' },
    { template: { metadata: { labels: { metrics: 'enable' } }, spec: { containers: [{ name: 'web', image: 'nginx' }] } } },
  );
  const { out } = await run('-n', 'shop', 'deploy/typo');
  t.regex(
    out,
    /\n {2}metrics-agent: not-applicable — pod labels do not match its objectSelector: it needs metrics=enabled, and the pod template has metrics="enable"; its value "enable" is a near miss of "enabled"\n/,
  );
  // An override naming no template here: said by why (at admission only the creator saw it).
  deployment('shop', { app: 'web' }, { 'log-shiper.sidecar-injector.io/memoryLimit': '1Gi' });
  const notes = (await json('-n', 'shop', 'deploy/web')).notes;
  t.true(
    notes.some((n) =>
      /^override ignored: annotation log-shiper\.sidecar-injector\.io\/memoryLimit names no template here \(did you mean log-shipper\?\); ignored$/.test(n),
    ),
    notes.join(' | '),
  );
});

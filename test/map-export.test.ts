/**
 * `policies --mutating` (manifests/mutating-policies.ts) without a cluster: which templates
 * export and, for the others, every reason; the objects' shape (one policy in the webhooks'
 * order, IfNeeded, the webhooks' scope, the guard that refuses bad overrides and pod-level budgets); the command's
 * output and errors. That the policy injects what the webhook injects is proved on the real API
 * server (test/cluster/map-export.test.ts): no CEL evaluator here has the API server's libraries.
 */
import test from 'ava';
import { mkdtemp, readFile, writeFile, copyFile, readdir } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { policies as policiesCommand } from '../src/cli/policies.js';
import { ConfigError, PolicyError } from '../src/errors.js';
import { exportedPolicyName, mutatingPolicies, mutatingPoliciesYaml } from '../src/manifests/mutating-policies.js';
import { exportProblems } from '../src/templates/export-rules.js';
import { webhookScope } from '../src/manifests/required-policies.js';
import { matchConditions as webhookMatchConditions } from '../src/pipeline/match-conditions.js';
import { loadTemplateDir, parseTemplateText } from '../src/templates/load.js';
import { createTemplateSet } from '../src/templates/set.js';
import type { Template } from '../src/templates/template.js';

type Json = Record<string, any>;

/** The bundled templates and the tutorial's (docs/first-template.md), in one directory. */
async function shippedTemplates(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'map-export-unit-'));
  for (const file of await readdir('templates')) if (file !== 'kustomization.yaml') await copyFile(join('templates', file), join(dir, file));
  const text = await readFile('docs/first-template.md', 'utf8');
  const start = text.indexOf("cat > my-templates/otel-agent.yaml <<'EOF'\n");
  await writeFile(join(dir, 'otel-agent.yaml'), text.slice(text.indexOf('\n', start) + 1, text.indexOf('\nEOF\n', start) + 1));
  return dir;
}

function template(text: string): Template {
  const { template, problems } = parseTemplateText(text, 'probe.yaml');
  if (!template) throw new Error(JSON.stringify(problems));
  return template;
}

const sidecar = `
name: probe
initContainers:
  - name: probe
    image: registry.example/probe:1
    restartPolicy: Always
    resources: { limits: { cpu: 100m, memory: 64Mi } }
    securityContext:
      allowPrivilegeEscalation: false
      runAsNonRoot: true
      capabilities: { drop: [ALL] }
      seccompProfile: { type: RuntimeDefault }
`;

test('the bundled templates and the tutorial one export, in the webhooks’ order: the required webhook’s first, each by name', async (t) => {
  const set = await loadTemplateDir(await shippedTemplates());
  const result = mutatingPolicies(set);
  t.deepEqual(result.exported, ['proxy', 'log-shipper', 'otel-agent']);
  t.deepEqual(result.refused, []);
  const [policy, binding, guard, guardBinding] = result.objects as Json[];
  t.is(policy!.kind, 'MutatingAdmissionPolicy');
  t.is(policy!.apiVersion, 'admissionregistration.k8s.io/v1');
  t.is(policy!.metadata.name, exportedPolicyName);
  // The v1 API requires it (no default), and it is what makes a second mutation of the pod safe.
  t.is(policy!.spec.reinvocationPolicy, 'IfNeeded');
  t.is(policy!.spec.failurePolicy, 'Fail', 'a required template is exported');
  t.is(policy!.spec.mutations.length, 3);
  for (const m of policy!.spec.mutations) t.is(m.patchType, 'JSONPatch');
  t.deepEqual(
    policy!.spec.matchConditions.map((c: Json) => c.name),
    [...webhookMatchConditions.map((c) => c.name), 'within-the-injectors-bounds'],
  );
  t.is(binding!.kind, 'MutatingAdmissionPolicyBinding');
  t.deepEqual(binding!.spec.matchResources.namespaceSelector, { matchExpressions: webhookScope.namespaceSelector.matchExpressions });
  t.deepEqual(binding!.spec.matchResources.objectSelector, { matchExpressions: webhookScope.objectSelector.matchExpressions });
  t.is(guard!.kind, 'ValidatingAdmissionPolicy');
  t.is(
    guard!.spec.validations.length,
    2 + 2 * 3 + 1,
    'the pod: requested names and bounds; per template: its overrides and no pod-level budget; a required one: no rule in its way',
  );
  t.deepEqual(guardBinding!.spec.validationActions, ['Deny']);
  // Each template's hash, so that an operator sees which revision the policy holds.
  for (const name of result.exported) t.is(policy!.metadata.annotations[`sidecar-injector.io/template-hash.${name}`], set.byName.get(name)!.hash);
  // Every variable a mutation reads is declared, and every declared one is read.
  const declared = new Set(policy!.spec.variables.map((v: Json) => v.name as string));
  const texts = [...policy!.spec.mutations.map((m: Json) => m.jsonPatch.expression), ...policy!.spec.variables.map((v: Json) => v.expression)].join('\n');
  const read = new Set([...texts.matchAll(/variables\.([A-Za-z0-9_]+)/g)].map((m) => m[1]!));
  t.deepEqual([...read].sort(), [...declared].sort());
});

test('a template that CEL cannot inject as the webhook does is refused with every reason; the others still export', (t) => {
  const refusedOnes = [
    {
      text: `${sidecar.replace('name: probe\n', 'name: strings\n')}parameters:\n  tag:\n    default: "1"\n    type: string\n    override: pod\n`,
      reason: /parameter tag is overridable and of type string/,
    },
    { text: `${sidecar.replace('name: probe\n', 'name: pulls\n')}imagePullSecrets: [{ name: registry }]\n`, reason: /imagePullSecrets are not exported/ },
    {
      text: `${sidecar.replace('name: probe\n', 'name: from\n')}appContainers:\n  envFrom: [{ configMapRef: { name: cfg } }]\n`,
      reason: /envFrom is not exported/,
    },
    { text: `${sidecar.replace('name: probe\n', 'name: labelled\n')}labels:\n  team: "{{ pod.namespace }}"\n`, reason: /label team has a placeholder/ },
    {
      text: `name: root\ncontainers:\n  - name: root\n    image: registry.example/root:1\n    securityContext: { privileged: true }\n`,
      reason: /do not fit Pod Security "restricted" whatever the pod sets/,
    },
    { text: `name: front\nplacement: first\ncontainers:\n  - name: front\n    image: registry.example/front:1\n`, reason: /ordinary containers placed first/ },
    { text: `name: empty\nvolumes: [{ name: scratch, emptyDir: {} }]\n`, reason: /adds no container/ },
  ];
  const set = createTemplateSet([...refusedOnes.map((r) => template(r.text)), template(sidecar)]);
  const result = mutatingPolicies(set);
  t.deepEqual(result.exported, ['probe']);
  for (const { text, reason } of refusedOnes) {
    const name = /^name: (\S+)/m.exec(text)![1]!;
    const refusal = result.refused.find((r) => r.template === name);
    t.truthy(refusal, name);
    t.true(
      refusal!.reasons.some((r) => reason.test(r)),
      `${name}: ${refusal!.reasons.join('; ')}`,
    );
    t.deepEqual(exportProblems(set.byName.get(name)!, set), refusal!.reasons);
  }
  // Asked for by name, a template that cannot be exported is an error naming the reason, as is an unknown name.
  const error = t.throws(() => mutatingPolicies(set, ['probe', 'pulls']), { instanceOf: PolicyError });
  t.regex(error!.message, /template pulls: imagePullSecrets are not exported/);
  t.throws(() => mutatingPolicies(set, ['nope']), { instanceOf: PolicyError, message: /no template named "nope"/ });
  t.deepEqual(mutatingPolicies(set, ['probe']).exported, ['probe']);
});

test('a template that reads a label another template adds is not exported: the policy would read the pod after that template, the webhook before', (t) => {
  const reader = template(`${sidecar.replace('name: probe\n', 'name: reader\n')}objectSelector:\n  matchLabels: { team: a }\n`);
  const writer = template(`${sidecar.replace('name: probe\n', 'name: writer\n').replace(/- name: probe/, '- name: writer')}labels:\n  team: a\n`);
  const result = mutatingPolicies(createTemplateSet([reader, writer]));
  t.deepEqual(result.exported, ['writer']);
  t.regex(result.refused[0]!.reasons.join(), /objectSelector reads the label team, which a template adds/);
});

test('policies --mutating prints the policy as YAML and says on stderr what is not exported; --template needs --mutating', async (t) => {
  const dir = await shippedTemplates();
  await writeFile(join(dir, 'pulls.yaml'), `${sidecar.replace('name: probe\n', 'name: pulls\n')}imagePullSecrets: [{ name: registry }]\n`);
  let out = '';
  let err = '';
  const io = { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) } };
  t.is(await policiesCommand(['--mutating', '--templates', dir], io), 0);
  const docs = parseAllDocuments(out).map((d) => d.toJSON() as Json);
  t.deepEqual(
    docs.map((d) => d.kind),
    ['MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding', 'ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'],
  );
  t.regex(out, /^# Sidecar templates exported as a MutatingAdmissionPolicy/);
  t.regex(out, /# Not exported: pulls: imagePullSecrets are not exported/);
  t.regex(err, /note: template pulls is not exported: imagePullSecrets are not exported/);
  t.deepEqual(parseAllDocuments(mutatingPoliciesYaml(mutatingPolicies(await loadTemplateDir(dir)))).length, 4);
  await t.throwsAsync(policiesCommand(['--template', 'proxy', '--templates', dir], io), { instanceOf: ConfigError, message: /needs --mutating/ });
  await t.throwsAsync(policiesCommand(['--mutating', '--template', 'pulls', '--templates', dir], io), { instanceOf: PolicyError });
});

test('delivery: policy — the webhooks leave the template to the policy (delivered-by-policy) and decide it themselves when a pod arrives without it; every other reader expects it; the export holds exactly the marked templates', async (t) => {
  const { startTestServer } = await import('./helpers/server.js');
  const { createReview, decodePatch, prepareCreate } = await import('./helpers/apiserver.js');
  const { optedIn, pod } = await import('./helpers/pods.js');
  const { admitPod } = await import('../src/pipeline/admit.js');
  const delivered = template(
    `${sidecar.replace('name: probe\n', 'name: delivered\ndelivery: policy\nfailurePolicy: Ignore\n').replace(/- name: probe/, '- name: delivered')}`,
  );
  const served = template(sidecar.replace('name: probe\n', 'name: probe\nfailurePolicy: Ignore\n'));
  t.is(delivered.delivery, 'policy');
  t.is(served.delivery, 'webhook');
  const set = createTemplateSet([delivered, served]);
  const server = await startTestServer({ templates: set, namespaces: optedIn('shop') });
  t.teardown(() => server.stop());
  const initNames = (response: Json) =>
    decodePatch(response)
      .filter((op: Json) => op.path.startsWith('/spec/initContainers'))
      .flatMap((op: Json) => (Array.isArray(op.value) ? op.value : [op.value]).map((c: Json) => c.name));
  // The pod as the policy leaves it (the policy runs before every webhook call): it carries the delivered template.
  const alone = createTemplateSet([delivered]);
  const byPolicy = await admitPod({ pod: prepareCreate(pod(), 'shop'), namespace: 'shop', name: '' }, { templates: () => alone, namespaces: optedIn('shop') });
  t.is(byPolicy.reason, 'injected', 'render, the audit and why decide without the flag: they expect the template in the pod');
  const policyPod = byPolicy.decision === 'patched' ? byPolicy.injection.pod : {};
  for (const path of ['/mutate', '/mutate/optional']) {
    const res = await server.post(createReview(policyPod, { namespace: 'shop' }), path);
    t.deepEqual(initNames(res.json.response), ['probe'], `${path}: only the webhook's template`);
    t.deepEqual(res.json.response.warnings ?? [], [], `${path}: nothing to say`);
  }
  // Only the policy's template applies, and the pod has it: the webhook answers without a patch, and says why.
  const quiet = await startTestServer({ templates: alone, namespaces: optedIn('shop') });
  t.teardown(() => quiet.stop());
  const review = createReview(policyPod, { namespace: 'shop' });
  const res = await quiet.post(review, '/mutate');
  t.is(res.json.response.patch, undefined);
  const line = quiet.logs.find((l) => l.uid === review.request.uid)!;
  t.is(line.reason, 'delivered-by-policy');
  t.regex(String(line.detail), /delivered is injected by the API server's MutatingAdmissionPolicy/);
  // A pod that reaches the webhooks without it (no policy applied, or a stale one): the webhook
  // injects it instead, and says so; never silently missing.
  for (const path of ['/mutate', '/mutate/optional']) {
    const missing = await server.post(createReview(prepareCreate(pod(), 'shop'), { namespace: 'shop' }), path);
    t.deepEqual(initNames(missing.json.response).sort(), ['delivered', 'probe'], `${path}: injected by the webhook instead`);
    t.true(
      (missing.json.response.warnings as string[]).some((w) =>
        /^delivered: not injected by the MutatingAdmissionPolicy \(delivery: policy\); the webhook decides it instead$/.test(w),
      ),
      `${path}: warned`,
    );
  }
  // A forged entry that claims only a volume the pod has itself: its container is not the ledger's, so not delivered.
  const withVolume = template(
    `${sidecar.replace('name: probe\n', 'name: vol\ndelivery: policy\nfailurePolicy: Ignore\n').replace(/- name: probe/, '- name: vol')}volumes:\n  - name: shared\n    emptyDir: {}\n`,
  );
  const volumeServer = await startTestServer({ templates: createTemplateSet([withVolume]), namespaces: optedIn('shop') });
  t.teardown(() => volumeServer.stop());
  const volumeForged = prepareCreate(pod(), 'shop');
  volumeForged.spec.volumes = [...(volumeForged.spec.volumes ?? []), { name: 'shared', emptyDir: {} }];
  volumeForged.metadata.annotations = {
    ...volumeForged.metadata.annotations,
    'sidecar-injector.io/status': JSON.stringify({ v: 1, templates: { vol: { hash: withVolume.hash, volumes: ['shared'] } } }),
  };
  const volumeAnswer = await volumeServer.post(createReview(volumeForged, { namespace: 'shop' }), '/mutate');
  t.deepEqual(initNames(volumeAnswer.json.response), ['vol'], 'a volume-only claim does not stand for the sidecar');
  t.true((volumeAnswer.json.response.warnings as string[]).some((w) => w.startsWith('vol: not injected by the MutatingAdmissionPolicy')));
  // A template with no container: the policy's entry (written even when the pod held everything) is taken; no entry, it is missing.
  const labelsOnly = template('name: tag\ndelivery: policy\nfailurePolicy: Ignore\nlabels:\n  example.com/tagged: "yes"\n');
  const tagServer = await startTestServer({ templates: createTemplateSet([labelsOnly]), namespaces: optedIn('shop') });
  t.teardown(() => tagServer.stop());
  const tagged = prepareCreate(pod(), 'shop');
  tagged.metadata.labels = { ...tagged.metadata.labels, 'example.com/tagged': 'yes' };
  tagged.metadata.annotations = {
    ...tagged.metadata.annotations,
    'sidecar-injector.io/status': JSON.stringify({ v: 1, templates: { tag: { hash: labelsOnly.hash } } }),
  };
  const byPolicyTag = await tagServer.post(createReview(tagged, { namespace: 'shop' }), '/mutate');
  t.deepEqual(byPolicyTag.json.response.warnings ?? [], [], 'delivered by the policy: nothing to say');
  const untagged = await tagServer.post(createReview(prepareCreate(pod(), 'shop'), { namespace: 'shop' }), '/mutate');
  t.true((untagged.json.response.warnings as string[]).some((w) => w.startsWith('tag: not injected by the MutatingAdmissionPolicy')));
  const missed = (await server.metrics.policyDeliveryMissing.get()).values.find((v) => v.labels.template === 'delivered')?.value;
  t.is(missed, 2, 'counted per pod, by template: sidecar_injector_policy_delivery_missing_total');
  // A ledger entry the pod wrote itself, with no container behind it (the policy skips such a
  // pod as injected): not delivered, so the webhook decides the template and restores it.
  const forged = prepareCreate(pod(), 'shop');
  forged.metadata.annotations = {
    ...forged.metadata.annotations,
    'sidecar-injector.io/status': JSON.stringify({
      v: 1,
      templates: { delivered: { hash: delivered.hash, initContainers: ['delivered'] } },
    }),
  };
  const restored = await quiet.post(createReview(forged, { namespace: 'shop' }), '/mutate');
  t.deepEqual(initNames(restored.json.response), ['delivered'], 'a forged ledger does not stand for the sidecar');
  t.true((restored.json.response.warnings as string[]).some((w) => w.startsWith('delivered: not injected by the MutatingAdmissionPolicy')));
  // The export holds the marked templates only; unmarked, every exportable one.
  t.deepEqual(mutatingPolicies(set).exported, ['delivered']);
  t.deepEqual(mutatingPolicies(createTemplateSet([served])).exported, ['probe']);
});

test('a template marked delivery: policy that no policy can hold is refused at load, by check and by serve alike', async (t) => {
  const { checkTemplateFiles } = await import('../src/pipeline/template-check.js');
  const { TemplateError } = await import('../src/errors.js');
  const text = `${sidecar.replace('name: probe\n', 'name: pulls\ndelivery: policy\n')}imagePullSecrets: [{ name: registry }]\n`;
  const error = await t.throwsAsync(checkTemplateFiles([{ name: 'pulls.yaml', text }], 'dir'), { instanceOf: TemplateError });
  t.regex(error!.message, /delivery.*a MutatingAdmissionPolicy cannot inject it as the webhook does: imagePullSecrets are not exported/);
  const bad = await t.throwsAsync(
    checkTemplateFiles([{ name: 'x.yaml', text: sidecar.replace('name: probe\n', 'name: probe\ndelivery: api-server\n') }], 'dir'),
    {
      instanceOf: TemplateError,
    },
  );
  t.regex(bad!.message, /delivery.*must be "webhook".*or "policy"/);
});

test('policies --mutating writes the API version the cluster serves (v1, else the beta with a note), refuses a cluster that serves neither saying what it needs, and takes --api-version offline', async (t) => {
  const { FakeApiServer } = await import('./helpers/fake-apiserver.js');
  const { ClusterError } = await import('../src/errors.js');
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.applyTemplateText(sidecar);
  api.gitVersion = 'v1.36.5';
  const kubeconfig = join(await mkdtemp(join(tmpdir(), 'map-export-api-')), 'kubeconfig');
  await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
  const run = async (args: string[]) => {
    let out = '';
    let err = '';
    const code = await policiesCommand(['--mutating', ...args], { stdout: { write: (s: string) => (out += s) }, stderr: { write: (s: string) => (err += s) } });
    return { code, docs: parseAllDocuments(out).map((d) => d.toJSON() as Json), out, err };
  };
  const versions = (docs: Json[]) => docs.map((d) => `${d.apiVersion} ${d.kind}`);
  // 1.36 and later: v1.
  const v1 = await run(['--kubeconfig', kubeconfig]);
  t.deepEqual(versions(v1.docs), [
    'admissionregistration.k8s.io/v1 MutatingAdmissionPolicy',
    'admissionregistration.k8s.io/v1 MutatingAdmissionPolicyBinding',
    'admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy',
    'admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding',
  ]);
  t.is(v1.err, '');
  // 1.35 with the feature gate: the beta, said on stderr and in the header; the guard stays v1 (GA since 1.30).
  api.gitVersion = 'v1.35.4';
  api.mutatingAdmissionPolicyApi = 'v1beta1';
  const beta = await run(['--kubeconfig', kubeconfig]);
  t.deepEqual(versions(beta.docs).slice(0, 3), [
    'admissionregistration.k8s.io/v1beta1 MutatingAdmissionPolicy',
    'admissionregistration.k8s.io/v1beta1 MutatingAdmissionPolicyBinding',
    'admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy',
  ]);
  t.regex(beta.out, /^# Sidecar templates exported as a MutatingAdmissionPolicy of the beta API \(Kubernetes 1\.35, with its feature gate\)/);
  t.regex(beta.err, /^note: written in admissionregistration\.k8s\.io\/v1beta1/);
  // The same spec in either version: only apiVersion differs.
  t.deepEqual(beta.docs[0]!.spec, v1.docs[0]!.spec);
  // Without the gate: refused, naming the gate and the runtime-config; nothing on stdout.
  api.mutatingAdmissionPolicyApi = undefined;
  let printed = '';
  const refused = await t.throwsAsync(
    policiesCommand(['--mutating', '--kubeconfig', kubeconfig], { stdout: { write: (s: string) => (printed += s) }, stderr: { write: () => undefined } }),
    { instanceOf: ClusterError },
  );
  t.regex(refused!.message, /serves no MutatingAdmissionPolicy API/);
  t.regex(refused!.message, /--feature-gates=MutatingAdmissionPolicy=true and --runtime-config=admissionregistration\.k8s\.io\/v1beta1=true/);
  t.is(printed, '');
  // 1.34 serves the beta behind the same gate, but its CEL for new policies has no flatten or lists.range: refused before anything is printed.
  api.gitVersion = 'v1.34.4';
  api.mutatingAdmissionPolicyApi = 'v1beta1';
  const old = await t.throwsAsync(
    policiesCommand(['--mutating', '--kubeconfig', kubeconfig], { stdout: { write: (s: string) => (printed += s) }, stderr: { write: () => undefined } }),
    { instanceOf: ClusterError },
  );
  t.regex(old!.message, /^this API server is Kubernetes 1\.34: it takes no exported templates, since its CEL for new policies lacks the list functions/);
  t.is(printed, '');
  // A version that cannot be read: discovery decides, and stderr says what the beta means on 1.34.
  api.versionFails = true;
  const unknown = await run(['--kubeconfig', kubeconfig]);
  t.is(unknown.docs[0]!.apiVersion, 'admissionregistration.k8s.io/v1beta1');
  t.regex(
    unknown.err,
    /note: the API server's version could not be read \(cannot read the API server's version[^)]*\): Kubernetes 1\.34 serves the beta too, and refuses these objects/,
  );
  api.versionFails = false;
  // Offline: v1 unless told; --api-version names it; anything else, or without --mutating, is a usage error.
  const dir = await shippedTemplates();
  t.is((await run(['--templates', dir])).docs[0]!.apiVersion, 'admissionregistration.k8s.io/v1');
  const offlineBeta = await run(['--templates', dir, '--api-version', 'v1beta1']);
  t.is(offlineBeta.docs[1]!.apiVersion, 'admissionregistration.k8s.io/v1beta1');
  // No cluster was asked: the note does not say it serves the beta.
  t.regex(offlineBeta.err, /^note: written in admissionregistration\.k8s\.io\/v1beta1, the beta API \(Kubernetes 1\.35/);
  await t.throwsAsync(run(['--templates', dir, '--api-version', 'v1alpha1']), { instanceOf: ConfigError, message: /one of v1, v1beta1/ });
  await t.throwsAsync(
    policiesCommand(['--templates', dir, '--api-version', 'v1'], { stdout: { write: () => undefined }, stderr: { write: () => undefined } }),
    {
      instanceOf: ConfigError,
      message: /needs --mutating/,
    },
  );
});

/**
 * The preflight of a candidate through the cluster's own admission chain: the test API server's
 * dry-run create calls the injector's webhook (and any other) over HTTPS, applies their patches
 * and runs a validator. A candidate refused by the chain, not injected, or not a fixed point of
 * the chain never takes a real pod; one that passes does.
 */
import test, { type ExecutionContext } from 'ava';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { admitPod } from '../src/pipeline/admit.js';
import { loadConfig } from '../src/config.js';
import { ConfigError } from '../src/errors.js';
import { apiServerDryRun, apiServerNamespaceLabels, Preflights, probeKeptOut, type PreflightResult } from '../src/rollout/preflight.js';
import { compileTemplate } from '../src/templates/compile.js';
import { warningTexts } from '../src/kube-api/request.js';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';
import { LabelKeys, LabelValues } from '../src/k8s/keys.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { probeAnnotation, revisionsFor } from '../src/templates/rollout.js';
import type { TemplateSet } from '../src/templates/set.js';
import { AdmissionChain, startWebhook } from './helpers/admission-chain.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { optedIn, pod } from './helpers/pods.js';
import { startTestServer } from './helpers/server.js';
import { bareExampleText } from './helpers/templates.js';

const shipper = bareExampleText('log-shipper');
const candidateText = `rollout:\n  role: candidate\n  share: 100\n${shipper.replace('fluent-bit:3.2.2', 'fluent-bit:3.2.3')}`;

async function candidateSet(): Promise<TemplateSet> {
  const dir = await mkdtemp(join(tmpdir(), 'preflight-'));
  try {
    await writeFile(join(dir, 'log-shipper.yaml'), shipper);
    await writeFile(join(dir, 'log-shipper-next.yaml'), candidateText);
    return await loadTemplateDir(dir);
  } finally {
    await rm(dir, { recursive: true });
  }
}

/** The cluster: the test API server with its admission chain, the injector as its webhook, and the preflights. */
async function cluster(t: ExecutionContext, probeNamespaceOptedIn = true) {
  const set = await candidateSet();
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  const chain = new AdmissionChain();
  api.admission = chain;
  let now = 0;
  const results: PreflightResult[] = [];
  const preflights = new Preflights(
    'probes',
    apiServerDryRun(await api.kubeConfig()),
    () => new Date(Date.UTC(2026, 0, 1) + now++ * 1000),
    (r) => results.push(r),
  );
  const namespaces = probeNamespaceOptedIn ? optedIn('shop', 'probes') : optedIn('shop');
  const injector = await startTestServer({ templates: () => preflights.gate(set), namespaces });
  t.teardown(() => injector.stop());
  chain.webhooks.push({ name: 'all.sidecar-injector.io', port: injector.port, path: '/mutate?timeout=10s' });
  const stable = set.byName.get('log-shipper')!.hash;
  const candidate = set.rollouts!.get('log-shipper')!.candidate!.hash;
  /** The revision a real pod of a StatefulSet gets now. */
  const revisionOfNewPod = async () => {
    const p = pod({ generateName: 'db-' });
    p.metadata.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: 'u-db', controller: true }];
    const outcome = await admitPod({ pod: p, namespace: 'shop', name: '' }, { templates: () => preflights.gate(set), namespaces });
    return outcome.decision === 'patched' ? outcome.templates.find((x) => x.name === 'log-shipper')?.hash : undefined;
  };
  return { set, api, chain, preflights, results, stable, candidate, revisionOfNewPod };
}

test('a candidate takes no pod before its preflight; passed (admitted, once, a fixed point), it takes its share', async (t) => {
  const c = await cluster(t);
  t.is(await c.revisionOfNewPod(), c.stable, 'pending: the stable revision');
  t.is(c.preflights.gate(c.set), c.preflights.gate(c.set), 'the same gated set for the same state (the answer cache keys on it)');
  await c.preflights.run(c.set);
  t.is(c.results.length, 1);
  t.like(c.results[0], { template: 'log-shipper', revision: c.candidate, passed: true });
  t.regex(c.results[0]!.message, /admitted by the chain with the sidecar once, and a second pass changed nothing/);
  // The probe went through our webhook twice (the second pass of the result), as a dry run, in the probe namespace.
  t.is(c.chain.calls.length, 2);
  t.true(c.chain.calls.every((call) => call.dryRun && call.pod.metadata.namespace === 'probes'));
  t.is(c.chain.calls[0]!.pod.metadata.annotations[probeAnnotation], `log-shipper@${c.candidate}`);
  t.is(await c.revisionOfNewPod(), c.candidate, 'passed: the candidate takes its share');
  t.deepEqual(
    c.preflights.status().results.map((r) => r.passed),
    [true],
  );
});

test('a candidate refused by the chain (a policy on its image) is never rolled out, with the policy named', async (t) => {
  const c = await cluster(t);
  c.chain.validators.push((p) => {
    const images = [...(p.spec.containers ?? []), ...(p.spec.initContainers ?? [])].map((x: { image: string }) => x.image);
    const unsigned = images.find((image: string) => image.endsWith(':3.2.3'));
    return unsigned ? `image-signature policy: ${unsigned} is not signed by the release key` : undefined;
  });
  await c.preflights.run(c.set);
  t.like(c.results[0], { passed: false, failure: 'refused' });
  t.regex(
    c.results[0]!.message,
    /the admission chain refused the probe pod of log-shipper@\w+ in namespace probes \(HTTP 403\): pods "rollout-probe-log-shipper-" is forbidden: image-signature policy: fluent\/fluent-bit:3\.2\.3 is not signed/,
  );
  for (let i = 0; i < 3; i++) t.is(await c.revisionOfNewPod(), c.stable);
  t.regex(c.preflights.gate(c.set).rollouts!.get('log-shipper')!.stopped!, /^preflight failed \(refused\)/);
});

test('a candidate whose probe is not a fixed point of the chain (another webhook adds again on each pass) is never rolled out', async (t) => {
  const c = await cluster(t);
  // Another mutating webhook that appends an env entry to the first container on every call: not idempotent.
  const other = await startWebhook((request) => {
    const patch = [{ op: 'add', path: '/spec/containers/0/env', value: [...(request.object.spec.containers[0].env ?? []), { name: 'SEEN', value: 'yes' }] }];
    return { allowed: true, patchType: 'JSONPatch', patch: Buffer.from(JSON.stringify(patch)).toString('base64') };
  });
  t.teardown(() => other.stop());
  c.chain.webhooks.push({ name: 'env.example.com', port: other.port, path: '/' });
  await c.preflights.run(c.set);
  t.like(c.results[0], { passed: false, failure: 'not-a-fixed-point' });
  t.regex(c.results[0]!.message, /a second pass of the admission chain changed the probe pod/);
  t.is(await c.revisionOfNewPod(), c.stable);
});

test('a webhook the chain could not call on the second dry run (its replica left between the two) is unreachable, not a verdict on the candidate', async (t) => {
  const c = await cluster(t);
  const other = await startWebhook(() => ({ allowed: true }));
  t.teardown(() => other.stop());
  c.chain.webhooks.push({ name: 'other.example.com', port: other.port, path: '/' });
  // After the first pass the other webhook's server goes away: the second dry run cannot call it.
  let gone: Promise<void> | undefined;
  c.chain.validators.push(() => {
    gone ??= other.stop();
    return undefined;
  });
  await c.preflights.run(c.set);
  await gone;
  t.like(c.results[0], { passed: false, failure: 'unreachable' });
  t.regex(
    c.results[0]!.message,
    /^the admission chain could not call a webhook for the probe pod .* the second time \(HTTP 500\): Internal error occurred: failed calling webhook "other\.example\.com"/,
  );
  t.is(await c.revisionOfNewPod(), c.stable);
});

test('a probe the injector never reached (its namespace not opted in) fails and says what to check', async (t) => {
  const c = await cluster(t, false);
  await c.preflights.run(c.set);
  t.like(c.results[0], { passed: false, failure: 'not-injected' });
  t.regex(c.results[0]!.message, /is the namespace opted in \(label sidecar-injector\.io\/injection=enabled\)/);
  t.is(await c.revisionOfNewPod(), c.stable);
});

test('the preflight names what kept its probe out, from the probe namespace’s labels, with the fix: the opt-in (a near miss said), or the candidate’s own namespaceSelector', async (t) => {
  const set = await candidateSet();
  const candidate = set.rollouts!.get('log-shipper')!.candidate!;
  t.is(
    probeKeptOut(candidate, 'probes', { 'sidecar-injector/injection': 'enabled', 'kubernetes.io/metadata.name': 'probes' }),
    'the probe namespace probes is not opted in (it needs label sidecar-injector.io/injection=enabled; it has sidecar-injector/injection=enabled, a near miss: did you mean sidecar-injector.io/injection=enabled?); fix: kubectl label namespace probes sidecar-injector.io/injection=enabled --overwrite',
  );
  const scoped = compileTemplate(
    { name: 'agent', namespaceSelector: { matchLabels: { team: 'payments' } }, containers: [{ name: 'agent', image: 'agent:1' }] },
    'agent.yaml',
  ).template!;
  t.is(
    probeKeptOut(scoped, 'probes', { 'sidecar-injector.io/injection': 'enabled', 'kubernetes.io/metadata.name': 'probes' }),
    "the candidate's namespaceSelector does not select the probe namespace probes: it needs team=payments, and the namespace has no label team; fix: give the probe namespace that label (kubectl label namespace probes team=payments --overwrite), or use a probe namespace labelled as the namespaces the template serves",
  );
  t.is(probeKeptOut(scoped, 'probes', { 'sidecar-injector.io/injection': 'enabled', team: 'payments' }), undefined, 'neither: the webhook or another one');
  // Through the preflight: the probe namespace's labels read when the probe came back without the sidecar.
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  const chain = new AdmissionChain();
  api.admission = chain;
  api.create('probes', { 'sidecar-injector/injection': 'enabled' });
  const results: PreflightResult[] = [];
  const kubeConfig = await api.kubeConfig();
  const preflights = new Preflights(
    'probes',
    apiServerDryRun(kubeConfig),
    () => new Date(0),
    (r) => results.push(r),
    apiServerNamespaceLabels(kubeConfig),
  );
  await preflights.run(set);
  t.like(results[0], { passed: false, failure: 'not-injected' });
  t.regex(
    results[0]!.message,
    /came back without the candidate's sidecar: the probe namespace probes is not opted in .*fix: kubectl label namespace probes sidecar-injector\.io\/injection=enabled --overwrite$/,
  );
});

test('an API server that cannot be reached fails the preflight; the probe annotation counts only in the probe namespace', async (t) => {
  const set = await candidateSet();
  const preflights = new Preflights('probes', async () => {
    throw new Error('connect ECONNREFUSED');
  });
  await preflights.run(set);
  t.like(preflights.status().results[0], { passed: false, failure: 'unreachable' });
  const gated = preflights.gate(set);
  const candidate = set.rollouts!.get('log-shipper')!.candidate!;
  const subject = (namespace: string, probe: string) => ({ namespace, name: 'p-', labels: {}, probe });
  t.is(revisionsFor(gated, subject('probes', `log-shipper@${candidate.hash}`)).byName.get('log-shipper'), candidate, 'the probe gets the stopped candidate');
  t.is(revisionsFor(gated, subject('shop', `log-shipper@${candidate.hash}`)), gated, 'a forged probe annotation elsewhere: nothing');
  t.is(revisionsFor(gated, subject('probes', 'log-shipper@000000000000')), gated, 'another revision: nothing');
});

test('--rollout-probe-namespace: a namespace name, in cluster mode only', (t) => {
  t.is(loadConfig({}, ['--namespace-source', 'cluster', '--rollout-probe-namespace', 'rollout-probes']).rolloutProbeNamespace, 'rollout-probes');
  t.is(loadConfig({ SIDECAR_INJECTOR_ROLLOUT_PROBE_NAMESPACE: 'probes' }, ['--namespace-source', 'cluster']).rolloutProbeNamespace, 'probes');
  t.is(loadConfig({}, []).rolloutProbeNamespace, undefined);
  t.throws(() => loadConfig({}, ['--namespace-source', 'cluster', '--rollout-probe-namespace', 'Probes_1']), {
    instanceOf: ConfigError,
    message: /--rollout-probe-namespace: expected a namespace name \(got "Probes_1"\)/,
  });
  t.throws(() => loadConfig({}, ['--namespace-source', 'local', '--rollout-probe-namespace', 'probes']), {
    instanceOf: ConfigError,
    message: /--rollout-probe-namespace needs the cluster/,
  });
});

test('the probe annotation is honoured on dry runs only: a real pod in the probe namespace that carries it gets the stable revision', async (t) => {
  const set = await candidateSet();
  const preflights = new Preflights('probes', async () => {
    throw new Error('connect ECONNREFUSED');
  });
  await preflights.run(set);
  const gated = preflights.gate(set);
  const candidate = gated.rollouts!.get('log-shipper')!.candidate!;
  const stable = gated.byName.get('log-shipper')!;
  t.not(candidate.hash, stable.hash);
  const namespaces = optedIn('probes');
  const revision = async (dryRun: boolean) => {
    const p = pod({ generateName: 'forged-' });
    p.metadata.annotations = { [probeAnnotation]: `log-shipper@${candidate.hash}` };
    const outcome = await admitPod({ pod: p, namespace: 'probes', name: '', dryRun }, { templates: () => gated, namespaces });
    return outcome.decision === 'patched' ? outcome.templates.find((x) => x.name === 'log-shipper')?.hash : undefined;
  };
  t.is(await revision(true), candidate.hash, 'the dry run (the preflight) tries the stopped candidate');
  t.is(await revision(false), stable.hash, 'a pod that is stored never takes a candidate by its annotation');
});

test('a candidate the injector leaves out of the probe pod: the preflight quotes the answer’s warning that says why (a Pod Security level here)', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'preflight-'));
  t.teardown(() => rm(dir, { recursive: true }));
  await writeFile(join(dir, 'log-shipper.yaml'), shipper);
  await writeFile(join(dir, 'log-shipper-next.yaml'), candidateText.replace('allowPrivilegeEscalation: false', 'allowPrivilegeEscalation: true'));
  const set = await loadTemplateDir(dir);
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  const chain = new AdmissionChain();
  api.admission = chain;
  const results: PreflightResult[] = [];
  const preflights = new Preflights(
    'probes',
    apiServerDryRun(await api.kubeConfig()),
    () => new Date(0),
    (r) => results.push(r),
  );
  const namespaces = createLocalNamespaceSource({
    probes: { [LabelKeys.namespaceOptIn]: LabelValues.enabled, 'pod-security.kubernetes.io/enforce': 'restricted' },
  });
  const injector = await startTestServer({ templates: () => preflights.gate(set), namespaces });
  t.teardown(() => injector.stop());
  chain.webhooks.push({ name: 'all.sidecar-injector.io', port: injector.port, path: '/mutate?timeout=10s' });
  await preflights.run(set);
  t.like(results[0], { passed: false, failure: 'not-injected' });
  t.regex(
    results[0]!.message,
    /came back without the candidate's sidecar, and the chain's answer warned: log-shipper not injected: it would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false/,
  );
});

test('warningTexts: each Warning header’s text as the API server writes it, unescaped; other headers, malformed values and any past 20 left out', (t) => {
  t.deepEqual(
    warningTexts([
      'Content-Type',
      'application/json',
      'Warning',
      '299 - "a \\"quoted\\" word and a \\\\ backslash"',
      'warning',
      '299 - "second"',
      'Warning',
      'not a warning value',
    ]),
    ['a "quoted" word and a \\ backslash', 'second'],
  );
  t.is(warningTexts(Array.from({ length: 30 }, (_, i) => ['Warning', `299 - "w${i}"`]).flat()).length, 20);
  t.is(warningTexts(['Warning', `299 - "${'x'.repeat(5000)}"`])[0]!.length, 1000);
  t.deepEqual(warningTexts([]), []);
  // UTF-8 bytes, as Node hands them over (read as latin1).
  t.deepEqual(warningTexts(['Warning', Buffer.from('299 - "cut short…"', 'utf8').toString('latin1')]), ['cut short…']);
});

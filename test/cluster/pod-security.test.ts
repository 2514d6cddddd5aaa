/**
 * Pod Security as kube-apiserver's own PodSecurity admission plugin enforces it, against the
 * injector's check of the same pods (src/k8s/pod-security.ts): on every case the suite knows
 * (test/helpers/pod-security-cases.ts) both refuse the same pods with the same words; and in
 * namespaces enforcing baseline and restricted, every pod the injector lets through is
 * admitted, and a template it leaves out would have been refused.
 */
import test from 'ava';
import { copyFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { checkPodSecurity, describeViolations, rulesAt, type PodSecurityPolicy } from '../../src/k8s/pod-security.js';
import { parseKubernetesVersion } from '../../src/k8s/version.js';
import { pod, rules, versionCases } from '../helpers/pod-security-cases.js';
import { cli, joinWorld, optedInNamespace, testFolder, testNamespace, warnings, withTemplate, type Json } from './helpers.js';

/** The pod as the API server has it when PodSecurity runs (defaulted, the ServiceAccount plugin's volume), from a namespace that enforces nothing. */
async function asAdmitted(plain: string, body: Json): Promise<Json> {
  const { kube } = joinWorld();
  return kube.create(`/api/v1/namespaces/${plain}/pods?dryRun=All`, body);
}

const namespaces = new Map<string, Promise<string>>();
/** A namespace enforcing `level` at `version` (shared by the cases of one test). */
function enforcing(t: Parameters<typeof testNamespace>[0], level: string, version: string): Promise<string> {
  const key = `${level}:${version}`;
  if (!namespaces.has(key))
    namespaces.set(
      key,
      testNamespace(t, `pss-${level}-${version.replace(/\./g, '-')}`, {
        'pod-security.kubernetes.io/enforce': level,
        'pod-security.kubernetes.io/enforce-version': version,
      }),
    );
  return namespaces.get(key)!;
}

test("the injector's Pod Security verdicts equal kube-apiserver's, word for word, on every case the suite knows", async (t) => {
  const { kube, file } = joinWorld();
  // What the injector judges by where it runs: a policy version capped at the API server's (latest is its own).
  const inForce = parseKubernetesVersion(file.kubernetesVersion)!;
  namespaces.clear();
  const plain = await testNamespace(t, 'pss-plain');
  const cases: { name: string; body: Json; level: 'baseline' | 'restricted'; version: string }[] = [];
  for (const [id, level, failing, passing] of rules) {
    cases.push({ name: `${id} failing`, body: pod(failing), level, version: 'latest' });
    cases.push({ name: `${id} passing`, body: pod(passing), level, version: 'latest' });
    if (level === 'restricted') cases.push({ name: `${id} failing, at baseline`, body: pod(failing), level: 'baseline', version: 'latest' });
  }
  for (const [name, body, level, minor] of versionCases) cases.push({ name: `${name} at v1.${minor}`, body, level, version: `v1.${minor}` });
  let refused = 0;
  const differences: string[] = [];
  for (const c of cases) {
    const namespace = await enforcing(t, c.level, c.version);
    const body = { ...c.body, metadata: { ...c.body.metadata, name: 'p' } };
    const real = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, body);
    const admitted = await asAdmitted(plain, body).catch((err: Error) => err);
    if (admitted instanceof Error) {
      differences.push(`${c.name}: not a pod the API server admits at all: ${admitted.message}`);
      continue;
    }
    const version = c.version === 'latest' ? ('latest' as const) : { major: 1, minor: Number(c.version.slice(3)) };
    const policy: PodSecurityPolicy = { level: c.level, version, label: `${c.level}:${c.version}`, rules: rulesAt(version, inForce)! };
    const ours = checkPodSecurity(admitted, policy);
    const expected = ours.length === 0 ? 'admitted' : `pods "p" is forbidden: violates PodSecurity "${policy.label}": ${describeViolations(ours)}`;
    const actual = real.status === 201 ? 'admitted' : String(real.body.message);
    if (ours.length > 0) refused++;
    if (actual !== expected) differences.push(`${c.name} (${policy.label}):\n  kube-apiserver: ${actual}\n  the injector:   ${expected}`);
  }
  t.deepEqual(differences, []);
  t.true(refused >= rules.length, `${refused} refusals compared`);
});

/** An on-request template whose container runs privileged as root: baseline and restricted both forbid it. */
const privilegedAgent = `name: privileged-agent
description: a node agent that runs privileged (for the Pod Security tests)
injection: on-request
failurePolicy: Ignore
containers:
  - name: privileged-agent
    image: registry.example/agent:1.0
    securityContext:
      privileged: true
`;

/** An on-request template whose container runs as root: baseline allows it, restricted does not. */
const rootAgent = `name: root-agent
description: an agent that runs as root (for the Pod Security tests)
injection: on-request
failurePolicy: Ignore
containers:
  - name: root-agent
    image: registry.example/agent:1.0
    securityContext:
      runAsUser: 0
`;

test('opted-in namespaces at baseline and restricted: what the injector lets through is admitted, and a template it leaves out would have been refused', async (t) => {
  const { kube, file } = joinWorld();
  await withTemplate(t, 'privileged-agent', privilegedAgent);
  await withTemplate(t, 'root-agent', rootAgent);
  // The same set offline, for render.
  const offline = await testFolder(t, 'pss-templates');
  for (const file of ['log-shipper.yaml', 'proxy.yaml']) await copyFile(join('templates', file), join(offline, file));
  await writeFile(join(offline, 'privileged-agent.yaml'), privilegedAgent);
  await writeFile(join(offline, 'root-agent.yaml'), rootAgent);
  const expectedLeftOut = { baseline: ['privileged-agent'], restricted: ['privileged-agent', 'root-agent'] };
  const minor = file.kubernetesVersion.replace(/^v(\d+\.\d+).*/, '$1');
  for (const level of ['baseline', 'restricted'] as const) {
    const namespace = await optedInNamespace(t, `pss-in-${level}`, { 'pod-security.kubernetes.io/enforce': level });
    // A pod that meets restricted, asking for the proxy and both agents.
    const body = pod((p) => (p.metadata.annotations['sidecar-injector.io/templates'] = 'proxy,privileged-agent,root-agent'));
    const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, body);
    t.is(answer.status, 201, `${level}: the injected pod is admitted (${answer.body.message ?? ''})`);
    const injected = Object.keys(JSON.parse(answer.body.metadata.annotations['sidecar-injector.io/status']).templates);
    const warned = warnings(answer).join('\n');
    const left = ['proxy', 'log-shipper', 'privileged-agent', 'root-agent'].filter((tpl) => !injected.includes(tpl));
    t.deepEqual(left, expectedLeftOut[level], `${level}: the templates the level forbids are left out, and only those`);
    for (const template of left) {
      t.regex(warned, new RegExp(`${template} not injected: it would violate PodSecurity "${level}`), `${level}: ${template} left out, saying why`);
      // Forced in (render with --pod-security-action inject), the API server refuses it: the injector was right.
      const rendered = await cli(
        [
          'render',
          '-f',
          '-',
          '--templates',
          offline,
          '--namespace',
          namespace,
          '--namespace-label',
          `${namespace}:sidecar-injector.io/injection=enabled`,
          '--namespace-label',
          `${namespace}:pod-security.kubernetes.io/enforce=${level}`,
          '--kubernetes-version',
          minor,
          '--pod-security-action',
          'inject',
          '-o',
          'json',
        ],
        { input: JSON.stringify({ apiVersion: 'v1', kind: 'Pod', ...body, metadata: { ...body.metadata, name: `forced-${template}` } }) },
      );
      t.is(rendered.code, 0, rendered.stderr);
      const forced = parseAllDocuments(rendered.stdout)[0]!.toJS() as Json;
      // The pod's own opt-out keeps the webhook out of it: PodSecurity judges what render made.
      forced.metadata.labels = { ...(forced.metadata.labels ?? {}), 'sidecar-injector.io/inject': 'disabled' };
      const refused = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, forced);
      t.is(refused.status, 403, `${level}: ${template} forced in is refused`);
      t.regex(String(refused.body.message), new RegExp(`violates PodSecurity "${level}:latest"`));
    }
    t.log(`${level}: injected ${injected.join(', ') || 'nothing'}; left out ${left.join(', ') || 'nothing'}`);
  }
});

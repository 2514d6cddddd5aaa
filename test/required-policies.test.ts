/**
 * The required-sidecar policies (src/manifests/required-policies.ts) judge the pods admission
 * judges. The binding's selectors are matched with the project's selector code and every CEL
 * expression is evaluated with a CEL evaluator (@bufbuild/cel) on corpus pods as the API server
 * holds them after admission: every pod the injector produced passes; a required sidecar
 * removed or altered fails; a policy applies exactly where admission selects its template; the
 * policy follows its template; and a deliberately wrong policy is caught by the same checks.
 */
import test from 'ava';
import { celEnv, isCelError, parse, plan } from '@bufbuild/cel';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import fc from 'fast-check';
import { parseAllDocuments } from 'yaml';
import { policies as policiesCommand } from '../src/cli/policies.js';
import { policiesOptions } from '../src/cli/usage.js';
import { ConfigError, PolicyError, UsageError } from '../src/errors.js';
import { celString } from '../src/k8s/cel.js';
import { matches, parseSelector, type Labels } from '../src/k8s/selector.js';
import { celLimits, parseValidationActions, policiesYaml, requiredPolicies, webhookScope, type RequiredPolicy } from '../src/manifests/required-policies.js';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';
import { flagText } from '../src/options.js';
import { admitPod } from '../src/pipeline/admit.js';
import { requestedTemplates } from '../src/selection/select.js';
import { matchConditions as webhookMatchConditions } from '../src/pipeline/match-conditions.js';
import { loadTemplateDir, parseTemplateText } from '../src/templates/load.js';
import { createTemplateSet, type TemplateSet } from '../src/templates/set.js';
import { prepareCreate } from './helpers/apiserver.js';
import { loadCorpus } from './helpers/corpus.js';
import { parsePod, podOs } from '../src/k8s/pod.js';
import { schemaProblems } from './helpers/kube-schema.js';
import { kustomizeObjects } from './helpers/kustomize.js';
import { bareExampleText } from './helpers/templates.js';

type Obj = Record<string, any>;

const corpus = loadCorpus();
let bundled: TemplateSet;
/** The bundled templates with the log shipper required too: an automatic template in spec.containers, with an objectSelector. */
let bothRequired: TemplateSet;
let proxyText = '';
let shipperText = '';

function templateSet(...texts: string[]): TemplateSet {
  return createTemplateSet(
    texts.map((text, i) => {
      const { template, problems } = parseTemplateText(text, `t${i}.yaml`);
      if (!template) throw new Error(JSON.stringify(problems));
      return template;
    }),
  );
}

test.before(async () => {
  bundled = await loadTemplateDir('templates');
  proxyText = bareExampleText('proxy');
  shipperText = bareExampleText('log-shipper');
  bothRequired = templateSet(proxyText, shipperText.replace('failurePolicy: Ignore', 'failurePolicy: Fail'));
});

const env = celEnv();
const planned = new Map<string, ReturnType<typeof plan>>();

/** Evaluates one expression as the API server would on `object`; an evaluation error fails the test. */
function cel(expression: string, object: unknown): unknown {
  let program = planned.get(expression);
  if (!program) planned.set(expression, (program = plan(env, parse(expression))));
  const result = program({ object: object as never });
  if (isCelError(result)) throw new Error(`CEL error in ${expression.slice(0, 80)}…: ${result.message}`);
  return result;
}

interface Verdict {
  /** The binding's selectors and the policy's matchConditions select the pod. */
  readonly applies: boolean;
  /** The messages of the failed validations (empty: admitted). */
  readonly failures: readonly string[];
}

/** What the API server decides for `pod` in a namespace with `namespaceLabels` (CREATE of pods, as every policy matches). */
function judge(policy: RequiredPolicy, pod: Obj, namespaceLabels: Labels): Verdict {
  const { matchResources } = (policy.binding as Obj).spec;
  const spec = (policy.policy as Obj).spec;
  const none: Verdict = { applies: false, failures: [] };
  if (!matches(parseSelector(matchResources.namespaceSelector), namespaceLabels)) return none;
  if (!matches(parseSelector(matchResources.objectSelector), pod.metadata?.labels ?? {})) return none;
  for (const condition of spec.matchConditions) if (cel(condition.expression, pod) !== true) return none;
  const failures: string[] = [];
  for (const validation of spec.validations) {
    // The API server evaluates every messageExpression, passed or not: it must never fail.
    const message = validation.messageExpression ? cel(validation.messageExpression, pod) : validation.message;
    if (typeof message !== 'string' || message.includes('\n') || message.length > 5 * 1024) throw new Error(`bad message ${String(message)}`);
    if (cel(validation.expression, pod) !== true) failures.push(message);
  }
  return { applies: true, failures };
}

/** A variation of a corpus pod or of its namespace. */
interface Variant {
  readonly name: string;
  readonly namespace?: string;
  readonly optedIn?: boolean;
  readonly annotations?: Record<string, string>;
  readonly labels?: Record<string, string>;
  readonly spec?: Obj;
}

const variants: readonly Variant[] = [
  { name: 'as is' },
  { name: 'requests proxy', annotations: { 'sidecar-injector.io/templates': 'proxy' } },
  { name: 'requests both, spaced', annotations: { 'sidecar-injector.io/templates': ' log-shipper ,\u00a0proxy\t' } },
  { name: 'requests with an empty item', annotations: { 'sidecar-injector.io/templates': 'proxy,' } },
  { name: 'requests the other template', annotations: { 'sidecar-injector.io/templates': 'log-shipper' } },
  { name: 'requests nothing', annotations: { 'sidecar-injector.io/templates': '' } },
  { name: 'namespace not opted in', optedIn: false, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
  { name: 'opted out', labels: { 'sidecar-injector.io/inject': 'disabled' }, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
  { name: 'opt-out label of another value', labels: { 'sidecar-injector.io/inject': 'enabled' }, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
  { name: 'mirror pod', annotations: { 'sidecar-injector.io/templates': 'proxy', 'kubernetes.io/config.mirror': 'a1b2' } },
  { name: 'windows pod', spec: { os: { name: 'windows' } }, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
  { name: 'windows by node selector', spec: { nodeSelector: { 'kubernetes.io/os': 'windows' } }, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
  { name: 'linux spelled out', spec: { os: { name: 'linux' } }, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
  { name: 'kube-system opted in', namespace: 'kube-system', annotations: { 'sidecar-injector.io/templates': 'proxy' } },
  { name: 'shipping off', labels: { 'logging.example.com/ship': 'false' }, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
];

/** One admitted pod: what the API server stores, the namespace's labels, and which templates admission selected. */
interface Admitted {
  readonly label: string;
  readonly pod: Obj;
  readonly namespaceLabels: Labels;
  readonly selected: ReadonlySet<string>;
}

const admittedBySet = new Map<TemplateSet, Promise<{ pods: Admitted[]; denied: number }>>();

/** Every corpus pod in every variant, through admission (admitPod as the webhook runs it); denied pods are left out. Once per set. */
function admitted(set: TemplateSet): Promise<{ pods: Admitted[]; denied: number }> {
  let result = admittedBySet.get(set);
  if (!result) admittedBySet.set(set, (result = admitAll(set)));
  return result;
}

/** A corpus pod in a variant, as the API server sends it, with its namespace's labels (opted in unless the variant says not). */
async function variantOf(entry: (typeof corpus)[number], variant: Variant) {
  const namespace = variant.namespace ?? entry.namespace;
  const pod = prepareCreate(entry.body, namespace);
  pod.metadata.namespace = namespace;
  if (variant.annotations) pod.metadata.annotations = { ...pod.metadata.annotations, ...variant.annotations };
  if (variant.labels) pod.metadata.labels = { ...pod.metadata.labels, ...variant.labels };
  if (variant.spec) pod.spec = { ...pod.spec, ...variant.spec };
  const namespaces = createLocalNamespaceSource({ [namespace]: variant.optedIn === false ? {} : { 'sidecar-injector.io/injection': 'enabled' } });
  return { namespace, pod, namespaces, namespaceLabels: await namespaces.labelsOf(namespace) };
}

async function admitAll(set: TemplateSet): Promise<{ pods: Admitted[]; denied: number }> {
  const pods: Admitted[] = [];
  let denied = 0;
  for (const entry of corpus) {
    for (const variant of variants) {
      const { namespace, pod, namespaces, namespaceLabels } = await variantOf(entry, variant);
      const outcome = await admitPod({ pod, namespace, name: pod.metadata.name ?? '' }, { templates: () => set, namespaces });
      if (outcome.decision === 'denied') {
        denied++;
        continue;
      }
      const stored = outcome.decision === 'patched' ? (outcome.injection.pod as Obj) : pod;
      const selected = new Set(outcome.selection?.templates.map((t) => t.name) ?? []);
      pods.push({ label: `${entry.name} (${variant.name})`, pod: stored, namespaceLabels, selected });
    }
  }
  return { pods, denied };
}

/** The webhooks are never called outside their scope (manifests), so admission selects nothing there. */
const inWebhookScope = (pod: Admitted) =>
  matches(parseSelector(webhookScope.namespaceSelector), pod.namespaceLabels) &&
  matches(parseSelector(webhookScope.objectSelector), pod.pod.metadata.labels ?? {});

/** Admitted pods a policy refuses, and pods where the policy applies and admission did not select its template (or the reverse). */
function survey(policies: readonly RequiredPolicy[], pods: readonly Admitted[]): { refused: string[]; mismatched: string[]; applied: number } {
  const refused: string[] = [];
  const mismatched: string[] = [];
  let applied = 0;
  for (const pod of pods) {
    for (const policy of policies) {
      const verdict = judge(policy, pod.pod, pod.namespaceLabels);
      const expected = pod.selected.has(policy.template) && inWebhookScope(pod);
      if (verdict.applies !== expected) mismatched.push(`${policy.template}: ${pod.label}: applies ${verdict.applies}, admission selected ${expected}`);
      if (verdict.applies) applied++;
      for (const failure of verdict.failures) refused.push(`${policy.template}: ${pod.label}: ${failure.slice(0, 120)}`);
    }
  }
  return { refused, mismatched, applied };
}

test('every pod the injector admits passes, and a policy applies exactly where admission selects its template', async (t) => {
  for (const [name, set] of [
    ['bundled', bundled],
    ['both required', bothRequired],
  ] as const) {
    const policies = requiredPolicies(set);
    const { pods, denied } = await admitted(set);
    const { refused, mismatched, applied } = survey(policies, pods);
    t.deepEqual(refused, [], name);
    t.deepEqual(mismatched, [], name);
    t.true(applied > 3 * corpus.length, `${name}: the policies applied ${applied} times`);
    t.true(pods.length > 10 * corpus.length && denied < pods.length, `${name}: ${pods.length} admitted, ${denied} denied`);
    t.log(`${name}: ${pods.length} admitted, ${denied} denied, ${applied} verdicts where a policy applies`);
  }
});

test('one policy per required template; optional templates get none', (t) => {
  t.deepEqual(
    requiredPolicies(bundled).map((p) => p.template),
    ['proxy'],
  );
  t.deepEqual(
    requiredPolicies(bothRequired).map((p) => p.template),
    ['log-shipper', 'proxy'],
  );
  t.deepEqual(requiredPolicies(templateSet(shipperText)), []);
  // A required template that adds no container leaves nothing for a policy to find.
  t.deepEqual(requiredPolicies(templateSet('name: env-only\nappContainers:\n  env: [{ name: REGION, value: eu }]\n')), []);
  t.regex(policiesYaml([]), /No template is required/);
});

test("optOut: a template's opt-out policy refuses (deny) or warns about (warn) exactly the opted-out pods the required webhook does", async (t) => {
  const set = templateSet(`${proxyText}\noptOut: deny\n`, `${shipperText.replace('failurePolicy: Ignore', 'failurePolicy: Fail')}\noptOut: warn\n`);
  const policies = requiredPolicies(set);
  t.deepEqual(
    policies.map((p) => [p.template, p.subject, (p.binding as Obj).spec.validationActions]),
    [
      ['log-shipper', 'sidecars', ['Warn', 'Audit']],
      ['log-shipper', 'opt-out', ['Warn', 'Audit']],
      ['proxy', 'sidecars', ['Warn', 'Audit']],
      ['proxy', 'opt-out', ['Deny']],
    ],
  );
  t.deepEqual(await schemaProblems(policies.flatMap((p) => [p.policy, p.binding])), []);
  t.regex(policiesYaml(policies), /# Template proxy, the pods labelled to opt out of it: worst-case CEL cost/);
  const optOutPolicies = policies.filter((p) => p.subject === 'opt-out');
  const mismatched: string[] = [];
  let refused = 0;
  let warned = 0;
  const optOutVariants = [
    ...variants,
    { name: 'requests one that does not exist too', annotations: { 'sidecar-injector.io/templates': 'proxy,nope' } },
  ].flatMap((v) => [v, { ...v, name: `${v.name}, opted out`, labels: { ...v.labels, 'sidecar-injector.io/inject': 'disabled' } }]);
  for (const entry of corpus) {
    for (const variant of optOutVariants) {
      const { namespace, pod, namespaces, namespaceLabels } = await variantOf(entry, variant);
      // With components/required-opt-out the required webhook is called in every namespace of its scope, opted out or not.
      if (!matches(parseSelector(webhookScope.namespaceSelector), namespaceLabels)) continue;
      const outcome = await admitPod({ pod, namespace, name: pod.metadata.name ?? '' }, { templates: () => set, namespaces, failurePolicy: 'Fail' });
      const webhook = {
        deny: outcome.decision === 'denied' && outcome.reason === 'opt-out-refused' ? outcome.templates.map((t) => t.name) : [],
        warn: outcome.warnings.filter((w) => w.id === 'opt-out-of-required').map((w) => w.template),
      };
      const policy = { deny: [] as string[], warn: [] as string[] };
      for (const p of optOutPolicies) {
        const verdict = judge(p, pod, namespaceLabels);
        if (verdict.failures.length > 0) policy[(p.binding as Obj).spec.validationActions.includes('Deny') ? 'deny' : 'warn'].push(p.template);
      }
      // A refused pod gets no warnings: compare the warnings of the admitted ones.
      if (webhook.deny.length > 0) policy.warn = [];
      if (JSON.stringify(webhook) !== JSON.stringify(policy))
        mismatched.push(`${entry.name} (${variant.name}): webhook ${JSON.stringify(webhook)}, policies ${JSON.stringify(policy)}`);
      if (webhook.deny.length > 0) refused++;
      if (webhook.warn.length > 0) warned++;
    }
  }
  t.deepEqual(mismatched, []);
  t.true(refused > corpus.length && warned > corpus.length / 2, `${refused} refused, ${warned} warned`);
  t.log(`${refused} opted-out pods refused, ${warned} warned, by the webhook and the policies alike`);
});

/** Ways to break a pod's required sidecar, and whether the policy must refuse the result. */
const alterations: readonly { name: string; refused: boolean; alter(pod: Obj, sidecar: Obj, list: Obj[]): void }[] = [
  { name: 'removed', refused: true, alter: (_pod, sidecar, list) => void list.splice(list.indexOf(sidecar), 1) },
  { name: 'renamed', refused: true, alter: (_pod, sidecar) => void (sidecar.name = `${sidecar.name}-x`) },
  { name: 'another registry', refused: true, alter: (_pod, sidecar) => void (sidecar.image = `mirror.example.com/${sidecar.image}`) },
  { name: 'another repository', refused: true, alter: (_pod, sidecar) => void (sidecar.image = sidecar.image.replace(/[^/:]+(?=:)/, 'impostor')) },
  { name: 'a huge image', refused: true, alter: (_pod, sidecar) => void (sidecar.image = `${sidecar.image}${'a'.repeat(2000)}`) },
  { name: 'no image', refused: true, alter: (_pod, sidecar) => void delete sidecar.image },
  { name: 'another tag', refused: false, alter: (_pod, sidecar) => void (sidecar.image = sidecar.image.replace(/:[^/:]+$/, ':v9')) },
  { name: 'pinned by digest', refused: false, alter: (_pod, sidecar) => void (sidecar.image = `${sidecar.image}@sha256:${'ab'.repeat(32)}`) },
  { name: 'Docker Hub spelled out', refused: false, alter: (_pod, sidecar) => void (sidecar.image = `docker.io/${sidecar.image}`) },
];

test('a pod whose required sidecar is removed or altered after admission is refused, with a message naming the container', async (t) => {
  const policies = requiredPolicies(bothRequired);
  const { pods } = await admitted(bothRequired);
  let checked = 0;
  for (const policy of policies) {
    const name = policy.template;
    for (const pod of pods) {
      if (!judge(policy, pod.pod, pod.namespaceLabels).applies) continue;
      for (const alteration of alterations) {
        const altered = structuredClone(pod.pod);
        const holder = (['initContainers', 'containers'] as const)
          .map((key) => altered.spec[key] as Obj[] | undefined)
          .find((l) => l?.some((c) => c.name === name))!;
        const sidecar = holder.find((c) => c.name === name)!;
        alteration.alter(altered, sidecar, holder);
        const verdict = judge(policy, altered, pod.namespaceLabels);
        t.is(verdict.failures.length > 0, alteration.refused, `${name}: ${pod.label}: ${alteration.name}`);
        if (alteration.refused) t.regex(verdict.failures[0]!, new RegExp(`required sidecar (missing|altered).*container named ${name}`));
        checked++;
      }
    }
  }
  t.true(checked > 20 * alterations.length, `${checked} alterations checked`);
});

test('the list the template uses: a native sidecar turned into a plain init container is refused; the ordinary-container form only with fallback container', async (t) => {
  const denyFallback = templateSet(`${proxyText}\nnativeSidecars:\n  fallback: deny\n`);
  for (const [set, containerFormAccepted] of [
    [bundled, true],
    [denyFallback, false],
  ] as const) {
    const [policy] = requiredPolicies(set);
    const { pods } = await admitted(set);
    const injected = pods.filter((p) => judge(policy!, p.pod, p.namespaceLabels).applies);
    t.true(injected.length > corpus.length);
    for (const pod of injected) {
      const plain = structuredClone(pod.pod);
      delete plain.spec.initContainers.find((c: Obj) => c.name === 'proxy').restartPolicy;
      t.true(judge(policy!, plain, pod.namespaceLabels).failures.length > 0, `plain init container: ${pod.label}`);
      const moved = structuredClone(pod.pod);
      const sidecar = moved.spec.initContainers.find((c: Obj) => c.name === 'proxy');
      moved.spec.initContainers = moved.spec.initContainers.filter((c: Obj) => c !== sidecar);
      delete sidecar.restartPolicy;
      moved.spec.containers.unshift(sidecar);
      const verdict = judge(policy!, moved, pod.namespaceLabels);
      t.is(verdict.failures.length === 0, containerFormAccepted, `container form: ${pod.label}`);
      if (!containerFormAccepted) t.regex(verdict.failures[0]!, /^required sidecar altered: .*another list or another image/);
    }
  }
});

test('the on-request condition reads the annotation exactly as selection does, whitespace and all', (t) => {
  const [policy] = requiredPolicies(bundled);
  const condition = (policy!.policy as Obj).spec.matchConditions.find((c: Obj) => c.name === 'requests-the-template').expression as string;
  // Names, near-names, separators, every character JavaScript's trim removes, and some it keeps (zero-width space, NEL).
  const token = fc.constantFrom(
    'proxy',
    'log-shipper',
    'proxyx',
    'xproxy',
    'prox',
    'y',
    ',',
    ' ',
    '\t',
    '\n',
    '\v',
    '\f',
    '\r',
    '\u00a0',
    '\u1680',
    '\u2000',
    '\u2005',
    '\u200a',
    '\u2028',
    '\u2029',
    '\u202f',
    '\u205f',
    '\u3000',
    '\ufeff',
    '\u200b',
    '\u0085',
    '\u180e',
  );
  let requested = 0;
  fc.assert(
    fc.property(fc.array(token, { maxLength: 12 }), (tokens) => {
      const value = tokens.join('');
      const expected = requestedTemplates({ 'sidecar-injector.io/templates': value }).includes('proxy');
      if (expected) requested++;
      return cel(condition, { metadata: { annotations: { 'sidecar-injector.io/templates': value } } }) === expected;
    }),
    { numRuns: 3000, seed: 26 },
  );
  t.true(requested > 100, `${requested} values name proxy`);
});

test('a pod over the injector bound is refused before any list is walked', (t) => {
  const [policy] = requiredPolicies(bundled);
  const containers = Array.from({ length: 251 }, (_, i) => ({ name: `c${i}`, image: 'nginx' }));
  const pod = { metadata: { annotations: { 'sidecar-injector.io/templates': 'proxy' } }, spec: { containers } };
  const verdict = judge(policy!, pod, { 'sidecar-injector.io/injection': 'enabled', 'kubernetes.io/metadata.name': 'shop' });
  t.true(verdict.applies);
  t.regex(verdict.failures[0]!, /more than 250 containers/);
});

test('the policy follows its template: image, selectors, operating systems and the class', (t) => {
  const [before] = requiredPolicies(bundled);
  const moved = requiredPolicies(templateSet(proxyText.replace('image: envoyproxy/envoy:v1.32.3', 'image: registry.example.com/mesh/envoy:1.33')))[0]!;
  t.notDeepEqual(moved.policy, before!.policy);
  t.not(
    (moved.policy as Obj).metadata.annotations['sidecar-injector.io/template-hash'],
    (before!.policy as Obj).metadata.annotations['sidecar-injector.io/template-hash'],
  );
  t.regex(JSON.stringify((moved.policy as Obj).spec.validations), /registry\[\.\]example\[\.\]com\/mesh\/envoy/);
  // A pod injected from the old template no longer passes the new policy.
  const old = {
    metadata: { annotations: { 'sidecar-injector.io/templates': 'proxy' } },
    spec: { containers: [{ name: 'app', image: 'a' }], initContainers: [{ name: 'proxy', image: 'envoyproxy/envoy:v1.32.3', restartPolicy: 'Always' }] },
  };
  const shop = { 'sidecar-injector.io/injection': 'enabled', 'kubernetes.io/metadata.name': 'shop' };
  t.deepEqual(judge(before!, old, shop).failures, []);
  t.is(judge(moved, old, shop).failures.length, 1);

  const selective = requiredPolicies(
    templateSet(proxyText.replace('injection: on-request', 'injection: automatic\nobjectSelector:\n  matchLabels:\n    mesh: "on"')),
  )[0]!;
  const objectSelector = (selective.binding as Obj).spec.matchResources.objectSelector;
  t.deepEqual(objectSelector.matchExpressions.at(-1), { key: 'mesh', operator: 'In', values: ['on'] });
  t.false(
    (selective.policy as Obj).spec.matchConditions.some((c: Obj) => c.name === 'requests-the-template'),
    'automatic: no request condition',
  );

  const everywhere = requiredPolicies(
    templateSet(
      proxyText
        .replace('failurePolicy: Fail', 'failurePolicy: Fail\nos: [linux, windows]')
        .replace(/ {6}runAsUser: 101\n/, '')
        .replace(/ {6}readOnlyRootFilesystem: true\n/, '')
        .replace(/ {6}allowPrivilegeEscalation: false\n/, '')
        .replace(/ {6}capabilities:\n {8}drop: \["ALL"\]\n/, '')
        .replace(/ {6}# Fits Pod Security[^\n]*\n {6}seccompProfile:\n {8}type: RuntimeDefault\n/, ''),
    ),
  )[0]!;
  t.false((everywhere.policy as Obj).spec.matchConditions.some((c: Obj) => c.name === 'runs-on-a-supported-os'));
  t.deepEqual(requiredPolicies(templateSet(proxyText.replace('failurePolicy: Fail', 'failurePolicy: Ignore'))), []);
});

test('an image a pod may choose from an enum is checked against every choice; one only a pattern bounds is checked by name, and said so', (t) => {
  const enumImage = proxyText.replace(
    '  image: envoyproxy/envoy:v1.32.3\n',
    '  image:\n    default: envoyproxy/envoy:v1.32.3\n    type: enum\n    values: [envoyproxy/envoy:v1.32.3, "registry.example.com/envoy:1"]\n    override: pod\n',
  );
  const [choices] = requiredPolicies(templateSet(enumImage));
  t.deepEqual(choices!.notes, []);
  const text = JSON.stringify((choices!.policy as Obj).spec.validations[0].expression);
  t.regex(text, /registry\[\.\]example\[\.\]com\/envoy/);
  t.regex(text, /envoyproxy\/envoy/);
  const patterned = proxyText.replace(
    '  image: envoyproxy/envoy:v1.32.3\n',
    '  image:\n    default: envoyproxy/envoy:v1.32.3\n    pattern: "envoyproxy/envoy:v1\\\\.[0-9.]+"\n    override: pod\n',
  );
  const [byName] = requiredPolicies(templateSet(patterned));
  t.is(byName!.notes.length, 1);
  t.regex(byName!.notes[0]!, /image of container proxy is not checked/);
  t.notRegex(JSON.stringify((byName!.policy as Obj).spec.validations[0].expression), /matches/);
  t.regex(policiesYaml([byName!]), /# Note: proxy: the image of container proxy is not checked/);
});

test('a template that adds a label or annotation a policy reads is refused with ERR_POLICY', (t) => {
  const labelling = shipperText.replace('annotations:\n  logging.example.com/shipper: fluent-bit', 'labels:\n  logging.example.com/ship: "true"');
  const error = t.throws(() => requiredPolicies(templateSet(proxyText, labelling.replace('failurePolicy: Ignore', 'failurePolicy: Fail'))), {
    instanceOf: PolicyError,
  });
  t.is(error.code, 'ERR_POLICY');
  t.regex(error.message, /template log-shipper adds the pod label logging\.example\.com\/ship, which the policy of required template log-shipper reads/);
});

test('each expression stays within the API server cost limits, with the worst case computed', (t) => {
  for (const policy of requiredPolicies(bothRequired)) {
    t.true(policy.cost.maxPerExpression > 0 && policy.cost.maxPerExpression <= celLimits.perCall, JSON.stringify(policy.cost));
    t.true(policy.cost.perBinding <= celLimits.perBinding);
    t.true(policy.cost.matchConditions <= celLimits.matchConditions);
  }
  // The longest template name, on request: the annotation's regular expression is the costliest expression.
  const long = 'p'.repeat(63);
  const [policy] = requiredPolicies(templateSet(proxyText.replace('name: proxy\n', `name: ${long}\n`)));
  t.true(policy!.cost.maxPerExpression <= celLimits.perCall, JSON.stringify(policy!.cost));
});

test('the check can fail: a wrong policy is caught', async (t) => {
  const policies = requiredPolicies(bothRequired);
  const { pods } = await admitted(bothRequired);
  const broken = (change: (policy: Obj, binding: Obj) => void): RequiredPolicy[] =>
    policies.map((p) => {
      const copy = structuredClone(p) as { policy: Obj; binding: Obj } & RequiredPolicy;
      change(copy.policy, copy.binding);
      return copy;
    });
  // Native sidecars looked for in the wrong list: every injected pod is refused.
  const wrongList = survey(
    broken((policy) => {
      for (const v of policy.spec.validations) v.expression = v.expression.replaceAll('object.spec.initContainers', 'object.spec.ephemeralContainers');
    }),
    pods,
  );
  t.true(wrongList.refused.length > corpus.length, `${wrongList.refused.length} refused`);
  // The on-request condition forgotten: the policy applies to pods that never asked.
  const noRequest = survey(
    broken((policy) => {
      policy.spec.matchConditions = policy.spec.matchConditions.filter((c: Obj) => c.name !== 'requests-the-template');
    }),
    pods,
  );
  t.true(noRequest.mismatched.length > corpus.length && noRequest.refused.length > 0);
  // The opt-out label forgotten.
  const noOptOut = survey(
    broken((_policy, binding) => {
      binding.spec.matchResources.objectSelector.matchExpressions.shift();
    }),
    pods,
  );
  t.true(noOptOut.mismatched.length >= corpus.length);
  // The system namespaces forgotten.
  const system = survey(
    broken((_policy, binding) => {
      binding.spec.matchResources.namespaceSelector.matchExpressions.splice(1, 1);
    }),
    pods,
  );
  t.true(system.mismatched.some((m) => m.includes('kube-system')));
});

test("the binding's scope is the webhooks' scope, and the mirror-pod condition the webhooks' condition", (t) => {
  const rendered = kustomizeObjects('manifests');
  // The pod webhooks (the SidecarTemplate one reviews cluster-scoped objects: no selectors).
  const hooks = (rendered.find((o) => o.kind === 'MutatingWebhookConfiguration')!.webhooks as Obj[]).filter((w) => w.rules[0].resources.includes('pods'));
  t.is(hooks.length, 2);
  for (const hook of hooks) {
    t.deepEqual(hook.namespaceSelector, webhookScope.namespaceSelector, hook.name);
    t.deepEqual(hook.objectSelector, webhookScope.objectSelector, hook.name);
  }
  for (const policy of requiredPolicies(bothRequired)) {
    t.deepEqual((policy.policy as Obj).spec.matchConditions[0], webhookMatchConditions[0]);
  }
});

test('the generated objects are valid ValidatingAdmissionPolicy and Binding objects', async (t) => {
  for (const actions of [undefined, parseValidationActions('Deny')] as const) {
    const generated = requiredPolicies(bothRequired, typeof actions === 'object' ? { validationActions: actions } : {});
    t.deepEqual(await schemaProblems(generated.flatMap((p) => [p.policy, p.binding])), []);
  }
});

test('the component ships exactly what the generator prints for the bundled templates, and kustomize builds it', async (t) => {
  const committed = await readFile('manifests/components/required-policies/required-policies.yaml', 'utf8');
  t.is(committed, policiesYaml(requiredPolicies(bundled)), 'run: sidecar-injector policies > manifests/components/required-policies/required-policies.yaml');
  // A component is built from a kustomization that uses it; kustomize refuses absolute paths, so it lives in dist/.
  const dir = join('dist', 'required-policies-kustomization');
  await mkdir(dir, { recursive: true });
  try {
    await writeFile(join(dir, 'kustomization.yaml'), 'resources:\n  - ../../manifests\ncomponents:\n  - ../../manifests/components/required-policies\n');
    const objects = kustomizeObjects(dir);
    const shipped = objects.filter((o) => o.kind.startsWith('ValidatingAdmissionPolicy'));
    const generated = requiredPolicies(bundled).flatMap((p) => [p.policy, p.binding]);
    t.deepEqual(shipped, generated);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

test('validation actions: Warn,Audit by default, Deny when asked, combinations the API server refuses are refused', (t) => {
  t.deepEqual(parseValidationActions('Warn,Audit'), ['Warn', 'Audit']);
  t.deepEqual(parseValidationActions('Deny'), ['Deny']);
  t.deepEqual(parseValidationActions(' Deny , Audit'), ['Deny', 'Audit']);
  for (const bad of ['Deny,Warn', 'deny', '', 'Warn,Warn', '__proto__', 'x'.repeat(100_000)]) {
    const problem = parseValidationActions(bad);
    t.is(typeof problem, 'string', bad.slice(0, 20));
    t.true((problem as string).length < 300);
  }
});

/** Captured output of one `policies` run. */
async function runPolicies(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  // The bundled examples unless the test names a folder: policies reads the cluster's otherwise.
  const code = await policiesCommand(argv.includes('--templates') ? argv : [...argv, '--templates', 'templates'], {
    stdout: { write: (s: string) => (out += s) },
    stderr: { write: (s: string) => (err += s) },
  });
  return { code, out, err };
}

test('the policies command prints the YAML, takes --validation-actions and --templates, and refuses bad input with a message', async (t) => {
  const plain = await runPolicies([]);
  t.is(plain.code, 0);
  t.is(plain.out, policiesYaml(requiredPolicies(bundled)));
  const deny = await runPolicies(['--validation-actions', 'Deny', '--templates', 'templates']);
  const binding = parseAllDocuments(deny.out).map((d) => d.toJS() as Obj)[1]!;
  t.deepEqual(binding.spec.validationActions, ['Deny']);
  await t.throwsAsync(runPolicies(['--validation-actions', 'Deny,Warn']), { instanceOf: ConfigError, message: /Deny and Warn cannot be combined/ });
  await t.throwsAsync(runPolicies(['--bogus']), { instanceOf: UsageError });
  await t.throwsAsync(runPolicies(['--templates', 'no-such-dir']));
});

test('the docs list the options of policies as its option table does', async (t) => {
  const text = await readFile('docs/required-policies.md', 'utf8');
  const section = text.slice(text.indexOf('## Options of `policies`'));
  const rows = [...section.matchAll(/^\| (`--[^`]+`) \| ([^|]*) \|/gm)].map((m) => [m[1], m[2]!.trim()]);
  t.deepEqual(
    rows,
    Object.entries(policiesOptions).map(([name, spec]) => [`\`${flagText(name, spec)}\``, 'default' in spec ? spec.default : '']),
  );
});

test("the policies' operating system is admission's: spec.os, either OS node selector, required node affinity on Windows in every term", (t) => {
  const [policy] = requiredPolicies(bundled);
  const condition = (policy!.policy as Obj).spec.matchConditions.find((c: Obj) => c.name === 'runs-on-a-supported-os').expression as string;
  const term = (...expressions: Obj[]) => ({ matchExpressions: expressions });
  const os = (key: string, operator: string, values: string[]) => ({ key, operator, values });
  const affinity = (...terms: Obj[]) => ({ nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: terms } } });
  const specs: [string, Obj, 'linux' | 'windows'][] = [
    ['nothing', {}, 'linux'],
    ['spec.os windows', { os: { name: 'windows' } }, 'windows'],
    ['spec.os linux beside a windows selector', { os: { name: 'linux' }, nodeSelector: { 'kubernetes.io/os': 'windows' } }, 'linux'],
    ['kubernetes.io/os selector', { nodeSelector: { 'kubernetes.io/os': 'windows' } }, 'windows'],
    ['beta.kubernetes.io/os selector', { nodeSelector: { 'beta.kubernetes.io/os': 'windows' } }, 'windows'],
    ['a selector value that is no OS', { nodeSelector: { 'kubernetes.io/os': 'Windows' } }, 'linux'],
    ['the current label first', { nodeSelector: { 'kubernetes.io/os': 'linux', 'beta.kubernetes.io/os': 'windows' } }, 'linux'],
    ['affinity, one term', { affinity: affinity(term(os('kubernetes.io/os', 'In', ['windows']))) }, 'windows'],
    ['affinity, beta label', { affinity: affinity(term(os('beta.kubernetes.io/os', 'In', ['windows']))) }, 'windows'],
    [
      'affinity, every term windows',
      { affinity: affinity(term(os('kubernetes.io/os', 'In', ['windows'])), term(os('zone', 'In', ['a']), os('beta.kubernetes.io/os', 'In', ['windows']))) },
      'windows',
    ],
    ['affinity, one term without the OS', { affinity: affinity(term(os('kubernetes.io/os', 'In', ['windows'])), term(os('zone', 'In', ['a']))) }, 'linux'],
    ['affinity, either OS', { affinity: affinity(term(os('kubernetes.io/os', 'In', ['windows', 'linux']))) }, 'linux'],
    ['affinity, NotIn linux', { affinity: affinity(term(os('kubernetes.io/os', 'NotIn', ['linux']))) }, 'linux'],
    ['affinity, no terms', { affinity: affinity() }, 'linux'],
    [
      'a selector before the affinity',
      { nodeSelector: { 'kubernetes.io/os': 'linux' }, affinity: affinity(term(os('kubernetes.io/os', 'In', ['windows']))) },
      'linux',
    ],
  ];
  for (const [what, spec, expected] of specs) {
    const pod = { metadata: { name: 'p' }, spec: { containers: [{ name: 'app', image: 'x' }], ...spec } };
    t.is(podOs(parsePod(pod)), expected, `admission: ${what}`);
    t.is(cel(condition, pod), expected === 'linux', `the policy (a linux-only template): ${what}`);
  }
});

test('a CEL string literal reads back as the text it was made from: quotes, controls, the basic plane and beyond', (t) => {
  for (const text of ["it's", 'back\\slash', 'nbsp\u00a0nel\u0085', '日本', 'rocket 🚀 and 𝄞', 'tab\tnewline\n', '']) {
    t.is(cel(`${celString(text)} == object.text`, { text }), true, JSON.stringify(text));
    t.regex(celString(text), /^'[\x20-\x7e]*'$/, 'only printable ASCII in the YAML');
  }
  t.is(celString('🚀'), "'\\U0001f680'");
});

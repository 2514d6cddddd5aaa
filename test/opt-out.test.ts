/**
 * A required template's `optOut`: what a pod labelled sidecar-injector.io/inject=disabled gets
 * where the template would otherwise apply. `allow` (the default) admits it unchanged; `warn`
 * admits it with a warning naming the template; `deny` refuses it with a message a person can
 * act on. Only the required webhook judges it; the template's revision does not depend on it;
 * `check` refuses it where it cannot hold; the component that lets the required webhook see
 * opted-out pods is what kustomize builds.
 */
import test from 'ava';
import { answersForNewPod } from '../src/manifests/why.js';
import { admitPod } from '../src/pipeline/admit.js';
import { compileTemplate } from '../src/templates/compile.js';
import type { TemplateSet } from '../src/templates/set.js';
import { createReview } from './helpers/apiserver.js';
import { kustomizeWith } from './helpers/kustomize.js';
import { optedIn, pod } from './helpers/pods.js';
import { startTestServer } from './helpers/server.js';
import { templateSet } from './helpers/templates.js';

const proxy = (extra: Record<string, unknown> = {}) => ({
  name: 'proxy',
  objectSelector: { matchExpressions: [{ key: 'mesh', operator: 'NotIn', values: ['off'] }] },
  containers: [{ name: 'proxy', image: 'envoyproxy/envoy:v1.31.0' }],
  ...extra,
});
const agent = (extra: Record<string, unknown> = {}) => ({ name: 'agent', containers: [{ name: 'agent', image: 'example.com/agent:1' }], ...extra });
const namespaces = optedIn('shop');
const optedOut = { app: 'web', 'sidecar-injector.io/inject': 'disabled' };

async function admit(set: TemplateSet, labels: Record<string, string>, failurePolicy?: 'Fail' | 'Ignore') {
  return admitPod({ pod: pod({ labels }), namespace: 'shop', name: '' }, { templates: () => set, namespaces, ...(failurePolicy ? { failurePolicy } : {}) });
}

test('allow, the default: an opted-out pod is admitted unchanged, without a word', async (t) => {
  const outcome = await admit(templateSet(proxy()), optedOut, 'Fail');
  t.is(outcome.decision, 'allowed');
  t.is(outcome.reason, 'pod-opted-out');
  t.deepEqual(outcome.warnings, []);
});

test('deny: the required webhook refuses an opted-out pod the template would apply to, and says what to change', async (t) => {
  const set = templateSet(proxy({ optOut: 'deny' }), agent({ optOut: 'deny' }));
  const outcome = await admit(set, optedOut, 'Fail');
  t.is(outcome.decision, 'denied');
  t.is(outcome.reason, 'opt-out-refused');
  t.is(outcome.decision === 'denied' ? outcome.code : 0, 403);
  t.is(
    outcome.message,
    "pod has label sidecar-injector.io/inject=disabled, and the required templates agent, proxy that apply to it do not let a pod opt out (optOut: deny); remove the label, or ask the platform team to change the template's selectors or optOut",
  );
  // Where the template's own selector leaves the pod out, the opt-out is the pod's to make.
  const notSelected = await admit(templateSet(proxy({ optOut: 'deny' })), { ...optedOut, mesh: 'off' }, 'Fail');
  t.is(notSelected.decision, 'allowed');
  t.is(notSelected.reason, 'pod-opted-out');
  // The same pod without the label is injected as ever.
  const injected = await admit(set, { app: 'web' }, 'Fail');
  t.is(injected.decision, 'patched');
  // The optional webhook leaves the judgement to the required one; one webhook for all judges it.
  t.is((await admit(set, optedOut, 'Ignore')).decision, 'allowed');
  t.is((await admit(set, optedOut)).reason, 'opt-out-refused');
  // A namespace that did not opt in is never judged.
  const elsewhere = await admitPod(
    { pod: pod({ labels: optedOut }), namespace: 'other', name: '' },
    { templates: () => set, namespaces, failurePolicy: 'Fail' },
  );
  t.is(elsewhere.decision, 'allowed');
  t.is(elsewhere.reason, 'pod-opted-out');
});

test('warn: the opted-out pod is admitted unchanged, with a warning per template; deny wins over warn', async (t) => {
  const warned = await admit(templateSet(proxy({ optOut: 'warn' }), agent()), optedOut, 'Fail');
  t.is(warned.decision, 'allowed');
  t.is(warned.reason, 'pod-opted-out');
  t.deepEqual(
    warned.warnings.map((w) => [w.id, w.template, w.text]),
    [['opt-out-of-required', 'proxy', 'proxy: a required sidecar the pod opts out of (optOut: warn); remove label sidecar-injector.io/inject=disabled']],
  );
  const both = await admit(templateSet(proxy({ optOut: 'warn' }), agent({ optOut: 'deny' })), optedOut, 'Fail');
  t.is(both.reason, 'opt-out-refused');
  t.regex(both.message, /required template agent that applies to it does not let/);
});

test('over HTTPS: the denial reaches the API server as a 403 with the message; a warning as a Warning', async (t) => {
  const server = await startTestServer({ templates: templateSet(proxy({ optOut: 'deny' }), agent({ optOut: 'warn' })), namespaces });
  try {
    const denied = await server.post(createReview(pod({ labels: optedOut }), { namespace: 'shop' }), '/mutate/required?timeout=5s');
    t.is(denied.status, 200);
    t.false(denied.json.response.allowed);
    t.is(denied.json.response.status.code, 403);
    t.regex(denied.json.response.status.message, /^pod has label sidecar-injector\.io\/inject=disabled, and the required template proxy /);
    const warnOnly = await startTestServer({ templates: templateSet(proxy(), agent({ optOut: 'warn' })), namespaces });
    try {
      const warned = await warnOnly.post(createReview(pod({ labels: optedOut }), { namespace: 'shop' }), '/mutate/required?timeout=5s');
      t.true(warned.json.response.allowed);
      t.is(warned.json.response.patch, undefined);
      t.deepEqual(warned.json.response.warnings, [
        'agent: a required sidecar the pod opts out of (optOut: warn); remove label sidecar-injector.io/inject=disabled',
      ]);
    } finally {
      await warnOnly.stop();
    }
  } finally {
    await server.stop();
  }
});

test('check: optOut takes allow, warn or deny, on a required template only, whose objectSelector does not name the opt-out label', (t) => {
  const problems = (doc: unknown) => compileTemplate(doc, 't.yaml').problems.map((p) => `${p.field}: ${p.message}`);
  t.deepEqual(problems(proxy({ optOut: 'refuse' })), [
    'optOut: must be "allow" (a pod labelled sidecar-injector.io/inject=disabled goes without it), "warn" or "deny"',
  ]);
  t.deepEqual(problems(proxy({ optOut: 'deny', failurePolicy: 'Ignore' })), [
    `optOut: "deny" is for a required template (failurePolicy: Fail); an optional template's sidecars may always be opted out of`,
  ]);
  t.deepEqual(problems(proxy({ optOut: 'warn', objectSelector: { matchLabels: { 'sidecar-injector.io/inject': 'enabled' } } })), [
    'objectSelector: names sidecar-injector.io/inject, the opt-out label, which optOut: warn judges: select pods by other labels',
  ]);
  t.deepEqual(problems(proxy({ optOut: 'allow', failurePolicy: 'Ignore' })), []);
  t.deepEqual(problems(proxy({ optOut: 'deny' })), []);
});

test('the revision does not change with optOut: pods that carry the template stay current', (t) => {
  const hash = (doc: unknown) => compileTemplate(doc, 't.yaml').template!.hash;
  t.is(hash(proxy({ optOut: 'deny' })), hash(proxy()));
  t.is(hash(proxy({ optOut: 'warn' })), hash(proxy({ optOut: 'allow' })));
  t.not(hash(proxy({ failurePolicy: 'Ignore' })), hash(proxy()));
});

test('the component calls the required webhook for opted-out pods, and only it', (t) => {
  const webhooks = (components: string[]) =>
    (kustomizeWith(['manifests'], components).find((o) => o.kind === 'MutatingWebhookConfiguration') as any).webhooks as any[];
  const base = webhooks([]);
  const withComponent = webhooks(['manifests/components/required-opt-out']);
  const selectorOf = (hooks: any[], name: string) => hooks.find((w) => w.name === name).objectSelector;
  t.deepEqual(selectorOf(base, 'required.sidecar-injector.io'), {
    matchExpressions: [{ key: 'sidecar-injector.io/inject', operator: 'NotIn', values: ['disabled'] }],
  });
  t.is(selectorOf(withComponent, 'required.sidecar-injector.io'), undefined);
  t.deepEqual(selectorOf(withComponent, 'optional.sidecar-injector.io'), selectorOf(base, 'optional.sidecar-injector.io'));
  // Nothing else changes.
  const rest = (hooks: any[]) => hooks.map(({ objectSelector: _o, ...hook }) => hook);
  t.deepEqual(rest(withComponent), rest(base));
});

test('why answers as the injector does: would-deny, with the refusal, for a pod deny contests', async (t) => {
  const set = templateSet(proxy({ optOut: 'deny' }), agent());
  const outcome = await admit(set, optedOut);
  const answers = answersForNewPod(outcome, set);
  t.deepEqual(
    answers.map((a) => [a.template, a.state]),
    [
      ['agent', 'would-deny'],
      ['proxy', 'would-deny'],
    ],
  );
  t.regex(answers[1]!.reason, /^admission refuses the pod: pod has label sidecar-injector\.io\/inject=disabled, and the required template proxy that applies/);
  const free = answersForNewPod(await admit(set, { ...optedOut, mesh: 'off' }), set);
  t.deepEqual(
    free.map((a) => [a.state, a.reason]),
    [
      ['not-applicable', 'pod has label sidecar-injector.io/inject=disabled'],
      ['not-applicable', 'pod has label sidecar-injector.io/inject=disabled'],
    ],
  );
});

test('a request for a template that does not exist changes nothing: the opt-out is judged as without it', async (t) => {
  const onRequest = templateSet(proxy({ optOut: 'deny', injection: 'on-request' }));
  const judge = (templates: string) =>
    admitPod(
      { pod: pod({ labels: optedOut, annotations: { 'sidecar-injector.io/templates': templates } }), namespace: 'shop', name: '' },
      { templates: () => onRequest, namespaces, failurePolicy: 'Fail' },
    );
  for (const request of ['proxy', 'proxy,nope', 'nope, proxy']) {
    const outcome = await judge(request);
    t.is(outcome.reason, 'opt-out-refused', request);
    // An on-request template's refusal names the other way out: not requesting it.
    t.regex(outcome.message, /remove the label, or stop requesting proxy in annotation sidecar-injector\.io\/templates, or ask/, request);
  }
  t.is((await judge('nope')).reason, 'pod-opted-out');
  const automatic = await admit(templateSet(proxy({ optOut: 'deny' })), optedOut, 'Fail');
  t.notRegex(automatic.message, /stop requesting/);
});

test('an opted-out pod nothing contests is admitted before any other check, as the shipped webhooks never see it; one a template contests meets them', async (t) => {
  const labels: Record<string, string> = { ...optedOut };
  for (let i = 0; i < 2001; i++) labels[`l${i}`] = 'x';
  const free = await admitPod(
    { pod: pod({ labels }), namespace: 'shop', name: '' },
    { templates: () => templateSet(proxy()), namespaces, failurePolicy: 'Fail' },
  );
  t.is(free.decision, 'allowed');
  t.is(free.reason, 'pod-opted-out');
  const contested = await admitPod(
    { pod: pod({ labels }), namespace: 'shop', name: '' },
    { templates: () => templateSet(proxy({ optOut: 'deny' })), namespaces, failurePolicy: 'Fail' },
  );
  t.is(contested.reason, 'pod-too-large');
  // Before the templates are known nothing can say no template contests it: the required webhook waits, as for every pod.
  const unknown = { ...templateSet(), unavailable: 'not listed yet' };
  const early = await admitPod(
    { pod: pod({ labels: optedOut }), namespace: 'shop', name: '' },
    { templates: () => unknown, namespaces, failurePolicy: 'Fail' },
  );
  t.is(early.reason, 'templates-unknown');
});

test('warn: the pod’s workload gets a SidecarInjectionSkipped Event naming the template', async (t) => {
  const { admissionEvents } = await import('../src/pipeline/admission-events.js');
  const body = pod({ labels: optedOut });
  body.metadata.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5d8f', uid: 'u-1', controller: true }];
  const outcome = await admitPod(
    { pod: body, namespace: 'shop', name: '' },
    { templates: () => templateSet(proxy({ optOut: 'warn' })), namespaces, failurePolicy: 'Fail' },
  );
  const events = admissionEvents(outcome, body);
  t.deepEqual(
    events.map((e) => [e.type, e.reason, e.regarding.kind, e.note]),
    [
      [
        'Warning',
        'SidecarInjectionSkipped',
        'ReplicaSet',
        'proxy: a required sidecar the pod opts out of (optOut: warn); remove label sidecar-injector.io/inject=disabled (pod web-5d8f-)',
      ],
    ],
  );
});

test('a deny template that cannot be injected is not told to be opted out of: the denial, why and the Event leave the opt-out out', async (t) => {
  const { admissionEvents } = await import('../src/pipeline/admission-events.js');
  const job = (set: TemplateSet) => {
    const body = pod({ spec: { restartPolicy: 'Never' } });
    body.metadata.ownerReferences = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'once', uid: 'u-1', controller: true }];
    return admitPod(
      { pod: body, namespace: 'shop', name: '' },
      {
        templates: () => set,
        namespaces,
        failurePolicy: 'Fail',
        kubernetesVersion: () => ({ version: { major: 1, minor: 28 }, source: 'flag', reason: 'test' }),
      },
    ).then((outcome) => ({ outcome, events: admissionEvents(outcome, body) }));
  };
  const allowing = await job(templateSet(proxy()));
  t.is(allowing.outcome.reason, 'required-sidecar-unavailable');
  t.regex(allowing.outcome.message, /opt it out with label sidecar-injector\.io\/inject=disabled/);
  const denying = await job(templateSet(proxy({ optOut: 'deny' })));
  t.is(denying.outcome.reason, 'required-sidecar-unavailable');
  t.regex(denying.outcome.message, /run the pod with restartPolicy Always, or run Kubernetes 1\.29 or later/);
  t.notRegex(denying.outcome.message, /opt it out/);
  t.notRegex(denying.events[0]!.note, /opt it out/);
  const answers = answersForNewPod(denying.outcome, templateSet(proxy({ optOut: 'deny' })));
  t.true(answers.every((a) => !/opt it out/.test(a.fix ?? '') && !/opt it out/.test(a.reason)));
});

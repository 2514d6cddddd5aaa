import test from 'ava';
import { RequestError } from '../errors.js';
import { applyPatchV4, createReview, decodePatch, prepareCreate, reinvocationInput } from '../../test/helpers/apiserver.js';
import { logShipperDoc, proxyDoc, templateSet } from '../../test/helpers/templates.js';
import { NamespaceLabelsUnavailableError } from '../errors.js';
import type { NamespaceLabelSource } from '../namespaces/source.js';
import { optedIn, pod } from '../../test/helpers/pods.js';
import { mutate, type MutateDeps, type Reason } from './mutate.js';

const set = templateSet(logShipperDoc, proxyDoc);
const namespaces = optedIn('shop');
const deps: MutateDeps = { templates: () => set, namespaces };
const podBody = pod();

function review(options: { namespace?: string; version?: 'v1' | 'v1beta1'; body?: Record<string, any> } = {}) {
  const namespace = options.namespace ?? 'shop';
  return createReview(prepareCreate(options.body ?? podBody, namespace), { namespace, version: options.version ?? 'v1' });
}

test('injects into a Deployment pod with no name and answers a v1 review with a patch', async (t) => {
  const input = review();
  const outcome = await mutate(input, deps);
  t.is(outcome.decision, 'patched');
  t.is(outcome.reason, 'injected');
  t.is(outcome.pod, 'web-5d8f-');
  const { response } = outcome;
  t.is(outcome.response.apiVersion, 'admission.k8s.io/v1');
  t.is(outcome.response.kind, 'AdmissionReview');
  t.is(response.response.uid, input.request.uid);
  t.true(response.response.allowed);
  t.is(response.response.patchType, 'JSONPatch');
  t.deepEqual(response.response.auditAnnotations, { injected: `logs@${set.byName.get('logs')!.hash}` });
  const patched = applyPatchV4(input.request.object, decodePatch(response.response)) as any;
  t.deepEqual(
    patched.spec.containers.map((c: any) => c.name),
    ['web', 'log-shipper'],
  );
  t.is(patched.metadata.name, undefined);
});

test('answers v1beta1 in v1beta1', async (t) => {
  const outcome = await mutate(review({ version: 'v1beta1' }), deps);
  t.is(outcome.response.apiVersion, 'admission.k8s.io/v1beta1');
  t.is(outcome.decision, 'patched');
});

test('the second call of reinvocation returns no patch fields at all', async (t) => {
  const input = review();
  const first = await mutate(input, deps);
  const again = reinvocationInput(applyPatchV4(input.request.object, decodePatch(first.response.response)) as any);
  const second = await mutate(createReview(again, { namespace: 'shop' }), deps);
  t.is(second.decision, 'allowed');
  t.is(second.reason, 'already-injected');
  t.false('patch' in second.response.response);
  t.false('patchType' in second.response.response);
});

test('uses request.namespace when the pod has none (clusters before 1.24)', async (t) => {
  const input = review();
  delete input.request.object.metadata.namespace;
  const outcome = await mutate(input, deps);
  t.is(outcome.namespace, 'shop');
  t.is(outcome.decision, 'patched');
});

test('accepts an absent creationTimestamp (Kubernetes 1.34+) as well as null', async (t) => {
  const input = review();
  delete input.request.object.metadata.creationTimestamp;
  t.is((await mutate(input, deps)).decision, 'patched');
});

test('serves dry-run requests like any other', async (t) => {
  const input = createReview(prepareCreate(podBody, 'shop'), { namespace: 'shop', dryRun: true });
  const outcome = await mutate(input, deps);
  t.true(outcome.dryRun);
  t.is(outcome.decision, 'patched');
});

// [title, change to the request, reason]
const passThrough: [string, (r: any) => void, Reason][] = [
  ['UPDATE', (r) => (r.operation = 'UPDATE'), 'operation-not-create'],
  ['DELETE', (r) => ((r.operation = 'DELETE'), (r.object = null)), 'operation-not-create'],
  ['CONNECT', (r) => (r.operation = 'CONNECT'), 'operation-not-create'],
  ['a ConfigMap', (r) => (r.kind = { group: '', version: 'v1', kind: 'ConfigMap' }), 'not-a-pod'],
  ['a Pod-kind in another group', (r) => (r.kind = { group: 'example.com', version: 'v1', kind: 'Pod' }), 'not-a-pod'],
  ['a subresource', (r) => (r.subResource = 'ephemeralcontainers'), 'subresource'],
];
for (const [title, change, reason] of passThrough) {
  test(`allows ${title} unchanged`, async (t) => {
    const input = review();
    change(input.request);
    const outcome = await mutate(input, deps);
    t.is(outcome.decision, 'allowed');
    t.is(outcome.reason, reason);
    t.deepEqual(outcome.response.response, { uid: input.request.uid, allowed: true });
  });
}

test('skips a namespace that has not opted in', async (t) => {
  const outcome = await mutate(review({ namespace: 'plain' }), deps);
  t.is(outcome.reason, 'namespace-not-enabled');
  t.false('patch' in outcome.response.response);
});

test('skips a pod that opted out', async (t) => {
  const body = structuredClone(podBody) as any;
  body.metadata.labels['sidecar-injector.io/inject'] = 'disabled';
  const outcome = await mutate(review({ body }), deps);
  t.is(outcome.reason, 'pod-opted-out');
});

test('injects an on-request template only when the pod names it', async (t) => {
  const body = structuredClone(podBody) as any;
  body.metadata.annotations = { 'sidecar-injector.io/templates': ' proxy , ' };
  const outcome = await mutate(review({ body }), deps);
  t.deepEqual(outcome.templates, ['logs', 'proxy']);
  const patch = decodePatch(outcome.response.response);
  // The pod had no initContainers: the list is created whole.
  t.true(patch.some((op) => op.op === 'add' && op.path === '/spec/initContainers' && op.value[0].name === 'proxy'));
});

test('denies a pod that requests a template that does not exist, naming it', async (t) => {
  const body = structuredClone(podBody) as any;
  body.metadata.annotations = { 'sidecar-injector.io/templates': 'proxy,tracer' };
  const outcome = await mutate(review({ body }), deps);
  t.is(outcome.decision, 'denied');
  t.is(outcome.reason, 'unknown-template');
  t.false(outcome.response.response.allowed);
  t.is(outcome.response.response.status?.code, 400);
  t.regex(outcome.response.response.status?.message ?? '', /names "tracer", which is not a sidecar template here \(available: logs, proxy\)/);
});

test('warns when a requested template does not match its selectors', async (t) => {
  const s = templateSet({ ...proxyDoc, objectSelector: { matchLabels: { mesh: 'on' } } });
  const body = structuredClone(podBody) as any;
  body.metadata.annotations = { 'sidecar-injector.io/templates': 'proxy' };
  const outcome = await mutate(review({ body }), { templates: () => s, namespaces });
  t.is(outcome.reason, 'no-template-matched');
  t.deepEqual(outcome.response.response.warnings, ['proxy: pod labels do not match its objectSelector']);
});

test('denies a pod whose shape cannot be injected into, naming the field', async (t) => {
  const input = review();
  input.request.object.spec.containers = { name: 'web' };
  const outcome = await mutate(input, deps);
  t.is(outcome.decision, 'denied');
  t.is(outcome.reason, 'invalid-pod');
  t.regex(outcome.response.response.status?.message ?? '', /spec\.containers must be a list/);
});

test('denies a pod with no namespace anywhere', async (t) => {
  const input = review();
  delete input.request.namespace;
  delete input.request.object.metadata.namespace;
  const outcome = await mutate(input, deps);
  t.is(outcome.decision, 'denied');
  t.regex(outcome.response.response.status?.message ?? '', /no namespace/);
});

test('malformed reviews are RequestErrors naming the field', async (t) => {
  const cases: [unknown, RegExp][] = [
    [[], /body must be a JSON object/],
    [{ apiVersion: 'admission.k8s.io/v2', kind: 'AdmissionReview', request: {} }, /apiVersion must be one of/],
    [{ apiVersion: 'admission.k8s.io/v1', kind: 'Review', request: {} }, /kind must be AdmissionReview/],
    [{ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview' }, /request must be an object/],
    [{ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: '' } }, /request\.uid/],
    [{ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u', operation: 'CREATE' } }, /request\.kind/],
    [{ apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u', kind: { kind: 'Pod' } } }, /request\.operation/],
    [
      { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u', operation: 'CREATE', kind: { kind: 'Pod' }, dryRun: 'yes' } },
      /request\.dryRun/,
    ],
    [
      { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', request: { uid: 'u', operation: 'CREATE', kind: { kind: 'Pod' }, namespace: 7 } },
      /request\.namespace must be a string/,
    ],
  ];
  for (const [body, message] of cases) {
    const err = await t.throwsAsync(mutate(body, deps), { instanceOf: RequestError });
    t.is(err?.status, 400);
    t.is(err?.code, 'ERR_MALFORMED_REVIEW');
    t.regex(err?.message ?? '', message);
  }
});

for (const policy of ['deny', 'allow'] as const) {
  test(`a namespace source that cannot answer applies its failure policy: ${policy}`, async (t) => {
    const failing: NamespaceLabelSource = {
      kind: 'test',
      isReady: () => true,
      status: () => ({ source: 'test' }),
      labelsOf: async (ns) => Promise.reject(new NamespaceLabelsUnavailableError(ns, 'the Kubernetes API did not answer', policy)),
    };
    const outcome = await mutate(review(), { templates: () => set, namespaces: failing });
    t.is(outcome.reason, 'namespace-unknown');
    if (policy === 'deny') {
      t.is(outcome.decision, 'denied');
      t.is(outcome.response.response.status?.code, 503);
      t.regex(
        outcome.response.response.status?.message ?? '',
        /labels of namespace shop cannot be known: the Kubernetes API did not answer; the pod is refused/,
      );
    } else {
      t.is(outcome.decision, 'allowed');
      t.deepEqual(outcome.response.response.warnings, ['no sidecars injected: labels of namespace shop unknown: the Kubernetes API did not answer']);
      t.is(outcome.response.response.patch, undefined);
    }
  });
}

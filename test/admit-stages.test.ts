/**
 * Each stage of the decision alone (src/pipeline/stages/): what it ends the decision with, or
 * what it hands the next stage. A later stage's input is the earlier stages' output for the
 * same pod, so each table row sets up only what its stage reads.
 */
import test from 'ava';
import { AnnotationKeys } from '../src/k8s/keys.js';
import { finish } from '../src/pipeline/stages/finish.js';
import type { AdmitDeps, PodInput, PodOutcome, Progress, Step } from '../src/pipeline/stages/outcome.js';
import { resolveOverrides, type Parameterised } from '../src/pipeline/stages/parameters.js';
import { placeTemplates, type Placed } from '../src/pipeline/stages/place.js';
import { readPod, type Read } from '../src/pipeline/stages/read.js';
import { selectTemplates, type Selected } from '../src/pipeline/stages/select.js';
import { admitPod } from '../src/pipeline/admit.js';
import { optedIn, pod } from './helpers/pods.js';
import { logShipperDoc, proxyDoc, templateSet } from './helpers/templates.js';

const required = { name: 'agent', failurePolicy: 'Fail', containers: [{ name: 'agent', image: 'agent:1' }] };
const limited = {
  ...logShipperDoc,
  failurePolicy: 'Ignore',
  parameters: { memoryLimit: { default: '64Mi', type: 'quantity', max: '512Mi', override: 'pod' } },
  containers: [{ ...logShipperDoc.containers[0], resources: { limits: { memory: '{{ params.memoryLimit }}' } } }],
};

function deps(extra: Partial<AdmitDeps> = {}): AdmitDeps {
  const set = templateSet(limited, proxyDoc, required);
  return { templates: () => set, namespaces: optedIn('shop'), ...extra };
}

const progress = (): Progress => ({ podName: '', namespace: '', decisions: [] });
const input = (p: Record<string, any>, namespace = 'shop'): PodInput => ({ pod: p, namespace, name: '' });
function next<T>(step: Step<T>): T {
  if ('outcome' in step) throw new Error(`ended early: ${step.outcome.reason}: ${step.outcome.message}`);
  return step.next;
}
function outcome<T>(step: Step<T>): PodOutcome {
  if (!('outcome' in step)) throw new Error('went on');
  return step.outcome;
}

/** The stages up to and including `stop`, for one pod. */
async function upTo(p: Record<string, any>, d = deps(), namespace = 'shop') {
  const at = progress();
  const i = input(p, namespace);
  const read: Read = next(readPod(i, d, at));
  const selected: Selected = next(await selectTemplates(read, i, d, at));
  const parameterised: Parameterised = next(resolveOverrides(selected, d, at));
  return { at, i, read, selected, parameterised };
}

test('read: a pod with no namespace anywhere is refused; a mirror pod goes through as it is; else the namespace and the name the messages quote', (t) => {
  let at = progress();
  const noNamespace = outcome(readPod(input(pod(), ''), deps(), at));
  t.like(noNamespace, { decision: 'denied', reason: 'invalid-pod', podName: 'web-5d8f-' });
  t.regex(noNamespace.message, /the pod has no namespace/);
  at = progress();
  const mirror = outcome(readPod(input(pod({ annotations: { [AnnotationKeys.mirror]: 'x' } })), deps(), at));
  t.like(mirror, { decision: 'allowed', reason: 'mirror-pod' });
  t.deepEqual(
    mirror.decisions.map((d) => [d.template, d.kind]),
    [
      ['agent', 'not-applicable'],
      ['logs', 'not-applicable'],
      ['proxy', 'not-applicable'],
    ],
  );
  at = progress();
  const withNamespace = pod();
  withNamespace.metadata.namespace = 'shop';
  const read = next(readPod(input(withNamespace, ''), deps(), at));
  t.is(read.podNamespace, 'shop', 'a pod that says its namespace, in a request that does not');
  t.like(at, { podName: 'web-5d8f-', namespace: 'shop' });
});

test('select: a namespace not opted in, a pod that names an unknown template, a webhook whose class selected nothing; else its own templates', async (t) => {
  const run = async (p: Record<string, any>, d = deps(), namespace = 'shop') => {
    const at = progress();
    const i = input(p, namespace);
    return selectTemplates(next(readPod(i, d, at)), i, d, at);
  };
  t.like(outcome(await run(pod(), deps(), 'plain')), { decision: 'allowed', reason: 'namespace-not-enabled' });
  const unknown = outcome(await run(pod({ annotations: { [AnnotationKeys.request]: 'proxxy' } })));
  t.like(unknown, { decision: 'denied', reason: 'unknown-template' });
  t.regex(unknown.message, /names "proxxy", which is not a sidecar template here \(did you mean proxy\? available: agent, logs, proxy\)/);
  // The required webhook's call for a pod that only optional templates apply to.
  const { templates } = deps();
  const optionalOnly = { templates, namespaces: optedIn('shop'), failurePolicy: 'Fail' as const };
  const other = outcome(await run(pod({ labels: { app: 'web' } }), { ...optionalOnly, templates: () => templateSet(limited) }));
  t.like(other, { decision: 'allowed', reason: 'other-webhook' });
  t.deepEqual(
    other.decisions.map((d) => [d.template, d.kind, 'why' in d ? d.why : '']),
    [['logs', 'not-applicable', 'other-webhook']],
  );
  const selected = next(await run(pod({ annotations: { [AnnotationKeys.request]: 'proxy' } })));
  t.deepEqual(
    selected.ours.map((tpl) => tpl.name),
    ['agent', 'logs', 'proxy'],
  );
});

test('parameters: a pod override outside its declaration refuses the pod; one that names no template is a warning and the decision goes on', async (t) => {
  const d = deps();
  const tooMuch = pod({ annotations: { 'logs.sidecar-injector.io/memoryLimit': '4Gi' } });
  let at = progress();
  let i = input(tooMuch);
  const refused = outcome(resolveOverrides(next(await selectTemplates(next(readPod(i, d, at)), i, d, at)), d, at));
  t.like(refused, { decision: 'denied', reason: 'invalid-override' });
  t.regex(refused.message, /must be at most 512Mi/);
  at = progress();
  i = input(pod({ annotations: { 'tracer.sidecar-injector.io/level': 'debug', 'logs.sidecar-injector.io/memoryLimit': '128Mi' } }));
  const going = next(resolveOverrides(next(await selectTemplates(next(readPod(i, d, at)), i, d, at)), d, at));
  t.deepEqual(going.overrides.get('logs'), { memoryLimit: '128Mi' });
  t.true(going.selected.warnings.some((w) => w.id === 'override-ignored' && /names no template here/.test(w.text)));
});

test('place: a required template that cannot join the pod refuses it; an optional one is left out with a warning, and every decision is recorded', async (t) => {
  // The pod's own container is named like the required agent's.
  const taken = await upTo(
    pod({
      containers: [
        { name: 'web', image: 'nginx' },
        { name: 'agent', image: 'mine:1' },
      ],
    }),
  );
  const refused = outcome(placeTemplates(taken.parameterised, taken.i, deps(), taken.at));
  t.like(refused, { decision: 'denied', reason: 'required-sidecar-unavailable' });
  t.true(refused.decisions.some((d) => d.template === 'agent' && d.kind === 'cannot'));
  // Now the optional log shipper's container name is taken.
  const optional = await upTo(
    pod({
      containers: [
        { name: 'web', image: 'nginx' },
        { name: 'log-shipper', image: 'mine:1' },
      ],
    }),
  );
  const placed: Placed = next(placeTemplates(optional.parameterised, optional.i, deps(), optional.at));
  t.deepEqual(
    placed.leftOut.map((l) => [l.template.name, l.rule]),
    [['logs', 'name-conflict']],
  );
  t.true(placed.parameterised.selected.warnings.some((w) => w.id === 'template-left-out' && w.template === 'logs'));
  t.deepEqual(
    optional.at.decisions.map((d) => [d.template, d.kind]),
    [
      ['agent', 'inject'],
      ['logs', 'left-out'],
      ['proxy', 'not-applicable'],
    ],
  );
});

test('finish: a patch for what was injected; a pod that carries its sidecars already is allowed with no patch', async (t) => {
  const fresh = await upTo(pod());
  const patched = finish(next(placeTemplates(fresh.parameterised, fresh.i, deps(), fresh.at)), fresh.at);
  t.like(patched, { decision: 'patched', reason: 'injected' });
  if (patched.decision !== 'patched') return;
  // The same pod with its sidecars, as the API server sends it on reinvocation.
  const again = await upTo(patched.injection.pod as Record<string, any>);
  const allowed = finish(next(placeTemplates(again.parameterised, again.i, deps(), again.at)), again.at);
  t.like(allowed, { decision: 'allowed', reason: 'already-injected' });
  // And admitPod runs exactly these stages: the same outcome end to end.
  t.like(await admitPod(input(pod()), deps()), { decision: 'patched', reason: 'injected', message: patched.message });
});

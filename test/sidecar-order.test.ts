/**
 * The order sidecars take in a pod: placed first, ahead of the pod's own containers in
 * template-name order; placed last, after them in template-name order. The same pod whichever
 * call adds which template and in whichever order: one call for all (the single /mutate path),
 * the required webhook then the optional one or the other way round, or a template added
 * earlier by someone else (the exported MutatingAdmissionPolicy runs before the webhooks). Native
 * sidecars start in that order, so it must not depend on who delivers them.
 */
import test from 'ava';
import { applyPatchV4 } from './helpers/apiserver.js';
import { templateSet } from './helpers/templates.js';
import { diff } from '../src/inject/diff.js';
import { injectPod } from '../src/pipeline/inject-pod.js';
import { templateInForm } from '../src/templates/forms.js';
import type { Template } from '../src/templates/template.js';

type Json = Record<string, any>;

const sidecar = (name: string) => ({ name, image: `example.com/${name}:1` });
// Names chosen so that name order crosses the classes: a-agent (optional) < b-mesh (required); c-tail (required) < d-tail (optional).
const docs = [
  { name: 'a-agent', failurePolicy: 'Ignore', placement: 'first', containers: [sidecar('a-agent')] },
  { name: 'b-mesh', failurePolicy: 'Fail', placement: 'first', containers: [sidecar('b-mesh'), sidecar('b-mesh-helper')] },
  { name: 'c-tail', failurePolicy: 'Fail', placement: 'last', containers: [sidecar('c-tail')] },
  {
    name: 'd-tail',
    failurePolicy: 'Ignore',
    placement: 'last',
    containers: [sidecar('d-tail')],
    initContainers: [{ ...sidecar('d-init'), restartPolicy: 'Always' }],
  },
];
const set = templateSet(...docs);
const all = set.templates;
const byName = (names: readonly string[]) => names.map((n) => set.byName.get(n)!);

const pods: Record<string, () => Json> = {
  'a long-running pod': () => ({
    metadata: { name: 'web' },
    spec: {
      containers: [
        { name: 'app', image: 'app' },
        { name: 'worker', image: 'worker' },
      ],
    },
  }),
  // Runs to completion: every sidecar becomes a native one, in initContainers.
  'a pod that runs to completion': () => ({ metadata: { name: 'job' }, spec: { restartPolicy: 'Never', containers: [{ name: 'app', image: 'app' }] } }),
  'a pod with init containers of its own': () => ({
    metadata: { name: 'init' },
    spec: { restartPolicy: 'OnFailure', initContainers: [{ name: 'migrate', image: 'migrate' }], containers: [{ name: 'app', image: 'app' }] },
  }),
};

/** One call that injects `templates` (in the sidecar form where the pod runs to completion, as selection picks it), its patch applied as the API server applies it. */
function call(pod: Json, templates: readonly Template[]): Json {
  const toCompletion = pod.spec.restartPolicy === 'Never' || pod.spec.restartPolicy === 'OnFailure';
  const forms = toCompletion ? templates.map((x) => templateInForm(x, 'sidecar')) : templates;
  const result = injectPod(pod, forms, set, { namespace: 'shop', namespaceLabels: {} });
  const patched = applyPatchV4(pod, diff(pod, result.pod)) as Json;
  return patched;
}

const names = (pod: Json) => ({
  initContainers: (pod.spec.initContainers ?? []).map((c: Json) => c.name as string),
  containers: pod.spec.containers.map((c: Json) => c.name as string),
});

function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [items.slice()];
  return items.flatMap((item, i) => permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]));
}

test('one call for all: placed first ahead of the pod own containers, placed last after them, each group in template-name order', (t) => {
  t.deepEqual(names(call(pods['a long-running pod']!(), all)), {
    initContainers: ['d-init'],
    containers: ['a-agent', 'b-mesh', 'b-mesh-helper', 'app', 'worker', 'c-tail', 'd-tail'],
  });
  t.deepEqual(names(call(pods['a pod with init containers of its own']!(), all)), {
    initContainers: ['a-agent', 'b-mesh', 'b-mesh-helper', 'migrate', 'c-tail', 'd-init', 'd-tail'],
    containers: ['app'],
  });
});

for (const [kind, make] of Object.entries(pods)) {
  test(`${kind}: every order of one call per template, and both orders of the two webhooks, give the order of one call for all`, (t) => {
    const single = names(call(make(), all));
    let orders = 0;
    for (const order of permutations(all.map((x) => x.name))) {
      let pod = make();
      for (const name of order) pod = call(pod, byName([name]));
      t.deepEqual(names(pod), single, order.join(' → '));
      // A fixed point: nothing more to add, in any call.
      t.deepEqual(diff(pod, call(pod, all)), []);
      orders++;
    }
    t.is(orders, 24);
    const required = all.filter((x) => x.failurePolicy === 'Fail');
    const optional = all.filter((x) => x.failurePolicy === 'Ignore');
    for (const groups of [
      [required, optional],
      [optional, required],
    ]) {
      let pod = make();
      for (const group of groups) pod = call(pod, group);
      t.deepEqual(names(pod), single);
    }
  });
}

test('a template added earlier by someone else (the exported policy runs first): the webhook places its own sidecars around it by name', (t) => {
  // The policy delivers d-tail and a-agent; the webhook then adds the other two.
  let pod = call(pods['a long-running pod']!(), byName(['a-agent', 'd-tail']));
  t.deepEqual(names(pod).containers, ['a-agent', 'app', 'worker', 'd-tail']);
  pod = call(pod, byName(['b-mesh', 'c-tail']));
  t.deepEqual(names(pod).containers, ['a-agent', 'b-mesh', 'b-mesh-helper', 'app', 'worker', 'c-tail', 'd-tail']);
});

test('placed first, a container no believed entry claims ends the run; placed last, a sidecar goes before the first later-named one, wherever it is; a template no longer in force places nothing', (t) => {
  // A container of the pod's own after a sidecar placed last: the later-named sidecar still follows the earlier-named one.
  const pod = call(pods['a long-running pod']!(), byName(['d-tail']));
  pod.spec.containers.push({ name: 'late-own', image: 'own' });
  const out = call(pod, byName(['c-tail']));
  t.deepEqual(names(out).containers, ['app', 'worker', 'c-tail', 'd-tail', 'late-own']);
  // A container of the pod's own ahead of a sidecar placed first: the earlier-named sidecar goes before it, never past it.
  const first = call(pods['a long-running pod']!(), byName(['b-mesh']));
  first.spec.containers.unshift({ name: 'early-own', image: 'own' });
  t.deepEqual(names(call(first, byName(['a-agent']))).containers, ['a-agent', 'early-own', 'b-mesh', 'b-mesh-helper', 'app', 'worker']);
  // A sidecar of a retired template (in the ledger, not in force): its place is unknown, so nothing is put before it.
  const retired = templateSet(...docs.filter((d) => d.name !== 'd-tail'));
  const again = injectPod(
    call(pods['a long-running pod']!(), byName(['d-tail'])),
    byName(['c-tail']).map((x) => retired.byName.get(x.name)!),
    retired,
    {
      namespace: 'shop',
      namespaceLabels: {},
    },
  );
  t.deepEqual(names(again.pod as Json).containers, ['app', 'worker', 'd-tail', 'c-tail']);
});

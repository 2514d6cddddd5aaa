/**
 * The container form of a template (below Kubernetes 1.29) and its record in the ledger: a
 * claim is checked against the form the ledger names, and a ledger that names another form
 * is a claim like any other.
 */
import test from 'ava';
import { proxyDoc, templateSet } from '../../test/helpers/templates.js';
import { templateInForm } from '../templates/forms.js';
import { render } from '../templates/render.js';
import { parseLedger, serializeLedger } from './ledger.js';
import { parsePod } from '../k8s/pod.js';
import { checkLedger } from './trust.js';
import { injectPod } from '../pipeline/inject-pod.js';

const set = templateSet({ ...proxyDoc, initContainers: [...proxyDoc.initContainers, { name: 'setup', image: 'setup:1' }] });
const proxy = set.byName.get('proxy')!;
const place = { namespace: 'shop', namespaceLabels: {} };
const pod = () => ({ metadata: { generateName: 'web-', namespace: 'shop' }, spec: { containers: [{ name: 'web', image: 'nginx' }] } });

test('the container form moves only native sidecars, drops their restartPolicy, keeps the rest, and is derived once', (t) => {
  t.deepEqual(proxy.nativeSidecars, ['proxy']);
  const form = templateInForm(proxy, 'container');
  t.is(form, templateInForm(proxy, 'container'));
  t.is(templateInForm(proxy, 'native'), proxy);
  t.is(form.hash, proxy.hash);
  const rendered = render(form, { pod: { name: '', namespace: 'shop', labels: {}, annotations: {} }, namespace: { name: 'shop', labels: {} } } as never);
  t.deepEqual(
    rendered.containers.map((c) => [c.name, 'restartPolicy' in c]),
    [['proxy', false]],
  );
  t.deepEqual(
    rendered.initContainers.map((c) => c.name),
    ['setup'],
  );
  t.is(rendered.form, 'container');
});

test('a ledger naming the container form is believed only for a pod that holds that form', (t) => {
  const injected = injectPod(pod(), [templateInForm(proxy, 'container')], set, place);
  const ledger = injected.ledger.templates.proxy!;
  t.is(ledger.form, 'container');
  t.deepEqual(ledger.containers, ['proxy']);
  // Believed as written.
  const parts = parsePod(injected.pod);
  const checked = checkLedger(parseLedger(serializeLedger(injected.ledger)).ledger, parts, set);
  t.is(checked.believed.templates.proxy?.form, 'container');
  t.deepEqual(checked.doubts, []);
  // The same pod with a ledger claiming the native form: its container is not what the native form adds.
  const forged = { v: 1 as const, templates: { proxy: { ...ledger, form: undefined } } };
  delete forged.templates.proxy.form;
  const doubted = checkLedger(forged, parts, set);
  t.deepEqual(doubted.doubts, [
    'proxy: status annotation claims container proxy, which the template does not add; not treated as injected',
    // Only a form that places a container first sets the default container.
    'proxy: status annotation claims annotation kubectl.kubernetes.io/default-container, which the template does not add; not treated as injected',
  ]);
});

test('a ledger with an unknown form or malformed podResources is refused whole, with a warning', (t) => {
  for (const [entry, problem] of [
    [{ hash: 'x', form: 'init' }, 'status annotation proxy.form is malformed; ignoring it'],
    [{ hash: 'x', podResources: { requests: { cpu: 5 } } }, 'status annotation proxy.podResources is malformed; ignoring it'],
    [{ hash: 'x', podResources: { spare: {} } }, 'status annotation proxy.podResources is malformed; ignoring it'],
  ] as const) {
    const parsed = parseLedger(JSON.stringify({ v: 1, templates: { proxy: entry } }));
    t.is(parsed.problem, problem);
    t.deepEqual(Object.keys(parsed.ledger.templates), []);
  }
});

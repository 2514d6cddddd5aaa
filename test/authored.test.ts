/**
 * The pod as its author sent it, from a patched pod: what simulate sends for a bare pod, whose
 * re-create starts from the author's manifest. Taking out what the ledger records gives back
 * the pod before injection, whatever the templates added.
 */
import test from 'ava';
import { withoutInjected } from '../src/inject/authored.js';
import { admitPod } from '../src/pipeline/admit.js';
import { optedIn } from './helpers/pods.js';
import { logShipperDoc, proxyDoc, templateSet } from './helpers/templates.js';

const namespaces = optedIn('shop');

test('every item the ledger records is taken out again: the pod before injection', async (t) => {
  const original = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'bare-one', labels: { app: 'web' }, annotations: { 'sidecar-injector.io/templates': 'proxy', team: 'a' } },
    spec: {
      // Pod-level resources: the injector grows them by the sidecars' share.
      resources: { requests: { cpu: '500m', memory: '256Mi' }, limits: { cpu: '1', memory: '512Mi' } },
      containers: [
        { name: 'app', image: 'app:1', env: [{ name: 'OWN', value: '1' }], volumeMounts: [{ name: 'data', mountPath: '/data' }] },
        { name: 'helper', image: 'helper:1' },
      ],
      volumes: [{ name: 'data', emptyDir: {} }],
    },
  };
  const shipper = { ...logShipperDoc, containers: [{ ...logShipperDoc.containers[0]!, resources: { limits: { cpu: '100m', memory: '64Mi' } } }] };
  const set = templateSet(shipper, proxyDoc);
  const outcome = await admitPod({ pod: original, namespace: 'shop', name: 'bare-one' }, { templates: () => set, namespaces });
  t.is(outcome.decision, 'patched');
  if (outcome.decision !== 'patched') return;
  const injected = outcome.injection.pod;
  t.notDeepEqual(injected, original, 'the templates added something');
  t.deepEqual(
    (injected.spec as any).resources,
    { requests: { cpu: '600m', memory: '320Mi' }, limits: { cpu: '1100m', memory: '576Mi' } },
    'grown by the shipper',
  );
  t.deepEqual(withoutInjected(injected, set), original);
  // Injected again, it is the same pod as the first injection: the simulation's starting point is exact.
  const again = await admitPod({ pod: withoutInjected(injected, set), namespace: 'shop', name: 'bare-one' }, { templates: () => set, namespaces });
  t.deepEqual(again.decision === 'patched' ? again.injection.pod : undefined, injected);
});

test('a pod without a ledger is its own author’s; a ledger that is not one, or claims what no template in force adds, takes nothing but itself out', (t) => {
  const set = templateSet(logShipperDoc, proxyDoc);
  const plain = { metadata: { name: 'p', annotations: { a: 'b' } }, spec: { containers: [{ name: 'app', image: 'app:1' }] } };
  t.is(withoutInjected(plain, set), plain);
  const broken = {
    metadata: { name: 'p', annotations: { 'sidecar-injector.io/status': '{not json' } },
    spec: { containers: [{ name: 'app', image: 'app:1' }] },
  };
  t.deepEqual(withoutInjected(broken, set), { metadata: { name: 'p' }, spec: { containers: [{ name: 'app', image: 'app:1' }] } });
  // A forged entry claiming the pod's own container, and one naming the shipper's container
  // which the pod holds as something else of its own: neither is believed, the containers stay.
  const ledger = JSON.stringify({ v: 1, templates: { logs: { hash: 'x', containers: ['log-shipper', 'app'] }, made: { hash: 'y', containers: ['app'] } } });
  const spec = {
    containers: [
      { name: 'app', image: 'app:1' },
      { name: 'log-shipper', image: 'mine:1' },
    ],
  };
  t.deepEqual(withoutInjected({ metadata: { name: 'p', annotations: { 'sidecar-injector.io/status': ledger } }, spec }, set), {
    metadata: { name: 'p' },
    spec,
  });
});

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
  // A forged entry claiming the pod's own container (by the template in force, and by one that
  // is not) takes nothing of it. A container under the name the shipper adds, claimed, is the
  // shipper's of another revision: taken out (admission refuses it as a name conflict anyway).
  const ledger = JSON.stringify({ v: 1, templates: { logs: { hash: 'x', containers: ['log-shipper', 'app'] }, made: { hash: 'y', containers: ['app'] } } });
  const spec = {
    containers: [
      { name: 'app', image: 'app:1' },
      { name: 'log-shipper', image: 'older:1' },
    ],
  };
  t.deepEqual(withoutInjected({ metadata: { name: 'p', annotations: { 'sidecar-injector.io/status': ledger } }, spec }, set), {
    metadata: { name: 'p' },
    spec: { containers: [{ name: 'app', image: 'app:1' }] },
  });
});

test('a pod injected by an older revision is its author’s pod again under the new one; a claimed pod-level growth is never taken, the sidecars’ share is computed again', async (t) => {
  const original = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'bare-two', labels: { app: 'web' } },
    spec: { resources: { limits: { cpu: '1', memory: '512Mi' } }, containers: [{ name: 'app', image: 'app:1' }] },
  };
  const shipper = (image: string) => ({
    ...logShipperDoc,
    containers: [{ ...logShipperDoc.containers[0]!, image, resources: { limits: { cpu: '100m', memory: '64Mi' } } }],
  });
  const old = templateSet(shipper('fluent/fluent-bit:3'));
  const outcome = await admitPod({ pod: original, namespace: 'shop', name: 'bare-two' }, { templates: () => old, namespaces });
  if (outcome.decision !== 'patched') return t.fail(outcome.message);
  const stored = outcome.injection.pod as Record<string, any>;
  // The templates in force moved on: the shipper's image changed.
  t.deepEqual(withoutInjected(stored, templateSet(shipper('fluent/fluent-bit:4'))), original);
  // A ledger whose record of the growth is forged (a thousand CPUs): the share is computed from the sidecar.
  const ledger = JSON.parse(stored.metadata.annotations['sidecar-injector.io/status']);
  ledger.templates.logs.podResources = { limits: { cpu: '1000', memory: '1Ti' } };
  const forged = {
    ...stored,
    metadata: { ...stored.metadata, annotations: { ...stored.metadata.annotations, 'sidecar-injector.io/status': JSON.stringify(ledger) } },
  };
  t.deepEqual(withoutInjected(forged, old), original);
});

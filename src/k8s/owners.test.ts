import test from 'ava';
import { labelsLookup, ownerFactsOf, readOwnersLookup, resolveWorkload, type OwnerFacts } from './owners.js';

const controller = (kind: string, name: string, uid?: string, apiVersion = 'apps/v1') => [
  { apiVersion, kind, name, ...(uid ? { uid } : {}), controller: true },
];
const ref = (kind: string, name: string, uid?: string, apiVersion = 'apps/v1') => ({ apiVersion, kind, namespace: 'shop', name, ...(uid ? { uid } : {}) });

test("from the pod's labels alone: a ReplicaSet named <deployment>-<pod-template-hash> is the Deployment's, any other owner is itself", (t) => {
  const of = (ownerReferences: unknown, labels: Record<string, string>) => resolveWorkload({ ownerReferences }, 'shop', labelsLookup(labels));
  t.like(of(controller('ReplicaSet', 'web-5d8f'), { 'pod-template-hash': '5d8f' }), { kind: 'Deployment', name: 'web' });
  // Another hash, no hash, a name that only ends like one: the ReplicaSet itself.
  t.like(of(controller('ReplicaSet', 'web-5d8f'), { 'pod-template-hash': '9999' }), { kind: 'ReplicaSet', name: 'web-5d8f' });
  t.like(of(controller('ReplicaSet', 'web-5d8f'), {}), { kind: 'ReplicaSet', name: 'web-5d8f' });
  t.like(of(controller('ReplicaSet', 'web5d8f'), { 'pod-template-hash': '5d8f' }), { kind: 'ReplicaSet', name: 'web5d8f' });
  // Only a ReplicaSet is a Deployment's: a Job with the label stays the Job.
  t.like(of(controller('Job', 'backup-5d8f', undefined, 'batch/v1'), { 'pod-template-hash': '5d8f' }), { kind: 'Job', name: 'backup-5d8f' });
  t.like(of(controller('StatefulSet', 'db'), {}), { kind: 'StatefulSet', name: 'db' });
  t.is(of(undefined, {}), undefined);
  t.is(of([{ kind: 'Node', name: 'n1', controller: false }], {}), undefined);
  t.is(of(controller('Deploy\nment', 'web'), {}), undefined);
  // A label key from request data reaches no prototype.
  t.like(of(controller('ReplicaSet', 'web-x'), JSON.parse('{"__proto__": "x"}') as Record<string, string>), { kind: 'ReplicaSet' });
});

test('from what was read: a claimed owner counts only when the object is there with that uid; its own owner only when that one is too', (t) => {
  const read = new Map<string, OwnerFacts>([
    ['ReplicaSet/shop/web-5d8f', ownerFactsOf({ uid: 'rs-1', ownerReferences: controller('Deployment', 'web', 'd-1') }, 'shop')],
    ['Deployment/shop/web', { uid: 'd-1' }],
    ['ReplicaSet/shop/stale', ownerFactsOf({ uid: 'rs-2', ownerReferences: controller('Deployment', 'web', 'd-old') }, 'shop')],
    ['Job/shop/backup-1', ownerFactsOf({ uid: 'j-1', ownerReferences: controller('CronJob', 'backup', 'c-1', 'batch/v1') }, 'shop')],
    ['StatefulSet/shop/db', ownerFactsOf({ uid: 's-1', ownerReferences: controller('Other', 'x', 'o-1') }, 'shop')],
  ]);
  const listed = readOwnersLookup(read, new Set(['ReplicaSet', 'Deployment', 'StatefulSet', 'Job']));
  const of = (ownerReferences: unknown) => resolveWorkload({ ownerReferences }, 'shop', listed);
  t.like(of(controller('ReplicaSet', 'web-5d8f', 'rs-1')), { kind: 'Deployment', name: 'web', uid: 'd-1' });
  // The Deployment it names has another uid: the ReplicaSet is the workload.
  t.like(of(controller('ReplicaSet', 'stale', 'rs-2')), { kind: 'ReplicaSet', name: 'stale' });
  // A CronJob is not listed: taken as named.
  t.like(of(controller('Job', 'backup-1', 'j-1', 'batch/v1')), { kind: 'CronJob', name: 'backup' });
  // A StatefulSet is nobody's: its own ownerReference is not followed.
  t.like(of(controller('StatefulSet', 'db', 's-1')), { kind: 'StatefulSet', name: 'db' });
  // Forged: another uid, no uid, a listed kind that is not there.
  t.is(of(controller('ReplicaSet', 'web-5d8f', 'forged')), undefined);
  t.is(of(controller('ReplicaSet', 'web-5d8f')), undefined);
  t.is(of(controller('Deployment', 'payments', 'x')), undefined);
  // A kind the reader does not read: taken as named.
  t.like(of(controller('Rollout', 'canary', 'r-1', 'argoproj.io/v1alpha1')), { kind: 'Rollout', name: 'canary' });
  // Read one by one (no kind in full): an owner not read is taken as named.
  const single = readOwnersLookup(read, new Set());
  t.like(resolveWorkload({ ownerReferences: controller('ReplicaSet', 'gone', 'rs-9') }, 'shop', single), { kind: 'ReplicaSet', name: 'gone' });
  t.deepEqual(ref('Deployment', 'web', 'd-1'), resolveWorkload({ ownerReferences: controller('ReplicaSet', 'web-5d8f', 'rs-1') }, 'shop', single));
});

import test from 'ava';
import { apiPath, apiResources } from './api-paths.js';
import { collectionPath, objectPath, workloadKinds } from './workloads.js';

test('one way to an API path: core and named groups, cluster-wide and namespaced, objects and subresources, names escaped', (t) => {
  t.is(apiPath(apiResources.namespaces), '/api/v1/namespaces');
  t.is(apiPath(apiResources.namespaces, { name: 'shop' }), '/api/v1/namespaces/shop');
  t.is(apiPath(apiResources.pods, { namespace: 'shop' }), '/api/v1/namespaces/shop/pods');
  t.is(
    apiPath(apiResources.leases, { namespace: 'sidecar-injector', name: 'sidecar-injector-leader' }),
    '/apis/coordination.k8s.io/v1/namespaces/sidecar-injector/leases/sidecar-injector-leader',
  );
  t.is(apiPath(apiResources.pods, { namespace: 'shop', name: 'web-0', subresource: 'status' }), '/api/v1/namespaces/shop/pods/web-0/status');
  // A name from request data cannot leave its segment.
  t.is(apiPath(apiResources.pods, { namespace: '../x', name: 'a/b?c#d' }), '/api/v1/namespaces/..%2Fx/pods/a%2Fb%3Fc%23d');
  t.is(collectionPath(workloadKinds.get('CronJob')!), '/apis/batch/v1/cronjobs');
  t.is(objectPath(workloadKinds.get('ReplicationController')!, 'shop', 'web'), '/api/v1/namespaces/shop/replicationcontrollers/web');
});

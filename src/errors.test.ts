import test from 'ava';
import { clusterReadFailure, ClusterError, KubernetesApiError } from './errors.js';

test('a refused cluster read says what could not be read, in the API server’s words, and what a 403 or 401 means', (t) => {
  const forbidden = clusterReadFailure(
    'the cluster',
    new KubernetesApiError(403, 'GET /api/v1/pods: HTTP 403', 'pods is forbidden: User "dev" cannot list resource "pods" in API group "" at the cluster scope'),
  );
  t.true(forbidden instanceof ClusterError);
  t.is(forbidden.code, 'ERR_CLUSTER');
  t.is(
    forbidden.message,
    'cannot read the cluster: GET /api/v1/pods: HTTP 403: pods is forbidden: User "dev" cannot list resource "pods" in API group "" at the cluster scope (the kubeconfig’s user lacks the permission the API server names: grant it with RBAC, or run as a user who has it)',
  );
  t.regex(
    clusterReadFailure('Deployment shop/web', new KubernetesApiError(401, 'GET x: HTTP 401')).message,
    /HTTP 401 \(the API server does not accept the kubeconfig’s credentials/,
  );
  t.is(
    clusterReadFailure('Deployment shop/web', new Error('connect ECONNREFUSED 127.0.0.1:6443')).message,
    'cannot read Deployment shop/web: connect ECONNREFUSED 127.0.0.1:6443',
  );
});

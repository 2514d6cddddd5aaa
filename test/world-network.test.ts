/**
 * The test world's kube-proxy stand-in reads EndpointSlices as kube-proxy does: ready endpoints
 * first, and the terminating ones that still serve only while none is ready.
 */
import test from 'ava';
import { serviceRules } from './cluster/world/network.js';

const service = { metadata: { namespace: 'ns', name: 'svc' }, spec: { clusterIP: '10.96.0.10', ports: [{ name: 'https', port: 443, protocol: 'TCP' }] } };
const slice = (endpoints: { ip: string; ready?: boolean; serving?: boolean; terminating?: boolean }[]) => ({
  metadata: { namespace: 'ns', name: 'svc-x', labels: { 'kubernetes.io/service-name': 'svc' } },
  addressType: 'IPv4',
  ports: [{ name: 'https', port: 10250, protocol: 'TCP' }],
  endpoints: endpoints.map(({ ip, ...conditions }) => ({ addresses: [ip], conditions })),
});
const endpointsOf = (endpoints: Parameters<typeof slice>[0]) => serviceRules([service], [slice(endpoints)])[0]!.endpoints;

test('ready endpoints take the connections; terminating ones only while none is ready, and only while they serve', (t) => {
  const oldServing = { ip: '10.244.0.1', ready: false, serving: true, terminating: true };
  const oldNotServing = { ip: '10.244.0.2', ready: false, serving: false, terminating: true };
  const starting = { ip: '10.244.0.3', ready: false, serving: false, terminating: false };
  const successor = { ip: '10.244.0.4', ready: true, serving: true, terminating: false };
  t.deepEqual(endpointsOf([oldServing, oldNotServing, starting]), ['10.244.0.1 . 10250']);
  t.deepEqual(endpointsOf([oldServing, oldNotServing, starting, successor]), ['10.244.0.4 . 10250']);
  t.deepEqual(endpointsOf([oldNotServing, starting]), []);
  // Unset conditions read as true: an endpoint with none is ready.
  t.deepEqual(endpointsOf([{ ip: '10.244.0.5' }, oldServing]), ['10.244.0.5 . 10250']);
});

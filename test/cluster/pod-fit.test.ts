/**
 * What the pod's author chose survives injection, as the real API server records it: the QoS
 * class it computes when it stores the pod (`status.qosClass`), a Windows pod placed by node
 * affinity or the older OS label, and a pod on the node's network.
 */
import test from 'ava';
import { containerNames, joinWorld, optedInNamespace, plainPod, type Json } from './helpers.js';

const sidecars = (pod: Json) => [...containerNames(pod).init, ...containerNames(pod).app].filter((n) => n !== 'app');

test('the QoS class the API server stores: Guaranteed pods stay Guaranteed (container and pod level), a BestEffort one becomes Burstable', async (t) => {
  const { kube } = joinWorld();
  const namespace = await optedInNamespace(t, 'qos');
  const create = (name: string, extra: Json) => kube.create(`/api/v1/namespaces/${namespace}/pods`, plainPod(name, extra));
  const limits = { cpu: '500m', memory: '256Mi' };
  const guaranteed = await create('guaranteed', { containers: [{ name: 'app', image: 'registry.example/app:1.0', resources: { limits } }] });
  t.is(guaranteed.status.qosClass, 'Guaranteed');
  t.deepEqual(sidecars(guaranteed), ['log-shipper']);
  const shipper = (guaranteed.spec.initContainers as Json[]).find((c) => c.name === 'log-shipper')!;
  t.deepEqual(shipper.resources.requests, shipper.resources.limits, 'the sidecar requests what it limits');
  const podLevel = await create('pod-level', { resources: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } } });
  t.is(podLevel.status.qosClass, 'Guaranteed');
  t.deepEqual(sidecars(podLevel), ['log-shipper']);
  t.deepEqual(podLevel.spec.resources.requests, podLevel.spec.resources.limits, "the pod's budget grew alike on both sides");
  const bestEffort = await create('best-effort', {});
  t.is(bestEffort.status.qosClass, 'Burstable');
  t.deepEqual(sidecars(bestEffort), ['log-shipper']);
});

test('Windows pods placed by the older OS label or by required node affinity get no Linux-only sidecar; a hostNetwork pod that asks for the proxy, which declares its loopback port, is refused', async (t) => {
  const { kube } = joinWorld();
  const namespace = await optedInNamespace(t, 'placed');
  const create = (name: string, extra: Json, annotations: Json = {}) =>
    kube.create(`/api/v1/namespaces/${namespace}/pods`, { ...plainPod(name, extra), metadata: { name, labels: { app: name }, annotations } });
  const beta = await create('beta-label', { nodeSelector: { 'beta.kubernetes.io/os': 'windows' } });
  t.deepEqual(sidecars(beta), []);
  const affinity = await create('affinity', {
    affinity: {
      nodeAffinity: {
        requiredDuringSchedulingIgnoredDuringExecution: {
          nodeSelectorTerms: [{ matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['windows'] }] }],
        },
      },
    },
  });
  t.deepEqual(sidecars(affinity), []);
  // The proxy declares its admin port (loopback): on the node's network that port is the node's,
  // so a hostNetwork pod that asks for the required proxy is refused, saying why and what to do.
  const refused = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, {
    ...plainPod('host-network', { hostNetwork: true }),
    metadata: { name: 'host-network', labels: { app: 'host-network' }, annotations: { 'sidecar-injector.io/templates': 'proxy' } },
  });
  t.is(refused.status, 403, refused.text);
  t.is(
    refused.body.message,
    `admission webhook "required.sidecar-injector.io" denied the request: required sidecar proxy cannot be injected: proxy not injected: a hostNetwork pod, and its container proxy declares port 9901/TCP (a port of the node); run the pod without hostNetwork, or use a template whose containers listen on no port (on the node's network, a loopback port is the node's too)`,
  );
  // Without the proxy it is created with the log shipper, which declares no port.
  const host = await create('host-network-plain', { hostNetwork: true });
  t.deepEqual(sidecars(host), ['log-shipper']);
  const ports = [...(host.spec.initContainers as Json[]), ...(host.spec.containers as Json[])].flatMap((c) => (c.ports ?? []) as Json[]);
  t.deepEqual(ports, [], 'no container of the pod declares a port, so none is a port of the node');
  // On the pod's own network the proxy comes with its port declared.
  const meshed = await create('meshed', {}, { 'sidecar-injector.io/templates': 'proxy' });
  t.deepEqual(((meshed.spec.initContainers as Json[]).find((c) => c.name === 'proxy')?.ports ?? []) as Json[], [
    { name: 'proxy-admin', containerPort: 9901, protocol: 'TCP' },
  ]);
});

/**
 * What the pod's author chose survives injection: its QoS class (computed as the kubelet
 * computes it), and the node's ports of a pod on the node's network. A Guaranteed pod stays
 * Guaranteed or the decision says why not; a BestEffort pod that gets a sidecar with requests
 * becomes Burstable, and the decision notes it; no other change of class happens.
 */
import test from 'ava';
import fc from 'fast-check';
import { mutate } from '../src/admission/mutate.js';
import { guaranteedContainer, qosClass } from '../src/k8s/qos.js';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { applyPatchV4, createReview, decodePatch, prepareCreate } from './helpers/apiserver.js';
import { loadCorpus } from './helpers/corpus.js';
import { pod } from './helpers/pods.js';
import { templateSet } from './helpers/templates.js';

type Json = Record<string, any>;
const deps = (set: ReturnType<typeof templateSet>) => ({
  templates: () => set,
  namespaces: createLocalNamespaceSource({ shop: { 'sidecar-injector.io/injection': 'enabled' } }),
});

test('the QoS class as the kubelet computes it: cpu and memory only, requests defaulted from limits, init containers counted, pod-level resources first', (t) => {
  const c = (resources: Json) => ({ name: 'c', image: 'x', resources });
  const g = { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '1', memory: '1Gi' } };
  t.is(qosClass({ containers: [c({})] }), 'BestEffort');
  t.is(qosClass({ containers: [c(g)] }), 'Guaranteed');
  t.is(qosClass({ containers: [c({ limits: { cpu: '1', memory: '1Gi' } })] }), 'Guaranteed', 'requests defaulted from limits');
  t.is(qosClass({ containers: [c({ limits: { cpu: '1000m', memory: '1024Mi' }, requests: { cpu: '1', memory: '1Gi' } })] }), 'Guaranteed', 'by value');
  t.is(qosClass({ containers: [c(g), c({ requests: { cpu: '10m' } })] }), 'Burstable');
  t.is(qosClass({ containers: [c(g)], initContainers: [c({ requests: { memory: '1Mi' } })] }), 'Burstable', 'an init container counts');
  t.is(qosClass({ containers: [c({ ...g, limits: { ...g.limits, 'nvidia.com/gpu': '1' } })] }), 'Guaranteed', 'other resources do not count');
  t.is(qosClass({ containers: [c({ requests: { 'ephemeral-storage': '1Gi' } })] }), 'BestEffort');
  t.is(qosClass({ containers: [c({ requests: { cpu: '0' } })] }), 'BestEffort', 'zero is nothing');
  // Pod-level resources decide alone.
  t.is(qosClass({ resources: g, containers: [c({ requests: { cpu: '10m' } })] }), 'Guaranteed');
  t.is(qosClass({ resources: { limits: g.limits }, containers: [c({})] }), 'Guaranteed');
  t.is(qosClass({ resources: { requests: g.requests }, containers: [c(g)] }), 'Burstable');
});

test('a container kept Guaranteed: requests from limits, or limits from requests; nothing to take them from, nothing', (t) => {
  const c = { name: 's', resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { cpu: '100m', memory: '64Mi', 'ephemeral-storage': '1Gi' } } };
  t.deepEqual(guaranteedContainer(c, 'requests-from-limits')!.resources, {
    requests: { cpu: '100m', memory: '64Mi' },
    limits: { cpu: '100m', memory: '64Mi', 'ephemeral-storage': '1Gi' },
  });
  t.deepEqual(guaranteedContainer(c, 'limits-from-requests')!.resources, {
    requests: { cpu: '10m', memory: '32Mi' },
    limits: { cpu: '10m', memory: '32Mi', 'ephemeral-storage': '1Gi' },
  });
  t.is(guaranteedContainer({ name: 's', resources: { limits: { memory: '64Mi' } } }, 'requests-from-limits'), undefined);
  t.is(guaranteedContainer({ name: 's' }, 'limits-from-requests'), undefined);
});

test('the bundled templates keep every Guaranteed corpus pod Guaranteed (container-level and pod-level), and say when a BestEffort one becomes Burstable', async (t) => {
  const set = await loadTemplateDir('templates');
  let guaranteed = 0;
  let bestEffort = 0;
  for (const entry of loadCorpus()) {
    for (const variant of ['as-is', 'pod-level'] as const) {
      const before = prepareCreate(structuredClone(entry.body), 'shop');
      if (variant === 'pod-level') before.spec.resources = { requests: { cpu: '2', memory: '2Gi' }, limits: { cpu: '2', memory: '2Gi' } };
      before.metadata.annotations = { ...(before.metadata.annotations ?? {}), 'sidecar-injector.io/templates': 'proxy' };
      const { response, notes } = await mutate(createReview(before, { namespace: 'shop' }), deps(set));
      if (!response.response.patch) continue;
      const after = applyPatchV4(before, decodePatch(response.response)) as Json;
      const from = qosClass(before.spec);
      const to = qosClass(after.spec);
      if (from === 'Guaranteed') guaranteed++;
      if (from === 'BestEffort') {
        bestEffort++;
        t.is(to, 'Burstable', entry.name);
        t.true(
          (notes ?? []).some((n: string) => n.startsWith("the pod's QoS class becomes Burstable (was BestEffort)")),
          entry.name,
        );
      } else t.is(to, from, `${entry.name} (${variant})`);
    }
  }
  t.true(guaranteed >= 20, `${guaranteed} Guaranteed pods injected`);
  t.true(bestEffort > 0);
});

const cpu = fc.constantFrom('10m', '100m', '1');
const memory = fc.constantFrom('32Mi', '64Mi', '1Gi');
const side = fc.record({ cpu: fc.option(cpu, { nil: undefined }), memory: fc.option(memory, { nil: undefined }) }, { requiredKeys: [] });
const resources = fc.record({ requests: fc.option(side, { nil: undefined }), limits: fc.option(side, { nil: undefined }) }, { requiredKeys: [] });
/** A container's resources with no request above its limit (as the API server requires). */
const valid = (r: Json) => {
  const out: Json = {};
  for (const list of ['requests', 'limits'] as const) {
    const values = Object.fromEntries(Object.entries(r[list] ?? {}).filter(([, v]) => v !== undefined));
    if (Object.keys(values).length > 0) out[list] = values;
  }
  if (out.requests && out.limits) for (const name of ['cpu', 'memory']) if (out.requests[name] && out.limits[name]) out.limits[name] = out.requests[name];
  return out;
};

test('property: injection changes the QoS class only from BestEffort to Burstable, with a note; a template that cannot keep Guaranteed is left out or denies, by its class', async (t) => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(resources, { minLength: 1, maxLength: 3 }),
      fc.array(fc.record({ resources, mode: fc.constantFrom('requests-from-limits', 'limits-from-requests'), required: fc.boolean() }), {
        minLength: 1,
        maxLength: 3,
      }),
      async (own, sidecars) => {
        const set = templateSet(
          ...sidecars.map((s, i) => ({
            name: `s${i}`,
            failurePolicy: s.required ? 'Fail' : 'Ignore',
            guaranteedPods: s.mode,
            containers: [{ name: `s${i}`, image: 'x:1', resources: valid(s.resources) }],
          })),
        );
        const before = prepareCreate(pod({ containers: own.map((r, i) => ({ name: `app${i}`, image: 'a:1', resources: valid(r) })) }), 'shop');
        const { response, notes } = await mutate(createReview(before, { namespace: 'shop' }), deps(set));
        const from = qosClass(before.spec);
        if (!response.response.allowed) {
          // Only a required template that cannot keep a Guaranteed pod so denies here.
          t.is(from, 'Guaranteed');
          t.regex(response.response.status!.message!, /it would make the Guaranteed pod Burstable/);
          return;
        }
        const after = response.response.patch ? (applyPatchV4(before, decodePatch(response.response)) as Json) : before;
        const to = qosClass(after.spec);
        if (to !== from) {
          t.deepEqual([from, to], ['BestEffort', 'Burstable']);
          t.true((notes ?? []).some((n: string) => n.startsWith("the pod's QoS class becomes Burstable (was BestEffort)")));
        }
        const leftOut = (response.response.warnings ?? []).filter((w: string) => / not injected: it would make the Guaranteed pod Burstable/.test(w));
        if (leftOut.length > 0) t.is(from, 'Guaranteed');
      },
    ),
    { numRuns: 300, seed: 3317 },
  );
});

test("a pod on the node's network: a template that declares a port is left out (optional) or denies (required); one that declares none is injected", async (t) => {
  const listening = (failurePolicy: string) => ({
    name: 'metrics',
    failurePolicy,
    containers: [{ name: 'metrics', image: 'm:1', ports: [{ name: 'metrics', containerPort: 9090 }] }],
  });
  const quiet = { name: 'quiet', failurePolicy: 'Ignore', containers: [{ name: 'quiet', image: 'q:1' }] };
  const hostNetwork = prepareCreate(pod({ spec: { hostNetwork: true } }), 'shop');
  const optional = await mutate(createReview(hostNetwork, { namespace: 'shop' }), deps(templateSet(listening('Ignore'), quiet)));
  const after = applyPatchV4(hostNetwork, decodePatch(optional.response.response)) as Json;
  t.deepEqual(
    after.spec.containers.map((c: Json) => c.name),
    ['web', 'quiet'],
  );
  t.true(
    (optional.response.response.warnings as string[]).includes(
      'metrics not injected: a hostNetwork pod, and its container metrics declares port 9090/TCP (a port of the node)',
    ),
  );
  const required = await mutate(createReview(hostNetwork, { namespace: 'shop' }), deps(templateSet(listening('Fail'))));
  t.false(required.response.response.allowed);
  t.regex(required.response.response.status!.message!, /^required sidecar metrics cannot be injected: .*run the pod without hostNetwork/);
  // Not on the node's network: the port is the pod's own.
  const plain = prepareCreate(pod(), 'shop');
  const injected = await mutate(createReview(plain, { namespace: 'shop' }), deps(templateSet(listening('Fail'))));
  t.truthy(injected.response.response.patch);
  // The bundled proxy listens on loopback and declares that port: on the node's network a
  // loopback port is the node's too (two such pods would collide on one node), so a hostNetwork
  // pod that asks for the required proxy is refused; any other pod gets it with its port.
  const set = await loadTemplateDir('templates');
  const requested = prepareCreate(pod({ annotations: { 'sidecar-injector.io/templates': 'proxy' }, spec: { hostNetwork: true } }), 'shop');
  const bundled = await mutate(createReview(requested, { namespace: 'shop' }), deps(set));
  t.false(bundled.response.response.allowed);
  t.is(
    bundled.response.response.status!.message,
    "required sidecar proxy cannot be injected: proxy not injected: a hostNetwork pod, and its container proxy declares port 9901/TCP (a port of the node); run the pod without hostNetwork, or use a template whose containers listen on no port (on the node's network, a loopback port is the node's too)",
  );
  const onPodNetwork = prepareCreate(pod({ annotations: { 'sidecar-injector.io/templates': 'proxy' } }), 'shop');
  const withProxy = applyPatchV4(
    onPodNetwork,
    decodePatch((await mutate(createReview(onPodNetwork, { namespace: 'shop' }), deps(set))).response.response),
  ) as Json;
  const proxy = withProxy.spec.initContainers.find((c: Json) => c.name === 'proxy');
  t.deepEqual(proxy.ports, [{ name: 'proxy-admin', containerPort: 9901 }]);
  t.true(proxy.args.some((a: string) => a.includes('address: 127.0.0.1, port_value: 9901')));
});

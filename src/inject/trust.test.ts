import test from 'ava';
import { admitPod } from '../pipeline/admit.js';
import { optedIn } from '../../test/helpers/pods.js';
import { applyDefaults, applyPatchV4, applyServiceAccountPlugin } from '../../test/helpers/apiserver.js';
import { logShipperDoc, proxyDoc, templateSet } from '../../test/helpers/templates.js';
import { contains, containsContainer, sameImage, sameScalar } from '../k8s/contains.js';
import { diff } from './diff.js';
import { parseLedger, serializeLedger } from './ledger.js';
import { parsePod } from '../k8s/pod.js';
import { checkLedger } from './trust.js';
import { anyValue } from '../k8s/contains.js';

test('quantities compare by value across the forms the API server writes back', (t) => {
  for (const [a, b] of [
    ['0.1', '100m'],
    ['1024Mi', '1Gi'],
    [1, '1'],
    ['1000m', '1'],
    ['1e3', '1k'],
    ['0.5Gi', '512Mi'],
  ] as const) {
    t.true(sameScalar(a, b), `${a} = ${b}`);
  }
  for (const [a, b] of [
    ['100m', '101m'],
    ['1Gi', '1G'],
    ['true', true],
    ['abc', 'abc '],
    ['1', 2],
  ] as const)
    t.false(sameScalar(a, b), `${a} ≠ ${b}`);
});

test('an image matches with Docker Hub defaults spelled out and under a digest pin, not from another registry or without its tag', (t) => {
  t.true(sameImage('fluent/fluent-bit:3.2.2', 'fluent/fluent-bit:3.2.2'));
  t.true(sameImage('fluent/fluent-bit:3.2.2', 'docker.io/fluent/fluent-bit:3.2.2'));
  t.true(sameImage('nginx:1', 'docker.io/library/nginx:1'));
  t.true(sameImage('fluent/fluent-bit:3.2.2', 'fluent/fluent-bit:3.2.2@sha256:abc'));
  t.true(sameImage('fluent/fluent-bit:3.2.2', 'docker.io/fluent/fluent-bit@sha256:abc'), 'a tag replaced by its digest');
  t.true(sameImage('localhost:5000/agent:1', 'localhost:5000/agent:1'));
  t.false(sameImage('fluent/fluent-bit:3.2.2', 'mirror.example.com/fluent/fluent-bit:3.2.2'), 'another registry');
  t.false(sameImage('fluent/fluent-bit:3.2.2', 'attacker.example.com/fluent/fluent-bit'), 'another registry, no tag');
  t.false(sameImage('fluent/fluent-bit:3.2.2', 'fluent/fluent-bit'), 'no tag, no digest');
  t.false(sameImage('fluent/fluent-bit:3.2.2', 'busybox:1'));
  t.false(sameImage('fluent/fluent-bit:3.2.2', 'fluent/fluent-bit:3.1.0'));
  t.false(sameImage('fluent/fluent-bit:3.2.2', 'evil/fluent-bit:3.2.2'));
  t.false(sameImage('localhost:5000/agent:1', 'localhost:5001/agent:1'));
});

test('containment: defaults and extra list items are allowed, changed values are not; anyValue matches any present value', (t) => {
  const skeleton = { name: 'a', image: 'x:1', args: ['--a', anyValue], volumeMounts: [{ name: 'v', mountPath: '/v' }], resources: { limits: { cpu: '0.5' } } };
  const defaulted = {
    name: 'a',
    image: 'x:1',
    args: ['--a', 'pod-specific'],
    imagePullPolicy: 'IfNotPresent',
    volumeMounts: [
      { name: 'v', mountPath: '/v' },
      { name: 'kube-api-access', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount', readOnly: true },
    ],
    resources: { limits: { cpu: '500m' }, requests: { cpu: '500m' } },
  };
  t.true(contains(skeleton, defaulted));
  t.false(contains(skeleton, { ...defaulted, image: 'busybox:1' }));
  t.false(contains(skeleton, { ...defaulted, args: ['--a'] }));
  t.false(contains(skeleton, { ...defaulted, args: ['--b', 'x'] }));
  t.false(contains(skeleton, { ...defaulted, volumeMounts: [] }));
  t.false(contains(skeleton, { ...defaulted, resources: { limits: { cpu: '1' } } }));
});

const set = templateSet({ ...logShipperDoc, objectSelector: { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['restricted'] }] } }, proxyDoc);
const namespaces = optedIn('shop');
const deps = { templates: () => set, namespaces };

function pod(extra: { labels?: Record<string, string>; annotations?: Record<string, string>; containers?: unknown[] } = {}): Record<string, any> {
  return {
    metadata: { generateName: 'web-', labels: { app: 'web', ...extra.labels }, annotations: extra.annotations ?? {} },
    spec: { containers: extra.containers ?? [{ name: 'web', image: 'nginx' }] },
  };
}

test('a forged ledger cannot hide a label from a selector that forbids the pod', async (t) => {
  const forged = serializeLedger({ v: 1, templates: { logs: { hash: 'x', labels: ['tier'] } } });
  const outcome = await admitPod(
    { pod: pod({ labels: { tier: 'restricted' }, annotations: { 'sidecar-injector.io/status': forged } }), namespace: 'shop', name: '' },
    deps,
  );
  t.is(outcome.decision, 'allowed');
  t.is(outcome.reason, 'no-template-matched');
  t.true(outcome.warnings.some((w) => /claims label tier, which the template does not add/.test(w.text)));
});

test('a forged ledger cannot hide a label with a value other than the template adds', async (t) => {
  // logs adds logging.example.com/shipped=true; a pod that says "false" and claims it keeps its own label.
  const withSelector = templateSet(logShipperDoc, {
    name: 'gate',
    objectSelector: { matchLabels: { 'logging.example.com/shipped': 'false' } },
    annotations: { 'gate.example.com/x': 'y' },
  });
  const claimed = serializeLedger({ v: 1, templates: { logs: { hash: 'x', labels: ['logging.example.com/shipped'] } } });
  const outcome = await admitPod(
    { pod: pod({ labels: { 'logging.example.com/shipped': 'false' }, annotations: { 'sidecar-injector.io/status': claimed } }), namespace: 'shop', name: '' },
    { templates: () => withSelector, namespaces },
  );
  t.is(outcome.decision, 'patched');
  t.deepEqual(
    outcome.selection?.templates.map((x) => x.name),
    ['gate', 'logs'],
  );
});

test('a decoy container with a forged ledger does not pass for the sidecar: no silent already-injected', async (t) => {
  const forged = serializeLedger({ v: 1, templates: { logs: { hash: 'x', containers: ['log-shipper'], volumes: ['app-logs'] } } });
  const decoy = pod({
    annotations: { 'sidecar-injector.io/status': forged },
    containers: [
      { name: 'web', image: 'nginx' },
      { name: 'log-shipper', image: 'busybox:1', command: ['sleep', 'infinity'] },
    ],
  });
  const outcome = await admitPod({ pod: decoy, namespace: 'shop', name: '' }, deps);
  t.not(outcome.reason, 'already-injected');
  t.true(outcome.warnings.some((w) => /claims container log-shipper, which does not match the template/.test(w.text)));
  t.true(outcome.warnings.some((w) => /container log-shipper already exists in the pod/.test(w.text)));
});

test('the genuine ledger, after defaulting, the token mount and canonical quantities, is believed whole: a fixed point', async (t) => {
  const first = await admitPod({ pod: pod({ annotations: { 'sidecar-injector.io/templates': 'proxy' } }), namespace: 'shop', name: '' }, deps);
  if (first.decision !== 'patched') return t.fail(first.message);
  const patched = applyPatchV4(first.original, diff(first.original, first.injection.pod)) as Record<string, any>;
  applyServiceAccountPlugin(patched);
  applyDefaults(patched);
  const parts = parsePod(patched);
  const checked = checkLedger(parseLedger(parts.annotations['sidecar-injector.io/status']).ledger, parts, set);
  t.deepEqual(checked.doubts, []);
  t.deepEqual(serializeLedger(checked.believed), parts.annotations['sidecar-injector.io/status']);
  const second = await admitPod({ pod: patched, namespace: 'shop', name: '' }, deps);
  t.is(second.reason, 'already-injected');
  t.deepEqual(second.warnings, []);
});

test('entries of templates that no longer exist are kept as written and decide nothing', async (t) => {
  const ledger = serializeLedger({ v: 1, templates: { retired: { hash: 'old', containers: ['web'], labels: ['tier'] } } });
  const outcome = await admitPod(
    {
      pod: pod({ labels: { tier: 'restricted' }, annotations: { 'sidecar-injector.io/status': ledger, 'sidecar-injector.io/templates': 'proxy' } }),
      namespace: 'shop',
      name: '',
    },
    deps,
  );
  if (outcome.decision !== 'patched') return t.fail(outcome.message);
  const written = JSON.parse((outcome.injection.pod as any).metadata.annotations['sidecar-injector.io/status']);
  t.deepEqual(written.templates.retired, { hash: 'old', containers: ['web'], labels: ['tier'] });
  // "web" is still an app container: logs is not selected (tier=restricted is seen), proxy is.
  t.deepEqual(outcome.injection.injected, ['proxy']);
});

test('a forged ledger naming "constructor" and "__proto__" stays data', async (t) => {
  const text = '{"v":1,"templates":{"__proto__":{"hash":"x"},"constructor":{"hash":"y","appContainers":{"__proto__":{"env":["A"]}}}}}';
  const outcome = await admitPod({ pod: pod({ annotations: { 'sidecar-injector.io/status': text } }), namespace: 'shop', name: '' }, deps);
  t.is(outcome.decision, 'patched');
  t.deepEqual(Object.getOwnPropertyNames(Object.prototype).includes('hash'), false);
  t.is(({} as Record<string, unknown>).hash, undefined);
});

test('a claim on a container that sits in the other list is doubted (a decoy init container named like a sidecar)', async (t) => {
  const forged = serializeLedger({ v: 1, templates: { logs: { hash: 'x', containers: ['log-shipper'], volumes: ['app-logs'] } } });
  const decoy = pod({ annotations: { 'sidecar-injector.io/status': forged } });
  decoy.spec.initContainers = [{ name: 'log-shipper', image: 'busybox:1' }];
  decoy.spec.volumes = [{ name: 'app-logs', emptyDir: {} }];
  const outcome = await admitPod({ pod: decoy, namespace: 'shop', name: '' }, deps);
  // The claim is not believed, so the init container is the pod's own, bearing the sidecar's
  // name: the (required) template cannot be injected, and the pod is refused, saying why.
  t.is(outcome.reason, 'required-sidecar-unavailable');
  t.deepEqual(
    outcome.decisions.find((d) => d.template === 'logs'),
    {
      template: 'logs',
      kind: 'cannot',
      rule: 'name-conflict',
      text: 'logs not injected: the pod has its own container log-shipper, the name of its sidecar; rename that container',
    },
  );
});

test('a look-alike sidecar (another registry, a command of its own) is doubted; being a claimed sidecar, it gets no items of ours', async (t) => {
  const forged = serializeLedger({ v: 1, templates: { logs: { hash: 'x', containers: ['log-shipper'], volumes: ['app-logs'] } } });
  const lookalike = pod({
    annotations: { 'sidecar-injector.io/status': forged },
    containers: [
      { name: 'web', image: 'nginx' },
      {
        name: 'log-shipper',
        image: 'attacker.example.com/fluent/fluent-bit',
        command: ['sh', '-c', 'sleep infinity'],
        volumeMounts: [{ name: 'app-logs', mountPath: '/var/log/app', readOnly: true }],
      },
    ],
  });
  lookalike.spec.volumes = [{ name: 'app-logs', emptyDir: {} }];
  const outcome = await admitPod({ pod: lookalike, namespace: 'shop', name: '' }, deps);
  t.not(outcome.reason, 'already-injected');
  t.true(outcome.warnings.some((w) => /claims container log-shipper, which does not match the template/.test(w.text)));
  if (outcome.decision !== 'patched') return t.fail(outcome.message);
  const containers = (outcome.injection.pod as any).spec.containers;
  t.is(containers[1], lookalike.spec.containers[1], 'the claimed container is left exactly as it is');
  t.true(
    containers[0].env.some((e: any) => e.name === 'LOG_DIR'),
    'the app container gets its items',
  );
});

test('only fields the API server or other webhooks add to every container may be extra on a sidecar', (t) => {
  const skeleton = { name: 'a', image: 'x:1' };
  t.true(
    containsContainer(skeleton, {
      ...skeleton,
      imagePullPolicy: 'IfNotPresent',
      terminationMessagePath: '/dev/termination-log',
      terminationMessagePolicy: 'File',
      resources: {},
      env: [{ name: 'TZ', value: 'UTC' }],
      volumeMounts: [],
    }),
  );
  t.false(containsContainer(skeleton, { ...skeleton, command: ['sleep', 'infinity'] }));
  t.false(containsContainer(skeleton, { ...skeleton, securityContext: { privileged: true } }));
});

test('a sidecar as a Guaranteed pod gets it counts only in the template’s own way: requests raised to its limits, never limits lowered to its requests', (t) => {
  const skeleton = { name: 's', image: 'x:1', resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { cpu: '100m', memory: '64Mi' } } };
  const raised = { ...skeleton, resources: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '100m', memory: '64Mi' } } };
  const lowered = { ...skeleton, resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { cpu: '10m', memory: '32Mi' } } };
  t.true(containsContainer(skeleton, skeleton));
  t.true(containsContainer(skeleton, raised, 'requests-from-limits'));
  t.false(containsContainer(skeleton, lowered, 'requests-from-limits'), 'a decoy with its limits lowered');
  t.true(containsContainer(skeleton, lowered, 'limits-from-requests'));
  t.false(containsContainer(skeleton, raised, 'limits-from-requests'));
  t.false(containsContainer(skeleton, raised), 'without the template, as written only');
});

test('request values that are not what the API server sends are refused, not a crash', async (t) => {
  for (const [title, edit] of [
    ['env name as an object', (p: any) => (p.spec.containers[0].env = [{ name: { toString: 1 }, value: 'x' }])],
    ['mountPath as an object', (p: any) => (p.spec.containers[0].volumeMounts = [{ name: 'v', mountPath: { toString: 1 } }])],
    ['envFrom source name as a number', (p: any) => (p.spec.containers[0].envFrom = [{ configMapRef: { name: 7 } }])],
    ['spec.os.name as an object', (p: any) => (p.spec.os = { name: { toString: 1 } })],
  ] as const) {
    const body = pod();
    edit(body);
    const outcome = await admitPod({ pod: body, namespace: 'shop', name: '' }, deps);
    t.is(outcome.decision, 'denied', title);
    t.is(outcome.reason, 'invalid-pod', title);
  }
});

// --- Second hostile review ------------------------------------------------------------------

/** The bundled-style fixed point, run through the real pipeline: inject, apply, default, call again. */
async function injectThenReinvoke(first: ReturnType<typeof templateSet>, second: ReturnType<typeof templateSet>, alter: (pod: any) => void = () => undefined) {
  const one = await admitPod(
    { pod: pod({ annotations: { 'sidecar-injector.io/templates': 'proxy' } }), namespace: 'shop', name: '' },
    { templates: () => first, namespaces },
  );
  if (one.decision !== 'patched') throw new Error(one.message);
  const patched = applyPatchV4(one.original, diff(one.original, one.injection.pod)) as Record<string, any>;
  applyServiceAccountPlugin(patched);
  applyDefaults(patched);
  alter(patched);
  const two = await admitPod({ pod: patched, namespace: 'shop', name: '' }, { templates: () => second, namespaces });
  const afterTwo = two.decision === 'patched' ? (applyPatchV4(patched, diff(patched, two.injection.pod)) as Record<string, any>) : patched;
  const three = await admitPod({ pod: afterTwo, namespace: 'shop', name: '' }, { templates: () => second, namespaces });
  return { two, three, afterTwo };
}

test('a sidecar doubted after a template change is never given app items, and the next call is a fixed point', async (t) => {
  const newer = templateSet(
    {
      ...logShipperDoc,
      containers: [{ ...logShipperDoc.containers[0], image: 'fluent/fluent-bit:4' }],
      appContainers: { ...logShipperDoc.appContainers, env: [...logShipperDoc.appContainers.env, { name: 'LOG_FORMAT', value: 'json' }] },
    },
    proxyDoc,
  );
  const { two, three, afterTwo } = await injectThenReinvoke(set, newer);
  t.is(two.decision, 'patched', 'the new env reaches the app container');
  const sidecar = afterTwo.spec.containers.find((c: any) => c.name === 'log-shipper');
  t.false(
    (sidecar.env ?? []).some((e: any) => e.name === 'LOG_DIR' || e.name === 'LOG_FORMAT'),
    'the old sidecar is left alone',
  );
  t.true(afterTwo.spec.containers.find((c: any) => c.name === 'web').env.some((e: any) => e.name === 'LOG_FORMAT'));
  t.not(three.decision, 'patched', 'the third call changes nothing');
});

test('a genuine sidecar with resizePolicy defaulted by the API server is believed, without warnings', async (t) => {
  const { two } = await injectThenReinvoke(set, set, (p) => {
    for (const c of [...p.spec.containers, ...p.spec.initContainers]) c.resizePolicy = [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }];
  });
  t.is(two.reason, 'already-injected');
  t.deepEqual(two.warnings, []);
});

test('quantities compare by value only where Kubernetes has quantities: a forged "1000m" label is not the template\'s "1"', async (t) => {
  const tiered = templateSet(
    { name: 'tier', labels: { 'example.com/tier': '1' }, annotations: { 'tier.example.com/x': 'y' } },
    {
      name: 'batch-only',
      objectSelector: { matchExpressions: [{ key: 'example.com/tier', operator: 'DoesNotExist' }] },
      annotations: { 'batch.example.com/x': 'y' },
    },
  );
  const forged = serializeLedger({ v: 1, templates: { tier: { hash: 'x', labels: ['example.com/tier'] } } });
  const outcome = await admitPod(
    { pod: pod({ labels: { app: 'web', 'example.com/tier': '1000m' }, annotations: { 'sidecar-injector.io/status': forged } }), namespace: 'shop', name: '' },
    { templates: () => tiered, namespaces },
  );
  t.false(
    outcome.selection?.templates.some((x) => x.name === 'batch-only'),
    'the label is seen by selection',
  );
  t.true(outcome.warnings.some((w) => /claims label example.com\/tier, which does not match the template/.test(w.text)));
  t.true(contains({ limits: { cpu: '1' } }, { limits: { cpu: '1000m' } }), 'under resources they are equal');
});

test('a sidecar with a rewritten argument or a privileged securityContext of its own is doubted', async (t) => {
  const withArgs = templateSet(
    {
      name: 'shipper',
      containers: [
        { name: 'shipper', image: 'fluent/fluent-bit:3', args: ['--tag={{ pod.namespace }}.app', '--output=stdout'], securityContext: { runAsNonRoot: true } },
      ],
    },
    proxyDoc,
  );
  for (const [title, alter] of [
    ['an argument rewritten around its placeholder', (c: any) => (c.args = ['--config=/var/log/app/attacker.conf', '--output=stdout'])],
    ['a privileged securityContext', (c: any) => (c.securityContext = { ...c.securityContext, privileged: true })],
  ] as const) {
    const { two } = await injectThenReinvoke(withArgs, withArgs, (p) => alter(p.spec.containers.find((c: any) => c.name === 'shipper')));
    t.not(two.reason, 'already-injected', title);
    t.true(
      two.warnings.some((w) => /claims container shipper, which does not match the template/.test(w.text)),
      title,
    );
  }
  const { two } = await injectThenReinvoke(withArgs, withArgs);
  t.is(two.reason, 'already-injected', 'untouched, it is believed');
});

test('a pod whose imagePullSecrets hold {} (an empty name, as the API server sends it) is served, not denied', async (t) => {
  const body = pod();
  body.spec.imagePullSecrets = [{}];
  const outcome = await admitPod({ pod: body, namespace: 'shop', name: '' }, deps);
  t.is(outcome.decision, 'patched');
});

test('an orphaned sidecar (claimed by a template no longer in force) is no app container: the current templates add nothing to it', async (t) => {
  const retired = serializeLedger({ v: 1, templates: { 'old-agent': { hash: 'abc123', containers: ['old-agent'] } } });
  const withOrphan = pod({
    annotations: { 'sidecar-injector.io/status': retired },
    containers: [
      { name: 'web', image: 'nginx' },
      { name: 'old-agent', image: 'example.com/old-agent:1' },
    ],
  });
  const outcome = await admitPod({ pod: withOrphan, namespace: 'shop', name: '' }, deps);
  if (outcome.decision !== 'patched') return t.fail(outcome.message);
  const containers = (outcome.injection.pod as any).spec.containers;
  t.is(containers[1], withOrphan.spec.containers[1], 'the orphaned sidecar is left exactly as it is');
  t.true(
    (containers[0].env ?? []).some((e: any) => e.name === 'LOG_DIR'),
    'the app container gets the current templates',
  );
  // The retired entry is carried, so the next call still knows the container for a sidecar.
  t.is(JSON.parse((outcome.injection.pod as any).metadata.annotations['sidecar-injector.io/status']).templates['old-agent'].hash, 'abc123');
});

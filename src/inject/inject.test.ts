import test from 'ava';
import { applyPatchV4, applyServiceAccountPlugin, applyDefaults, validationProblems } from '../../test/helpers/apiserver.js';
import { logShipperDoc, proxyDoc, templateSet } from '../../test/helpers/templates.js';
import type { RenderContext } from '../templates/placeholders.js';
import { render } from '../templates/render.js';
import { diff } from './diff.js';
import { inject } from './inject.js';
import { indexLedger, parseLedger, serializeLedger } from './ledger.js';
import { parsePod } from '../k8s/pod.js';
import { injectPod } from '../pipeline/inject-pod.js';

const set = templateSet(logShipperDoc, proxyDoc);
const context: RenderContext = {
  pod: { name: 'web', generateName: '', namespace: 'shop', serviceAccountName: 'default', labels: { app: 'web' }, annotations: {} },
  namespace: { name: 'shop', labels: {} },
};

/** The one face of injection, as the webhook uses it after selection. */
function run(pod: Record<string, any>, names = ['logs', 'proxy']) {
  return injectPod(
    pod,
    names.map((n) => set.byName.get(n)!),
    set,
    { namespace: 'shop', namespaceLabels: {} },
  );
}

function basePod(): Record<string, any> {
  return {
    metadata: { generateName: 'web-', labels: { app: 'web' } },
    spec: {
      initContainers: [{ name: 'istio-init', image: 'istio/proxyv2' }],
      containers: [
        { name: 'web', image: 'nginx', env: [{ name: 'PORT', value: '80' }] },
        { name: 'worker', image: 'worker' },
      ],
    },
  };
}

test('adds every kind of item and records each in the ledger', (t) => {
  const pod = basePod();
  const result = run(pod);
  t.true(result.changed);
  t.deepEqual(result.injected, ['logs', 'proxy']);
  const out = result.pod as any;
  t.deepEqual(
    out.spec.initContainers.map((c: any) => c.name),
    ['proxy', 'istio-init'],
  );
  t.deepEqual(
    out.spec.containers.map((c: any) => c.name),
    ['web', 'worker', 'log-shipper'],
  );
  t.deepEqual(
    out.spec.containers[0].env.map((e: any) => e.name),
    ['PORT', 'LOG_DIR'],
  );
  t.deepEqual(
    out.spec.containers[1].env.map((e: any) => e.name),
    ['LOG_DIR'],
  );
  t.deepEqual(out.spec.containers[1].volumeMounts, [{ name: 'app-logs', mountPath: '/var/log/app' }]);
  t.deepEqual(out.spec.containers[1].envFrom, [{ configMapRef: { name: 'logging-env' } }]);
  t.deepEqual(out.spec.volumes, [{ name: 'app-logs', emptyDir: {} }]);
  t.deepEqual(out.spec.imagePullSecrets, [{ name: 'registry' }]);
  t.is(out.metadata.labels['logging.example.com/shipped'], 'true');
  t.is(out.metadata.annotations['logging.example.com/by'], 'shop');
  t.deepEqual(JSON.parse(out.metadata.annotations['sidecar-injector.io/status']), {
    v: 1,
    templates: {
      logs: {
        hash: set.byName.get('logs')!.hash,
        containers: ['log-shipper'],
        volumes: ['app-logs'],
        imagePullSecrets: ['registry'],
        labels: ['logging.example.com/shipped'],
        annotations: ['logging.example.com/by'],
        appContainers: {
          web: { env: ['LOG_DIR'], envFrom: ['configMap:logging-env:'], volumeMounts: ['/var/log/app'] },
          worker: { env: ['LOG_DIR'], envFrom: ['configMap:logging-env:'], volumeMounts: ['/var/log/app'] },
        },
      },
      proxy: { hash: set.byName.get('proxy')!.hash, initContainers: ['proxy'] },
    },
  });
  t.deepEqual(validationProblems(out), []);
});

test('never mutates the pod it was given', (t) => {
  const pod = basePod();
  const copy = structuredClone(pod);
  run(pod);
  t.deepEqual(pod, copy);
});

test('is a fixed point: the output, defaulted and given token mounts, yields nothing', (t) => {
  const first = run(basePod());
  const again = applyServiceAccountPlugin(applyDefaults(structuredClone(first.pod)));
  const second = run(again);
  t.false(second.changed);
  t.is(second.pod, again);
  t.deepEqual(second.injected, []);
  t.deepEqual(second.present, ['logs', 'proxy']);
  t.deepEqual(second.warnings, []);
});

test("a pod with its own container of a sidecar's name: the whole template is left out, nothing added to that container", (t) => {
  const pod = basePod();
  pod.spec.containers.push({ name: 'log-shipper', image: 'my/own' });
  const result = run(pod, ['logs']);
  t.false(result.changed);
  t.is(result.pod, pod);
  t.deepEqual(result.injected, []);
  t.deepEqual(result.conflicts, [
    {
      template: 'logs',
      rule: 'name-conflict',
      text: 'logs not injected: the pod has its own container log-shipper, the name of its sidecar; rename that container',
    },
  ]);
});

test("never touches another webhook's init container or the user's env, mounts and volumes", (t) => {
  const pod = basePod();
  pod.spec.containers[0].env.push({ name: 'LOG_DIR', value: '/mine' });
  pod.spec.containers[0].volumeMounts = [{ name: 'mine', mountPath: '/var/log/app' }];
  pod.spec.volumes = [{ name: 'mine', emptyDir: {} }];
  const result = run(pod);
  const out = result.pod as any;
  t.deepEqual(out.spec.initContainers[1], { name: 'istio-init', image: 'istio/proxyv2' });
  t.deepEqual(out.spec.containers[0].env, [
    { name: 'PORT', value: '80' },
    { name: 'LOG_DIR', value: '/mine' },
  ]);
  t.deepEqual(out.spec.containers[0].volumeMounts, [{ name: 'mine', mountPath: '/var/log/app' }]);
  t.true(result.warnings.some((w) => w.includes('env LOG_DIR in container web')));
  t.true(result.warnings.some((w) => w.includes('mountPath /var/log/app in container web')));
  t.deepEqual(validationProblems(out), []);
});

test('an existing equal label is not a collision and is not claimed', (t) => {
  const pod = basePod();
  pod.metadata.labels['logging.example.com/shipped'] = 'true';
  const result = run(pod, ['logs']);
  t.deepEqual(result.warnings, []);
  t.is(JSON.parse((result.pod as any).metadata.annotations['sidecar-injector.io/status']).templates.logs.labels, undefined);
});

test('re-adds an item of ours that is missing, without duplicating the rest', (t) => {
  const first = run(basePod()).pod as any;
  const damaged = structuredClone(first);
  damaged.spec.containers = damaged.spec.containers.filter((c: any) => c.name !== 'log-shipper');
  const result = run(damaged);
  t.true(result.changed);
  const out = result.pod as any;
  t.deepEqual(
    out.spec.containers.map((c: any) => c.name),
    ['web', 'worker', 'log-shipper'],
  );
  t.deepEqual(validationProblems(out), []);
  t.deepEqual(JSON.parse(out.metadata.annotations['sidecar-injector.io/status']), JSON.parse(first.metadata.annotations['sidecar-injector.io/status']));
});

test('a malformed ledger is ignored with a warning and nothing is duplicated: the sidecar is then a container of the pod in the way', (t) => {
  const first = run(basePod()).pod as any;
  const edited = structuredClone(first);
  edited.metadata.annotations['sidecar-injector.io/status'] = '{not json';
  const parts = parsePod(edited);
  const { ledger, problem } = parseLedger(parts.annotations['sidecar-injector.io/status']);
  t.regex(problem ?? '', /not JSON/);
  const result = inject(edited, parts, ledger, indexLedger(ledger), [render(set.byName.get('logs')!, context)]);
  t.false(result.changed);
  t.is(result.pod, edited);
  t.deepEqual(
    result.conflicts.map((c) => c.rule),
    ['name-conflict'],
  );
});

test('an invalid rendered label value is skipped with a warning', (t) => {
  const s = templateSet({ name: 'lbl', labels: { 'example.com/app': '{{ pod.labels.app }}' } });
  const pod = basePod();
  const parts = parsePod(pod);
  const { ledger } = parseLedger(undefined);
  const ctx = { ...context, pod: { ...context.pod, labels: { app: 'has spaces\nand a newline' } } };
  const result = inject(pod, parts, ledger, indexLedger(ledger), [render(s.byName.get('lbl')!, ctx)]);
  t.false(result.changed);
  t.true(result.warnings.some((w) => w.includes('label example.com/app not added')));
});

/** Injects every template of `s` into the base pod, as the webhook would after selecting them all. */
function injectAll(s: ReturnType<typeof templateSet>) {
  return injectPod(basePod(), s.templates, s, { namespace: 'shop', namespaceLabels: {} });
}

test('two templates claiming one volume name with different content: the second is not injected at all, and says so', (t) => {
  const result = injectAll(
    templateSet({ name: 'a', volumes: [{ name: 'shared', emptyDir: {} }] }, { name: 'b', volumes: [{ name: 'shared', emptyDir: { medium: 'Memory' } }] }),
  );
  t.deepEqual((result.pod as any).spec.volumes, [{ name: 'shared', emptyDir: {} }]);
  t.deepEqual(result.injected, ['a']);
  t.deepEqual(result.conflicts, [
    { template: 'b', rule: 'volume-conflict', text: "b not injected: its mounts would use the pod's own volume shared; rename that volume" },
  ]);
});

test('two templates declaring the very same volume share it', (t) => {
  const result = injectAll(
    templateSet(
      { name: 'a', volumes: [{ name: 'shared', emptyDir: {} }] },
      { name: 'b', volumes: [{ name: 'shared', emptyDir: {} }], annotations: { 'b.example.com/x': 'y' } },
    ),
  );
  t.deepEqual((result.pod as any).spec.volumes, [{ name: 'shared', emptyDir: {} }]);
  t.deepEqual(result.injected, ['a', 'b']);
  t.deepEqual(result.conflicts, []);
});

test('the patch applies under json-patch v4 rules and reproduces the injected pod', (t) => {
  const pod = basePod();
  const result = run(pod);
  t.deepEqual(applyPatchV4(pod, diff(pod, result.pod)), result.pod);
});

test('the ledger serialises templates in name order', (t) => {
  t.is(serializeLedger({ v: 1, templates: { b: { hash: '2' }, a: { hash: '1' } } }), '{"v":1,"templates":{"a":{"hash":"1"},"b":{"hash":"2"}}}');
});

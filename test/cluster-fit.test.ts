/**
 * Sidecars the cluster accepts, over HTTPS and through the API server's reinvocation: native
 * sidecars gated by the Kubernetes version (each fallback), Pod Security levels (enforce,
 * warn, audit; each action), pod-level resources, the default container.
 */
import test from 'ava';
import { createLocalNamespaceSource } from '../src/namespaces/source.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { checkPodSecurity, podSecurityPolicies } from '../src/k8s/pod-security.js';
import { parseQuantity, quantityAtMost, addQuantities, type Quantity } from '../src/k8s/quantity.js';
import type { TemplateSet } from '../src/templates/set.js';
import type { PodSecurityAction } from '../src/pipeline/pod-security-fit.js';
import { qosClass } from '../src/k8s/qos.js';
import { applyPatchV4, createReview, decodePatch, overwrites, prepareCreate, reinvocationInput, validationProblems } from './helpers/apiserver.js';
import { pod } from './helpers/pods.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { proxyDoc, templateSet } from './helpers/templates.js';

type Json = Record<string, any>;
const enabled = { 'sidecar-injector.io/injection': 'enabled' };
const namespaces = createLocalNamespaceSource({
  shop: enabled,
  strict: { ...enabled, 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' },
  watched: { ...enabled, 'pod-security.kubernetes.io/warn': 'restricted', 'pod-security.kubernetes.io/audit': 'restricted' },
  base: { ...enabled, 'pod-security.kubernetes.io/enforce': 'baseline' },
});

const servers: TestServer[] = [];
async function server(templates: TemplateSet, options: { version?: number; podSecurity?: PodSecurityAction } = {}): Promise<TestServer> {
  const s = await startTestServer({
    templates,
    namespaces,
    ...(options.version ? { kubernetesVersion: { major: 1, minor: options.version } } : {}),
    ...(options.podSecurity ? { podSecurity: options.podSecurity } : {}),
  });
  servers.push(s);
  return s;
}
test.after.always(async () => {
  for (const s of servers) await s.stop();
});

/** One CREATE as the API server makes it: the review, the patch applied, and the second call (reinvocation) checked empty. */
async function create(t: any, s: TestServer, body: Json, namespace = 'shop') {
  const before = prepareCreate(body, namespace);
  const res = await s.post(createReview(before, { namespace }));
  t.is(res.status, 200);
  const reason = s.logs.at(-1)?.reason;
  const response = res.json.response;
  const patch = response.allowed ? decodePatch(response) : [];
  // Only adds, except the pod-level budget, which grows by the sidecars' share (pod-resources.ts).
  t.deepEqual(
    overwrites(before, patch).filter((o) => !o.startsWith('replace /spec/resources/')),
    [],
  );
  const after = applyPatchV4(before, patch) as Json;
  t.deepEqual(validationProblems(after), []);
  if (response.allowed) {
    for (const again of [after, reinvocationInput(after)]) {
      const second = await s.post(createReview(again, { namespace }));
      t.is(second.json.response.patch, undefined, `second call patched: ${JSON.stringify(second.json.response.warnings)}`);
    }
  }
  return { response, after, warnings: (response.warnings ?? []) as string[], reason };
}

const ledgerOf = (p: Json) => JSON.parse(p.metadata.annotations['sidecar-injector.io/status']);
const nativeProxy = (fallback?: string) => ({ ...proxyDoc, injection: 'automatic', ...(fallback ? { nativeSidecars: { fallback } } : {}) });

test('native sidecars at 1.29 and later; unknown version is current', async (t) => {
  for (const version of [29, 33, undefined]) {
    const s = await server(templateSet(nativeProxy()), version ? { version } : {});
    const { after } = await create(t, s, pod());
    t.deepEqual(
      after.spec.initContainers.map((c: Json) => [c.name, c.restartPolicy]),
      [['proxy', 'Always']],
    );
    t.is(ledgerOf(after).templates.proxy.form, undefined);
  }
});

test('below 1.29, fallback container (the default): an ordinary container, placed first, default container set, form in the ledger', async (t) => {
  const s = await server(templateSet(nativeProxy()), { version: 28 });
  const { after, warnings } = await create(
    t,
    s,
    pod({
      containers: [
        { name: 'web', image: 'nginx' },
        { name: 'worker', image: 'w' },
      ],
    }),
  );
  t.is(after.spec.initContainers, undefined);
  t.deepEqual(
    after.spec.containers.map((c: Json) => c.name),
    ['proxy', 'web', 'worker'],
  );
  t.false('restartPolicy' in after.spec.containers[0]);
  t.is(after.metadata.annotations['kubectl.kubernetes.io/default-container'], 'web');
  t.deepEqual(ledgerOf(after).templates.proxy, {
    hash: ledgerOf(after).templates.proxy.hash,
    form: 'container',
    containers: ['proxy'],
    annotations: ['kubectl.kubernetes.io/default-container'],
  });
  t.deepEqual(warnings, ['proxy: no native sidecars on Kubernetes 1.28; proxy run as ordinary containers (start order not guaranteed)']);
  // The cluster is upgraded between two calls: the recorded form stands, nothing changes.
  const upgraded = await server(templateSet(nativeProxy()), { version: 31 });
  const second = await upgraded.post(createReview(reinvocationInput(after), { namespace: 'shop' }));
  t.is(second.json.response.patch, undefined);
  t.is(upgraded.logs.at(-1)?.reason, 'already-injected');
});

test('below 1.29, a pod that runs to completion never gets the ordinary-container fallback', async (t) => {
  const s = await server(templateSet({ ...nativeProxy(), failurePolicy: 'Ignore' }), { version: 28 });
  const job = pod({ spec: { restartPolicy: 'Never' } });
  job.metadata.ownerReferences = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'migrate', uid: 'u', controller: true }];
  const { after, warnings, reason } = await create(t, s, job);
  t.is(after.spec.initContainers, undefined);
  t.deepEqual(
    after.spec.containers.map((c: Json) => c.name),
    ['web'],
  );
  t.is(reason, 'cluster-unfit');
  t.deepEqual(warnings, ['proxy not injected: no native sidecars on Kubernetes 1.28, and the pod runs to completion (Job "migrate")']);
  const onFailure = await create(t, s, pod({ spec: { restartPolicy: 'OnFailure' } }));
  t.regex(onFailure.warnings[0]!, /runs to completion \(restartPolicy OnFailure\)$/);
  // Required means required: the same template with failurePolicy Fail refuses the pod, saying what to change.
  const required = await server(templateSet(nativeProxy()), { version: 28 });
  const refused = await create(t, required, pod({ spec: { restartPolicy: 'OnFailure' } }));
  t.false(refused.response.allowed);
  t.is(refused.response.status.code, 403);
  t.is(refused.reason, 'required-sidecar-unavailable');
  t.regex(
    refused.response.status.message,
    /^required sidecar proxy cannot be injected: proxy not injected: no native sidecars on Kubernetes 1\.28, and the pod runs to completion \(restartPolicy OnFailure\); run the pod with restartPolicy Always/,
  );
});

test('below 1.29, fallback skip leaves the template out; fallback deny refuses the pod', async (t) => {
  const skip = await server(templateSet({ ...nativeProxy('skip'), failurePolicy: 'Ignore' }), { version: 28 });
  const skipped = await create(t, skip, pod());
  t.is(skipped.after.spec.initContainers, undefined);
  t.is(skipped.reason, 'cluster-unfit');
  t.deepEqual(skipped.warnings, ['proxy not injected: no native sidecars on Kubernetes 1.28 (its fallback is skip)']);
  const requiredSkip = await server(templateSet(nativeProxy('skip')), { version: 28 });
  const refused = await create(t, requiredSkip, pod());
  t.false(refused.response.allowed);
  t.is(refused.reason, 'required-sidecar-unavailable');
  t.regex(
    refused.response.status.message,
    /^required sidecar proxy cannot be injected: proxy not injected: no native sidecars on Kubernetes 1\.28 \(its fallback is skip\); upgrade/,
  );
  const deny = await server(templateSet(nativeProxy('deny')), { version: 28 });
  const denied = await create(t, deny, pod());
  t.false(denied.response.allowed);
  t.is(denied.response.status.code, 400);
  t.is(denied.reason, 'native-sidecars-unsupported');
  t.is(
    denied.response.status.message,
    'template proxy needs native sidecars (Kubernetes 1.29+) and the cluster runs Kubernetes 1.28: --kubernetes-version 1.28 was given; its fallback is deny',
  );
});

/** An optional template whose sidecar sets no securityContext: it breaks restricted (not baseline). */
const loose = { name: 'loose', failurePolicy: 'Ignore', containers: [{ name: 'agent', image: 'agent:1' }] };

/** A pod that passes restricted. */
function hardened(): Json {
  return pod({
    spec: { securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } } },
    containers: [{ name: 'web', image: 'nginx', securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
  });
}

test('Pod Security enforce: a template that would break the level is left out (skip), with the rule named', async (t) => {
  const set = await loadTemplateDir('templates');
  const s = await server(
    templateSet(loose, {
      ...nativeProxy(),
      initContainers: [{ ...proxyDoc.initContainers[0], securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
    }),
  );
  const { after, warnings, reason } = await create(t, s, hardened(), 'strict');
  t.is(reason, 'injected');
  t.deepEqual(
    after.spec.containers.map((c: Json) => c.name),
    ['web'],
  );
  t.deepEqual(
    after.spec.initContainers.map((c: Json) => c.name),
    ['proxy'],
  );
  t.is(warnings.length, 1);
  // kubectl shows warnings cut at 120 characters (R-48): the template, the level and the first rule fit.
  t.is(warnings[0], 'loose not injected: it would violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "age…');
  // The pod as left passes the level, as Pod Security Admission will check it.
  t.deepEqual(checkPodSecurity(after, podSecurityPolicies({ 'pod-security.kubernetes.io/enforce': 'restricted' }).enforce!), []);
  // The bundled templates pass restricted: nothing is left out.
  const bundled = await server(set);
  const all = await create(
    t,
    bundled,
    { ...hardened(), metadata: { ...hardened().metadata, annotations: { 'sidecar-injector.io/templates': 'proxy' } } },
    'strict',
  );
  t.deepEqual(all.warnings, []);
  t.deepEqual([...all.after.spec.initContainers, ...all.after.spec.containers].map((c: Json) => c.name).sort(), ['log-shipper', 'proxy', 'web']);
  // Also where the pod sets seccomp per container rather than for the pod: the bundled templates set their own.
  const perContainer = hardened();
  perContainer.spec.securityContext = { runAsNonRoot: true };
  perContainer.spec.containers[0].securityContext.seccompProfile = { type: 'RuntimeDefault' };
  perContainer.metadata.annotations = { 'sidecar-injector.io/templates': 'proxy' };
  const fits = await create(t, bundled, perContainer, 'strict');
  t.is(fits.reason, 'injected');
  t.deepEqual(fits.warnings, []);
  t.deepEqual(checkPodSecurity(fits.after, podSecurityPolicies({ 'pod-security.kubernetes.io/enforce': 'restricted' }).enforce!), []);
  // A required template that would break the enforced level refuses the pod rather than start it without.
  const required = await server(templateSet({ ...loose, failurePolicy: 'Fail' }));
  const refused = await create(t, required, hardened(), 'strict');
  t.false(refused.response.allowed);
  t.is(refused.reason, 'required-sidecar-unavailable');
  t.regex(refused.response.status.message, /^required sidecar loose cannot be injected: loose not injected: it would violate PodSecurity "restricted:latest"/);
});

test('Pod Security enforce: deny refuses the pod (403); inject injects with a warning; a pod already failing is not ours to judge', async (t) => {
  const deny = await server(templateSet(loose), { podSecurity: 'deny' });
  const denied = await create(t, deny, hardened(), 'strict');
  t.false(denied.response.allowed);
  t.is(denied.response.status.code, 403);
  t.is(denied.reason, 'pod-security');
  t.regex(
    denied.response.status.message,
    /^injecting loose would make the pod violate PodSecurity "restricted:latest" enforced on the namespace: allowPrivilegeEscalation != false/,
  );
  const inject = await server(templateSet(loose), { podSecurity: 'inject' });
  const injected = await create(t, inject, hardened(), 'strict');
  t.true(injected.after.spec.containers.some((c: Json) => c.name === 'agent'));
  t.regex(injected.warnings[0]!, /^loose injected though they violate PodSecurity "restricted:latest": /);
  // A pod that fails the level as sent: what it fails is the API server's to judge; what the
  // sidecar would add still counts (our rules may be stricter than the API server's).
  const skip = await server(templateSet(loose));
  const failing = await create(t, skip, pod(), 'strict');
  t.false(failing.after.spec.containers.some((c: Json) => c.name === 'agent'));
  t.regex(failing.warnings[0]!, /^loose not injected: it would violate PodSecurity "restricted:latest": /);
  // A compliant sidecar in a pod that fails on its own: injected, no word from us.
  const hardenedAgent = {
    name: 'hard',
    containers: [
      {
        name: 'agent',
        image: 'agent:1',
        securityContext: { allowPrivilegeEscalation: false, runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' }, capabilities: { drop: ['ALL'] } },
      },
    ],
  };
  const compliant = await create(t, await server(templateSet(hardenedAgent)), pod(), 'strict');
  t.true(compliant.after.spec.containers.some((c: Json) => c.name === 'agent'));
  t.deepEqual(compliant.warnings, []);
  // baseline: the loose sidecar passes.
  t.deepEqual((await create(t, skip, hardened(), 'base')).warnings, []);
});

test('Pod Security warn and audit: injected, with a warning and a note', async (t) => {
  const s = await server(templateSet(loose));
  const { after, warnings, response } = await create(t, s, hardened(), 'watched');
  t.true(after.spec.containers.some((c: Json) => c.name === 'agent'));
  // The audit level goes to the audit event, as an audit annotation (R-47).
  t.regex(response.auditAnnotations['pod-security-audit'], /^restricted:latest: allowPrivilegeEscalation != false \(container "agent"/);
  t.is(warnings.length, 1);
  t.regex(warnings[0]!, /^loose make the pod violate PodSecurity "restricted:latest": allowPrivilegeEscalation != false/);
});

const q = (text: string): Quantity => parseQuantity(text)!;

/**
 * What the API server checks of pod-level resources (R-72), on the pod as it will default it:
 * a container's request defaults from its limit; the aggregate of container requests within
 * the pod's requests, every container limit within the pod's limits, pod requests within pod limits.
 */
function budgetProblems(p: Json): string[] {
  const problems: string[] = [];
  const pod = p.spec.resources ?? {};
  const all = [...(p.spec.initContainers ?? []).filter((c: Json) => c.restartPolicy === 'Always'), ...p.spec.containers];
  for (const name of ['cpu', 'memory']) {
    const request = (c: Json) => c.resources?.requests?.[name] ?? c.resources?.limits?.[name];
    if (pod.requests?.[name]) {
      const sum = all.reduce((acc: Quantity, c: Json) => (request(c) ? addQuantities(acc, q(request(c))) : acc), q('0'));
      if (!quantityAtMost(sum, q(pod.requests[name]))) problems.push(`aggregate requests.${name} over the pod's`);
    }
    if (pod.limits?.[name]) {
      for (const c of all)
        if (c.resources?.limits?.[name] && !quantityAtMost(q(c.resources.limits[name]), q(pod.limits[name])))
          problems.push(`${c.name} limits.${name} over the pod's`);
      if (pod.requests?.[name] && !quantityAtMost(q(pod.requests[name]), q(pod.limits[name]))) problems.push(`pod requests.${name} over its limits`);
    }
  }
  return problems;
}

test('pod-level resources grow by the sidecars share, recorded in the ledger; the budget holds every container', async (t) => {
  const s = await server(await loadTemplateDir('templates'));
  const body = pod({
    annotations: { 'sidecar-injector.io/templates': 'proxy' },
    containers: [{ name: 'web', image: 'nginx', resources: { requests: { cpu: '500m', memory: '512Mi' }, limits: { memory: '1Gi' } } }],
    spec: { resources: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '2', memory: '2Gi' } } },
  });
  const { after, warnings } = await create(t, s, body);
  // log-shipper 10m/32Mi (limits 100m/64Mi), proxy 50m/64Mi (limits 1/256Mi): the pod's requests
  // grow by their requests, its limits by their limits (a Burstable pod: as written).
  t.deepEqual(after.spec.resources, { requests: { cpu: '1060m', memory: '1120Mi' }, limits: { cpu: '3100m', memory: '2368Mi' } });
  t.deepEqual(ledgerOf(after).templates.proxy.podResources, { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '1', memory: '256Mi' } });
  t.true(warnings.includes("log-shipper, proxy: pod-level resources grown by the sidecars' share: cpu +60m, memory +96Mi (requests); cpu +1100m, me…"));
  t.deepEqual(budgetProblems(after), []);
  // A pod without pod-level resources keeps having none.
  t.is((await create(t, s, pod())).after.spec.resources, undefined);
});

test('pod-level resources: requests equal to limits, and a sidecar that states only limits, stay within the budget', async (t) => {
  const limitsOnly = { name: 'capped', containers: [{ name: 'capped', image: 'c:1', resources: { limits: { cpu: '100m', memory: '128Mi' } } }] };
  const requestsOnly = {
    name: 'loose',
    failurePolicy: 'Ignore',
    containers: [{ name: 'loose', image: 'l:1', resources: { requests: { cpu: '20m', memory: '16Mi' } } }],
  };
  const s = await server(templateSet(limitsOnly, requestsOnly));
  for (const resources of [
    { requests: { cpu: '2', memory: '2Gi' }, limits: { cpu: '2', memory: '2Gi' } },
    { requests: { cpu: '1', memory: '1Gi' } },
    { limits: { cpu: '1', memory: '1Gi' } },
  ]) {
    const body = pod({ containers: [{ name: 'web', image: 'nginx', resources: { requests: { cpu: '1', memory: '1Gi' } } }], spec: { resources } });
    const { after, warnings } = await create(t, s, body);
    t.deepEqual(budgetProblems(after), [], JSON.stringify(resources));
    // Guaranteed at pod level (limits, with requests defaulted from them where unset): kept so.
    // The sidecar that limits both requests as much; the one that states no limits is left out.
    const guaranteed = qosClass(prepareCreate(body, 'shop').spec) === 'Guaranteed';
    t.is(qosClass(after.spec), qosClass(prepareCreate(body, 'shop').spec), JSON.stringify(resources));
    t.deepEqual(
      after.spec.containers.map((c: Json) => c.name),
      guaranteed ? ['web', 'capped'] : ['web', 'capped', 'loose'],
      `${JSON.stringify(resources)}: ${warnings.join('; ')}`,
    );
    if (guaranteed) {
      t.deepEqual(after.spec.containers[1].resources, { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '100m', memory: '128Mi' } });
      t.true(warnings.some((w: string) => w === 'loose not injected: it would make the Guaranteed pod Burstable (container loose limits no cpu and memory)'));
    }
  }
  // A required template that cannot keep a Guaranteed pod so: the pod is denied, saying why and what to change.
  const required = await server(templateSet(limitsOnly, { ...requestsOnly, failurePolicy: 'Fail' }));
  const body = pod({ containers: [{ name: 'web', image: 'nginx', resources: { limits: { cpu: '1', memory: '1Gi' } } }] });
  const { response } = await create(t, required, body);
  t.false(response.allowed);
  t.regex(
    response.status.message,
    /^required sidecar loose cannot be injected: loose not injected: it would make the Guaranteed pod Burstable .*give the template's containers cpu and memory limits/,
  );
});

test('default container: set when a template places a container first, never over the pod’s own choice', async (t) => {
  const first = { name: 'agent', placement: 'first', containers: [{ name: 'agent', image: 'agent:1' }] };
  const last = { name: 'tail', containers: [{ name: 'tail', image: 'tail:1' }] };
  const s = await server(templateSet(first, last));
  const { after } = await create(t, s, pod({ containers: [{ name: 'web', image: 'nginx' }] }));
  t.deepEqual(
    after.spec.containers.map((c: Json) => c.name),
    ['agent', 'web', 'tail'],
  );
  t.is(after.metadata.annotations['kubectl.kubernetes.io/default-container'], 'web');
  // Explained in the log line (and render --explain), not in a warning on every pod.
  t.deepEqual(s.logs.find((l) => l.msg === 'review' && l.decision === 'patched')?.notes, [
    "kubectl.kubernetes.io/default-container set to web, the pod's first own container: agent places its container before it",
  ]);
  const chosen = await create(t, s, pod({ annotations: { 'kubectl.kubernetes.io/default-container': 'sidecar-of-mine' } }));
  t.is(chosen.after.metadata.annotations['kubectl.kubernetes.io/default-container'], 'sidecar-of-mine');
  t.false((ledgerOf(chosen.after).templates.agent.annotations ?? []).includes('kubectl.kubernetes.io/default-container'));
  const lastOnly = await server(templateSet(last));
  t.is((await create(t, lastOnly, pod())).after.metadata.annotations['kubectl.kubernetes.io/default-container'], undefined);
});

test('a forged ledger cannot choose the form: only a native sidecar the pod holds in that form keeps it', async (t) => {
  const set = await loadTemplateDir('templates');
  const requested = { 'sidecar-injector.io/templates': 'proxy' };
  // On 1.33, a Job pod claiming the container form (with a label as its only evidence) gets the native sidecar.
  const forgedForm = JSON.stringify({ v: 1, templates: { proxy: { hash: 'x', form: 'container', labels: ['proxy.example.com/injected'] } } });
  const job = pod({
    labels: { app: 'web', 'proxy.example.com/injected': 'true' },
    annotations: { ...requested, 'sidecar-injector.io/status': forgedForm },
    spec: { restartPolicy: 'Never' },
  });
  const current = await create(t, await server(set, { version: 33 }), job);
  t.deepEqual(
    current.after.spec.initContainers.map((c: Json) => [c.name, c.restartPolicy]),
    [
      ['proxy', 'Always'],
      ['log-shipper', 'Always'],
    ],
  );
  t.false(current.after.spec.containers.some((c: Json) => c.name === 'proxy'));
  t.true(current.warnings.some((w) => w.startsWith('proxy: status annotation claims form container, but the pod holds none of the containers that')));
  // On 1.28 with fallback deny, a ledger believed for a volume only does not make the native form "recorded".
  const denySet = templateSet({ ...nativeProxy('deny'), volumes: [{ name: 'proxy-tmp', emptyDir: {} }] });
  const forgedVolume = JSON.stringify({ v: 1, templates: { proxy: { hash: 'x', volumes: ['proxy-tmp'] } } });
  const withVolume = pod({ annotations: { 'sidecar-injector.io/status': forgedVolume }, volumes: [{ name: 'proxy-tmp', emptyDir: {} }] });
  const denied = await create(t, await server(denySet, { version: 28 }), withVolume);
  t.false(denied.response.allowed);
  t.is(denied.reason, 'native-sidecars-unsupported');
});

test('Pod Security latest means the rules of the Kubernetes version in force: container_engine_t is refused by a 1.30 API server', async (t) => {
  const engine = {
    name: 'engine',
    failurePolicy: 'Ignore',
    containers: [{ name: 'engine', image: 'engine:1', securityContext: { seLinuxOptions: { type: 'container_engine_t' } } }],
  };
  // enforce: baseline (latest). At 1.30 the type is forbidden, as that API server would judge it: left out, with the rule.
  const old = await create(t, await server(templateSet(engine), { version: 30 }), hardened(), 'base');
  t.deepEqual(
    old.after.spec.containers.map((c: Json) => c.name),
    ['web'],
  );
  t.regex(old.warnings[0] ?? '', /^engine not injected: it would violate PodSecurity "baseline:latest": seLinuxOptions/);
  // From 1.31 it is allowed.
  const current = await create(t, await server(templateSet(engine), { version: 31 }), hardened(), 'base');
  t.deepEqual(
    current.after.spec.containers.map((c: Json) => c.name),
    ['web', 'engine'],
  );
  t.deepEqual(current.warnings, []);
});

test('Pod Security restricted: a volume source written null is no source, as upstream reads it; the hostPath beside it counts', async (t) => {
  const sneaky = {
    name: 'sneaky',
    failurePolicy: 'Ignore',
    volumes: [{ name: 'host', emptyDir: null, hostPath: { path: '/var/run' } }],
    containers: [
      {
        name: 'sneaky',
        image: 'sneaky:1',
        securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
        volumeMounts: [{ name: 'host', mountPath: '/host' }],
      },
    ],
  };
  const { after, warnings } = await create(t, await server(templateSet(sneaky)), hardened(), 'strict');
  t.deepEqual(
    after.spec.containers.map((c: Json) => c.name),
    ['web'],
  );
  t.regex(warnings[0] ?? '', /^sneaky not injected: it would violate PodSecurity "restricted:latest": restricted volume types \(volume "host" uses re/);
});

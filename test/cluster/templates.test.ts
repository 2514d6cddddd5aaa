/**
 * Templates as SidecarTemplate objects on the real API server: a bad template is refused at
 * `kubectl apply` with check's message and never reaches a replica; replicas that start (a
 * rollout restart, every replica pod evicted, or deleted at once) serve the stored templates and no pod create is
 * refused; the status the leader writes is what `kubectl get sidecartemplates` shows and agrees
 * with `audit`; every command reads the cluster's templates from any working directory.
 */
import test from 'ava';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  cli,
  eventually,
  healthyInstall,
  injectorPods,
  joinWorld,
  optedInNamespace,
  plainPod,
  sidecarTemplate,
  sidecarTemplatesPath,
  warnings,
  withTemplate,
  type Json,
} from './helpers.js';

/** The injector's pods: name and restart count, as a fingerprint of "nothing restarted". */
async function replicaFingerprint(): Promise<string[]> {
  return (await injectorPods())
    .filter((p) => !p.metadata.deletionTimestamp)
    .map((p) => `${p.metadata.name}:${((p.status?.containerStatuses ?? []) as Json[]).map((c) => c.restartCount).join()}`)
    .sort();
}

const manifest = (name: string, spec: string) => `apiVersion: sidecar-injector.io/v1alpha1\nkind: SidecarTemplate\nmetadata:\n  name: ${name}\nspec:\n${spec}`;

test.serial('a bad SidecarTemplate is refused at kubectl apply with check’s message, never stored, and no replica restarts', async (t) => {
  const { kube, kubectl } = joinWorld();
  const before = await replicaFingerprint();
  const cases: { what: string; files: Record<string, string>; message: RegExp }[] = [
    {
      what: 'mis-indentation',
      files: { 'agent.yaml': manifest('bad-indent', '  containers:\n  - name: agent\n  image: registry.example/agent:1\n') },
      message: /SidecarTemplate bad-indent is refused \(the checks of sidecar-injector check\):\n\s+spec\.image: unknown field/,
    },
    {
      what: 'an unknown field',
      files: { 'agent.yaml': manifest('bad-field', '  containers:\n    - name: agent\n      image: registry.example/agent:1\n      volumeMount: []\n') },
      message: /spec\.containers\[0\]\.volumeMount: unknown field "volumeMount" \(did you mean volumeMounts\?\)/,
    },
    {
      what: 'a bad placeholder',
      files: { 'agent.yaml': manifest('bad-placeholder', '  containers:\n    - name: agent\n      image: "registry.example/agent:{{ pod.nmaespace }}"\n') },
      message: /spec\.containers\[0\]\.image: .*pod\.nmaespace/,
    },
    {
      what: 'a Pod-schema error',
      files: {
        'agent.yaml': manifest(
          'bad-schema',
          '  containers:\n    - name: agent\n      image: registry.example/agent:1\n      ports: [{ containerPort: "http" }]\n',
        ),
      },
      message: /does not match the Kubernetes Pod schema/,
    },
    {
      what: 'a kustomization mistake (a patch that breaks the template)',
      files: {
        'agent.yaml': manifest('bad-patch', '  containers:\n    - name: agent\n      image: registry.example/agent:1\n'),
        'kustomization.yaml':
          'resources: [agent.yaml]\npatches:\n  - target: { kind: SidecarTemplate, name: bad-patch }\n    patch: |-\n      - op: add\n        path: /spec/containers/0/resources\n        value: { limits: { memory: lots } }\n',
      },
      message: /SidecarTemplate bad-patch is refused/,
    },
  ];
  for (const { what, files, message } of cases) {
    const dir = await mkdtemp(join(tmpdir(), 'bad-template-'));
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
    if (!files['kustomization.yaml']) await writeFile(join(dir, 'kustomization.yaml'), 'resources: [agent.yaml]\n');
    const applied = await kubectl(['apply', '-k', dir]).then(
      () => ({ ok: true, out: '' }),
      (err: Error) => ({ ok: false, out: err.message }),
    );
    await rm(dir, { recursive: true, force: true });
    t.false(applied.ok, `${what}: refused`);
    t.regex(applied.out, /admission webhook "templates\.sidecar-injector\.io" denied the request: SidecarTemplate /, what);
    t.regex(applied.out, message, what);
  }
  const stored = ((await kube.get(sidecarTemplatesPath())).items as Json[]).map((o) => o.metadata.name).sort();
  t.deepEqual(stored, ['log-shipper', 'proxy'], 'nothing of them stored');
  t.deepEqual(await replicaFingerprint(), before, 'no replica restarted');
});

/** Creates plain pods in `namespace` until `done()`, at most 4 at once; returns the refusals' messages and the count. */
async function createWhile(namespace: string, done: () => boolean): Promise<{ created: number; refused: string[] }> {
  const { kube } = joinWorld();
  const refused: string[] = [];
  let created = 0;
  await Promise.all(
    Array.from({ length: 4 }, async (_, worker) => {
      while (!done()) {
        const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods?dryRun=All`, plainPod(`during-${worker}-${created}`));
        created++;
        if (answer.status !== 201) refused.push(String(answer.body.message ?? answer.status));
        else if (!((answer.body.spec.initContainers ?? []) as Json[]).some((c) => c.name === 'log-shipper')) refused.push('admitted without log-shipper');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }),
  );
  return { created, refused };
}

test.serial(
  'replicas that start serve the stored templates: a rollout restart, every replica pod evicted as a drain does, every replica pod deleted at once, and no pod create refused or missing its sidecar',
  async (t) => {
    const { kube, kubectl } = joinWorld();
    const namespace = await optedInNamespace(t, 'restarts');
    let finished = false;
    const load = createWhile(namespace, () => finished);
    try {
      await kubectl(['rollout', 'restart', 'deployment/sidecar-injector', '-n', 'sidecar-injector']);
      await kubectl(['rollout', 'status', 'deployment/sidecar-injector', '-n', 'sidecar-injector', '--timeout=180s']);
      await healthyInstall();
    } finally {
      finished = true;
    }
    const restart = await load;
    t.true(restart.created > 20, `${restart.created} creates during the rollout restart`);
    t.deepEqual(restart.refused, [], 'a rollout restart refuses no pod create');

    // Every replica pod evicted, as a node drain does (the PodDisruptionBudget paces it): each new
    // replica lists the SidecarTemplates and serves them before the next old one goes.
    finished = false;
    const second = createWhile(namespace, () => finished);
    const old = (await injectorPods()).map((p) => p.metadata.name as string);
    try {
      for (const name of old)
        await eventually(`the eviction of ${name} accepted`, async () => {
          const answer = await kube.request('POST', `/api/v1/namespaces/sidecar-injector/pods/${name}/eviction`, {
            apiVersion: 'policy/v1',
            kind: 'Eviction',
            metadata: { name, namespace: 'sidecar-injector' },
          });
          // 429: the budget allows no disruption yet (the replacement is not ready).
          return answer.status === 201 || answer.status === 200;
        });
      await eventually('new replicas, the old ones gone', async () => {
        const pods = await injectorPods();
        return pods.every((p) => !old.includes(p.metadata.name)) && pods.length === 2;
      });
      await healthyInstall();
    } finally {
      finished = true;
    }
    const drained = await second;
    t.true(drained.created > 10, `${drained.created} creates while every replica was replaced`);
    t.deepEqual(drained.refused, [], 'no pod create refused while every replica was evicted and replaced');

    // Every replica pod deleted at once (no budget paces a delete): the old replicas keep
    // serving, terminating, until a new one is ready behind the Service.
    finished = false;
    const third = createWhile(namespace, () => finished);
    const deleted = (await injectorPods()).map((p) => p.metadata.name as string);
    try {
      await kubectl(['delete', 'pods', '-n', 'sidecar-injector', ...deleted, '--wait=false']);
      await eventually('new replicas, the deleted ones gone', async () => {
        const pods = await injectorPods();
        return pods.every((p) => !deleted.includes(p.metadata.name)) && pods.length === 2;
      });
      await healthyInstall();
    } finally {
      finished = true;
    }
    const replaced = await third;
    t.true(replaced.created > 10, `${replaced.created} creates while every replica was deleted and replaced`);
    t.deepEqual(replaced.refused, [], 'no pod create refused while every replica pod was deleted at once');
  },
);

test.serial('kubectl get sidecartemplates: the status the leader writes names the revision in force, and its pod counts agree with audit', async (t) => {
  const { kube, kubectl } = joinWorld();
  const namespace = await optedInNamespace(t, 'status');
  for (let i = 0; i < 3; i++) await kube.create(`/api/v1/namespaces/${namespace}/pods`, plainPod(`counted-${i}`));
  const served = await kube.get('/api/v1/namespaces/sidecar-injector/services/https:sidecar-injector:8443/proxy/status');
  const revision = (served.templates.templates as string[]).find((s) => s.startsWith('log-shipper@'))!.split('@')[1];
  // The audit of the whole cluster, as `sidecar-injector audit` counts it, per state of log-shipper.
  const audited = async () => {
    const run = await cli(['audit', '-o', 'json']);
    const counts: Record<string, number> = {};
    for (const pod of JSON.parse(run.stdout).pods as Json[])
      for (const verdict of pod.templates as Json[]) if (verdict.name === 'log-shipper') counts[verdict.state] = (counts[verdict.state] ?? 0) + 1;
    return counts;
  };
  const status = await eventually('the status of log-shipper agreeing with audit', async () => {
    const object = await kube.get(sidecarTemplatesPath('log-shipper'));
    const counts = await audited();
    const pods = object.status?.pods;
    return pods && pods.current === (counts.current ?? 0) && pods.stale === (counts.stale ?? 0) && pods.missing === (counts.missing ?? 0) && pods.current >= 3
      ? object.status
      : undefined;
  });
  t.like(status, { template: 'log-shipper', revision, role: 'stable', state: 'Serving' });
  t.is(status.observedGeneration, (await kube.get(sidecarTemplatesPath('log-shipper'))).metadata.generation);
  t.like(
    (status.conditions as Json[]).find((c) => c.type === 'Ready'),
    { status: 'True', reason: 'Accepted' },
  );
  const table = (await kubectl(['get', 'sidecartemplates', 'log-shipper'])).stdout;
  t.regex(
    table,
    new RegExp(
      `^log-shipper\\s+log-shipper\\s+${revision}\\s+stable\\s+Serving\\s+${status.pods.current}\\s+${status.pods.stale}\\s+${status.pods.missing}\\s`,
      'm',
    ),
  );
});

test.serial('every command reads the cluster’s templates from any working directory', async (t) => {
  const { kube } = joinWorld();
  const namespace = await optedInNamespace(t, 'anywhere');
  await kube.create(`/api/v1/namespaces/${namespace}/pods`, plainPod('web'));
  const elsewhere = await mkdtemp(join(tmpdir(), 'elsewhere-'));
  t.teardown(() => rm(elsewhere, { recursive: true, force: true }));
  await mkdir(join(elsewhere, 'templates'));
  // A folder named templates with nothing in it: no command reads it unless told to.
  const inForce = ['log-shipper', 'proxy'];
  const why = await cli(['why', '-n', namespace, 'pod/web', '-o', 'json'], { cwd: elsewhere });
  t.is(why.code, 0, why.stderr);
  t.deepEqual((JSON.parse(why.stdout).templates as Json[]).map((a) => a.template).sort(), inForce);
  const audit = await cli(['audit', '-n', namespace, '-o', 'json'], { cwd: elsewhere });
  t.is(audit.code, 0, audit.stderr);
  t.true((JSON.parse(audit.stdout).pods as Json[]).some((p) => (p.templates as Json[]).some((v) => v.name === 'log-shipper' && v.state === 'current')));
  const rollout = await cli(['rollout', 'status', '-o', 'json'], { cwd: elsewhere });
  t.is(rollout.code, 0, rollout.stderr);
  t.deepEqual((JSON.parse(rollout.stdout).templates as Json[]).map((r) => r.template).sort(), inForce);
  const render = await cli(['render', '-f', '-'], { cwd: elsewhere, input: JSON.stringify({ ...plainPod('x'), metadata: { name: 'x', namespace } }) });
  t.is(render.code, 0, render.stderr);
  t.regex(render.stdout, /name: log-shipper/);
  const policies = await cli(['policies'], { cwd: elsewhere });
  t.is(policies.code, 0, policies.stderr);
  t.regex(policies.stdout, /sidecar-injector-required-proxy/);
});

test.serial('inPlaceMaxUnavailable: a number of pods or a share is stored; anything else is refused at apply, naming the field', async (t) => {
  const { kube } = joinWorld();
  const withBound = (value: unknown) =>
    sidecarTemplate(
      `name: bounded\nupdateStrategy: inPlace\ninPlaceMaxUnavailable: ${JSON.stringify(value)}\ncontainers:\n  - name: agent\n    image: registry.example/agent:1\n`,
    );
  for (const good of [1, 3, '25%', '100%']) {
    const answer = await kube.request('POST', `${sidecarTemplatesPath()}?dryRun=All`, withBound(good));
    t.is(answer.status, 201, `${JSON.stringify(good)}: ${answer.text}`);
  }
  for (const bad of [0, 100_001, '0%', '101%', '25', 'half']) {
    const answer = await kube.request('POST', `${sidecarTemplatesPath()}?dryRun=All`, withBound(bad));
    t.is(answer.status, 422, `${JSON.stringify(bad)}: ${answer.text}`);
    // The templates webhook is a mutating one, so it answers before the resource's schema and its rules.
    t.regex(answer.text, /admission webhook \\"templates\.sidecar-injector\.io\\" denied/, JSON.stringify(bad));
    t.regex(answer.text, /spec\.inPlaceMaxUnavailable: must be a whole number of pods from 1 to 100000/, JSON.stringify(bad));
  }
});

test.serial(
  'the CRD’s own rules refuse what they say without the injector’s admission (a copy of the shipped CRD in a group no webhook matches)',
  async (t) => {
    const { kube } = joinWorld();
    // The shipped CRD as it is, moved to a group of its own: what the API server alone says while
    // the templates webhook is not called (before it is armed, or while no replica runs).
    const group = 'rules.sidecar-injector.test';
    const shipped = parseYaml(await readFile('manifests/base/sidecartemplates-crd.yaml', 'utf8')) as Json;
    // Without the short name and category, which would make `kubectl get sct` ambiguous meanwhile.
    const { shortNames: _shortNames, categories: _categories, ...names } = shipped.spec.names as Json;
    const crd = { ...shipped, metadata: { name: `sidecartemplates.${group}` }, spec: { ...shipped.spec, group, names } };
    const crdPath = `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/sidecartemplates.${group}`;
    await kube.create('/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
    t.teardown(async () => {
      await kube.delete(crdPath);
      await eventually('the copy gone', async () => (await kube.find(crdPath)) === undefined);
    });
    await eventually('the copy established', async () => {
      const stored = await kube.find(crdPath);
      return (stored?.status?.conditions as Json[] | undefined)?.some((c) => c.type === 'Established' && c.status === 'True') || undefined;
    });
    const path = `/apis/${group}/v1alpha1/sidecartemplates?dryRun=All`;
    const object = (name: string, spec: Json) => ({ apiVersion: `${group}/v1alpha1`, kind: 'SidecarTemplate', metadata: { name }, spec });
    const containers = [{ name: 'agent', image: 'registry.example/agent:1' }];
    // The collection is served a moment after Established: wait for the first answer.
    const stored = await eventually('the copy served', async () => {
      const answer = await kube.request('POST', path, object('good', { containers, updateStrategy: 'inPlace', inPlaceMaxUnavailable: '25%' }));
      return answer.status === 404 ? undefined : answer;
    });
    t.is(stored.status, 201, stored.text);
    for (const good of [1, 100_000, '1%', '100%']) {
      const answer = await kube.request('POST', path, object('good', { containers, inPlaceMaxUnavailable: good }));
      t.is(answer.status, 201, `${JSON.stringify(good)}: ${answer.text}`);
    }
    const refusals: [string, Json, RegExp][] = [
      ...[0, 100_001, '0%', '101%', '25', 'half'].map((bad): [string, Json, RegExp] => [
        'x',
        { containers, inPlaceMaxUnavailable: bad },
        /spec\.inPlaceMaxUnavailable: Invalid value: .*a whole number of pods from 1 to 100000/,
      ]),
      ['x', { name: 'other', containers }, /spec\.name: only a candidate or previous revision/],
      ['x.y', { containers }, /metadata\.name names the template: a DNS-1123 label/],
      ['x-next', { name: 'x', rollout: { role: 'candidate' }, containers }, /a candidate needs share/],
      ['x-prev', { name: 'x', rollout: { role: 'previous', share: 5 }, containers }, /share, namespaces and podSelector belong to a candidate/],
    ];
    for (const [name, spec, message] of refusals) {
      const answer = await kube.request('POST', path, object(name, spec));
      t.is(answer.status, 422, `${name} ${JSON.stringify(spec)}: ${answer.text}`);
      t.regex(answer.text, message, `${name} ${JSON.stringify(spec)}`);
      t.notRegex(answer.text, /admission webhook/, 'the CRD answered, no webhook');
    }
  },
);

test.serial('kubectl apply of a SidecarTemplate whose container listens on a port it does not declare is admitted with a warning', async (t) => {
  const { kube } = joinWorld();
  const object = sidecarTemplate(
    'name: undeclared-port\nparameters:\n  adminPort: 9901\ncontainers:\n  - name: agent\n    image: registry.example/agent:1\n    args: ["--admin-port={{ params.adminPort }}"]\n',
  );
  const answer = await kube.request('POST', `${sidecarTemplatesPath()}?dryRun=All`, object);
  t.is(answer.status, 201, answer.text);
  t.deepEqual(warnings(answer), ['undeclared-port: container agent gets params.adminPort (9901), no such port declared; if it listens there, declare it']);
  // Declared, it is admitted without a word.
  object.spec.containers[0].ports = [{ name: 'admin', containerPort: '{{ params.adminPort }}' }];
  const declared = await kube.request('POST', `${sidecarTemplatesPath()}?dryRun=All`, object);
  t.is(declared.status, 201, declared.text);
  t.deepEqual(warnings(declared), []);
});

test.serial(
  'two valid required templates that add one container name: the pods both select are denied naming it, and every replica stays healthy (the liveness sample they deny is no reason to restart)',
  async (t) => {
    const { kube, kubectl } = joinWorld();
    const before = await replicaFingerprint();
    const namespace = await optedInNamespace(t, 'one-name');
    // Each passes admission on its own; together they want the container `dup` twice. The
    // objectSelector takes the liveness sample pod's label, so that every replica's canary meets them.
    for (const name of ['dup-a', 'dup-b'])
      await withTemplate(
        t,
        name,
        `name: ${name}\nobjectSelector:\n  matchLabels:\n    app: sample\ncontainers:\n  - name: dup\n    image: registry.example/dup:1\n`,
      );
    const both = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, {
      ...plainPod('sample'),
      metadata: { name: 'sample', labels: { app: 'sample' } },
    });
    t.true(both.status >= 400, `${both.status} ${both.text}`);
    t.regex(both.text, /dup/);
    t.is((await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, plainPod('other'))).status, 201, 'a pod neither selects is created');
    // Every replica's liveness check has met the denial: logged, not failed.
    const replicas = await injectorPods();
    await eventually('every replica logging the denied liveness sample', async () => {
      for (const pod of replicas) {
        const logs = (await kubectl(['-n', 'sidecar-injector', 'logs', pod.metadata.name, '-c', 'injector'])).stdout;
        if (!/the templates in force deny the liveness sample pod/.test(logs)) return undefined;
      }
      return true;
    });
    // What the kubelet's liveness probe asks, asked of every replica now that the sample is denied:
    // healthy (the old canary answered 503 here, and the kubelet restarted the replica).
    for (const pod of replicas) {
      const health = await kube.request('GET', `/api/v1/namespaces/sidecar-injector/pods/https:${pod.metadata.name}:8081/proxy/healthz`);
      t.is(health.status, 200, `${pod.metadata.name}: ${health.text}`);
    }
    t.deepEqual(await replicaFingerprint(), before, 'no replica restarted');
    const unhealthy = JSON.parse((await kubectl(['-n', 'sidecar-injector', 'get', 'events', '--field-selector', 'reason=Unhealthy', '-o', 'json'])).stdout)
      .items as Json[];
    t.deepEqual(
      unhealthy.filter((e) => /Liveness/.test(String(e.message)) && replicas.some((p) => p.metadata.name === e.involvedObject?.name)),
      [],
    );
  },
);

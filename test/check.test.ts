import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { check } from '../src/pipeline/template-check.js';
import { TemplateError } from '../src/errors.js';

async function dirWith(files: Record<string, string>): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-check-'));
  for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
  return dir;
}

const good = 'name: agent\ncontainers:\n  - name: agent\n    image: example/agent:1\n';

test('the bundled templates pass', async (t) => {
  const set = await check('templates');
  t.deepEqual(
    set.templates.map((x) => x.name),
    ['log-shipper', 'proxy'],
  );
});

// [title, files, file named, field named, message fragment]
const broken: [string, Record<string, string>, string, string, RegExp][] = [
  ['invalid YAML', { 'a.yaml': 'name: [a' }, 'a.yaml', '', /YAML/],
  [
    'unknown placeholder',
    { 'a.yaml': 'name: a\ncontainers:\n  - name: a\n    image: "{{ pod.image }}"\n' },
    'a.yaml',
    'containers[0].image',
    /unknown placeholder \{\{ pod\.image \}\}/,
  ],
  [
    'invalid selector',
    { 'a.yaml': `${good}objectSelector:\n  matchExpressions:\n    - { key: a, operator: Gt, values: ["1"] }\n`.replace('name: agent\n', 'name: a\n') },
    'a.yaml',
    'objectSelector.matchExpressions[0].operator',
    /not a valid label selector operator/,
  ],
  [
    'an objectSelector whose lines lost their indentation',
    { 'a.yaml': `${good}objectSelector:\nmatchLabels:\n  app: web\n`.replace('name: agent\n', 'name: a\n') },
    'a.yaml',
    'objectSelector',
    /the key has no value, which would select every pod \(did its lines lose their indentation\?\)/,
  ],
  [
    'a rendered pod that breaks the Pod schema',
    { 'a.yaml': 'name: a\nparameters: { port: http }\ncontainers:\n  - name: a\n    image: x\n    ports: [{ containerPort: "{{ params.port }}" }]\n' },
    'a.yaml',
    'rendered into a sample pod',
    /Pod schema: spec\.containers\[2\]\.ports\[0\]\.containerPort must be integer/,
  ],
  [
    'a rendered pod that collides with the sample app',
    { 'a.yaml': 'name: a\ncontainers:\n  - name: app\n    image: x\n' },
    'a.yaml',
    'rendered into a sample pod',
    /the pod has its own container app, the name of its sidecar/,
  ],
  ['two files, one name', { 'a.yaml': good, 'b.yaml': good }, 'b.yaml', 'name', /also used by a\.yaml/],
  [
    'a kustomization that misses a file',
    { 'a.yaml': good, 'kustomization.yaml': 'resources:\n  - b.yaml\n' },
    'kustomization.yaml',
    'resources',
    /does not list a\.yaml/,
  ],
  ['an empty directory', {}, '', '', /no template files/],
  [
    'a kustomization that makes a ConfigMap of the files, which no one reads',
    { 'a.yaml': good, 'kustomization.yaml': 'configMapGenerator:\n  - name: sidecar-injector-templates\n    files: [a.yaml]\nresources: [a.yaml]\n' },
    'kustomization.yaml',
    'configMapGenerator',
    /the injector reads SidecarTemplate objects, not a ConfigMap/,
  ],
  [
    'a kustomization that sets a namespace on cluster-scoped objects',
    { 'a.yaml': good, 'kustomization.yaml': 'namespace: sidecar-injector\nresources: [a.yaml]\n' },
    'kustomization.yaml',
    'namespace',
    /a SidecarTemplate is cluster-scoped: remove namespace:/,
  ],
  [
    'a kustomization that renames what it makes',
    { 'a.yaml': good, 'kustomization.yaml': 'namePrefix: team-\nresources: [a.yaml]\n' },
    'kustomization.yaml',
    'namePrefix',
    /renames every template/,
  ],
];

for (const [title, files, file, field, message] of broken) {
  test(`check names the file and field: ${title}`, async (t) => {
    const dir = await dirWith(files);
    const err = await t.throwsAsync(check(dir), { instanceOf: TemplateError });
    const hit = err?.problems.find((p) => (file === '' || p.file === file) && (field === '' || p.field === field) && message.test(p.message));
    t.truthy(hit, JSON.stringify(err?.problems));
  });
}

test('the check command exits 1 and prints every problem', async (t) => {
  const dir = await dirWith({ 'a.yaml': 'name: Bad\n', 'b.yaml': 'name: b\ncontainers: [{ name: b }]\n' });
  const child = spawn(process.execPath, [join('dist', 'src', 'cli', 'main.js'), 'check', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  t.is(code, 1);
  t.regex(stderr, /a\.yaml: name: is required and must be a DNS-1123 label/);
  t.regex(stderr, /b\.yaml: containers\[0\]\.image: a container needs an image/);
});

test('--pod-security restricted: the bundled templates pass, in both forms; a template that breaks the level is named with the rule', async (t) => {
  const { clusterCheckOptions } = await import('../src/cli/check.js');
  for (const version of [undefined, '1.28', '1.33']) {
    const options = clusterCheckOptions({ 'pod-security': 'restricted', ...(version ? { 'kubernetes-version': version } : {}) });
    await t.notThrowsAsync(check('templates', options), version ?? 'latest');
  }
  const dir = await dirWith({ 'agent.yaml': good });
  const err = await t.throwsAsync(check(dir, clusterCheckOptions({ 'pod-security': 'restricted' })), { instanceOf: TemplateError });
  t.deepEqual(
    err!.problems.map((p) => [p.file, p.field]),
    [['agent.yaml', 'rendered into a sample pod']],
  );
  t.is(
    err!.problems[0]!.message,
    'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "agent" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "agent" must set securityContext.capabilities.drop=["ALL"])',
  );
  // Baseline asks less: the same template passes.
  await t.notThrowsAsync(check(dir, clusterCheckOptions({ 'pod-security': 'baseline' })));
  // A privileged sidecar fails baseline too, at the version given.
  const privileged = await dirWith({ 'p.yaml': `${good}    securityContext:\n      privileged: true\n` });
  const base = await t.throwsAsync(check(privileged, clusterCheckOptions({ 'pod-security': 'baseline', 'kubernetes-version': '1.30' })), {
    instanceOf: TemplateError,
  });
  t.regex(
    base!.problems[0]!.message,
    /^violates PodSecurity "baseline:latest" \(rules of Kubernetes 1\.30\): privileged \(container "agent" must not set securityContext\.privileged=true\)$/,
  );
});

test('--kubernetes-version below 1.29 checks a template in the form it takes there', async (t) => {
  const { clusterCheckOptions } = await import('../src/cli/check.js');
  // A native sidecar with a port whose name collides with an app container's once it is an ordinary container is still valid;
  // what matters is that the container form is rendered and checked (its field says so).
  const dir = await dirWith({
    'proxy.yaml':
      'name: proxy\nplacement: first\ninitContainers:\n  - name: proxy\n    image: envoy\n    restartPolicy: Always\n    ports: [{ containerPort: "8080" }]\n',
  });
  const err = await t.throwsAsync(check(dir, clusterCheckOptions({ 'kubernetes-version': '1.28' })), { instanceOf: TemplateError });
  t.is(err!.problems[0]!.field, 'rendered into a sample pod at Kubernetes 1.28 (nativeSidecars fallback container)');
  t.regex(err!.problems[0]!.message, /spec\.containers\[0\]\.ports\[0\]\.containerPort must be integer/);
});

test('nativeSidecars: the fallback is one of container, skip, deny; restartPolicy may only be a literal Always', async (t) => {
  const dir = await dirWith({
    'a.yaml': 'name: a\nnativeSidecars: { fallback: hope, extra: 1 }\ninitContainers:\n  - name: a\n    image: x\n    restartPolicy: OnFailure\n',
  });
  const err = await t.throwsAsync(check(dir), { instanceOf: TemplateError });
  t.deepEqual(
    err!.problems.map((p) => `${p.field}: ${p.message}`),
    [
      'initContainers[0].restartPolicy: may only be Always (a native sidecar), as literal text',
      'nativeSidecars.extra: unknown field (expected fallback)',
      'nativeSidecars.fallback: must be one of container, skip, deny',
    ],
  );
});

test('an overridable parameter reaching a sensitive field is refused unless an enum or a pattern constrains it', async (t) => {
  const template = (declaration: string, field: string) =>
    `name: agent\nparameters:\n  p:\n${declaration}\ncontainers:\n  - name: agent\n    image: ${field === 'image' ? '"{{ params.p }}"' : 'agent:1'}\n${field === 'args' ? '    args: ["--level={{ params.p }}"]\n' : ''}${field === 'env' ? '    env: [{ name: X, value: "{{ params.p }}" }]\n' : ''}`;
  const unconstrained = '    default: agent:1\n    override: pod';
  for (const field of ['image', 'args']) {
    const err = await t.throwsAsync(check(await dirWith({ 'agent.yaml': template(unconstrained, field) })), { instanceOf: TemplateError });
    t.deepEqual(
      err!.problems.map((p) => `${p.field}: ${p.message}`),
      [
        `parameters.p: is overridable (override: pod) and reaches containers[0].${field === 'image' ? 'image' : 'args[0]'}, where an override could change what runs or with which rights: constrain it with type: enum or a pattern${field === 'args' ? ' (or give it a one-token type: integer, number, boolean, quantity, duration)' : ''}`,
      ],
    );
  }
  // Constrained, or not overridable, or in a field that is not sensitive: accepted.
  for (const [declaration, field] of [
    ['    default: agent:1\n    override: pod\n    pattern: "registry\\\\.example\\\\.com/agent:[0-9.]+|agent:1"', 'image'],
    ['    default: info\n    type: enum\n    values: [info, debug]\n    override: pod', 'args'],
    ['    default: agent:1\n    override: none', 'image'],
    ['    default: x\n    override: pod', 'env'],
  ]) {
    await t.notThrowsAsync(check(await dirWith({ 'agent.yaml': template(declaration!, field!) })), `${field}: ${declaration}`);
  }
});

test('the lock is an allow-list: probes, hooks, mounts, workingDir, an env value a command expands, and pod annotations outside it are refused', async (t) => {
  const unconstrained = 'parameters:\n  p:\n    default: x\n    override: pod\n';
  const cases: [string, string, RegExp][] = [
    [
      'hook',
      `${unconstrained}containers:\n  - name: a\n    image: a:1\n    lifecycle: { preStop: { exec: { command: ["sh", "-c", "sleep {{ params.p }}"] } } }\n`,
      /reaches containers\[0\]\.lifecycle\.preStop\.exec\.command\[2\]/,
    ],
    [
      'probe',
      `${unconstrained}containers:\n  - name: a\n    image: a:1\n    readinessProbe: { httpGet: { host: "{{ params.p }}", port: 80 } }\n`,
      /reaches containers\[0\]\.readinessProbe\.httpGet\.host/,
    ],
    ['workingDir', `${unconstrained}containers:\n  - name: a\n    image: a:1\n    workingDir: "/{{ params.p }}"\n`, /reaches containers\[0\]\.workingDir/],
    [
      'expanded env',
      `${unconstrained}containers:\n  - name: a\n    image: a:1\n    args: ["--delay=$(DELAY)"]\n    env: [{ name: DELAY, value: "{{ params.p }}" }]\n`,
      /reaches containers\[0\]\.env\[0\]\.value/,
    ],
    [
      'pod annotation',
      `containers:\n  - name: a\n    image: "registry/{{ pod.annotations['agent/image'] }}"\n`,
      /uses pod annotation "agent\/image", which any pod can set to anything/,
    ],
  ];
  for (const [title, body, message] of cases) {
    const err = await t.throwsAsync(check(await dirWith({ 'a.yaml': `name: a\n${body}` })), { instanceOf: TemplateError }, title);
    t.regex(err!.problems.map((p) => p.message).join('\n'), message, title);
  }
  // Allowed without a constraint: resources, an env value no command expands, pod labels and annotations.
  const ok = `name: a\n${unconstrained}containers:\n  - name: a\n    image: a:1\n    env: [{ name: NOTE, value: "{{ params.p }} {{ pod.annotations['note'] }}" }]\nannotations: { example.com/p: "{{ params.p }}" }\n`;
  await t.notThrowsAsync(check(await dirWith({ 'a.yaml': ok })));
});

test('an override reaches a shell through a chain of env references: refused, naming the chain', async (t) => {
  const agent = (env: string, run: string) =>
    `name: agent\nparameters:\n  flags:\n    default: "-v"\n    override: pod\nvolumes: [{ name: data, emptyDir: {} }]\ncontainers:\n  - name: agent\n    image: agent:1\n    env:\n${env}\n${run}\n`;
  const chain = '      - { name: A, value: "{{ params.flags }}" }\n      - { name: B, value: "--x=$(A)" }';
  const err = await t.throwsAsync(check(await dirWith({ 'agent.yaml': agent(chain, '    command: ["sh", "-c", "exec /agent $(B)"]') })), {
    instanceOf: TemplateError,
  });
  t.deepEqual(
    err!.problems.map((p) => `${p.field}: ${p.message}`),
    [
      'parameters.flags: is overridable (override: pod) and reaches containers[0].env[0].value (expanded by $(A) in env B, $(B) in containers[0].command[2]), where an override could change what runs or with which rights: constrain it with type: enum or a pattern (or give it a one-token type: integer, number, boolean, quantity, duration)',
    ],
  );
  // Through a mount's subPathExpr: a pod could point the mount anywhere in the volume.
  const subPath = '    volumeMounts: [{ name: data, mountPath: /data, subPathExpr: "$(B)" }]';
  const viaMount = await t.throwsAsync(check(await dirWith({ 'agent.yaml': agent(chain, subPath) })), { instanceOf: TemplateError });
  t.regex(viaMount!.problems[0]!.message, /expanded by \$\(A\) in env B, \$\(B\) in containers\[0\]\.volumeMounts\[0\]\.subPathExpr/);
  // `$$(B)` is the literal text $(B): nothing expands, the env value stays data.
  await t.notThrowsAsync(check(await dirWith({ 'agent.yaml': agent(chain, '    command: ["sh", "-c", "echo $$(B)"]') })));
  // A chain that ends in an env var nothing runs with is data.
  await t.notThrowsAsync(check(await dirWith({ 'agent.yaml': agent(chain, '    command: ["/agent"]') })));
});

test('a parameter with a one-token type may go into args; a free string still needs an enum or a pattern', async (t) => {
  const withArg = (declaration: string) =>
    `name: agent\nparameters:\n  p:\n${declaration}\n    override: pod\ncontainers:\n  - name: agent\n    image: agent:1\n    args: ["--p={{ params.p }}"]\n    env: [{ name: P, value: "--q={{ params.p }}" }]\n    command: ["sh", "-c", "exec /agent $(P)"]\n`;
  for (const declaration of [
    '    default: 3\n    type: integer\n    min: 1\n    max: 10',
    '    default: 0.5\n    type: number',
    '    default: true\n    type: boolean',
    '    default: 64Mi\n    type: quantity\n    max: 1Gi',
    '    default: 30s\n    type: duration',
  ]) {
    await t.notThrowsAsync(check(await dirWith({ 'agent.yaml': withArg(declaration) })), declaration);
  }
  const err = await t.throwsAsync(check(await dirWith({ 'agent.yaml': withArg('    default: x') })), { instanceOf: TemplateError });
  t.deepEqual(
    err!.problems.map((p) => p.message.replace(/,.*$/, '')),
    [
      'is overridable (override: pod) and reaches containers[0].args[0]',
      'is overridable (override: pod) and reaches containers[0].env[0].value (expanded by $(P) in containers[0].command[2])',
    ],
  );
  // A one-token type is still not free to choose the image.
  const image =
    'name: agent\nparameters:\n  tag:\n    default: 1\n    type: integer\n    override: pod\ncontainers:\n  - name: agent\n    image: "agent:{{ params.tag }}"\n';
  const imageErr = await t.throwsAsync(check(await dirWith({ 'agent.yaml': image })), { instanceOf: TemplateError });
  t.regex(
    imageErr!.problems[0]!.message,
    /reaches containers\[0\]\.image, where an override could change what runs or with which rights: constrain it with type: enum or a pattern$/,
  );
});

test('check --pod-security restricted refuses a hostPath volume hidden beside emptyDir: null', async (t) => {
  const { clusterCheckOptions } = await import('../src/cli/check.js');
  const dir = await dirWith({
    'agent.yaml':
      'name: agent\nvolumes:\n  - { name: host, emptyDir: null, hostPath: { path: /var/run } }\ncontainers:\n  - name: agent\n    image: agent:1\n    securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: [ALL] } }\n    volumeMounts: [{ name: host, mountPath: /host }]\n',
  });
  const err = await t.throwsAsync(check(dir, clusterCheckOptions({ 'pod-security': 'restricted' })), { instanceOf: TemplateError });
  t.deepEqual(
    err!.problems.map((p) => p.message),
    ['violates PodSecurity "restricted:latest": restricted volume types (volume "host" uses restricted volume type "hostPath")'],
  );
});

test('check refuses the misspellings a sidecar would silently lose: volumMounts, memroy, emptyDri', async (t) => {
  const dir = await dirWith({
    'agent.yaml':
      'name: agent\nvolumes:\n  - name: data\n    emptyDri: {}\ncontainers:\n  - name: agent\n    image: agent:1\n    resources: { requests: { memroy: 64Mi } }\n    volumMounts: [{ name: data, mountPath: /data }]\n',
  });
  const err = await t.throwsAsync(check(dir), { instanceOf: TemplateError });
  t.deepEqual(
    err!.problems.map((p) => `${p.file}: ${p.field}: ${p.message.replace(/:.*$/, '')}`),
    [
      'agent.yaml: containers[0].resources.requests.memroy: must be a standard resource for containers',
      'agent.yaml: containers[0].volumMounts: unknown field "volumMounts" (did you mean volumeMounts?)',
      'agent.yaml: volumes[0].emptyDri: unknown field "emptyDri" (did you mean emptyDir?)',
    ],
  );
});

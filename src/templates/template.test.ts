import test from 'ava';
import { parseTemplateText } from './load.js';
import { compileTemplate } from './compile.js';

const minimal = {
  name: 'agent',
  containers: [{ name: 'agent', image: 'example/agent:1' }],
};

function problemsOf(doc: unknown): { field: string; message: string }[] {
  const { template, problems } = compileTemplate(doc, 'agent.yaml');
  if (template) return [];
  return problems.map(({ field, message }) => ({ field, message }));
}

test('compiles a minimal template with defaults', (t) => {
  const { template, problems } = compileTemplate(minimal, 'agent.yaml');
  t.deepEqual(problems, []);
  t.is(template?.injection, 'automatic');
  t.is(template?.placement, 'last');
  t.regex(template?.hash ?? '', /^[0-9a-f]{12}$/);
});

test('the hash does not depend on key order but on content', (t) => {
  const a = compileTemplate({ containers: minimal.containers, name: 'agent' }, 'a.yaml').template;
  const b = compileTemplate(minimal, 'b.yaml').template;
  const c = compileTemplate({ ...minimal, description: 'changed' }, 'c.yaml').template;
  t.is(a?.hash, b?.hash);
  t.not(a?.hash, c?.hash);
});

test('who delivers a template is no part of its revision: moving it to the policy and back leaves pods current', (t) => {
  const webhook = compileTemplate(minimal, 'a.yaml').template!;
  const policy = compileTemplate({ ...minimal, delivery: 'policy' }, 'a.yaml').template!;
  const explicit = compileTemplate({ ...minimal, delivery: 'webhook' }, 'a.yaml').template!;
  t.is(policy.delivery, 'policy');
  t.is(policy.hash, webhook.hash);
  t.is(explicit.hash, webhook.hash);
});

// [title, document, field, message fragment]
const broken: [string, unknown, string, string][] = [
  ['not a map', ['a'], '', 'must be a YAML map'],
  ['unknown top-level field', { ...minimal, sidecars: [] }, 'sidecars', 'unknown field'],
  ['missing name', { containers: minimal.containers }, 'name', 'DNS-1123'],
  ['bad injection', { ...minimal, injection: 'always' }, 'injection', 'automatic'],
  ['bad placement', { ...minimal, placement: 'middle' }, 'placement', 'first'],
  ['container without image', { name: 'a', containers: [{ name: 'a' }] }, 'containers[0].image', 'needs an image'],
  ['container name not DNS-1123', { name: 'a', containers: [{ name: 'Agent_1', image: 'x' }] }, 'containers[0].name', 'DNS-1123'],
  [
    'container name twice across lists',
    { name: 'a', containers: [{ name: 'x', image: 'i' }], initContainers: [{ name: 'x', image: 'i' }] },
    'initContainers[0].name',
    'used twice',
  ],
  [
    'volume twice',
    {
      name: 'a',
      volumes: [
        { name: 'v', emptyDir: {} },
        { name: 'v', emptyDir: {} },
      ],
    },
    'volumes[1].name',
    'used twice',
  ],
  [
    'mount of an undeclared volume',
    { name: 'a', containers: [{ name: 'x', image: 'i', volumeMounts: [{ name: 'nope', mountPath: '/x' }] }] },
    'containers[0].volumeMounts[0].name',
    'must name a volume declared',
  ],
  [
    'relative mountPath',
    { name: 'a', volumes: [{ name: 'v', emptyDir: {} }], appContainers: { volumeMounts: [{ name: 'v', mountPath: 'logs' }] } },
    'appContainers.volumeMounts[0].mountPath',
    'absolute path',
  ],
  [
    'same app mountPath twice',
    {
      name: 'a',
      volumes: [{ name: 'v', emptyDir: {} }],
      appContainers: {
        volumeMounts: [
          { name: 'v', mountPath: '/l' },
          { name: 'v', mountPath: '/l' },
        ],
      },
    },
    'appContainers.volumeMounts[1].mountPath',
    'used twice',
  ],
  [
    'sidecar env twice',
    {
      name: 'a',
      containers: [
        {
          name: 'a',
          image: 'i',
          env: [
            { name: 'X', value: '1' },
            { name: 'X', value: '2' },
          ],
        },
      ],
    },
    'containers[0].env[1].name',
    'set twice',
  ],
  [
    'app env twice',
    {
      name: 'a',
      appContainers: {
        env: [
          { name: 'A', value: '1' },
          { name: 'A', value: '2' },
        ],
      },
    },
    'appContainers.env[1].name',
    'set twice',
  ],
  ['app envFrom without a ref', { name: 'a', appContainers: { envFrom: [{ prefix: 'X_' }] } }, 'appContainers.envFrom[0]', 'configMapRef or secretRef'],
  ['unknown appContainers field', { name: 'a', appContainers: { ports: [] } }, 'appContainers.ports', 'unknown field'],
  ['unknown placeholder', { name: 'a', containers: [{ name: 'a', image: '{{ pod.image }}' }] }, 'containers[0].image', 'unknown placeholder'],
  ['undeclared parameter', { name: 'a', containers: [{ name: 'a', image: '{{ params.image }}' }] }, 'containers[0].image', 'not declared'],
  ['unclosed placeholder', { name: 'a', containers: [{ name: 'a', image: 'x:{{ params.tag' }], parameters: { tag: '1' } }, 'containers[0].image', 'unclosed'],
  ['placeholder in a container name', { name: 'a', containers: [{ name: '{{ pod.name }}', image: 'i' }] }, 'containers[0].name', 'DNS-1123'],
  [
    'placeholder in an env name',
    { name: 'a', containers: [{ name: 'a', image: 'i', env: [{ name: 'X_{{ pod.name }}', value: '1' }] }] },
    'containers[0].env[0].name',
    'must be literal',
  ],
  [
    'placeholder in a map key',
    { name: 'a', containers: [{ name: 'a', image: 'i', resources: { '{{ pod.name }}': 1 } }] },
    'containers[0].resources.{{ pod.name }}',
    'keys must be literal',
  ],
  ['invalid label key', { name: 'a', labels: { 'bad key': 'x' } }, 'labels.bad key', 'name part'],
  ['invalid static label value', { name: 'a', labels: { ok: 'not valid!' } }, 'labels.ok', 'alphanumerics'],
  ['template sets the ledger', { name: 'a', annotations: { 'sidecar-injector.io/status': 'x' } }, 'annotations.sidecar-injector.io/status', 'ledger'],
  ['structured parameter', { name: 'a', parameters: { list: [1, 2] } }, 'parameters.list', 'string, number or boolean'],
  [
    'invalid selector operator',
    { ...minimal, objectSelector: { matchExpressions: [{ key: 'a', operator: 'Gt', values: ['1'] }] } },
    'objectSelector.matchExpressions[0].operator',
    'not a valid label selector operator',
  ],
  ['invalid namespace selector key', { ...minimal, namespaceSelector: { matchLabels: { '-a': 'b' } } }, 'namespaceSelector.matchLabels["-a"]', 'name part'],
];

for (const [title, doc, field, fragment] of broken) {
  test(`refuses a template: ${title}`, (t) => {
    const problems = problemsOf(doc);
    const hits = problems.filter((p) => p.field === field);
    t.true(hits.length > 0, `expected a problem at ${field}, got ${JSON.stringify(problems)}`);
    t.true(
      hits.some((hit) => hit.message.includes(fragment)),
      JSON.stringify(hits),
    );
  });
}

test('reports every problem of a file, not only the first', (t) => {
  const problems = problemsOf({ name: 'Bad', injection: 'x', containers: [{ name: 'a' }] });
  t.deepEqual(problems.map((p) => p.field).sort(), ['containers[0].image', 'injection', 'name']);
});

test('YAML errors and duplicate keys are refused with the file name', (t) => {
  const dup = parseTemplateText('name: a\nname: b\n', 'dup.yaml');
  t.is(dup.template, undefined);
  t.is(dup.problems[0]?.file, 'dup.yaml');
  t.regex(dup.problems[0]?.message ?? '', /YAML/);
  const bad = parseTemplateText('name: [a', 'bad.yaml');
  t.is(bad.template, undefined);
  t.regex(bad.problems[0]?.message ?? '', /YAML/);
});

test('a YAML syntax error names the line and the column', (t) => {
  const { problems } = parseTemplateText('name: agent\ncontainers:\n  - name: agent\n    image: agent:1\n  env: []\n', 'agent.yaml');
  t.deepEqual(
    problems.map((p) => `${p.file}: ${p.field}: ${p.message}`),
    ['agent.yaml: line 5, column 1: YAML: All mapping items must start at the same column'],
  );
  const duplicate = parseTemplateText('name: agent\nname: other\n', 'agent.yaml').problems;
  t.deepEqual(
    duplicate.map((p) => p.field),
    ['line 2, column 1'],
  );
});

test('a field the Kubernetes schema does not have is refused, anywhere, with the nearest valid name', (t) => {
  const problems = problemsOf({
    name: 'agent',
    volumes: [
      { name: 'data', emptyDri: {} },
      { name: 'conf', configMap: { name: 'c', itmes: [] } },
    ],
    containers: [
      {
        name: 'agent',
        image: 'agent:1',
        volumMounts: [{ name: 'data', mountPath: '/data' }],
        resources: { requests: { memroy: '64Mi', cpu: '10m', 'example.com/gpu': '1', 'hugepages-2Mi': '2Mi' }, limits: { 'nvidia.com/gpu': '1' } },
        securityContext: { capabilities: { drop: ['ALL'], dropp: [] }, runAsNonroot: true },
        livenessProbe: { httpGet: { path: '/', port: 8080, hots: 'x' } },
        env: [{ name: 'A', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } }, vaule: 'x' }],
      },
    ],
    initContainers: [{ name: 'init', image: 'init:1', restartPolicy: 'Always', comand: ['x'] }],
    appContainers: { volumeMounts: [{ name: 'data', mountPath: '/d', readonly: true }], env: [{ name: 'B', value: 'b', valeu: 'x' }] },
    imagePullSecrets: [{ name: 'pull', namespace: 'x' }],
  });
  t.deepEqual(
    problems.map((p) => `${p.field}: ${p.message}`),
    [
      'containers[0].volumMounts: unknown field "volumMounts" (did you mean volumeMounts?): not a field of Container',
      'containers[0].resources.requests.memroy: must be a standard resource for containers: cpu, memory, ephemeral-storage or hugepages-<size> (did you mean memory?)',
      'containers[0].securityContext.capabilities.dropp: unknown field "dropp" (did you mean drop?): not a field of Capabilities',
      'containers[0].securityContext.runAsNonroot: unknown field "runAsNonroot" (did you mean runAsNonRoot?): not a field of SecurityContext',
      'containers[0].livenessProbe.httpGet.hots: unknown field "hots" (did you mean host?): not a field of HTTPGetAction',
      'containers[0].env[0].vaule: unknown field "vaule" (did you mean value?): not a field of EnvVar',
      'initContainers[0].comand: unknown field "comand" (did you mean command?): not a field of Container',
      'volumes[0].emptyDri: unknown field "emptyDri" (did you mean emptyDir?): not a field of Volume',
      'volumes[1].configMap.itmes: unknown field "itmes" (did you mean items?): not a field of ConfigMapVolumeSource',
      'appContainers.env[0].valeu: unknown field "valeu" (did you mean value?): not a field of EnvVar',
      'appContainers.volumeMounts[0].readonly: unknown field "readonly" (did you mean readOnly?): not a field of VolumeMount',
      'imagePullSecrets[0].namespace: unknown field "namespace": not a field of LocalObjectReference',
    ],
  );
});

test('unknown fields: a hostile key is quoted cut, and a flood of them is reported in bounded numbers', (t) => {
  const container: Record<string, unknown> = { name: 'agent', image: 'agent:1' };
  for (let i = 0; i < 1000; i++) container[`x${i}`] = i;
  container.__proto__x = 1;
  container['y'.repeat(100_000)] = 1;
  const problems = problemsOf({ name: 'agent', containers: [container] });
  t.is(problems.length, 20);
  t.true(problems.every((p) => p.field.length < 200 && p.message.length < 400));
});

test('every template mistake names its fix: did you mean, the declared parameters, a quoted default, a Kubernetes object in the folder', (t) => {
  const withValue = (value: string, extra: Record<string, unknown> = {}) =>
    problemsOf({
      name: 'agent',
      parameters: { image: 'x', memoryLimit: '64Mi' },
      containers: [{ name: 'agent', image: 'x', env: [{ name: 'A', value }] }],
      ...extra,
    }).map((p) => p.message);
  t.regex(withValue('{{ pod.nmae }}')[0]!, /^unknown placeholder \{\{ pod\.nmae \}\} \(did you mean pod\.name\?\): expected one of/);
  t.regex(withValue('{{ param.image }}')[0]!, /\(did you mean params\.image\?\)/);
  t.regex(withValue("{{ pod.lables['app'] }}")[0]!, /\(did you mean pod\.labels\['KEY'\]\?\)/);
  t.deepEqual(withValue('{{ params.memorylimit }}'), [
    '{{ params.memorylimit }}: parameter "memorylimit" is not declared under parameters (did you mean memoryLimit? declared: image, memoryLimit)',
  ]);
  t.deepEqual(withValue('{{ params.other }}'), ['{{ params.other }}: parameter "other" is not declared under parameters (declared: image, memoryLimit)']);
  t.deepEqual(withValue('{{ params.image | default unknown }}'), ["{{ params.image | default unknown }}: the default is quoted text: | default 'unknown'"]);
  // Nothing near: the list, no guess.
  t.notRegex(withValue('{{ zzz.qqq }}')[0]!, /did you mean/);
  t.deepEqual(problemsOf({ ...minimal, objectSelecter: {} }), [{ field: 'objectSelecter', message: 'unknown field (did you mean objectSelector?)' }]);
  t.regex(problemsOf({ ...minimal, zzzzzzzz: 1 })[0]!.message, /^unknown field \(expected one of name, description/);
  t.deepEqual(problemsOf({ apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'web' }, spec: {} }), [
    { field: '', message: 'this is a Kubernetes Deployment, not a sidecar template (a template has name, containers and the fields of docs/templates.md)' },
  ]);
  t.regex(problemsOf({ ...minimal, appContainers: { volumMounts: [] } })[0]!.message, /did you mean volumeMounts\?/);
});

test('a misplaced field: an indentation hint, and no knock-on blame on the override that reaches it', (t) => {
  const overridable = { memoryLimit: { default: '64Mi', override: 'pod' } };
  // limits one level too high: one problem, the field's, with where it belongs; the parameter is not blamed.
  t.deepEqual(
    problemsOf({ name: 'agent', parameters: overridable, containers: [{ name: 'agent', image: 'x', limits: { memory: '{{ params.memoryLimit }}' } }] }),
    [{ field: 'containers[0].limits', message: 'unknown field "limits": not a field of Container; not indented enough? limits is a field of resources' }],
  );
  // securityContext one level too deep, under resources.
  t.deepEqual(problemsOf({ name: 'agent', containers: [{ name: 'agent', image: 'x', resources: { securityContext: { runAsNonRoot: true } } }] }), [
    {
      field: 'containers[0].resources.securityContext',
      message:
        'unknown field "securityContext": not a field of ResourceRequirements; indented too far? securityContext is a field of Container (containers[0]), one level up',
    },
  ]);
  // Where the field is right, an unconstrained override reaching it is still refused.
  t.regex(
    problemsOf({ name: 'agent', parameters: overridable, containers: [{ name: 'agent', image: 'x', workingDir: '{{ params.memoryLimit }}' }] })[0]!.message,
    /is overridable \(override: pod\) and reaches containers\[0\]\.workingDir/,
  );
});

test('an unquoted {{ is named as YAML reads it, with the quoted form, and no library warning', async (t) => {
  const warnings: unknown[] = [];
  const onWarning = (w: unknown) => warnings.push(w);
  process.on('warning', onWarning);
  try {
    const { problems } = parseTemplateText('name: agent\nparameters:\n  image: x\ncontainers:\n  - name: agent\n    image: {{ params.image }}\n', 'agent.yaml');
    t.deepEqual(problems, [
      {
        file: 'agent.yaml',
        field: 'line 6, column 12',
        message: 'YAML: {{ params.image }} is read as a map: YAML takes { as the start of one; quote the value ("{{ params.image }}")',
      },
    ]);
    // Node emits warnings on a later tick.
    await new Promise((resolve) => setImmediate(resolve));
  } finally {
    process.off('warning', onWarning);
  }
  t.deepEqual(warnings, []);
});

test('what a review found: a junk key hides no override problem; map keys that are maps; a YAML error on a line with {{', (t) => {
  const overridable = { image: { default: 'x:1', override: 'pod' } };
  const problems = problemsOf({ name: 'agent', parameters: overridable, 'containers[0]': 1, containers: [{ name: 'agent', image: '{{ params.image }}' }] });
  t.true(problems.some((p) => p.field === 'parameters.image' && /reaches containers\[0\]\.image/.test(p.message)));
  const parse = (text: string) => parseTemplateText(text, 'agent.yaml').problems.map((p) => p.message);
  t.deepEqual(parse('name: agent\nlabels:\n  {{ params.k }}: v\ncontainers:\n  - name: agent\n    image: x\n'), [
    'YAML: a map key that is a map or a list; map keys are literal text (no placeholders in keys)',
  ]);
  t.deepEqual(parse('name: agent\n? [a, b]\n: c\ncontainers:\n  - name: agent\n    image: x\n'), [
    'YAML: a map key that is a map or a list; map keys are literal text (no placeholders in keys)',
  ]);
  t.regex(
    parse('name: agent\ncontainers:\n  - name: agent\n    image: x\n    args:\n      - {{ pod.name }}-suffix\n')[0]!,
    /; a value with \{\{ must be quoted$/,
  );
});

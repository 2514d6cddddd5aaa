import test from 'ava';
import fc from 'fast-check';
import type { RenderContext } from './placeholders.js';
import { PlaceholderError } from '../errors.js';
import { parseSegments } from './placeholders.js';
import { render } from './render.js';
import { compileTemplate } from './compile.js';
import type { Template } from './template.js';

function compile(doc: unknown): Template {
  const { template, problems } = compileTemplate(doc, 't.yaml');
  if (!template) throw new Error(JSON.stringify(problems));
  return template;
}

function context(
  overrides: { labels?: Record<string, string>; annotations?: Record<string, string>; name?: string; nsLabels?: Record<string, string> } = {},
): RenderContext {
  return {
    pod: {
      name: overrides.name ?? 'web-abc',
      generateName: 'web-',
      namespace: 'shop',
      serviceAccountName: 'web-sa',
      labels: overrides.labels ?? { app: 'web', 'app.kubernetes.io/name': 'storefront' },
      annotations: overrides.annotations ?? {},
    },
    namespace: { name: 'shop', labels: overrides.nsLabels ?? { team: 'payments' } },
  };
}

const template = compile({
  name: 'agent',
  parameters: { image: 'example/agent:1.2', port: 9090, verbose: true },
  containers: [
    {
      name: 'agent',
      image: '{{ params.image }}',
      args: ['--app={{ pod.labels.app }}', "--name={{ pod.labels['app.kubernetes.io/name'] }}", '--verbose={{ params.verbose }}'],
      ports: [{ name: 'metrics', containerPort: '{{ params.port }}' }],
      env: [
        { name: 'POD', value: '{{ pod.name }}' },
        { name: 'SA', value: '{{ pod.serviceAccountName }}' },
        { name: 'TEAM', value: "{{ namespace.labels.team | default 'none' }}" },
        { name: 'OWNER', value: '{{ pod.annotations[\'example.com/owner\'] | default "nobody" }}' },
        { name: 'NS', value: '{{ pod.namespace }}/{{ namespace.name }}' },
        { name: 'BRACES', value: "{{ '{{' }} literal" },
      ],
    },
  ],
  labels: { 'example.com/app': '{{ pod.labels.app }}' },
});

test('substitutes every kind of reference', (t) => {
  const out = render(template, context());
  const c = out.containers[0]!;
  t.is(c.image, 'example/agent:1.2');
  t.deepEqual(c.args, ['--app=web', '--name=storefront', '--verbose=true']);
  t.deepEqual(c.env, [
    { name: 'POD', value: 'web-abc' },
    { name: 'SA', value: 'web-sa' },
    { name: 'TEAM', value: 'payments' },
    { name: 'OWNER', value: 'nobody' },
    { name: 'NS', value: 'shop/shop' },
    { name: 'BRACES', value: '{{ literal' },
  ]);
  t.deepEqual(out.labels, { 'example.com/app': 'web' });
});

test('a whole-leaf parameter keeps its type', (t) => {
  const c = render(template, context()).containers[0]!;
  t.deepEqual(c.ports, [{ name: 'metrics', containerPort: 9090 }]);
});

test('a missing value without default renders as the empty string', (t) => {
  const c = render(template, context({ labels: {} })).containers[0]!;
  t.deepEqual(c.args, ['--app=', '--name=', '--verbose=true']);
});

test('rendered output is frozen: changing it throws, and the next render is unaffected', (t) => {
  const first = render(template, context());
  t.throws(
    () => {
      (first.containers[0]!.ports as { containerPort: number }[])[0]!.containerPort = 1;
    },
    { instanceOf: TypeError },
  );
  t.deepEqual(render(template, context()).containers[0]!.ports, [{ name: 'metrics', containerPort: 9090 }]);
});

test('renders once per distinct set of referenced values', (t) => {
  const a = render(template, context());
  t.is(render(template, context()), a, 'same values: the same rendering');
  t.not(render(template, context({ name: 'other-pod' })), a, 'a referenced value changed: a new rendering');
  t.deepEqual(
    template.references.map((r) => r.source).sort(),
    ['namespace.labels', 'pod.annotations', 'pod.labels', 'pod.labels', 'pod.name', 'pod.namespace', 'pod.serviceAccountName', 'namespace.name'].sort(),
  );
});

const hostile = [
  'line1\nline2: value\n- item',
  '{{ params.image }}',
  '{{ pod.name }}',
  "'; rm -rf / #",
  '"quoted" and \\backslash',
  'key: value',
  '- listitem',
  '{"json": [1, 2]}',
  '&anchor *alias !!tag',
  '\u0000\u0007\u001b[31m',
  'x'.repeat(100_000),
];

test('hostile pod values never change the structure of the result', (t) => {
  const baseline = JSON.stringify(render(template, context({ labels: {}, annotations: {} })), (_, v) => (typeof v === 'string' ? '' : v));
  for (const value of hostile) {
    const out = render(
      template,
      context({ labels: { app: value, 'app.kubernetes.io/name': value }, annotations: { 'example.com/owner': value }, name: value, nsLabels: { team: value } }),
    );
    // Same shape: every string blanked, the JSON is identical to a render with empty values.
    t.is(
      JSON.stringify(out, (_, v) => (typeof v === 'string' ? '' : v)),
      baseline,
    );
    // Inserted verbatim, never evaluated: '{{ params.image }}' stays that text.
    t.is((out.containers[0]!.env as { value: string }[])[0]!.value, value);
    t.is((out.containers[0]!.args as string[])[0], `--app=${value}`);
  }
});

test('property: any pod value is inserted verbatim as one string', (t) => {
  fc.assert(
    fc.property(fc.string({ unit: 'binary', maxLength: 200 }), fc.string({ maxLength: 50 }), (value, name) => {
      const out = render(template, context({ labels: { app: value }, name }));
      const c = out.containers[0]!;
      return (c.args as string[])[0] === `--app=${value}` && (c.env as { value: string }[])[0]!.value === name && Object.keys(c).length === 5;
    }),
    { numRuns: 500 },
  );
  t.pass();
});

test('placeholder parsing: the default is used for empty values too', (t) => {
  const out = render(compile({ name: 'a', containers: [{ name: 'a', image: "{{ pod.labels.v | default 'dflt' }}" }] }), context({ labels: { v: '' } }));
  t.is(out.containers[0]!.image, 'dflt');
});

test('placeholder parsing errors name the placeholder', (t) => {
  const params = new Set(['image']);
  t.throws(() => parseSegments('{{ pod.labels }}', params), { instanceOf: PlaceholderError, message: /unknown placeholder \{\{ pod\.labels \}\}/ });
  t.throws(() => parseSegments('{{ pod.name.first }}', params), { instanceOf: PlaceholderError, message: /unknown placeholder/ });
  t.throws(() => parseSegments('{{ }}', params), { instanceOf: PlaceholderError, message: /empty placeholder/ });
  t.throws(() => parseSegments("{{ pod.labels['a }}", params), { instanceOf: PlaceholderError });
  t.throws(() => parseSegments('{{ env.HOME }}', params), { instanceOf: PlaceholderError, message: /unknown placeholder/ });
  t.throws(() => parseSegments('{{ process.exit() }}', params), { instanceOf: PlaceholderError });
  t.deepEqual(parseSegments('plain text }} too', params), [{ kind: 'text', text: 'plain text }} too' }]);
});

import test from 'ava';
import { admissionProblem, maxAnnotationBytes, reviewLimits } from './pod-validation.js';
import { maxMetadataEntries, parsePod } from './pod.js';

function problemOf(pod: Record<string, any>, namespace = 'shop') {
  return admissionProblem(
    parsePod({ metadata: { generateName: 'p-', ...pod.metadata }, spec: { containers: [{ name: 'app', image: 'x' }], ...pod.spec } }),
    namespace,
  );
}

const big = 'x'.repeat(1024 * 1024);

// [title, pod, kind, fragment of the message]
const refused: [string, Record<string, any>, 'invalid' | 'too-large', RegExp][] = [
  [
    'a container named __proto__',
    { spec: { containers: [{ name: '__proto__', image: 'x' }] } },
    'invalid',
    /spec.containers\[0\].name "__proto__" is not a DNS-1123 label/,
  ],
  ['an init container named toString', { spec: { initContainers: [{ name: 'toString', image: 'x' }] } }, 'invalid', /initContainers\[0\].name "toString"/],
  ['two containers of one name', { spec: { initContainers: [{ name: 'app', image: 'x' }] } }, 'invalid', /is used by another container/],
  ['a volume named hasOwnProperty', { spec: { volumes: [{ name: 'hasOwnProperty', emptyDir: {} }] } }, 'invalid', /spec.volumes\[0\].name "hasOwnProperty"/],
  [
    'a label value of a megabyte',
    { metadata: { labels: { 'app.kubernetes.io/name': big } } },
    'invalid',
    /label value must be at most 63 characters \(got 1048576\)/,
  ],
  ['a label key __proto__', { metadata: { labels: JSON.parse('{"__proto__":"x"}') } }, 'invalid', /label key "__proto__"/],
  ['an annotation key with a prefix "valueOf_"', { metadata: { annotations: { 'valueOf_/x': 'y' } } }, 'invalid', /annotation key "valueof_\/x"/],
  [
    'annotations over the limit',
    { metadata: { annotations: { a: 'x'.repeat(maxAnnotationBytes) } } },
    'invalid',
    /take 262145 bytes, over the limit of 262144/,
  ],
  ['a pod name with a megabyte', { metadata: { name: big } }, 'invalid', /metadata.name "x{200}"… \(\+1048376 characters\)/],
  ['spec.os.name other than linux or windows', { spec: { os: { name: 'plan9' } } }, 'invalid', /spec.os.name "plan9"/],
  [
    'too many containers',
    { spec: { containers: Array.from({ length: reviewLimits.maxContainers + 1 }, (_, i) => ({ name: `c${i}`, image: 'x' })) } },
    'too-large',
    /has 251 containers/,
  ],
];

for (const [title, pod, kind, message] of refused) {
  test(`refused before any work: ${title}`, (t) => {
    const problem = problemOf(pod);
    t.is(problem?.kind, kind);
    t.regex(problem?.message ?? '', message);
    t.true((problem?.message.length ?? 0) < 600, 'quoted values are cut');
  });
}

test('a namespace that cannot exist is refused, cut in the message', (t) => {
  t.regex(problemOf({}, big)?.message ?? '', /namespace "x{200}"… \(\+1048376 characters\) is not a DNS-1123 label/);
});

test('valid pods pass: "constructor" and "prototype" are valid DNS-1123 labels', (t) => {
  t.is(
    problemOf({
      spec: {
        containers: [
          { name: 'constructor', image: 'x' },
          { name: 'prototype', image: 'x' },
        ],
        volumes: [{ name: 'constructor', emptyDir: {} }],
      },
    }),
    undefined,
  );
  t.is(
    problemOf({
      metadata: { labels: { 'app.kubernetes.io/name': 'a'.repeat(63) }, annotations: { 'Example.COM/Upper': 'x'.repeat(maxAnnotationBytes - 100) } },
    }),
    undefined,
  );
});

test('label and annotation maps over the entry limit are refused when the pod is read, after one pass', (t) => {
  const many = Object.fromEntries(Array.from({ length: maxMetadataEntries + 1 }, (_, i) => [`k${i}`, '']));
  const error = t.throws(() => parsePod({ metadata: { annotations: many }, spec: { containers: [] } }));
  t.regex(error?.message ?? '', /has 2001 entries in metadata.annotations; the sidecar injector serves pods with at most 2000/);
  t.is((error as { code?: string }).code, 'ERR_POD_TOO_LARGE');
});

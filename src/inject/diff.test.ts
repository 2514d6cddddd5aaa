import test from 'ava';
import jsonpatch from 'fast-json-patch';
import { applyPatchV4 } from '../../test/helpers/apiserver.js';
import { diff } from './diff.js';

const app = { name: 'app', image: 'nginx', env: [{ name: 'A', value: '1' }] };
const other = { name: 'other', image: 'redis' };

test('equal documents give an empty patch', (t) => {
  const pod = { spec: { containers: [app] } };
  t.deepEqual(diff(pod, pod), []);
  t.deepEqual(diff(pod, structuredClone(pod)), []);
});

test('a container inserted at the front is one add at index 0, not a cascade of replaces', (t) => {
  const before = { spec: { containers: [app, other] } };
  const sidecar = { name: 'sidecar', image: 'envoy' };
  const after = { spec: { containers: [sidecar, app, other] } };
  t.deepEqual(diff(before, after), [{ op: 'add', path: '/spec/containers/0', value: sidecar }]);
  // For contrast: fast-json-patch's index-wise compare rewrites the user's containers.
  t.true(jsonpatch.compare(before, after).some((op) => op.op === 'replace'));
});

test('insertions at front and back and a change in the middle apply in order', (t) => {
  const before = { spec: { containers: [app, other] } };
  const changedApp = { ...app, env: [...app.env, { name: 'B', value: '2' }] };
  const after = { spec: { containers: [{ name: 's1', image: 'x' }, changedApp, other, { name: 's2', image: 'y' }] } };
  const patch = diff(before, after);
  t.deepEqual(patch, [
    { op: 'add', path: '/spec/containers/0', value: { name: 's1', image: 'x' } },
    { op: 'add', path: '/spec/containers/1/env/1', value: { name: 'B', value: '2' } },
    { op: 'add', path: '/spec/containers/3', value: { name: 's2', image: 'y' } },
  ]);
  t.deepEqual(applyPatchV4(before, patch), after);
});

test('a missing parent is created whole in the same patch', (t) => {
  const before = { metadata: { name: 'p' }, spec: { containers: [other] } };
  const after = {
    metadata: { name: 'p', annotations: { 'a/b': 'x' } },
    spec: { containers: [{ ...other, env: [{ name: 'X', value: '1' }] }], volumes: [{ name: 'v', emptyDir: {} }] },
  };
  const patch = diff(before, after);
  t.deepEqual(patch, [
    { op: 'add', path: '/metadata/annotations', value: { 'a/b': 'x' } },
    { op: 'add', path: '/spec/containers/0/env', value: [{ name: 'X', value: '1' }] },
    { op: 'add', path: '/spec/volumes', value: [{ name: 'v', emptyDir: {} }] },
  ]);
  t.deepEqual(applyPatchV4(before, patch), after);
});

test('keys with / and ~ are escaped (RFC 6901)', (t) => {
  const before = { metadata: { annotations: { x: '1' } } };
  const after = { metadata: { annotations: { x: '1', 'sidecar.istio.io/inject': 'a', 'odd~key': 'b' } } };
  const patch = diff(before, after);
  t.deepEqual(
    patch.map((op) => op.path),
    ['/metadata/annotations/sidecar.istio.io~1inject', '/metadata/annotations/odd~0key'],
  );
  t.deepEqual(applyPatchV4(before, patch), after);
});

test('arrays that are not "old items plus insertions" fall back to a correct index-wise patch', (t) => {
  const before = { list: [{ name: 'a' }, { name: 'b' }, 3] };
  const after = { list: [{ name: 'b' }, 4] };
  t.deepEqual(applyPatchV4(before, diff(before, after)), after);
  const reordered = { list: [{ name: 'b' }, { name: 'a' }, 3] };
  t.deepEqual(applyPatchV4(before, diff(before, reordered)), reordered);
});

test('scalar changes, removals and type changes are patched correctly', (t) => {
  const before = { a: 1, b: 'x', c: { d: true }, e: [1, 2] };
  const after = { a: 2, c: [1], e: [1, 2, 3], f: null };
  t.deepEqual(applyPatchV4(before, diff(before, after)), after);
});

test('1,000 env vars plus two appended: two adds, and the diff visits each old item once', (t) => {
  const env = Array.from({ length: 1000 }, (_, i) => ({ name: `VAR_${i}`, value: String(i) }));
  const container = { name: 'app', image: 'x', env };
  const before = { spec: { containers: [container] } };
  const added = [
    { name: 'LOG_DIR', value: '/l' },
    { name: 'X', value: 'y' },
  ];
  const after = { spec: { containers: [{ ...container, env: [...env, ...added] }] } };
  const patch = diff(before, after);
  t.deepEqual(patch, [
    { op: 'add', path: '/spec/containers/0/env/1000', value: added[0] },
    { op: 'add', path: '/spec/containers/0/env/1001', value: added[1] },
  ]);
});

test('identical references are not descended into (the cost follows what changed)', (t) => {
  let reads = 0;
  const big: Record<string, unknown> = {};
  for (let i = 0; i < 100; i++) {
    Object.defineProperty(big, `k${i}`, { enumerable: true, get: () => (reads++, i) });
  }
  const before = { spec: { big, containers: [] as unknown[] } };
  const after = { spec: { big, containers: [{ name: 'x' }] } };
  t.is(diff(before, after).length, 1);
  t.is(reads, 0);
});

test('a diff of 1,000,000 appended items does not overflow the stack', (t) => {
  const before = { items: [{ name: 'a' }] };
  const after = { items: [{ name: 'a' }, ...Array.from({ length: 1_000_000 }, (_, i) => ({ name: `n${i}` }))] };
  const ops = diff(before, after);
  t.is(ops.length, 1_000_000);
  t.deepEqual(ops[0], { op: 'add', path: '/items/1', value: { name: 'n0' } });
});

import test from 'ava';
import { containerResourceNameProblem, nearestName, schemaFieldProblems } from './schema-fields.js';

test('container resource names as pod validation checks them', (t) => {
  for (const name of ['cpu', 'memory', 'ephemeral-storage', 'hugepages-2Mi', 'nvidia.com/gpu', 'example.com/foo', 'kubernetes.io/anything']) {
    t.is(containerResourceNameProblem(name), undefined, name);
  }
  t.regex(containerResourceNameProblem('memroy')!, /must be a standard resource for containers.*\(did you mean memory\?\)$/);
  t.regex(containerResourceNameProblem('storage')!, /must be a standard resource for containers/);
  t.regex(containerResourceNameProblem('example.com/a b')!, /not a valid resource name/);
  t.is(containerResourceNameProblem('requests.example.com/x'), "doesn't follow extended resource name standard");
});

test('the nearest name only when it is near: no guess for a word that is not a typo', (t) => {
  t.is(nearestName('volumMounts', ['volumeMounts', 'volumeDevices']), 'volumeMounts');
  t.is(nearestName('IMAGE', ['image', 'name']), 'image');
  t.is(nearestName('sidecars', ['image', 'name', 'args']), undefined);
  t.is(nearestName('x'.repeat(10_000), ['image']), undefined);
});

test('values of the wrong kind are left to the type check; unknown types are not walked', (t) => {
  t.deepEqual(schemaFieldProblems({ name: 'a', resources: '{{ params.r }}', env: 'x' }, 'V1Container', 'c'), []);
  t.deepEqual(schemaFieldProblems({ name: 'a' }, 'NoSuchType', 'c'), []);
  t.deepEqual(schemaFieldProblems('text', 'V1Container', 'c'), []);
  // Own keys only: `__proto__` and `constructor` are fields nobody declared.
  t.deepEqual(
    schemaFieldProblems(JSON.parse('{"name":"a","__proto__":{"image":"x"},"constructor":1}'), 'V1Container', 'c').map((p) => p.field),
    ['c.__proto__', 'c.constructor'],
  );
});

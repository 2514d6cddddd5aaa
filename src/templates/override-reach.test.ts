import test from 'ava';
import { overrideReachProblems } from './override-reach.js';

const reaches = (field: string, doc: Record<string, unknown> = {}) =>
  overrideReachProblems([{ source: 'pod.annotations', key: 'team', field }], new Map(), doc).length === 0;

test('the allow-list: a pod annotation may reach resources, env values, labels and annotations, nothing else', (t) => {
  for (const field of [
    'containers[0].resources.requests.cpu',
    'initContainers[3].resources.limits.memory',
    'containers[1].env[2].value',
    'appContainers.env[0].value',
    'labels.app.kubernetes.io/name',
    'annotations.team',
  ])
    t.true(reaches(field), field);
  for (const field of [
    'containers[0].image',
    'containers[0].args[0]',
    'containers[0].env[0].valueFrom',
    'containers[0].resources.limits.nvidia.com/gpu',
    'containers[x].env[0].value',
    'volumes[0].hostPath.path',
    'labels',
    'imagePullSecrets[0].name',
  ])
    t.false(reaches(field), field);
});

test('an env value that what runs expands is an argument, named with the way it gets there', (t) => {
  const doc = {
    containers: [
      {
        name: 's',
        args: ['--level=$(B)'],
        env: [
          { name: 'A', value: '{{ x }}' },
          { name: 'B', value: '$(A)' },
        ],
      },
    ],
  };
  const [problem] = overrideReachProblems([{ source: 'pod.annotations', key: 'team', field: 'containers[0].env[0].value' }], new Map(), doc);
  t.is(problem?.field, 'containers[0].env[0].value');
  t.regex(problem!.message, /reaches containers\[0\]\.env\[0\]\.value \(expanded by \$\(A\) in env B, \$\(B\) in containers\[0\]\.args\[0\]\)/);
});

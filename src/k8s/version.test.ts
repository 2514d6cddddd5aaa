import test from 'ava';
import { decideVersion, parseKubernetesVersion, supportsNativeSidecars } from './version.js';

test('versions as the API server, kubelets and people write them', (t) => {
  const table: [unknown, string | undefined][] = [
    ['1.28', '1.28'],
    ['v1.29', '1.29'],
    ['v1.29.3', '1.29'],
    ['v1.28.9-eks-1234abcd', '1.28'],
    ['v1.30.2+k3s1', '1.30'],
    ['v1.31.0-gke.1200', '1.31'],
    [' 1.33 ', '1.33'],
    ['1', undefined],
    ['v1.x', undefined],
    ['latest', undefined],
    ['', undefined],
    [129, undefined],
    [null, undefined],
    ['1.2'.repeat(50), undefined],
  ];
  for (const [text, expected] of table) {
    const version = parseKubernetesVersion(text);
    t.is(version ? `${version.major}.${version.minor}` : undefined, expected, String(text));
  }
});

test('native sidecars from 1.29; an unknown version counts as current', (t) => {
  t.false(supportsNativeSidecars({ major: 1, minor: 28 }));
  t.true(supportsNativeSidecars({ major: 1, minor: 29 }));
  t.true(supportsNativeSidecars({ major: 2, minor: 0 }));
  t.true(supportsNativeSidecars(undefined));
});

test('the decision: flag, else the oldest of kubelets and API server, else unknown', (t) => {
  const nodes = [
    { node: 'a', kubeletVersion: 'v1.30.1' },
    { node: 'b', kubeletVersion: 'v1.28.2' },
  ];
  const flagged = decideVersion({ flag: { major: 1, minor: 33 }, apiServer: 'v1.28.0', nodes });
  t.deepEqual([flagged.version, flagged.source], [{ major: 1, minor: 33 }, 'flag']);
  const byNodes = decideVersion({ apiServer: 'v1.31.0', nodes });
  t.deepEqual([byNodes.version, byNodes.source], [{ major: 1, minor: 28 }, 'nodes']);
  t.is(byNodes.reason, 'oldest kubelet is v1.28.2 (node b) of 2 node(s); API server v1.31.0');
  const byServer = decideVersion({ apiServer: 'v1.27.5', nodes });
  t.deepEqual([byServer.version, byServer.source], [{ major: 1, minor: 27 }, 'api-server']);
  const unreadableNodes = decideVersion({ apiServer: 'v1.29.1', nodesProblem: 'HTTP 403' });
  t.is(unreadableNodes.reason, 'API server v1.29.1; nodes could not be read (HTTP 403)');
  const noNodes = decideVersion({ apiServer: 'v1.29.1', nodes: [] });
  t.is(noNodes.reason, 'API server v1.29.1; no node reports a kubelet version');
  const nothing = decideVersion({});
  t.is(nothing.source, 'unknown');
  t.is(nothing.version, undefined);
  // Reported versions are read leniently; a kubelet that reports nothing readable counts as old as the skew policy allows.
  t.deepEqual(decideVersion({ apiServer: 'v1.30.1+gke', nodes: [{ node: 'n', kubeletVersion: 'v1.29.4_custom' }] }).version, { major: 1, minor: 29 });
  t.deepEqual(decideVersion({ apiServer: 'v1.30.1', nodes: [...nodes, { node: 'odd', kubeletVersion: '' }] }).version, { major: 1, minor: 27 });
  const garbage = decideVersion({ apiServer: 'banana' });
  t.is(garbage.source, 'unknown');
  t.regex(garbage.reason, /"banana" cannot be read/);
  // Only nodes, no API server answer yet.
  t.is(decideVersion({ nodes }).reason, 'oldest kubelet is v1.28.2 (node b) of 2 node(s)');
});

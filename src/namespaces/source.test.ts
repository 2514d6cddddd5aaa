import test from 'ava';
import { createLocalNamespaceSource, parseNamespaceLabelFlag, parseNamespaceLabelMap } from './source.js';

test('the local source adds kubernetes.io/metadata.name, also for unknown namespaces', async (t) => {
  const source = createLocalNamespaceSource({ shop: { team: 'a' } });
  t.is(source.kind, 'local');
  t.true(source.isReady());
  t.deepEqual(await source.labelsOf('shop'), { team: 'a', 'kubernetes.io/metadata.name': 'shop' });
  t.deepEqual(await source.labelsOf('other'), { 'kubernetes.io/metadata.name': 'other' });
});

test('a labels file is validated entry by entry', (t) => {
  const { map, problems } = parseNamespaceLabelMap({ ok: { a: 'b' }, bad: { 'x y': 'v', n: 3 }, list: ['a'] }, 'ns.yaml');
  t.deepEqual(map.ok, { a: 'b' });
  t.is(problems.length, 3);
  t.true(problems.every((p) => p.startsWith('ns.yaml: ')));
});

test('a label flag is NAMESPACE:KEY=VALUE', (t) => {
  t.deepEqual(parseNamespaceLabelFlag('shop:a.io/b=c'), { namespace: 'shop', key: 'a.io/b', value: 'c' });
  t.deepEqual(parseNamespaceLabelFlag('shop:empty='), { namespace: 'shop', key: 'empty', value: '' });
  t.regex(parseNamespaceLabelFlag('noseparator') as string, /expected NAMESPACE:KEY=VALUE/);
  t.regex(parseNamespaceLabelFlag('shop:k=bad value') as string, /label value/);
});

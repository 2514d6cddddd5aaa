import test from 'ava';
import { addQuantities, formatQuantity, parseQuantity, quantityAtMost, sameQuantity } from './quantity.js';

const sum = (...texts: string[]) => formatQuantity(texts.map((t) => parseQuantity(t)!).reduce(addQuantities));

test('sums are exact and written in the canonical suffixes', (t) => {
  const table: [string[], string][] = [
    [['1', '10m'], '1010m'],
    [['100m', '900m'], '1'],
    [['1Gi', '64Mi'], '1088Mi'],
    [['512Mi', '512Mi'], '1Gi'],
    [['1G', '500M'], '1500M'],
    [['0.5', '250m'], '750m'],
    [['1Gi', '1'], '1073741825'],
    [['2e3', '1k'], '3k'],
    [['1u', '1n'], '1001n'],
    [['0', '0'], '0'],
    [['1.5Gi', '0.5Gi'], '2Gi'],
  ];
  for (const [parts, expected] of table) t.is(sum(...parts), expected, parts.join(' + '));
});

test('a value finer than a nano is rounded up; non-quantities are refused', (t) => {
  t.is(formatQuantity({ num: 1n, den: 10n ** 10n, binary: false }), '1n');
  for (const text of ['', 'abc', '1Kb', '1.2.3', 'Mi', '1e1000', 'x'.repeat(70)]) t.is(parseQuantity(text), undefined, text);
  t.true(quantityAtMost(parseQuantity('999m')!, parseQuantity('1')!));
  t.false(quantityAtMost(parseQuantity('1025Mi')!, parseQuantity('1Gi')!));
});

test('a value finer than 1n is rounded up to the next nano, away from zero, as the API server reads it', (t) => {
  const q = (text: string) => parseQuantity(text)!;
  t.true(sameQuantity('0.0999999999999', '100m'));
  t.true(sameQuantity('33554431.9999999999', '32Mi'));
  t.true(sameQuantity('0.0000000001', '1n'));
  t.true(sameQuantity('-0.0000000001', '-1n'));
  t.true(sameQuantity('1e-10', '1n'));
  t.true(sameQuantity('0.0000000001Ki', '103n'));
  // Nine decimals and fewer stay exact.
  t.false(sameQuantity('0.099999999', '100m'));
  t.true(quantityAtMost(q('0.099999999'), q('100m')));
  t.false(quantityAtMost(q('0.0999999999999'), q('99999999n')));
});

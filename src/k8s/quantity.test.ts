import test from 'ava';
import { addQuantities, formatQuantity, parseQuantity, quantityAtMost } from './quantity.js';

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

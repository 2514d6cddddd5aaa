import test from 'ava';
import { SelectorError } from '../errors.js';
import { matches, parseSelector, requirementPhrase } from './selector.js';

const labels = { app: 'web', tier: 'frontend', empty: '' };

// [title, selector, labels, expected]
const table: [string, unknown, Record<string, string>, boolean][] = [
  ['absent selector matches everything', undefined, labels, true],
  ['null selector matches everything', null, labels, true],
  ['empty selector matches everything', {}, labels, true],
  ['empty selector matches no labels', {}, {}, true],
  ['matchLabels equal', { matchLabels: { app: 'web' } }, labels, true],
  ['matchLabels different value', { matchLabels: { app: 'db' } }, labels, false],
  ['matchLabels absent key', { matchLabels: { zone: 'a' } }, labels, false],
  ['matchLabels empty value matches empty', { matchLabels: { empty: '' } }, labels, true],
  ['matchLabels all ANDed', { matchLabels: { app: 'web', tier: 'backend' } }, labels, false],
  ['In present value', { matchExpressions: [{ key: 'app', operator: 'In', values: ['db', 'web'] }] }, labels, true],
  ['In other value', { matchExpressions: [{ key: 'app', operator: 'In', values: ['db'] }] }, labels, false],
  ['In absent key', { matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }] }, labels, false],
  ['NotIn present other value', { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['db'] }] }, labels, true],
  ['NotIn present listed value', { matchExpressions: [{ key: 'app', operator: 'NotIn', values: ['web'] }] }, labels, false],
  ['NotIn absent key matches', { matchExpressions: [{ key: 'zone', operator: 'NotIn', values: ['a'] }] }, labels, true],
  ['Exists present', { matchExpressions: [{ key: 'app', operator: 'Exists' }] }, labels, true],
  ['Exists present with empty value', { matchExpressions: [{ key: 'empty', operator: 'Exists' }] }, labels, true],
  ['Exists absent', { matchExpressions: [{ key: 'zone', operator: 'Exists' }] }, labels, false],
  ['DoesNotExist absent', { matchExpressions: [{ key: 'zone', operator: 'DoesNotExist' }] }, labels, true],
  ['DoesNotExist present', { matchExpressions: [{ key: 'app', operator: 'DoesNotExist' }] }, labels, false],
  ['DoesNotExist present empty value', { matchExpressions: [{ key: 'empty', operator: 'DoesNotExist' }] }, labels, false],
  [
    'matchLabels and expressions ANDed',
    { matchLabels: { app: 'web' }, matchExpressions: [{ key: 'tier', operator: 'In', values: ['backend'] }] },
    labels,
    false,
  ],
  ['prefixed key', { matchLabels: { 'app.kubernetes.io/name': 'x' } }, { 'app.kubernetes.io/name': 'x' }, true],
  ['values may be null for Exists', { matchExpressions: [{ key: 'app', operator: 'Exists', values: null }] }, labels, true],
];

for (const [title, raw, input, expected] of table) {
  test(`matches: ${title}`, (t) => {
    t.is(matches(parseSelector(raw), input), expected);
  });
}

// [title, selector, field named in the error, message fragment]
const invalid: [string, unknown, string, string][] = [
  [
    'lowercase operator',
    { matchExpressions: [{ key: 'a', operator: 'in', values: ['x'] }] },
    'matchExpressions[0].operator',
    'is not a valid label selector operator',
  ],
  [
    'Gt operator',
    { matchExpressions: [{ key: 'a', operator: 'Gt', values: ['1'] }] },
    'matchExpressions[0].operator',
    'is not a valid label selector operator',
  ],
  ['In without values', { matchExpressions: [{ key: 'a', operator: 'In', values: [] }] }, 'matchExpressions[0].values', 'must be non-empty'],
  ['NotIn without values', { matchExpressions: [{ key: 'a', operator: 'NotIn' }] }, 'matchExpressions[0].values', 'must be non-empty'],
  ['Exists with values', { matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] }, 'matchExpressions[0].values', 'must be empty'],
  ['DoesNotExist with values', { matchExpressions: [{ key: 'a', operator: 'DoesNotExist', values: ['x'] }] }, 'matchExpressions[0].values', 'must be empty'],
  ['key with spaces', { matchLabels: { 'a b': 'x' } }, 'matchLabels["a b"]', 'name part'],
  ['key with empty prefix', { matchExpressions: [{ key: '/a', operator: 'Exists' }] }, 'matchExpressions[0].key', 'empty prefix'],
  ['key with uppercase prefix', { matchExpressions: [{ key: 'Example.com/a', operator: 'Exists' }] }, 'matchExpressions[0].key', 'DNS-1123'],
  ['key name too long', { matchExpressions: [{ key: 'a'.repeat(64), operator: 'Exists' }] }, 'matchExpressions[0].key', 'at most 63'],
  ['missing key', { matchExpressions: [{ operator: 'Exists' }] }, 'matchExpressions[0].key', 'is required'],
  ['value too long', { matchLabels: { a: 'x'.repeat(64) } }, 'matchLabels["a"]', 'at most 63'],
  ['value with slash', { matchExpressions: [{ key: 'a', operator: 'In', values: ['x/y'] }] }, 'matchExpressions[0].values[0]', 'alphanumerics'],
  ['non-string value', { matchLabels: { a: true } }, 'matchLabels["a"]', 'must be a string'],
  ['unknown field', { matchLabel: { a: 'b' } }, 'matchLabel', 'unknown field'],
  ['expressions not a list', { matchExpressions: { key: 'a' } }, 'matchExpressions', 'must be a list'],
  ['selector not an object', 'app=web', '', 'must be an object'],
];

for (const [title, raw, field, fragment] of invalid) {
  test(`refuses: ${title}`, (t) => {
    const err = t.throws(() => parseSelector(raw), { instanceOf: SelectorError });
    t.is(err?.code, 'ERR_SELECTOR');
    t.is(err?.field, field);
    t.true(err?.message.includes(fragment), err?.message);
  });
}

test('an empty-string value is a valid label value', (t) => {
  t.notThrows(() => parseSelector({ matchExpressions: [{ key: 'a', operator: 'In', values: [''] }] }));
});

test('a requirement as a sentence says what it needs: Exists and DoesNotExist in words, the rest as a selector writes them', (t) => {
  const phrase = (key: string, operator: string, values?: string[]) =>
    requirementPhrase(parseSelector({ matchExpressions: [{ key, operator, ...(values ? { values } : {}) }] }).requirements[0]!);
  t.is(phrase('team', 'Exists'), 'a label team (any value)');
  t.is(phrase('canary', 'DoesNotExist'), 'no label canary');
  t.is(phrase('team', 'In', ['shop']), 'team=shop');
  t.is(phrase('team', 'In', ['shop', 'payments']), 'team in (payments,shop)');
  t.is(phrase('team', 'NotIn', ['shop']), 'team notin (shop)');
});

/** Declared parameters: every type and rule, with values that pass and values that fail. */
import test from 'ava';
import { checkValue, compileDeclaration, durationMs, type ParamDeclaration } from './parameters.js';

function declare(raw: Record<string, unknown>): { declaration?: ParamDeclaration; problems: string[] } {
  const problems: string[] = [];
  const declaration = compileDeclaration('p', raw, (field, message) => problems.push(`${field}: ${message}`));
  return { ...(declaration ? { declaration } : {}), problems };
}

// [declaration, passing values with what they become, failing values with the rule named]
const table: [Record<string, unknown>, [string, unknown][], [string, string][]][] = [
  [
    { default: 'a', type: 'string', maxLength: 3 },
    [
      ['abc', 'abc'],
      ['', ''],
    ],
    [['abcd', 'must be at most 3 characters']],
  ],
  [
    { default: 'v1', pattern: 'v[0-9]+' },
    [['v12', 'v12']],
    [
      ['v1x', 'must match v[0-9]+'],
      ['xv1', 'must match v[0-9]+'],
    ],
  ],
  [
    { default: 5, type: 'integer', min: 1, max: 10 },
    [
      ['7', 7],
      ['10', 10],
    ],
    [
      ['11', 'must be at most 10'],
      ['0', 'must be at least 1'],
      ['1.5', 'must be an integer'],
      ['', 'must be an integer'],
    ],
  ],
  [
    { default: 0.5, type: 'number', max: 1 },
    [
      ['0.25', 0.25],
      ['1e-3', 0.001],
    ],
    [
      ['2', 'must be at most 1'],
      ['NaN', 'must be a number'],
      ['1,5', 'must be a number'],
    ],
  ],
  [
    { default: true, type: 'boolean' },
    [
      ['false', false],
      ['true', true],
    ],
    [
      ['yes', 'must be true or false'],
      ['True', 'must be true or false'],
    ],
  ],
  [
    { default: '64Mi', type: 'quantity', min: '16Mi', max: '1Gi' },
    [
      ['128Mi', '128Mi'],
      ['1Gi', '1Gi'],
      ['0.5Gi', '0.5Gi'],
    ],
    [
      ['2Gi', 'must be at most 1Gi'],
      ['1Mi', 'must be at least 16Mi'],
      ['lots', 'must be a Kubernetes quantity (such as 100m, 64Mi, 1.5)'],
    ],
  ],
  [
    { default: '30s', type: 'duration', max: '5m' },
    [
      ['1m30s', '1m30s'],
      ['500ms', '500ms'],
    ],
    [
      ['6m', 'must be at most 5m'],
      ['30', 'must be a duration (such as 30s, 1m30s, 500ms)'],
    ],
  ],
  [
    { default: 'info', type: 'enum', values: ['debug', 'info'] },
    [['debug', 'debug']],
    [
      ['INFO', 'must be one of debug, info'],
      ['trace', 'must be one of debug, info'],
    ],
  ],
];

for (const [raw, passing, failing] of table) {
  test(`${String(raw.type ?? 'string')} ${JSON.stringify(raw)}`, (t) => {
    const { declaration, problems } = declare({ override: 'pod', ...raw });
    t.deepEqual(problems, []);
    for (const [text, value] of passing) t.deepEqual(checkValue(declaration!, text), { value }, text);
    for (const [text, problem] of failing) t.deepEqual(checkValue(declaration!, text), { problem }, text);
    t.deepEqual(checkValue(declaration!, 'x'.repeat(1025)), { problem: 'is longer than 1024 characters' });
  });
}

test('declarations that cannot work are refused, each naming its field', (t) => {
  const cases: [Record<string, unknown>, string[]][] = [
    [{ type: 'integer' }, ['parameters.p.default: is required: a string, number or boolean']],
    [{ default: 'x', type: 'color' }, ['parameters.p.type: must be one of string, integer, number, boolean, quantity, duration, enum']],
    [{ default: 'x', override: 'cluster' }, ['parameters.p.override: must be one of none, namespace, pod']],
    [{ default: 'x', type: 'enum' }, ['parameters.p.values: an enum needs a list of values']],
    [{ default: 'x', values: ['x'] }, ['parameters.p.values: only an enum has values']],
    [{ default: 'x', pattern: '(' }, ['parameters.p.pattern: is not a valid RE2 regular expression: Invalid regular expression: /(/u: missing ): (']],
    [
      { default: 'aa', pattern: '(a)\\1' },
      ['parameters.p.pattern: is not a valid RE2 regular expression: Invalid regular expression: /(a)\\1/u: invalid escape sequence: \\1'],
    ],
    [{ default: '1.10', type: 'enum', values: [1.1, '1.2'] }, ['parameters.p.values: enum values must be strings (quote them in YAML: "1.10", "off")']],
    [{ default: 'x', min: 1 }, ['parameters.p.min: only integer, number, quantity and duration parameters have min']],
    [{ default: 20, type: 'integer', max: 10 }, ['parameters.p.default: must be at most 10']],
    [{ default: '1Gi', type: 'quantity', max: 'big' }, ['parameters.p.max: must be a Kubernetes quantity (such as 100m, 64Mi, 1.5)']],
    [{ default: 'x', maxLength: 0 }, ['parameters.p.maxLength: must be a positive integer']],
    [
      { default: 'x', colour: 'red' },
      ['parameters.p.colour: unknown field (expected one of default, type, pattern, min, max, maxLength, description, override, values)'],
    ],
  ];
  for (const [raw, expected] of cases) t.deepEqual(declare(raw).problems, expected, JSON.stringify(raw));
  // An overridable parameter is named as an annotation key's name part.
  const problems: string[] = [];
  compileDeclaration('_x', { default: 'a', override: 'pod' }, (f, m) => problems.push(`${f}: ${m}`));
  t.is(problems.length, 1);
});

test('durations as Go writes them', (t) => {
  t.is(durationMs('1h2m3s'), 3_723_000);
  t.is(durationMs('1.5s'), 1500);
  t.is(durationMs('250us'), 0.25);
  t.is(durationMs('1d'), undefined);
  t.is(durationMs(''), undefined);
});

test('a pattern runs in linear time: a value made to make a backtracking engine spin is simply refused', (t) => {
  const { declaration } = declare({ default: 'a', pattern: '([a-z0-9]+-?)*[a-z0-9](\\.[a-z0-9]+)*', override: 'pod' });
  // 1,000 characters: with backtracking this would not finish; here it is an answer.
  t.deepEqual(checkValue(declaration!, `${'a'.repeat(1000)}_`), { problem: 'must match ([a-z0-9]+-?)*[a-z0-9](\\.[a-z0-9]+)*' });
  t.deepEqual(checkValue(declaration!, 'web-1.example'), { value: 'web-1.example' });
});

test('a pattern stays anchored whatever its text: one that closes the anchoring group is refused', (t) => {
  // `^(?:1\.0)|(.*)$` would match any value: the pattern alone does not compile, so it is refused.
  const { problems } = declare({ default: '1.0', pattern: '1\\.0)|(.*' });
  t.is(problems.length, 1);
  t.regex(problems[0]!, /^parameters\.p\.pattern: is not a valid RE2 regular expression: .*missing \)|unexpected \)/);
  // A well-formed alternation is anchored as a whole: a suffix is not a match.
  const { declaration } = declare({ default: '1.0', pattern: '1\\.0|1\\.1', override: 'pod' });
  t.deepEqual(checkValue(declaration!, '1.0-debug-with-shell'), { problem: 'must match 1\\.0|1\\.1' });
  t.deepEqual(checkValue(declaration!, 'x1.1'), { problem: 'must match 1\\.0|1\\.1' });
  t.deepEqual(checkValue(declaration!, '1.1'), { value: '1.1' });
});

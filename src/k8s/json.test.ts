import test from 'ava';
import { isDeepStrictEqual } from 'node:util';
import fc from 'fast-check';
import { compileKeyPaths, scanJsonText, type JsonTextScan, mergePatchBetween } from './json.js';

const paths = compileKeyPaths([
  ['request', 'uid'],
  ['request', 'object', 'metadata', 'managedFields'],
  ['request', 'object', 'metadata', 'uid'],
]);

const limits = { depth: 1000, containers: 200_000 };

const scan = (text: string): JsonTextScan => scanJsonText(Buffer.from(text), limits, paths);

/** The spans of a scan as [path, text] pairs. */
function located(text: string): [string, string][] {
  const bytes = Buffer.from(text);
  const { spans } = scanJsonText(bytes, limits, paths);
  const out: [string, string][] = [];
  for (let s = 0; s < spans.length; s += 3) out.push([paths.leaves[spans[s]!]!.join('.'), bytes.toString('utf8', spans[s + 1], spans[s + 2]).trim()]);
  return out;
}

test('finds the values at the followed paths, whatever they hold', (t) => {
  const text = '{"request":{"uid":"a-1","object":{"metadata":{"uid":"x","managedFields":[{"f":{"g":[1,{"h":","}]}}],"name":"n"}}}}';
  t.deepEqual(located(text), [
    ['request.uid', '"a-1"'],
    ['request.object.metadata.uid', '"x"'],
    ['request.object.metadata.managedFields', '[{"f":{"g":[1,{"h":","}]}}]'],
  ]);
  // Indented text: the spans hold the same values.
  t.deepEqual(
    located(JSON.stringify(JSON.parse(text), null, 2)).map(([p, v]) => [p, JSON.parse(v)]),
    located(text).map(([p, v]) => [p, JSON.parse(v)]),
  );
});

test('keys elsewhere are not followed: in arrays, at other depths, in string values', (t) => {
  t.deepEqual(located('{"request":[{"uid":"a"}]}'), []);
  t.deepEqual(located('{"uid":"a","x":{"request":{"uid":"b"}}}'), []);
  t.deepEqual(located('{"request":{"note":"\\"}{,:\\\\","uid":"b"}}'), [['request.uid', '"b"']]);
  t.deepEqual(located('{"request":"{\\"uid\\":1}","other":{"uid":2}}'), []);
  t.deepEqual(located('{"request":{"object":{"spec":{"metadata":{"uid":"deep"}}}}}'), []);
});

test('escaped keys and repeated followed keys are reported; escapes in values are not', (t) => {
  t.true(scan('{"requ\\u0065st":{"uid":"a"}}').escapedKeys);
  t.false(scan('{"request":{"uid":"a\\"b"}}').escapedKeys);
  t.false(scan('{"request":{"object":{"metadata":{"managedFields":[{"fieldsV1":{"k:{\\"name\\":\\"app\\"}":{}}}]}}}}').escapedKeys, 'inside a followed value');
  t.true(scan('{"request":{"object":{"metadata":{"managedFields":[],"l\\u0061bels":{}}}}}').escapedKeys, 'beside a followed value');
  t.true(scan('{"request":{"uid":"a"},"request":{"uid":"b"}}').repeatedKeys);
  t.true(scan('{"request":{"uid":"a","uid":"b"}}').repeatedKeys);
  t.false(scan('{"request":{"uid":"a"},"other":{"uid":"b"}}').repeatedKeys);
});

test('text that is not JSON is scanned without a crash, and names no value without a colon', (t) => {
  for (const text of ['{"request":{"uid"}}', '{"request":{"uid":', '"', '}}}]]]', '{"request":{"uid":"a', '{"a":1}{"request":{"uid":"b"}}']) {
    t.notThrows(() => scan(text), text);
  }
  t.deepEqual(located('{"request":{"uid"}}'), []);
  t.deepEqual(located('{"request":{"uid":"a'), [], 'a value the text never ends is not located');
});

test('key paths are plain ASCII, and a leaf is not followed further', (t) => {
  t.throws(() => compileKeyPaths([['a"b']]));
  t.throws(() => compileKeyPaths([['ü']]));
  t.throws(() => compileKeyPaths([['a'], ['a', 'b']]));
});

const keyArbitrary = fc.oneof(fc.constantFrom('request', 'object', 'metadata', 'uid', 'managedFields', 'x'), fc.string({ maxLength: 6 }));
const valueArbitrary = fc.jsonValue({ maxDepth: 3 });
const objectArbitrary = (inner: fc.Arbitrary<unknown>) => fc.dictionary(keyArbitrary, fc.oneof(valueArbitrary, inner), { maxKeys: 4 });

test('property: for any JSON object, the spans hold the values JSON.parse finds at the paths', (t) => {
  const treeArbitrary = fc.letrec((tie) => ({ node: objectArbitrary(tie('node')) })).node;
  t.notThrows(() =>
    fc.assert(
      fc.property(treeArbitrary, fc.constantFrom(undefined, 0, 1, 2, '\t'), (tree, indent) => {
        const text = JSON.stringify(tree, null, indent);
        const parsed = JSON.parse(text) as Record<string, any>;
        const result = scan(text);
        // Keys inside a followed leaf's value are cut out with it: they are not reported.
        const keys: string[] = [];
        const leafPaths = new Set(paths.leaves.map((p) => p.join('\0')));
        const collect = (v: unknown, path: readonly string[] | undefined) => {
          if (Array.isArray(v)) v.forEach((item) => collect(item, undefined));
          else if (typeof v === 'object' && v !== null)
            for (const [k, child] of Object.entries(v)) {
              keys.push(k);
              const childPath = path && [...path, k];
              if (!childPath || !leafPaths.has(childPath.join('\0'))) collect(child, childPath);
            }
        };
        collect(parsed, []);
        if (result.escapedKeys !== keys.some((k) => JSON.stringify(k) !== `"${k}"`)) return false;
        if (result.repeatedKeys) return false; // JSON.stringify writes no key twice
        const expected: [string, unknown][] = [];
        const at = (path: readonly string[]) =>
          path.reduce<unknown>(
            (v, k) => (typeof v === 'object' && v !== null && !Array.isArray(v) && Object.hasOwn(v, k) ? (v as Record<string, unknown>)[k] : undefined),
            parsed,
          );
        for (const path of paths.leaves) {
          const value = at(path);
          const parent = at(path.slice(0, -1));
          if (typeof parent === 'object' && parent !== null && !Array.isArray(parent) && Object.hasOwn(parent, path.at(-1)!))
            expected.push([path.join('.'), value]);
        }
        const found = located(text).map(([p, v]) => [p, JSON.parse(v)] as [string, unknown]);
        const sort = (list: [string, unknown][]) => [...list].sort((a, b) => a[0].localeCompare(b[0]));
        return isDeepStrictEqual(sort(found), sort(expected));
      }),
      { numRuns: 2000, seed: 7 },
    ),
  );
});

test('a close with nothing open stops the scan: the text is not JSON', (t) => {
  const closes = scanJsonText(Buffer.alloc(1_000_000, 0x5d), limits, paths);
  t.true(closes.unbalanced);
  t.is(closes.depth, 0);
  t.true(scan('{"a":1}}').unbalanced);
  t.true(scan('}{').unbalanced);
  t.false(scan('{"a":[1,{}]}').unbalanced);
  t.false(scan('"}]"').unbalanced, 'brackets in a string are not brackets');
});

test('once a followed key repeats, no more spans are kept', (t) => {
  const text = `{"request":{${Array.from({ length: 1000 }, (_, i) => `"uid":${i}`).join(',')}}}`;
  const result = scan(text);
  t.true(result.repeatedKeys);
  t.deepEqual(located(text), [['request.uid', '0']]);
});

test('keys are counted in all and per object, and the scan stops once either passes its limit', (t) => {
  const text = '{"a":{"x":1,"y":2,"z":3},"b":[{"p":1}],"c":{}}';
  const counted = scanJsonText(Buffer.from(text), limits);
  t.is(counted.keys, 7);
  t.is(counted.widest, 3);
  t.is(scanJsonText(Buffer.from(text), { ...limits, keysPerObject: 2 }).widest, 3);
  t.is(scanJsonText(Buffer.from(text), { ...limits, keys: 4 }).keys, 5);
  // Strings that are values are not keys; a key with a colon in its text is one key.
  t.is(scanJsonText(Buffer.from('{"a":"b","c":["d","e"],"f:g":{}}'), limits).keys, 3);
});

test('mergePatchBetween: a key the target lacks is null at any depth, lists and values whole, __proto__ a key like any other', (t) => {
  const from = JSON.parse('{"state":"x","preflight":{"state":"failed","failure":"refused"},"conditions":[1,2],"__proto__":{"a":1},"gone":{"b":2}}');
  const patch = mergePatchBetween(from, { state: 'y', preflight: { state: 'passed' }, conditions: [3] });
  t.is(JSON.stringify(patch), '{"__proto__":null,"gone":null,"state":"y","preflight":{"failure":null,"state":"passed"},"conditions":[3]}');
  t.is(({} as Record<string, unknown>).a, undefined);
  // Nothing stored: the target itself.
  t.deepEqual({ ...mergePatchBetween(undefined, { a: { b: 1 } }) }, { a: { b: 1 } });
});

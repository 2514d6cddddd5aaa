import test from 'ava';
import { isJsonMediaType, jsonBody, jsonDepthExceeds } from './body.js';
import { RequestError } from '../errors.js';

const bytes = (s: string) => Buffer.from(s);

test('depth counts arrays and objects and skips strings, escapes included', (t) => {
  t.false(jsonDepthExceeds(bytes('{"a":[1,{"b":2}]}'), 3));
  t.true(jsonDepthExceeds(bytes('{"a":[1,{"b":2}]}'), 2));
  t.false(jsonDepthExceeds(bytes('{"a":"[[[[{{{{"}'), 1));
  t.false(jsonDepthExceeds(bytes('{"a":"\\"[[[[\\\\"}'), 1));
  t.true(jsonDepthExceeds(bytes(`${'['.repeat(1001)}${']'.repeat(1001)}`), 1000));
  t.false(jsonDepthExceeds(bytes(`${'['.repeat(1000)}${']'.repeat(1000)}`), 1000));
  t.false(jsonDepthExceeds(bytes('{"ü":"[ÿ"}'), 1));
});

test('media types: application/json with parameters, any case', (t) => {
  t.true(isJsonMediaType('application/json'));
  t.true(isJsonMediaType('Application/JSON; charset=utf-8'));
  t.false(isJsonMediaType('application/jsonx'));
  t.false(isJsonMediaType('text/json'));
  t.false(isJsonMediaType(undefined));
  t.false(isJsonMediaType(''));
});

test('a body that closes a bracket it never opened is refused before parsing', (t) => {
  const error = t.throws(() => jsonBody(Buffer.alloc(7 * 1024 * 1024, 0x5d)));
  t.is((error as RequestError).status, 400);
  t.is((error as RequestError).code, 'ERR_MALFORMED_JSON');
  t.regex(error!.message, /closes a bracket it never opened/);
  t.notThrows(() => jsonBody(Buffer.from('{"a":"]}"}')));
});

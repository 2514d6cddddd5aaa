import test from 'ava';
import { cut, printable, printableLine, quote } from './quote.js';

test('printable: C0 (but tab and newline), DEL, C1, bidi controls and line separators become visible escapes', (t) => {
  t.is(printable('a\u202eb'), 'a\\u202eb');
  t.is(printable('\u0000\u0007\r\u001b\u007f\u0085\u009f'), '\\u0000\\u0007\\u000d\\u001b\\u007f\\u0085\\u009f');
  t.is(printable('\u061c\u200e\u200f\u2028\u2029\u202a\u202d\u2066\u2069'), '\\u061c\\u200e\\u200f\\u2028\\u2029\\u202a\\u202d\\u2066\\u2069');
  t.is(printable('tab\tand\nnewline stay; é, 日本, 😀 too'), 'tab\tand\nnewline stay; é, 日本, 😀 too');
  // In JSON text the escape is the same value.
  const value = { name: 'x\u202e\u2028\u0085' };
  t.deepEqual(JSON.parse(printable(JSON.stringify(value))), value);
});

test('half of a surrogate pair alone is escaped; a whole pair is kept', (t) => {
  t.is(printable('a\ud83d'), 'a\\ud83d');
  t.is(printable('\ude80b'), '\\ude80b');
  t.is(printable('\ude80\ud83d'), '\\ude80\\ud83d');
  t.is(printable('🚀'), '🚀');
  t.notRegex(printable('x\ud800y'), /[\ud800-\udfff]/);
});

test('printableLine: one line, tabs and newlines escaped too', (t) => {
  t.is(printableLine('a\tb\nc\u202e'), 'a\\u0009b\\u000ac\\u202e');
});

test('quote and cut escape what they print, after cutting', (t) => {
  t.is(quote('proxy\u202e'), '"proxy\\u202e"');
  t.is(quote('a\u0085'.repeat(300), 4), '"a\\u0085a\\u0085"… (+596 characters)');
  t.is(cut('ns\u2028x'), 'ns\\u2028x');
  t.is(cut('\u202e'.repeat(10), 2), '\\u202e\\u202e… (+8 characters)');
});

test('a cut never splits a character beyond the basic plane in two', (t) => {
  t.is(cut('ab🚀cd', 3), 'ab… (+4 characters)');
  t.is(cut('ab🚀cd', 4), 'ab🚀… (+2 characters)');
  t.is(quote('ab🚀cd', 3), '"ab"… (+4 characters)');
  t.is(cut('abc', 3), 'abc');
});

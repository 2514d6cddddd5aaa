import test from 'ava';
import { goSpaceClass, trimSpace } from './space.js';

test('trimSpace removes what Go’s strings.TrimSpace removes, and nothing else', (t) => {
  t.is(trimSpace(' \t\n\v\f\r proxy \u0085\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000'), 'proxy');
  // JavaScript's trim removes U+FEFF and keeps U+0085; Go does the opposite.
  t.is(trimSpace('proxy\ufeff'), 'proxy\ufeff');
  t.is('proxy\ufeff'.trim(), 'proxy');
  t.is(trimSpace('\u0085proxy'), 'proxy');
  t.is('\u0085proxy'.trim(), '\u0085proxy');
  // Inside, nothing is touched; a zero-width space is no space to either.
  t.is(trimSpace(' a b\u0085c '), 'a b\u0085c');
  t.is(trimSpace('\u200bproxy'), '\u200bproxy');
  t.is(trimSpace(' \u0085 '), '');
});

test('the class is one RE2 and JavaScript read alike: the characters themselves and one range, no escape', (t) => {
  t.false(goSpaceClass.includes('\\'));
  t.is(goSpaceClass.split('-').length, 2);
  t.true(new RegExp(`^[${goSpaceClass}]$`).test('\u2005'));
  t.false(new RegExp(`^[${goSpaceClass}]$`).test('\ufeff'));
});

test('trimSpace walks in from each end only: a name with 200,000 spaces inside is returned as it is', (t) => {
  // A regular expression anchored at the end would try every position of the inner run (minutes for this one).
  const hostile = `logs${' '.repeat(200_000)}x`;
  t.is(trimSpace(hostile), hostile);
  t.is(trimSpace(`  ${hostile}\u0085`), hostile);
});

test('the set trimSpace uses is the class the policies embed', (t) => {
  for (let c = 0; c <= 0x3000; c++) {
    const ch = String.fromCharCode(c);
    t.is(trimSpace(`${ch}a`) === 'a', new RegExp(`^[${goSpaceClass}]$`).test(ch), `U+${c.toString(16).padStart(4, '0')}`);
  }
});

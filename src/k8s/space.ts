/**
 * White space as Kubernetes' Go code reads it (unicode.IsSpace, what strings.TrimSpace and CEL's
 * `trim()` remove): the injector trims the names of a pod's requested templates with it, so the
 * webhooks and the policies generated for the API server read a list alike. JavaScript's own
 * trim differs on two code points: it removes U+FEFF and keeps U+0085.
 */

/**
 * The code points of unicode.IsSpace as a regular expression class body: the characters
 * themselves and one range, which JavaScript and RE2 (CEL's `matches`) read alike (RE2 has no
 * `\u` escape).
 */
export const goSpaceClass = '\t\n\v\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000';

/** The same code points, for a linear trim (a regular expression anchored at the end is quadratic on a long inner run of spaces). */
const spaces: ReadonlySet<number> = new Set([
  0x09,
  0x0a,
  0x0b,
  0x0c,
  0x0d,
  0x20,
  0x85,
  0xa0,
  0x1680,
  ...range(0x2000, 0x200a),
  0x2028,
  0x2029,
  0x202f,
  0x205f,
  0x3000,
]);

function range(from: number, to: number): number[] {
  return Array.from({ length: to - from + 1 }, (_, i) => from + i);
}

/** `text` without leading and trailing white space, as Go's strings.TrimSpace removes it; linear in its length. */
export function trimSpace(text: string): string {
  let start = 0;
  let end = text.length;
  // Every code point of the set is a single UTF-16 unit.
  while (start < end && spaces.has(text.charCodeAt(start))) start++;
  while (end > start && spaces.has(text.charCodeAt(end - 1))) end--;
  return start === 0 && end === text.length ? text : text.slice(start, end);
}

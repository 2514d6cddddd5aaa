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

const edges = new RegExp(`^[${goSpaceClass}]+|[${goSpaceClass}]+$`, 'gu');

/** `text` without leading and trailing white space, as Go's strings.TrimSpace removes it. */
export function trimSpace(text: string): string {
  return text.replace(edges, '');
}

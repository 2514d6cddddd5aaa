/**
 * Quoting values that came from a request. A pod can hold a megabyte in any string, and
 * whatever we quote lands in a denial `kubectl` prints, a warning, or a log line: every quote
 * is cut to a few hundred characters and says how much it left out. Imports nothing.
 */

/**
 * Code points a terminal acts on, or reorders text by, that could make what a tenant wrote look
 * like something else on an operator's screen: C0 controls but tab and newline, DEL, C1
 * controls, the bidirectional marks, embeddings, overrides and isolates, and the line and
 * paragraph separators; and half of a surrogate pair alone (a cut in the middle of a character),
 * which is no text at all (the API server stores it as U+FFFD, so it would never read back the same).
 */
const unprintable =
  // eslint-disable-next-line no-control-regex -- the control characters are what it finds
  /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

const escapeCodePoint = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * `text` with every unprintable code point written as `\uXXXX`: visible on a terminal, and in
 * JSON text (where such code points stand only inside strings) the same value.
 */
export function printable(text: string): string {
  unprintable.lastIndex = 0;
  return unprintable.test(text) ? text.replace(unprintable, escapeCodePoint) : text;
}

/** `text` on one line: printable, and its tabs and newlines escaped too (a table's cell, whose row a newline would forge). */
export function printableLine(text: string): string {
  return printable(text).replace(/[\t\n]/g, escapeCodePoint);
}

/** Longest text kept from one quoted value. */
export const maxQuotedLength = 200;

/**
 * `value` as a JSON string literal of at most about `max` characters: `"abc…" (+1048376 characters)`.
 * Non-strings are quoted as their JSON text, cut the same way.
 */
export function quote(value: unknown, max = maxQuotedLength): string {
  let text: string;
  if (typeof value === 'string') text = value;
  else {
    try {
      text = JSON.stringify(value) ?? Object.prototype.toString.call(value);
    } catch {
      // Too deep to serialise, or an object whose toString throws: name its type only.
      text = Object.prototype.toString.call(value);
    }
    if (typeof value !== 'object' || value === null) return cut(text, max);
  }
  if (text.length <= max) return printable(JSON.stringify(text));
  const kept = head(text, max);
  return `${printable(JSON.stringify(kept))}… (+${text.length - kept.length} characters)`;
}

/** Plain text cut to `max` characters, saying how much was left out; unprintable code points escaped. */
export function cut(text: string, max = maxQuotedLength): string {
  if (text.length <= max) return printable(text);
  const kept = head(text, max);
  return `${printable(kept)}… (+${text.length - kept.length} characters)`;
}

/** The first `max` UTF-16 units of `text`, one fewer when the last would be half of a pair. */
function head(text: string, max: number): string {
  const code = text.charCodeAt(max - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? max - 1 : max);
}

/** The first `max` items of a list, each quoted, and how many more there were. */
export function quoteList(values: readonly unknown[], max = 5): string {
  const shown = values.slice(0, max).map((v) => quote(v, 80));
  return values.length > max ? `${shown.join(', ')} and ${values.length - max} more` : shown.join(', ');
}

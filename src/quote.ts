/**
 * Quoting values that came from a request. A pod can hold a megabyte in any string, and
 * whatever we quote lands in a denial `kubectl` prints, a warning, or a log line: every quote
 * is cut to a few hundred characters and says how much it left out. Imports nothing.
 */

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
  if (text.length <= max) return JSON.stringify(text);
  return `${JSON.stringify(text.slice(0, max))}… (+${text.length - max} characters)`;
}

/** Plain text cut to `max` characters, saying how much was left out. */
export function cut(text: string, max = maxQuotedLength): string {
  return text.length <= max ? text : `${text.slice(0, max)}… (+${text.length - max} characters)`;
}

/** The first `max` items of a list, each quoted, and how many more there were. */
export function quoteList(values: readonly unknown[], max = 5): string {
  const shown = values.slice(0, max).map((v) => quote(v, 80));
  return values.length > max ? `${shown.join(', ')} and ${values.length - max} more` : shown.join(', ');
}

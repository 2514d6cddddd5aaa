/**
 * How upstream's checks read a pod and word their details: Go's JSON decoding (a null field is
 * the zero value), its `%q`, its string order, and pod-security-admission's helpers
 * (`joinQuote`, `pluralize`, sorted sets). Shared by every check, so that each says what the
 * API server says.
 */
import { isJsonObject, type JsonObject } from '../json.js';

/**
 * A value from the pod as Go's JSON decoding leaves it for upstream's checks: a string as it
 * is, an absent or null field as the zero value `""`. Anything else would not decode in the API
 * server (the pod is refused before Pod Security runs); it is named by its type.
 */
export function str(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined || value === null) return '';
  return typeof value === 'number' || typeof value === 'boolean' ? String(value) : `(a ${Array.isArray(value) ? 'list' : typeof value})`;
}

/** Set in Go's sense: a pointer field that is not nil (JSON `null` decodes to nil). */
export function present(value: unknown): boolean {
  return value !== undefined && value !== null;
}

export function object(value: unknown): JsonObject {
  return isJsonObject(value) ? value : {};
}

/** A list of structs as Go decodes it: a `null` item is the zero value (an empty object). */
export function list(value: unknown): JsonObject[] {
  if (!Array.isArray(value)) return [];
  const out: JsonObject[] = [];
  for (const item of value) {
    if (isJsonObject(item)) out.push(item);
    else if (item === null) out.push({});
  }
  return out;
}

/** A list of strings (capabilities): each item as `str` reads it. */
export function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.map(str) : [];
}

/** Upstream's `joinQuote`: each item in double quotes, nothing escaped. */
export function joinQuote(items: readonly string[]): string {
  return items.length === 0 ? '' : `"${items.join('", "')}"`;
}

export function pluralize(singular: string, plural: string, count: number): string {
  return count === 1 ? singular : plural;
}

/**
 * Go's string order (`sort.Strings`, `sets.List`): by UTF-8 bytes, which is code point order.
 * UTF-16 code units agree except that a surrogate (a code point above U+FFFF) sorts after U+E000–U+FFFF.
 */
export function goOrder(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const surrogateX = x >= 0xd800 && x <= 0xdfff;
    const surrogateY = y >= 0xd800 && y <= 0xdfff;
    if (surrogateX !== surrogateY) return surrogateX ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/** `sets.NewString(items...).List()`: distinct, in Go's order. */
export function sortedSet(items: Iterable<string>): string[] {
  return [...new Set(items)].sort(goOrder);
}

const printable = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;
const shortEscapes: Readonly<Record<number, string>> = { 7: '\\a', 8: '\\b', 9: '\\t', 10: '\\n', 11: '\\v', 12: '\\f', 13: '\\r' };

/** Go's `%q` of a string (`strconv.Quote`). */
export function goQuote(text: string): string {
  let out = '"';
  for (const char of text) {
    const code = char.codePointAt(0)!;
    // A lone surrogate is U+FFFD in Go (its JSON decoder replaces it), which it prints as is.
    if (char === '"' || char === '\\') out += `\\${char}`;
    else if (code >= 0xd800 && code <= 0xdfff) out += '\ufffd';
    else if (printable.test(char)) out += char;
    else if (shortEscapes[code] !== undefined) out += shortEscapes[code];
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else if (code < 0x10000) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else out += `\\U${code.toString(16).padStart(8, '0')}`;
  }
  return `${out}"`;
}

/** A container's or a volume's name. */
export const name = (item: JsonObject): string => str(item.name);

/** `container "a"` / `containers "a", "b"`. */
export function containerList(containers: readonly JsonObject[]): string {
  return `${pluralize('container', 'containers', containers.length)} ${joinQuote(containers.map(name))}`;
}

/** `pod and containers "a", "b"` / `pod` / `container "a"`: who set a forbidden value. */
export function setters(pod: boolean, containers: readonly JsonObject[]): string[] {
  return [...(pod ? ['pod'] : []), ...(containers.length > 0 ? [containerList(containers)] : [])];
}

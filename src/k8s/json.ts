/** JSON as it comes from a request or a template file: the object type, its guard, and freezing. */

/** A JSON object as found in a pod or template. */
export type JsonObject = Record<string, unknown>;

/** True for a JSON object (not an array, not null). */
export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Freezes a JSON value and everything in it. Frozen values are shared between reviews (rendered
 * sidecars) and their JSON text is cached once (inject/patch.ts): freezing is that promise.
 */
export function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    for (const key of Object.keys(value)) deepFreeze((value as JsonObject)[key]);
    Object.freeze(value);
  }
  return value;
}

/** What one pass over JSON text finds (scanJsonText). */
export interface JsonTextScan {
  /** Deepest nesting reached, stopping at one past the limit. */
  readonly depth: number;
  /** Objects and arrays counted, stopping at one past the limit. */
  readonly containers: number;
  /**
   * True when no number is written in exponent form or as a negative zero: such a number
   * (`1e400` parses as Infinity) is not written back as sent by JSON.stringify (`null`, `0`).
   */
  readonly plainNumbers: boolean;
}

/**
 * One pass over JSON text, strings skipped: its nesting and object count (stopping as soon as
 * either passes its limit), and whether its numbers are written plainly. About 4 µs for a 5 KB
 * review; the text need not be valid JSON.
 */
export function scanJsonText(bytes: Uint8Array, maxDepth: number, maxContainers: number): JsonTextScan {
  let depth = 0;
  let deepest = 0;
  let containers = 0;
  let plainNumbers = true;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (inString) {
      if (b === 0x5c)
        i++; // backslash: skip the escaped byte
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if (b === 0x5b || b === 0x7b) {
      if (++depth > deepest) deepest = depth;
      if (deepest > maxDepth || ++containers > maxContainers) return { depth: deepest, containers, plainNumbers };
    } else if (b === 0x5d || b === 0x7d) depth--;
    else if (plainNumbers && (b === 0x65 || b === 0x45)) {
      // An e after a digit or a point is an exponent (the e of true and false follows a letter).
      const before = bytes[i - 1];
      if (before !== undefined && ((before >= 0x30 && before <= 0x39) || before === 0x2e)) plainNumbers = false;
    } else if (plainNumbers && b === 0x2d && bytes[i + 1] === 0x30) {
      // -0 or -0.000…: a negative zero unless a non-zero digit follows.
      let j = i + 2;
      if (bytes[j] === undefined || bytes[j]! < 0x30 || bytes[j]! > 0x39) {
        if (bytes[j] === 0x2e) for (j++; bytes[j] === 0x30; j++);
        if (bytes[j] === undefined || bytes[j]! < 0x31 || bytes[j]! > 0x39) plainNumbers = false;
      }
    }
  }
  return { depth: deepest, containers, plainNumbers };
}

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

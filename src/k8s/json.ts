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

/**
 * Object keys to follow into JSON text, compiled once (compileKeyPaths): one scan records where
 * the value of each path's last key lies, without parsing.
 */
export interface KeyPaths {
  readonly root: KeyPathNode;
  /** Number of nodes (keys) in the tree; each node's `id` is below it. */
  readonly size: number;
  /** The leaves' paths, by their `leaf` index. */
  readonly leaves: readonly (readonly string[])[];
}

interface KeyPathNode {
  readonly id: number;
  /** Index into `leaves` for a leaf, -1 for a key followed further. */
  readonly leaf: number;
  readonly names: readonly Uint8Array[];
  readonly children: readonly KeyPathNode[];
}

/** Compiles paths of plain ASCII keys (`['request', 'uid']`) into the tree scanJsonText follows. */
export function compileKeyPaths(paths: readonly (readonly string[])[]): KeyPaths {
  let size = 0;
  const leaves: (readonly string[])[] = [];
  const build = (prefix: readonly string[]): KeyPathNode => {
    const depth = prefix.length;
    const names = [...new Set(paths.filter((p) => p.length > depth && prefix.every((k, i) => p[i] === k)).map((p) => p[depth]!))];
    const id = size++;
    const isLeaf = depth > 0 && paths.some((p) => p.length === depth && prefix.every((k, i) => p[i] === k));
    if (isLeaf && names.length > 0) throw new Error(`key path ${prefix.join('.')} is both a leaf and followed further`);
    const leaf = isLeaf ? leaves.push(prefix) - 1 : -1;
    const children = names.map((name) => {
      if (!/^[\x20-\x21\x23-\x5b\x5d-\x7e]+$/.test(name)) throw new Error(`key ${JSON.stringify(name)} is not plain ASCII`);
      return build([...prefix, name]);
    });
    return { id, leaf, names: names.map((n) => Buffer.from(n, 'latin1')), children };
  };
  const root = build([]);
  return { root, size, leaves };
}

/** Bounds of JSON text's structure: the scan stops as soon as one is passed. */
export interface JsonLimits {
  /** Deepest nesting. */
  readonly depth: number;
  /** Objects and arrays in all. */
  readonly containers: number;
  /** Object keys in all. @default Infinity */
  readonly keys?: number;
  /** Keys of any one object. @default Infinity */
  readonly keysPerObject?: number;
}

/** What one pass over JSON text finds (scanJsonText). */
export interface JsonTextScan {
  /** Deepest nesting reached, stopping at one past the limit. */
  readonly depth: number;
  /** Objects and arrays counted, stopping at one past the limit. */
  readonly containers: number;
  /** Object keys counted, stopping at one past the limit. */
  readonly keys: number;
  /** Most keys found in one object, stopping at one past the limit. */
  readonly widest: number;
  /**
   * True when some object key outside the followed leaves' values holds a backslash escape: its
   * text is not its value (`"\u0061"` is `"a"`).
   */
  readonly escapedKeys: boolean;
  /** True when a followed key (KeyPaths) occurs more than once, anywhere on the paths. */
  readonly repeatedKeys: boolean;
  /** True when a bracket closes with none open; the scan stops there (the text is not JSON). */
  readonly unbalanced: boolean;
  /**
   * Where the values of the followed paths' leaves lie: triples of leaf index, start and end
   * (byte offsets, end exclusive; the span may hold whitespace around the value), in text order.
   */
  readonly spans: readonly number[];
}

const noSpans: readonly number[] = Object.freeze([]);

/** True when bytes[start, end) are the bytes of `name`. */
function sameBytes(bytes: Uint8Array, start: number, end: number, name: Uint8Array): boolean {
  if (end - start !== name.length) return false;
  for (let k = 0; k < name.length; k++) if (bytes[start + k] !== name[k]) return false;
  return true;
}

/**
 * One pass over JSON text, string contents skipped: its nesting, object and key counts
 * (stopping as soon as one passes its limit), whether any key is escaped, and, with `paths`,
 * where the values at those key paths lie. About 5 µs for a 5 KB review. The text need not be
 * valid JSON: what the scan reports about invalid text means nothing, and callers parse before
 * they trust it.
 */
export function scanJsonText(bytes: Uint8Array, limits: JsonLimits, paths?: KeyPaths): JsonTextScan {
  const length = bytes.length;
  const maxDepth = limits.depth;
  const maxContainers = limits.containers;
  const maxKeys = limits.keys ?? Infinity;
  const maxKeysPerObject = limits.keysPerObject ?? Infinity;
  let depth = 0;
  let deepest = 0;
  let containers = 0;
  let keys = 0;
  let widest = 0;
  let expectKey = false;
  let escapedKeys = false;
  let repeatedKeys = false;
  // Whether the container at each depth is an object (1) or an array (0).
  const objectAt = new Uint8Array(Math.min(maxDepth, length) + 2);
  // Keys of the object open at each depth.
  const keysAt = new Uint32Array(objectAt.length);
  const stop = (unbalanced: boolean): JsonTextScan => ({ depth: deepest, containers, keys, widest, escapedKeys, repeatedKeys, unbalanced, spans: noSpans });
  // The path node followed at each depth (objects on a path only), the node a key just named
  // (entered by the `{` that opens its value), and the leaf whose value is being read.
  const nodes: (KeyPathNode | undefined)[] = [];
  const seen = paths ? new Uint8Array(paths.size) : undefined;
  const spans: number[] = [];
  // The root is entered by the `{` that opens the text.
  let next: KeyPathNode | undefined = paths?.root;
  let leaf = -1;
  let leafDepth = 0;
  let leafStart = 0;
  for (let i = 0; i < length; i++) {
    const b = bytes[i]!;
    if (b === 0x22) {
      // A string: skipped to its closing quote in a loop of its own, escapes and all.
      const start = i + 1;
      let escaped = false;
      for (i = start; i < length; i++) {
        const c = bytes[i];
        if (c === 0x22) break;
        if (c === 0x5c) {
          escaped = true;
          i++;
        }
      }
      if (!expectKey) {
        next = undefined;
        continue;
      }
      expectKey = false;
      // Counted before anything is made of them: a body of half a million keys is refused
      // here, in milliseconds, rather than after a parse of a second or more.
      if (++keys > maxKeys) return stop(false);
      const inObject = ++keysAt[depth]!;
      if (inObject > widest && (widest = inObject) > maxKeysPerObject) return stop(false);
      // Inside a followed leaf's value the keys are not the caller's concern: the value is cut
      // out whole (managedFields' `k:{\"name\":\"app\"}` keys sit there on every real pod).
      if (escaped && leaf < 0) escapedKeys = true;
      const node = depth < nodes.length ? nodes[depth] : undefined;
      if (node === undefined) continue;
      let at = node.names.length - 1;
      while (at >= 0 && !sameBytes(bytes, start, i, node.names[at]!)) at--;
      if (at < 0) continue;
      const child = node.children[at]!;
      if (seen![child.id]!++) repeatedKeys = true;
      if (child.leaf >= 0) {
        leaf = child.leaf;
        leafDepth = depth;
        leafStart = -1;
      } else next = child;
      continue;
    }
    switch (b) {
      case 0x3a: // :
        if (leaf >= 0 && leafStart < 0 && depth === leafDepth) leafStart = i + 1;
        break;
      case 0x2c: // ,
      case 0x7d: // }
      case 0x5d: // ]
        if (leaf >= 0 && depth === leafDepth) {
          // No colon before the end: not a value (the text is not JSON, and its parse will say
          // so). Once a followed key repeats, no span is of use: none are kept (bounded memory).
          if (leafStart >= 0 && !repeatedKeys) spans.push(leaf, leafStart, i);
          leaf = -1;
        }
        next = undefined;
        if (b === 0x2c) {
          expectKey = objectAt[depth] === 1;
        } else {
          // A close with nothing open: not JSON, and nothing after it is worth a look.
          if (depth === 0) return stop(true);
          if (depth < nodes.length) nodes[depth] = undefined;
          depth--;
          expectKey = false;
        }
        break;
      case 0x7b: // {
      case 0x5b: // [
        if (++depth > deepest) deepest = depth;
        if (deepest > maxDepth || ++containers > maxContainers) return stop(false);
        objectAt[depth] = b === 0x7b ? 1 : 0;
        keysAt[depth] = 0;
        expectKey = b === 0x7b;
        if (next !== undefined || depth < nodes.length) nodes[depth] = b === 0x7b ? next : undefined;
        next = undefined;
        break;
    }
  }
  return { depth: deepest, containers, keys, widest, escapedKeys, repeatedKeys, unbalanced: false, spans: leaf >= 0 ? noSpans : spans };
}

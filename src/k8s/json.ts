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

/** The spans (flat [start, end) pairs, in text order) a scan found for the leaves at `wanted` of `paths`; empty for paths it does not follow. */
export function spansAt(scan: JsonTextScan, paths: KeyPaths, wanted: readonly (readonly string[])[]): number[] {
  const leaves = new Set(wanted.map((path) => paths.leaves.findIndex((p) => p.length === path.length && p.every((k, i) => k === path[i]))));
  const out: number[] = [];
  // The scan's spans are in text order: so are these.
  for (let s = 0; s < scan.spans.length; s += 3) if (leaves.has(scan.spans[s]!)) out.push(scan.spans[s + 1]!, scan.spans[s + 2]!);
  return out;
}

const isSpace = (b: number) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;
const isDigit = (b: number) => b >= 0x30 && b <= 0x39;
const isHexDigit = (b: number) => isDigit(b) || (b >= 0x41 && b <= 0x46) || (b >= 0x61 && b <= 0x66);

/** The index after whitespace from i. */
function afterSpace(bytes: Uint8Array, i: number, end: number): number {
  while (i < end && isSpace(bytes[i]!)) i++;
  return i;
}

/** The index after the JSON string whose opening quote is at i, or -1 when none ends before `end`. */
function afterString(bytes: Uint8Array, i: number, end: number): number {
  for (i++; i < end; i++) {
    const b = bytes[i]!;
    if (b === 0x22) return i + 1;
    if (b < 0x20) return -1;
    if (b === 0x5c) {
      if (++i >= end) return -1;
      const e = bytes[i]!;
      if (e === 0x75) {
        if (i + 4 >= end) return -1;
        for (let k = 1; k <= 4; k++) if (!isHexDigit(bytes[i + k]!)) return -1;
        i += 4;
      } else if (e !== 0x22 && e !== 0x5c && e !== 0x2f && e !== 0x62 && e !== 0x66 && e !== 0x6e && e !== 0x72 && e !== 0x74) return -1;
    }
  }
  return -1;
}

/** The index after the digits from i (i itself when there are none). */
function afterDigits(bytes: Uint8Array, i: number, end: number): number {
  while (i < end && isDigit(bytes[i]!)) i++;
  return i;
}

/** The index after the JSON number starting at i, or -1 when none does. */
function afterNumber(bytes: Uint8Array, i: number, end: number): number {
  if (bytes[i] === 0x2d) i++;
  if (i < end && bytes[i] === 0x30) i++;
  else {
    const from = i;
    if ((i = afterDigits(bytes, i, end)) === from) return -1;
  }
  if (i < end && bytes[i] === 0x2e) {
    const from = ++i;
    if ((i = afterDigits(bytes, i, end)) === from) return -1;
  }
  if (i < end && (bytes[i] === 0x65 || bytes[i] === 0x45)) {
    i++;
    if (i < end && (bytes[i] === 0x2b || bytes[i] === 0x2d)) i++;
    const from = i;
    if ((i = afterDigits(bytes, i, end)) === from) return -1;
  }
  return i;
}

/** The index after the literal (`true`, `false`, `null`) at i, or -1 when none is there. */
function afterLiteral(bytes: Uint8Array, i: number, end: number): number {
  const literal = bytes[i] === 0x74 ? literalTrue : bytes[i] === 0x66 ? literalFalse : bytes[i] === 0x6e ? literalNull : undefined;
  if (!literal || i + literal.length > end) return -1;
  for (let k = 1; k < literal.length; k++) if (bytes[i + k] !== literal[k]) return -1;
  return i + literal.length;
}
const literalTrue = Buffer.from('true', 'latin1');
const literalFalse = Buffer.from('false', 'latin1');
const literalNull = Buffer.from('null', 'latin1');

/** The index after an object's key and its colon (whitespace around), from the key's opening quote, or -1. */
function afterKey(bytes: Uint8Array, i: number, end: number): number {
  if (i >= end || bytes[i] !== 0x22 || (i = afterString(bytes, i, end)) < 0) return -1;
  i = afterSpace(bytes, i, end);
  return i < end && bytes[i] === 0x3a ? i + 1 : -1;
}

/**
 * True when bytes[start, end) are one JSON value with whitespace around it, by JSON's grammar
 * (RFC 8259, what JSON.parse accepts), without building anything. Bytes of 0x80 and above are
 * accepted inside strings only, and not checked to be UTF-8: the caller checks that (isUtf8).
 * Nesting is bounded by `maxDepth`: deeper text is refused.
 */
export function isOneJsonValue(bytes: Uint8Array, start: number, end: number, maxDepth: number): boolean {
  // Whether each open container is an object (1) or an array (0).
  const stack = new Uint8Array(Math.min(maxDepth, end - start) + 1);
  let depth = 0;
  let i = start;
  // At the top of the loop a value is expected; after it, closes, then a comma or the end.
  for (;;) {
    i = afterSpace(bytes, i, end);
    if (i >= end) return false;
    const b = bytes[i]!;
    if (b === 0x7b || b === 0x5b) {
      if (depth >= maxDepth) return false;
      stack[depth++] = b === 0x7b ? 1 : 0;
      i = afterSpace(bytes, i + 1, end);
      if (i < end && bytes[i] === (b === 0x7b ? 0x7d : 0x5d)) {
        // An empty container is a whole value.
        depth--;
        i++;
      } else {
        if (b === 0x7b && (i = afterKey(bytes, i, end)) < 0) return false;
        continue;
      }
    } else if (b === 0x22) i = afterString(bytes, i, end);
    else if (b === 0x2d || isDigit(b)) i = afterNumber(bytes, i, end);
    else i = afterLiteral(bytes, i, end);
    if (i < 0) return false;
    for (;;) {
      i = afterSpace(bytes, i, end);
      if (depth === 0) return i === end;
      if (i >= end) return false;
      const c = bytes[i]!;
      const inObject = stack[depth - 1] === 1;
      if (c === (inObject ? 0x7d : 0x5d)) {
        depth--;
        i++;
        continue;
      }
      if (c !== 0x2c) return false;
      i++;
      if (inObject && (i = afterKey(bytes, afterSpace(bytes, i, end), end)) < 0) return false;
      break;
    }
  }
}

/** JSON with object keys sorted: the same text whatever the key order (a template's hash, a status compared). */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (isJsonObject(value)) {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * The JSON merge patch (RFC 7386) that turns `from` into `to`: a key `to` lacks is sent as null
 * at any depth (a merge patch merges objects key by key, so a nested key left unmentioned would
 * stay), a list or any other value whole. Unchanged keys are sent too: the patch is `to` with the nulls.
 */
export function mergePatchBetween(from: unknown, to: JsonObject): JsonObject {
  // No prototype: a stored key named __proto__ is a key like any other.
  const patch: JsonObject = Object.create(null);
  const before = isJsonObject(from) ? from : {};
  for (const key of Object.keys(before)) if (!Object.hasOwn(to, key)) patch[key] = null;
  for (const [key, value] of Object.entries(to)) patch[key] = isJsonObject(value) && isJsonObject(before[key]) ? mergePatchBetween(before[key], value) : value;
  return patch;
}

/**
 * The key of a review and the store of answers under it. A Deployment's pods reach the webhook
 * as the same review text but for a few values no decision reads: the request's uid, and the
 * pod's `managedFields` (their timestamps), `creationTimestamp`, `uid` and `resourceVersion`.
 * The key is the review's own bytes with those values cut out, and the generation of the state
 * it is decided in (index.ts). So an answer is found before the body is parsed, and a cached
 * answer is the answer a fresh decision would give: the rest of the text is the same, byte for
 * byte (a property test holds it so).
 *
 * What keeps that exact: a body with an escaped object key in what is kept (its text is not its
 * value) or with a followed key twice is never a key; a body is only answered from the cache
 * when each value cut out parses as one JSON value (so the body is JSON, as the one it matched
 * was), with a uid as the parser would require it; and an answer is only remembered when the
 * parsed request names the uid and namespace the scan found. Bounded in entries and bytes; an
 * answer is kept only the second time its key comes (admits), so pods that never come again
 * cost a digest.
 */
import { hash } from 'node:crypto';
import { compileKeyPaths, type JsonTextScan } from '../../k8s/json.js';
import { isDns1123Label } from '../../k8s/label-syntax.js';
import { unreadPaths } from '../mutate.js';
import { uidProblem } from '../review.js';

/** Paths of a review the key follows: read (uid, namespace) or cut out (all but the namespace). */
export const reviewKeyPaths = compileKeyPaths([
  ['request', 'uid'],
  ['request', 'namespace'],
  // What no decision reads (managedFields): a fresh decision's parse leaves it out too.
  ...unreadPaths,
  ['request', 'object', 'metadata', 'creationTimestamp'],
  ['request', 'object', 'metadata', 'uid'],
  ['request', 'object', 'metadata', 'resourceVersion'],
]);

const leafOf = (...path: string[]) => reviewKeyPaths.leaves.findIndex((p) => p.join('\0') === path.join('\0'));
const uidLeaf = leafOf('request', 'uid');
const namespaceLeaf = leafOf('request', 'namespace');

/**
 * Where a review's key parts lie: what one scan found, read for the key. The key text is the
 * body without the values cut out, a NUL where each was (maskedText).
 */
export interface ReviewKeyText {
  /** The body. */
  readonly view: Buffer;
  /** Byte spans [start, end) of the body kept in the key text, flat, in text order. */
  readonly kept: readonly number[];
  /** The namespace as sent (a DNS label: the text is the value). */
  readonly namespace: string;
  /** The request uid's byte span [start, end). */
  readonly uid: readonly [number, number];
  /** Byte spans [start, end) of the other values cut out, flat. */
  readonly others: readonly number[];
}

// ignoreBOM: a byte order mark is kept, and JSON.parse refuses it, as it would in the whole body.
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

const invalid = Symbol('invalid');

const isJsonSpace = (b: number | undefined) => b === 0x20 || b === 0x0a || b === 0x0d || b === 0x09;

/** True when byte `b` may stand in a JSON string as itself: printable ASCII but the quote and the backslash. */
const isPlainStringByte = (b: number) => b >= 0x20 && b <= 0x7e && b !== 0x22 && b !== 0x5c;

/** The text of bytes[start, end) when they are a JSON string with nothing to unescape (its text is its value); else undefined. */
function plainString(view: Buffer, start: number, end: number): string | undefined {
  while (start < end && isJsonSpace(view[start])) start++;
  while (end > start && isJsonSpace(view[end - 1])) end--;
  if (end - start < 2 || view[start] !== 0x22 || view[end - 1] !== 0x22) return undefined;
  for (let i = start + 1; i < end - 1; i++) if (!isPlainStringByte(view[i]!)) return undefined;
  return view.toString('latin1', start + 1, end - 1);
}

/** The value JSON text in bytes[start, end) holds, or `invalid` when it is not one JSON value. */
function valueAt(view: Buffer, start: number, end: number): unknown {
  // Most values cut out are plain strings (a uid, a timestamp): read as they stand.
  const plain = plainString(view, start, end);
  if (plain !== undefined) return plain;
  try {
    return JSON.parse(utf8.decode(view.subarray(start, end)));
  } catch {
    return invalid;
  }
}

/**
 * The key text of a review body, or undefined when the body cannot make one: an escaped or
 * repeated key, no uid, or a namespace that is not a plain DNS label. Reads only the scan's
 * spans and the bytes; nothing is parsed.
 */
export function reviewKeyText(bytes: Uint8Array, scan: JsonTextScan): ReviewKeyText | undefined {
  if (scan.escapedKeys || scan.repeatedKeys) return undefined;
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const { spans } = scan;
  let uid: [number, number] | undefined;
  let namespace: string | undefined;
  const others: number[] = [];
  // The cut spans, in text order (the scan's).
  const cuts: number[] = [];
  for (let s = 0; s < spans.length; s += 3) {
    const leaf = spans[s]!;
    const start = spans[s + 1]!;
    const end = spans[s + 2]!;
    if (leaf === namespaceLeaf) {
      namespace = plainString(view, start, end);
      if (namespace === undefined) return undefined;
      continue;
    }
    if (leaf === uidLeaf) uid = [start, end];
    else others.push(start, end);
    cuts.push(start, end);
  }
  // Only a namespace that can be one: the state is read for it before the pod is validated.
  if (!uid || namespace === undefined || !isDns1123Label(namespace)) return undefined;
  // The parts kept, between the cuts; read in place (no copy of the body per review).
  const kept: number[] = [];
  let at = 0;
  for (let c = 0; c < cuts.length; c += 2) {
    kept.push(at, cuts[c]!);
    at = cuts[c + 1]!;
  }
  kept.push(at, bytes.length);
  return { view, kept, namespace, uid, others };
}

/** The length of the key text: the parts kept and a NUL between each two. */
function textLength(key: ReviewKeyText): number {
  let length = key.kept.length / 2 - 1;
  for (let k = 0; k < key.kept.length; k += 2) length += key.kept[k + 1]! - key.kept[k]!;
  return length;
}

/**
 * Writes the key text into `into` (large enough: textLength) and answers the part written. A
 * NUL marks each cut: it cannot stand in JSON text outside a value, so two texts that read the
 * same were cut at the same places.
 */
function writeText(key: ReviewKeyText, into: Buffer): Buffer {
  let at = 0;
  for (let k = 0; k < key.kept.length; k += 2) {
    if (k > 0) into[at++] = 0;
    at += key.view.copy(into, at, key.kept[k], key.kept[k + 1]);
  }
  return into.subarray(0, at);
}

/** The key text as a buffer of its own (what a cache entry keeps). */
function maskedText(key: ReviewKeyText): Buffer {
  return writeText(key, Buffer.allocUnsafe(textLength(key)));
}

/** True when `masked` (maskedText) is the key text of `key`, compared in place. */
function sameText(masked: Buffer, key: ReviewKeyText): boolean {
  let at = 0;
  for (let k = 0; k < key.kept.length; k += 2) {
    if (k > 0 && masked[at++] !== 0) return false;
    const start = key.kept[k]!;
    const end = key.kept[k + 1]!;
    if (at + end - start > masked.length || key.view.compare(masked, at, at + end - start, start, end) !== 0) return false;
    at += end - start;
  }
  return at === masked.length;
}

/** The request uid at the key text's uid span, when it is one the parser accepts (parseReview). */
export function uidOf(key: ReviewKeyText): string | undefined {
  const uid = valueAt(key.view, key.uid[0], key.uid[1]);
  return uidProblem(uid) === undefined ? (uid as string) : undefined;
}

/**
 * True when `text` is JSON text `known` (valid JSON, one value) with only the contents of some
 * strings replaced by plain characters (isPlainStringByte): then `text` is one JSON value too,
 * for such a change cannot end a string, start one, or touch anything between strings. What
 * the managedFields of two pods of one ReplicaSet differ in is their times; a byte walk
 * checks that in a few microseconds, where a parse takes tens.
 */
export function sameJsonShape(known: Buffer, text: Buffer): boolean {
  let i = 0;
  let j = 0;
  let inString = false;
  while (i < known.length && j < text.length) {
    const k = known[i]!;
    if (k === text[j]) {
      if (inString && k === 0x5c) {
        // An escape in both, the same whole: `\uXXXX` is six bytes, every other escape two (a
        // difference inside the hex digits would leave an escape JSON refuses).
        const n = known[i + 1] === 0x75 ? 6 : 2;
        if (i + n > known.length || j + n > text.length) return false;
        // Compared here: a native compare per escape costs more than the six bytes (managedFields hold dozens of `\"`).
        for (let k = 1; k < n; k++) if (known[i + k] !== text[j + k]) return false;
        i += n;
        j += n;
        continue;
      }
      if (k === 0x22) inString = !inString;
      i++;
      j++;
      continue;
    }
    // A difference is only allowed inside a string, and not in the middle of a character of
    // several bytes (the text would not be UTF-8): the rest of the known string skipped, and
    // the rest of this one read as plain characters to its closing quote.
    if (!inString || known[i - 1]! >= 0x80) return false;
    while (i < known.length && known[i] !== 0x22) i += known[i] === 0x5c ? 2 : 1;
    while (j < text.length && isPlainStringByte(text[j]!)) j++;
    if (i >= known.length || j >= text.length || text[j] !== 0x22) return false;
    // Both at the closing quote, which the equal branch takes next.
  }
  return i === known.length && j === text.length && !inString;
}

/**
 * The request uid of a body whose key text matched a remembered one, when every value cut out
 * is one JSON value and the uid is one the parser accepts; else undefined, and the body is
 * parsed and decided as any other. `known` holds the values cut out of the remembered body (a
 * body the parser read), in order: a value that is it with only string contents changed is
 * one JSON value without a parse (sameJsonShape).
 */
export function matchedUid(key: ReviewKeyText, known?: readonly Buffer[]): string | undefined {
  const uid = uidOf(key);
  if (uid === undefined) return undefined;
  for (let c = 0; c < key.others.length; c += 2) {
    const start = key.others[c]!;
    const end = key.others[c + 1]!;
    const remembered = known?.[c / 2];
    if (remembered && sameJsonShape(remembered, key.view.subarray(start, end))) continue;
    if (valueAt(key.view, start, end) === invalid) return undefined;
  }
  return uid;
}

/** Copies of the values cut out of a body other than the uid, in order (what matchedUid compares a later body's with). */
export function cutValues(key: ReviewKeyText): Buffer[] {
  const values: Buffer[] = [];
  for (let c = 0; c < key.others.length; c += 2) values.push(Buffer.from(key.view.subarray(key.others[c]!, key.others[c + 1]!)));
  return values;
}

/** What is remembered of one answer: the value, the key text it was found by, and its size. */
interface CachedAnswer<T> {
  readonly value: T;
  readonly masked: Buffer;
  readonly bytes: number;
}

/** A review's place in the cache: the digest of its key text and state, and the key text's parts to compare. */
export interface AnswerKey {
  readonly digest: string;
  readonly text: ReviewKeyText;
}

export class AnswerCache<T> {
  private readonly entries = new Map<string, CachedAnswer<T>>();
  private bytes = 0;
  /** Where keyOf puts a key text together, reused (no allocation per review); grows once to maxBodyBytes. */
  private scratch = Buffer.allocUnsafe(16 * 1024);
  /** Keys seen once and not remembered (admits), oldest first; bounded by maxSeen. */
  private readonly seen = new Set<string>();
  hits = 0;
  misses = 0;

  constructor(
    readonly maxEntries = 256,
    readonly maxBytes = 16 * 1024 * 1024,
    /** Bodies up to this size have keys; a larger one is decided afresh (a key is about its size). */
    readonly maxBodyBytes = 64 * 1024,
    /** Keys seen once remembered at most (a digest each, about 100 bytes). */
    readonly maxSeen = 4 * maxEntries,
  ) {}

  /**
   * True when an answer for `key` is worth remembering: its key was seen once before. A pod of
   * a ReplicaSet comes again; a pod that never does (a bare pod, a DaemonSet's pod, a dry run)
   * costs only its digest here, not an entry that pushes out one that is used: remembering every
   * answer made reviews of pods that all differ a third dearer (copies kept past the young
   * generation, and more to collect).
   */
  admits(key: AnswerKey): boolean {
    if (this.seen.delete(key.digest)) return true;
    this.seen.add(key.digest);
    if (this.seen.size > this.maxSeen) this.seen.delete(this.seen.values().next().value as string);
    return false;
  }

  /**
   * The key of a review's key text decided in the state named by `generation` (index.ts). The map is keyed by a SHA-256 digest of the text, not by the text:
   * V8 hashes a string at about a nanosecond per character (5 µs for a typical review) and a
   * string over 16,383 characters by its length alone. The whole text is digested (a digest of
   * a part would let a body that shares it take another's place), and compared on every hit,
   * so a digest shared by another text can only miss.
   */
  keyOf(key: ReviewKeyText, generation: string): AnswerKey {
    const length = textLength(key);
    if (this.scratch.length < length) this.scratch = Buffer.allocUnsafe(Math.max(length, this.maxBodyBytes));
    const text = writeText(key, this.scratch);
    return { digest: `${hash('sha256', text, 'base64')}/${generation}`, text: key };
  }

  /**
   * What `use` makes of the value remembered for `key`, or undefined when none is or `use`
   * refuses it (answers undefined): only a value used counts as a hit.
   */
  use<R>(key: AnswerKey, use: (value: T) => R | undefined): R | undefined {
    const hit = this.entries.get(key.digest);
    const used = hit && sameText(hit.masked, key.text) ? use(hit.value) : undefined;
    if (used === undefined) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    // Most recently used last.
    this.entries.delete(key.digest);
    this.entries.set(key.digest, hit!);
    return used;
  }

  set(key: AnswerKey, value: T, valueBytes: number): void {
    const masked = maskedText(key.text);
    const bytes = masked.length + key.digest.length * 2 + valueBytes;
    if (bytes > this.maxBytes / 8) return;
    const old = this.entries.get(key.digest);
    if (old) {
      this.bytes -= old.bytes;
      this.entries.delete(key.digest);
    }
    this.entries.set(key.digest, { value, masked, bytes });
    this.bytes += bytes;
    while (this.entries.size > this.maxEntries || this.bytes > this.maxBytes) {
      const [oldestKey, oldest] = this.entries.entries().next().value as [string, CachedAnswer<T>];
      this.entries.delete(oldestKey);
      this.bytes -= oldest.bytes;
    }
  }

  size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.bytes };
  }
}

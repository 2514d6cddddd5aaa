/**
 * Reading a review body with limits: declared and actual size (413), media type (415),
 * UTF-8 and JSON syntax (400). Every refusal is a RequestError with a message.
 */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { RequestError } from '../errors.js';
import { cut, quote } from '../quote.js';
import { isOneJsonValue, scanJsonText, type JsonLimits, type JsonTextScan, type KeyPaths } from '../k8s/json.js';

/**
 * Default body limit: 7 MiB. The API server caps a request at 3 MiB of object (etcd's limit),
 * and the review wraps the object and, on UPDATE, the old object beside it; 7 MiB leaves room
 * for both plus the envelope (controller-runtime uses the same figure).
 */
export const defaultMaxBodyBytes = 7 * 1024 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Deepest JSON nesting accepted. A Pod is nested a dozen levels deep, and the API server's own
 * decoder refuses 10,000; a body nested thousands of levels deep would stall the event loop
 * while it is parsed and overflow the stack wherever a value is later walked (quoted, compared),
 * so such a body is refused before parsing.
 */
export const maxJsonDepth = 1000;

/**
 * Most objects and arrays in one body. Parsed, `[{},{},…]` takes about 21 times its text
 * (7 MiB of it would take 150 MB of heap); a real review holds a few thousand objects (250
 * containers of a dozen objects each are 3,000). Refused before parsing, so that the memory a
 * body can take is bounded by this count as well as by its size.
 */
export const maxJsonContainers = 200_000;

/**
 * Most keys in one object. A pod's widest maps (labels, annotations, a managedFields entry of
 * them) hold tens of keys, rarely hundreds. JSON.parse of one object of 500,000 keys takes a
 * quarter of a second, and what reads it afterwards four times that: a body that wide is
 * refused before parsing.
 */
export const maxJsonKeysPerObject = 10_000;

/** Most object keys in one body: ten times the widest object, and some forty times a 56 KB pod's. */
export const maxJsonKeys = 100_000;

/** The bounds jsonBody holds a body's structure to. */
const bodyLimits: JsonLimits = { depth: maxJsonDepth, containers: maxJsonContainers, keys: maxJsonKeys, keysPerObject: maxJsonKeysPerObject };

/** Why a scanned body's structure is out of bounds (too deep, too many objects and arrays or keys), or undefined. */
function structureProblem(scan: JsonTextScan): string | undefined {
  if (scan.unbalanced) return 'request body is not valid JSON: it closes a bracket it never opened';
  if (scan.depth > maxJsonDepth) return `request body is nested more than ${maxJsonDepth} levels deep; no Kubernetes object is`;
  if (scan.containers > maxJsonContainers) return `request body holds more than ${maxJsonContainers} objects and arrays; no pod the injector serves does`;
  if (scan.widest > maxJsonKeysPerObject) return `request body holds an object of more than ${maxJsonKeysPerObject} keys; no pod the injector serves does`;
  if (scan.keys > maxJsonKeys) return `request body holds more than ${maxJsonKeys} object keys; no pod the injector serves does`;
  return undefined;
}

/** True when the nesting depth of JSON text exceeds `limit` (the scan jsonBody makes). */
export function jsonDepthExceeds(bytes: Uint8Array, limit: number): boolean {
  return scanJsonText(bytes, { depth: limit, containers: Infinity }).depth > limit;
}

/** True when the Content-Type header names JSON (`application/json`, parameters allowed). */
export function isJsonMediaType(header: string | undefined): boolean {
  if (!header) return false;
  const type = header.split(';', 1)[0]!.trim().toLowerCase();
  return type === 'application/json';
}

/**
 * Bytes of request bodies held at once, across all requests. Each body is bounded by the body
 * limit; this bounds their sum, so that a hundred clients sending 7 MiB each cannot take the
 * process past its memory limit. A body that does not fit is refused with 503 (the API server
 * then applies the webhook's failurePolicy; a retry a moment later fits again).
 */
export class BodyBudget {
  private held = 0;
  constructor(readonly maxBytes: number) {}

  /** Takes `bytes` from the budget; false (and nothing taken) when they do not fit. */
  take(bytes: number): boolean {
    if (this.held + bytes > this.maxBytes) return false;
    this.held += bytes;
    return true;
  }

  give(bytes: number): void {
    this.held = Math.max(0, this.held - bytes);
  }

  get inUse(): number {
    return this.held;
  }
}

/**
 * Bytes of each body that are not counted against the budget: real reviews (about 5 KB, at
 * most tens of KB) never wait for large ones, and clients that stall large uploads cannot
 * starve them. What this leaves unbudgeted is bounded by the connection limit (500 × 64 KiB =
 * 32 MiB), which is a hard limit: at the limit, a stalled upload is closed to make room, and
 * with none to close a new connection is refused (server.ts).
 */
export const unbudgetedBytesPerBody = 64 * 1024;

/** The bytes of a body of `size` that count against the budget. */
export function budgeted(size: number): number {
  return Math.max(0, size - unbudgetedBytesPerBody);
}

/**
 * Default sum of bodies held at once: 16 MiB — two bodies at the 7 MiB limit, or three thousand
 * typical reviews. A body stays counted until its answer is sent; its parsed form takes up to
 * five times its size (a map of 200,000 keys; denser bodies are refused by the object count),
 * so this bounds the live memory of reviews at about 110 MB whatever clients send: within the
 * Deployment's 256 Mi with the V8 heap capped at 160 MB (NODE_OPTIONS in
 * manifests/base/deployment.yaml).
 */
export const defaultMaxBodyBytesInFlight = 16 * 1024 * 1024;

function overloaded(budget: BodyBudget): RequestError {
  return new RequestError(
    503,
    'ERR_OVERLOADED',
    `too many large reviews in flight (${budget.inUse} bytes of bodies held, limit ${budget.maxBytes}); try again`,
  );
}

/**
 * Reads the whole body as bytes, refusing (413) as soon as it exceeds `limit`. With a budget,
 * the bytes read are taken from it as they arrive and stay taken until the caller gives them
 * back (after answering); on a refusal they are given back here.
 */
function readBody(req: IncomingMessage, limit: number, budget?: BodyBudget): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    return Promise.reject(new RequestError(413, 'ERR_BODY_TOO_LARGE', `request body of ${cut(declared, 40)} bytes exceeds the limit of ${limit} bytes`));
  }
  // Plain listeners rather than an async iterator: this runs for every review.
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
    };
    const refuse = (error: RequestError) => {
      cleanup();
      budget?.give(budgeted(size));
      // Stop reading; the answer carries Connection: close.
      req.pause();
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      const counted = budgeted(size + chunk.length) - budgeted(size);
      if (budget && counted > 0 && !budget.take(counted)) return refuse(overloaded(budget));
      size += chunk.length;
      if (size > limit) return refuse(new RequestError(413, 'ERR_BODY_TOO_LARGE', `request body exceeds the limit of ${limit} bytes`));
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onError = (err: Error) => {
      cleanup();
      budget?.give(budgeted(size));
      reject(new RequestError(400, 'ERR_BODY_ABORTED', `request body could not be read: ${err.message}`));
    };
    const onAborted = () => onError(new Error('the client went away'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}

/** A JSON body as read: its bytes, what one scan of them found, and its parse (when asked). */
export interface JsonBody {
  readonly bytes: Buffer;
  readonly scan: JsonTextScan;
  /** The key paths the scan followed (its spans' leaves). */
  readonly paths?: KeyPaths;
  /**
   * The parsed body; throws RequestError (400) when the bytes are not UTF-8 JSON. With
   * `unread` (flat [start, end) byte spans, in text order, of values the caller never reads:
   * parseJsonBytesWithout), those values are left out of the parse, and the body is still
   * refused exactly when a whole parse would refuse it.
   */
  json(unread?: readonly number[]): unknown;
}

/** Parses JSON bytes, refusing (400) what is not UTF-8 JSON. */
function parseJsonBytes(bytes: Uint8Array): unknown {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    throw new RequestError(400, 'ERR_MALFORMED_JSON', 'request body is not valid UTF-8');
  }
  if (text.trim() === '') throw new RequestError(400, 'ERR_MALFORMED_JSON', 'request body is empty; expected an AdmissionReview');
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new RequestError(400, 'ERR_MALFORMED_JSON', `request body is not valid JSON: ${cut((err as Error).message)}`);
  }
}

/**
 * Parses JSON bytes as parseJsonBytes does, but with each value at the byte spans `unread`
 * (flat [start, end) pairs in text order, each a whole value after a key, as a scan finds them)
 * read as null: nothing is built for them. The result is the whole parse with those values
 * null, and the bytes are refused exactly when the whole parse refuses them, with the same
 * message: each span must be one JSON value in UTF-8 (checked in place, without building it),
 * and on any doubt the whole body is parsed instead.
 */
export function parseJsonBytesWithout(bytes: Uint8Array, unread: readonly number[]): unknown {
  if (unread.length === 0) return parseJsonBytes(bytes);
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (!isUtf8(view)) return parseJsonBytes(bytes);
  // The text put together in a buffer reused from review to review (this runs to its end
  // without yielding): one decode, and nothing built for what is left out.
  // `null` may be longer than the value it stands for (`1`, `[]`): room for four bytes a value.
  const textBytes = view.length + 2 * unread.length;
  if (scratch.length < textBytes) scratch = Buffer.allocUnsafe(Math.max(textBytes, 2 * scratch.length));
  let at = 0;
  let written = 0;
  for (let s = 0; s < unread.length; s += 2) {
    const start = unread[s]!;
    const end = unread[s + 1]!;
    if (start < at || end < start || end > view.length || !isOneJsonValue(view, start, end, maxJsonDepth)) return parseJsonBytes(bytes);
    written += view.copy(scratch, written, at, start);
    written += scratch.write('null', written, 'latin1');
    at = end;
  }
  written += view.copy(scratch, written, at);
  // A byte order mark is dropped by the whole parse's decoder, and then the text parses the same.
  const from = scratch[0] === 0xef && scratch[1] === 0xbb && scratch[2] === 0xbf ? 3 : 0;
  const text = scratch.toString('utf8', from, written);
  // Large bodies do not keep their size in the scratch buffer.
  if (scratch.length > maxScratchBytes) scratch = Buffer.allocUnsafe(initialScratchBytes);
  try {
    return JSON.parse(text);
  } catch {
    // The exact refusal, with its position, is the whole parse's.
    return parseJsonBytes(bytes);
  }
}

const initialScratchBytes = 64 * 1024;
/** The most the scratch buffer keeps between reviews: a typical review is 8 KB, one with a large pod 130 KB. */
const maxScratchBytes = 256 * 1024;
let scratch = Buffer.allocUnsafe(initialScratchBytes);

/**
 * JSON bytes checked for their structure's bounds in one scan (400 when out of them), which
 * also finds the values at `paths` (k8s/json.ts); parsed only when asked.
 */
export function jsonBody(bytes: Buffer, paths?: KeyPaths): JsonBody {
  const scan = scanJsonText(bytes, bodyLimits, paths);
  const structure = structureProblem(scan);
  if (structure) throw new RequestError(400, 'ERR_MALFORMED_JSON', structure);
  return { bytes, scan, ...(paths ? { paths } : {}), json: (unread) => (unread ? parseJsonBytesWithout(bytes, unread) : parseJsonBytes(bytes)) };
}

/**
 * Reads a JSON body after checking its media type (jsonBody). With a budget, the body's bytes
 * stay taken from it until the caller gives back the budgeted bytes it was told of (the body
 * lives as long).
 */
export async function readJsonBody(
  req: IncomingMessage,
  limit: number,
  budget?: BodyBudget,
  onRead?: (budgetedBytes: number) => void,
  paths?: KeyPaths,
): Promise<JsonBody> {
  if (!isJsonMediaType(req.headers['content-type'])) {
    throw new RequestError(415, 'ERR_UNSUPPORTED_MEDIA_TYPE', `Content-Type must be application/json (got ${quote(req.headers['content-type'] ?? '')})`);
  }
  const bytes = await readBody(req, limit, budget);
  onRead?.(budgeted(bytes.length));
  return jsonBody(bytes, paths);
}

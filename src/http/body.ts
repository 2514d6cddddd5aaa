/**
 * Reading a review body with limits: declared and actual size (413), media type (415),
 * UTF-8 and JSON syntax (400). Every refusal is a RequestError with a message.
 */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { RequestError } from '../errors.js';
import { systemClock, type Clock } from '../clock.js';
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
 * How fast an upload must arrive, on average since its first byte, to keep budget another
 * body needs: 1 MiB/s. The API server sends a review from memory over a connection it keeps
 * (megabytes in milliseconds); a 7 MiB body at this rate still arrives within the request
 * timeout. Slower uploads are only cut when the budget is short.
 */
export const defaultMinUploadBytesPerSecond = 1024 * 1024;

/** Time an upload has before its rate is judged: the first second. */
const uploadRateGraceMs = 1000;

/**
 * One body's share of the budget, from its first byte until its answer is sent. While the body
 * is still arriving it may be cut to make room for another (`evict`); once whole it never is.
 */
export class BodyUpload {
  /** Budgeted bytes held. */
  held = 0;
  /** Bytes received so far. */
  received = 0;
  /** True once the whole body has arrived. */
  complete = false;
  private released = false;
  constructor(
    private readonly budget: BodyBudget,
    readonly startedAt: number,
    /** The size the client declared (Content-Length); undefined for a chunked upload. */
    readonly declared: number | undefined,
    /** Called once when the budget cuts this upload to make room for another body. */
    private readonly onEvicted: (error: RequestError) => void,
  ) {}

  /** Counts `bytes` more received; false (nothing taken) when the budget cannot make room. */
  receive(bytes: number): boolean {
    const counted = budgeted(this.received + bytes) - budgeted(this.received);
    if (counted > 0 && !this.budget.takeFor(this, counted)) return false;
    this.received += bytes;
    return true;
  }

  /** Gives every held byte back; only the first call counts. */
  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.forget(this);
  }

  /** @internal The budget cut this upload: its bytes are back, its reader refuses. */
  evicted(error: RequestError): void {
    this.release();
    this.onEvicted(error);
  }
}

/**
 * Bytes of request bodies held at once, across all requests. Each body is bounded by the body
 * limit; this bounds their sum, so that a hundred clients sending 7 MiB each cannot take the
 * process past its memory limit.
 *
 * Shared so that no client can hold what a complete review needs: when a body does not fit,
 * uploads still arriving are cut to make room (their clients get 503) — first those slower than
 * the minimum rate, then those larger than the asking body (by Content-Length), largest first. A
 * body that has arrived whole is never cut; a body is refused (503) only when the budget is held
 * by whole bodies being answered and by uploads no larger than it that arrive at the minimum
 * rate or faster. The API server applies the webhook's failurePolicy to a 503; a retry fits again.
 */
export class BodyBudget {
  private inFlight = 0;
  private readonly uploads = new Set<BodyUpload>();
  constructor(
    readonly maxBytes: number,
    private readonly clock: Clock = systemClock,
    readonly minUploadBytesPerSecond: number = defaultMinUploadBytesPerSecond,
  ) {}

  /** A new body's share, empty until it receives bytes; `declared` is its Content-Length. */
  open(onEvicted: (error: RequestError) => void, declared?: number): BodyUpload {
    const upload = new BodyUpload(this, this.clock.now(), declared, onEvicted);
    this.uploads.add(upload);
    return upload;
  }

  /** @internal Takes `bytes` for `asker`, cutting uploads that may be cut when that makes room. */
  takeFor(asker: BodyUpload, bytes: number): boolean {
    if (this.inFlight + bytes <= this.maxBytes) return this.hold(asker, bytes);
    // Sizes compared are what each body will be (its Content-Length), not how far it has come: a
    // body that merely started later never cuts an equal one ahead of it.
    const size = (u: BodyUpload) => u.declared ?? u.received;
    const askerSize = asker.declared ?? asker.received + bytes;
    const now = this.clock.now();
    const slow = (u: BodyUpload) => {
      const elapsed = now - u.startedAt;
      return elapsed >= uploadRateGraceMs && (u.received * 1000) / elapsed < this.minUploadBytesPerSecond;
    };
    const victims = [...this.uploads]
      .filter((u) => u !== asker && !u.complete && u.held > 0 && (slow(u) || size(u) > askerSize))
      .sort((a, b) => Number(slow(b)) - Number(slow(a)) || size(b) - size(a));
    // Cut only when the cuts make room: otherwise nobody is served by them.
    let freed = 0;
    let needed = 0;
    for (const victim of victims) {
      if (this.inFlight - freed + bytes <= this.maxBytes) break;
      freed += victim.held;
      needed++;
    }
    if (this.inFlight - freed + bytes > this.maxBytes) return false;
    for (const victim of victims.slice(0, needed)) {
      victim.evicted(
        new RequestError(
          503,
          'ERR_OVERLOADED',
          `request body cut to make room for another review: the budget for bodies held at once (${this.maxBytes} bytes) was short and this upload ${slow(victim) ? 'arrived slower than the minimum rate' : 'was larger'}; try again`,
        ),
      );
    }
    return this.hold(asker, bytes);
  }

  private hold(upload: BodyUpload, bytes: number): boolean {
    upload.held += bytes;
    this.inFlight += bytes;
    return true;
  }

  /** @internal */
  forget(upload: BodyUpload): void {
    if (!this.uploads.delete(upload)) return;
    this.inFlight = Math.max(0, this.inFlight - upload.held);
    upload.held = 0;
  }

  /** Budgeted bytes held now. */
  get inUse(): number {
    return this.inFlight;
  }

  /** Bodies holding a share now (arriving or being answered). */
  get bodies(): number {
    return this.uploads.size;
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
    `too many large reviews in flight (${budget.inUse} bytes of bodies held by ${budget.bodies} reviews being answered or arriving fast, limit ${budget.maxBytes}); try again`,
  );
}

/** A body read whole, and its share of the budget (held until the caller releases it). */
interface ReadBody {
  readonly bytes: Buffer;
  readonly upload?: BodyUpload;
}

/**
 * Reads the whole body as bytes, refusing (413) as soon as it exceeds `limit`. With a budget,
 * the bytes read are taken from it as they arrive; the caller releases them after answering. On
 * a refusal, or when the budget cuts the upload to make room for another body (503), they are
 * given back here.
 */
function readBody(req: IncomingMessage, limit: number, budget?: BodyBudget): Promise<ReadBody> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    return Promise.reject(new RequestError(413, 'ERR_BODY_TOO_LARGE', `request body of ${cut(declared, 40)} bytes exceeds the limit of ${limit} bytes`));
  }
  // Plain listeners rather than an async iterator: this runs for every review.
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const cleanup = () => {
      settled = true;
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
    };
    const refuse = (error: RequestError) => {
      if (settled) return;
      cleanup();
      upload?.release();
      // Stop reading; the answer carries Connection: close.
      req.pause();
      reject(error);
    };
    const length = declared === undefined ? undefined : Number(declared);
    const upload = budget?.open(refuse, length !== undefined && Number.isSafeInteger(length) && length >= 0 ? length : undefined);
    const onData = (chunk: Buffer) => {
      if (upload && !upload.receive(chunk.length)) return refuse(overloaded(budget!));
      size += chunk.length;
      if (size > limit) return refuse(new RequestError(413, 'ERR_BODY_TOO_LARGE', `request body exceeds the limit of ${limit} bytes`));
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      if (upload) upload.complete = true;
      resolve({ bytes: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size), ...(upload ? { upload } : {}) });
    };
    const onError = (err: Error) => refuse(new RequestError(400, 'ERR_BODY_ABORTED', `request body could not be read: ${err.message}`));
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
 * Reads a JSON body after checking its media type (jsonBody). With a budget, the body's share
 * is handed to `onRead` as soon as the body is whole, and stays held until the caller releases
 * it (the body lives as long).
 */
export async function readJsonBody(
  req: IncomingMessage,
  limit: number,
  budget?: BodyBudget,
  onRead?: (upload: BodyUpload) => void,
  paths?: KeyPaths,
): Promise<JsonBody> {
  if (!isJsonMediaType(req.headers['content-type'])) {
    throw new RequestError(415, 'ERR_UNSUPPORTED_MEDIA_TYPE', `Content-Type must be application/json (got ${quote(req.headers['content-type'] ?? '')})`);
  }
  const { bytes, upload } = await readBody(req, limit, budget);
  if (upload) onRead?.(upload);
  return jsonBody(bytes, paths);
}

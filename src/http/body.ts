/**
 * Reading a review body with limits: declared and actual size (413), media type (415),
 * UTF-8 and JSON syntax (400). Every refusal is a RequestError with a message.
 */
import type { IncomingMessage } from 'node:http';
import { RequestError } from '../errors.js';
import { cut, quote } from '../quote.js';

/**
 * Default body limit: 7 MiB. The API server caps a request at 3 MiB of object (etcd's limit),
 * and the review wraps the object and, on UPDATE, the old object beside it; 7 MiB leaves room
 * for both plus the envelope (controller-runtime uses the same figure).
 */
export const defaultMaxBodyBytes = 7 * 1024 * 1024;

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Deepest JSON nesting accepted. A Pod is nested a dozen levels deep, and the API server's own
 * decoder refuses 10,000; parsing a body nested hundreds of thousands of levels deep would
 * stall the event loop for every other review, so such a body is refused before parsing.
 */
export const maxJsonDepth = 1000;

/** Bodies up to this size are parsed without the depth scan: at most 32k levels, parsed in well under a millisecond. */
const depthScanThreshold = 64 * 1024;

/** The nesting depth of JSON text, stopping as soon as it exceeds `limit`. Strings are skipped. */
export function jsonDepthExceeds(bytes: Uint8Array, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (inString) {
      if (b === 0x5c) i++; // backslash: skip the escaped byte
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if (b === 0x5b || b === 0x7b) {
      if (++depth > limit) return true;
    } else if (b === 0x5d || b === 0x7d) depth--;
  }
  return false;
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
 * Default sum of bodies held at once: 16 MiB — two bodies at the 7 MiB limit, or three thousand
 * typical reviews. A body stays counted until its answer is sent, and its parsed form takes up
 * to five times its size (a map of 200,000 keys), so this bounds the live memory of reviews
 * at about 110 MB whatever clients send: within the Deployment's 256 Mi with the V8 heap
 * capped at 160 MB (NODE_OPTIONS in manifests/base/deployment.yaml).
 */
export const defaultMaxBodyBytesInFlight = 16 * 1024 * 1024;

function overloaded(budget: BodyBudget): RequestError {
  return new RequestError(503, 'ERR_OVERLOADED', `too many large reviews in flight (${budget.inUse} bytes of bodies held, limit ${budget.maxBytes}); try again`);
}

/**
 * Reads the whole body as bytes, refusing (413) as soon as it exceeds `limit`. With a budget,
 * the bytes read are taken from it as they arrive and stay taken until the caller gives them
 * back (after answering); on a refusal they are given back here.
 */
export function readBody(req: IncomingMessage, limit: number, budget?: BodyBudget): Promise<Buffer> {
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
      budget?.give(size);
      // Stop reading; the answer carries Connection: close.
      req.pause();
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      if (budget && !budget.take(chunk.length)) return refuse(overloaded(budget));
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
      budget?.give(size);
      reject(new RequestError(400, 'ERR_BODY_ABORTED', `request body could not be read: ${err.message}`));
    };
    const onAborted = () => onError(new Error('the client went away'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}

/**
 * Reads and parses a JSON body after checking its media type. With a budget, the body's bytes
 * stay taken from it until the caller gives back `bytes.length` (the parsed object lives as long).
 */
export async function readJsonBody(req: IncomingMessage, limit: number, budget?: BodyBudget, onRead?: (bytes: number) => void): Promise<unknown> {
  if (!isJsonMediaType(req.headers['content-type'])) {
    throw new RequestError(415, 'ERR_UNSUPPORTED_MEDIA_TYPE', `Content-Type must be application/json (got ${quote(req.headers['content-type'] ?? '')})`);
  }
  const bytes = await readBody(req, limit, budget);
  onRead?.(bytes.length);
  // A body under 64 KiB cannot nest deeply enough to matter; larger ones are scanned.
  if (bytes.length > depthScanThreshold && jsonDepthExceeds(bytes, maxJsonDepth)) {
    throw new RequestError(400, 'ERR_MALFORMED_JSON', `request body is nested more than ${maxJsonDepth} levels deep; no Kubernetes object is`);
  }
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

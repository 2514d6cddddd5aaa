/**
 * Reading a review body with limits: declared and actual size (413), media type (415),
 * UTF-8 and JSON syntax (400). Every refusal is a RequestError with a message.
 */
import type { IncomingMessage } from 'node:http';
import { RequestError } from '../errors.js';

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

/** Reads the whole body as bytes, refusing (413) as soon as it exceeds `limit`. */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) {
    throw new RequestError(413, 'ERR_BODY_TOO_LARGE', `request body of ${declared} bytes exceeds the limit of ${limit} bytes`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > limit) throw new RequestError(413, 'ERR_BODY_TOO_LARGE', `request body exceeds the limit of ${limit} bytes`);
      chunks.push(chunk as Buffer);
    }
  } catch (err) {
    if (err instanceof RequestError) throw err;
    throw new RequestError(400, 'ERR_BODY_ABORTED', `request body could not be read: ${(err as Error).message}`);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}

/** Reads and parses a JSON body after checking its media type. */
export async function readJsonBody(req: IncomingMessage, limit: number): Promise<unknown> {
  if (!isJsonMediaType(req.headers['content-type'])) {
    throw new RequestError(415, 'ERR_UNSUPPORTED_MEDIA_TYPE', `Content-Type must be application/json (got ${JSON.stringify(req.headers['content-type'] ?? '')})`);
  }
  const bytes = await readBody(req, limit);
  if (jsonDepthExceeds(bytes, maxJsonDepth)) {
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
    throw new RequestError(400, 'ERR_MALFORMED_JSON', `request body is not valid JSON: ${(err as Error).message}`);
  }
}

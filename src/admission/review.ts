/**
 * AdmissionReview in and out, for admission.k8s.io/v1 and v1beta1. Pure. We answer in the
 * version we were sent, echo the uid, always set apiVersion and kind,
 * and set patchType and patch together or not at all.
 */
import type { Operation } from 'fast-json-patch';
import { RequestError } from '../errors.js';
import { isJsonObject } from '../k8s/json.js';
import { encodePatch } from '../inject/patch.js';
import { quote } from '../quote.js';

export const reviewVersions = ['admission.k8s.io/v1', 'admission.k8s.io/v1beta1'] as const;
export type ReviewVersion = (typeof reviewVersions)[number];

/** The fields of `request` we read; the rest of the request is ignored, never echoed. */
export interface AdmissionRequest {
  readonly uid: string;
  readonly kind: { readonly group: string; readonly version: string; readonly kind: string };
  readonly subResource: string;
  readonly name: string;
  readonly namespace: string;
  readonly operation: string;
  readonly object: unknown;
  /** The object as stored, on an UPDATE. */
  readonly oldObject: unknown;
  readonly dryRun: boolean;
}

/** A parsed review: its version and request. */
export interface ParsedReview {
  readonly version: ReviewVersion;
  readonly request: AdmissionRequest;
}

/** Longest request uid answered (the API server sends UUIDs, 36 characters). */
export const maxUidLength = 256;

/** Why `uid` is not a request uid we answer, or undefined when it is one. */
export function uidProblem(uid: unknown): string | undefined {
  if (typeof uid !== 'string' || uid === '') return 'request.uid must be a non-empty string';
  // The uid is echoed whole in the answer: a UUID is 36 characters, so a long one is no review of the API server's.
  if (uid.length > maxUidLength) return `request.uid must be at most ${maxUidLength} characters (got ${uid.length})`;
  return undefined;
}

function malformed(message: string): RequestError {
  return new RequestError(400, 'ERR_MALFORMED_REVIEW', `malformed AdmissionReview: ${message}`);
}

function optionalString(value: unknown, field: string): string {
  if (value === undefined || value === null) return '';
  if (typeof value !== 'string') throw malformed(`${field} must be a string`);
  return value;
}

/**
 * Checks that `body` is an AdmissionReview we can answer and returns its request. Throws
 * RequestError (400, ERR_MALFORMED_REVIEW) naming the first field that is wrong: without a
 * version and a uid there is no review to answer, so the answer is HTTP, not a denial.
 */
export function parseReview(body: unknown): ParsedReview {
  if (!isJsonObject(body)) throw malformed('the body must be a JSON object');
  const { apiVersion, kind, request } = body;
  if (!reviewVersions.includes(apiVersion as ReviewVersion)) {
    throw malformed(`apiVersion must be one of ${reviewVersions.join(', ')} (got ${apiVersion === undefined ? 'nothing' : quote(apiVersion)})`);
  }
  if (kind !== 'AdmissionReview') throw malformed(`kind must be AdmissionReview (got ${kind === undefined ? 'nothing' : quote(kind)})`);
  if (!isJsonObject(request)) throw malformed('request must be an object');
  const { uid, operation } = request;
  const problem = uidProblem(uid);
  if (problem !== undefined) throw malformed(problem);
  if (typeof operation !== 'string' || operation === '') throw malformed('request.operation must be a non-empty string');
  const gvk = request.kind;
  if (!isJsonObject(gvk) || typeof gvk.kind !== 'string') throw malformed('request.kind must be an object with a string kind');
  if (request.dryRun !== undefined && request.dryRun !== null && typeof request.dryRun !== 'boolean') {
    throw malformed('request.dryRun must be a boolean');
  }
  return {
    version: apiVersion as ReviewVersion,
    request: {
      uid: uid as string,
      kind: { group: optionalString(gvk.group, 'request.kind.group'), version: optionalString(gvk.version, 'request.kind.version'), kind: gvk.kind },
      subResource: optionalString(request.subResource, 'request.subResource'),
      name: optionalString(request.name, 'request.name'),
      namespace: optionalString(request.namespace, 'request.namespace'),
      operation,
      object: request.object,
      oldObject: request.oldObject,
      dryRun: request.dryRun === true,
    },
  };
}

/** Extra fields of an answer that explain it. */
export interface Explanation {
  readonly warnings?: readonly string[];
  readonly auditAnnotations?: Readonly<Record<string, string>>;
}

/** The AdmissionReview JSON we send back. */
export interface ReviewResponse {
  apiVersion: ReviewVersion;
  kind: 'AdmissionReview';
  response: {
    uid: string;
    allowed: boolean;
    patchType?: 'JSONPatch';
    patch?: string;
    status?: { status: 'Failure'; code: number; reason: string; message: string };
    warnings?: string[];
    auditAnnotations?: Record<string, string>;
  };
}

/** Longest warning we send; the API server's guidance. */
export const maxWarningLength = 120;
const maxWarnings = 20;
// Control characters make the API server drop a warning: matching them is the point.
// eslint-disable-next-line no-control-regex
const controlChars = /[\u0000-\u001f\u007f-\u009f]+/g;

/** Warnings as the API server will keep them: no control characters, ≤120 characters, no duplicates. */
export function sanitizeWarnings(warnings: readonly string[]): string[] {
  const out = new Set<string>();
  for (const raw of warnings) {
    // Cut early: a warning can quote a pod's value, and values can be megabytes long.
    let text = raw
      .slice(0, 4 * maxWarningLength)
      .replace(controlChars, ' ')
      .replace(/\s+/g, ' ')
      .trim();
    if (!text) continue;
    if ([...text].length > maxWarningLength) text = `${[...text].slice(0, maxWarningLength - 1).join('')}…`;
    out.add(text);
    if (out.size === maxWarnings) break;
  }
  return [...out];
}

function explained(response: ReviewResponse['response'], explanation: Explanation): ReviewResponse['response'] {
  const warnings = sanitizeWarnings(explanation.warnings ?? []);
  if (warnings.length > 0) response.warnings = warnings;
  const audit = explanation.auditAnnotations;
  if (audit && Object.keys(audit).length > 0) response.auditAnnotations = { ...audit };
  return response;
}

/** Allows the object unchanged: no patch fields at all. */
export function allowed(version: ReviewVersion, uid: string, explanation: Explanation = {}): ReviewResponse {
  return { apiVersion: version, kind: 'AdmissionReview', response: explained({ uid, allowed: true }, explanation) };
}

/** Allows the object with a JSON Patch; an empty patch is answered as `allowed`. */
export function patched(version: ReviewVersion, uid: string, patch: readonly Operation[], explanation: Explanation = {}): ReviewResponse {
  if (patch.length === 0) return allowed(version, uid, explanation);
  // Standard base64 with padding, as Go's []byte decoding requires.
  const encoded = Buffer.from(encodePatch(patch), 'utf8').toString('base64');
  return {
    apiVersion: version,
    kind: 'AdmissionReview',
    response: explained({ uid, allowed: true, patchType: 'JSONPatch', patch: encoded }, explanation),
  };
}

const reasons: Record<number, string> = { 400: 'BadRequest', 403: 'Forbidden', 422: 'Invalid', 500: 'InternalError', 503: 'ServiceUnavailable' };

/** Denies the request; kubectl shows `admission webhook "<name>" denied the request: <message>`. */
export function denied(version: ReviewVersion, uid: string, code: number, message: string, explanation: Explanation = {}): ReviewResponse {
  const httpCode = code >= 400 ? code : 400;
  return {
    apiVersion: version,
    kind: 'AdmissionReview',
    response: explained(
      { uid, allowed: false, status: { status: 'Failure', code: httpCode, reason: reasons[httpCode] ?? 'BadRequest', message } },
      explanation,
    ),
  };
}

/**
 * An answer's JSON text around its uid: `head`, the uid as a JSON string, `tail` — the bytes
 * JSON.stringify writes for the response (the uid is its first field), so that a remembered
 * answer is sent for another request without writing it again.
 */
export interface AnswerText {
  readonly head: Buffer;
  readonly tail: Buffer;
}

/** The text of `response` around its uid (AnswerText). */
export function answerText(response: ReviewResponse): AnswerText {
  const { uid: _uid, ...rest } = response.response;
  // `rest` holds `allowed` at least: the tail goes on with a comma.
  const head = `{"apiVersion":${JSON.stringify(response.apiVersion)},"kind":${JSON.stringify(response.kind)},"response":{"uid":`;
  return { head: Buffer.from(head), tail: Buffer.from(`,${JSON.stringify(rest).slice(1)}}`) };
}

/** The bytes of an answer for the request `uid`. */
export function answerBytes(text: AnswerText, uid: string): Buffer {
  return Buffer.concat([text.head, Buffer.from(JSON.stringify(uid)), text.tail]);
}

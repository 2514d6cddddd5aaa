/**
 * One AdmissionReview, end to end: parse, admit the pod, diff, answer. No I/O besides what
 * admission asks of the namespace label source; no clock, no logger: the outcome says what
 * happened and the HTTP layer logs and measures it.
 */
import { diff } from '../inject/diff.js';
import { admissionEvents, type AdmissionEvent } from '../pipeline/admission-events.js';
import { admitPod, type AdmitDeps, type PodOutcome } from '../pipeline/admit.js';
import { AnswerCache, matchedUid, reviewKeyText, uidOf, type AnswerKey, type ReviewKeyText } from './answer-cache.js';
import type { JsonTextScan } from '../k8s/json.js';
import { say, type Decision, type Reason } from '../pipeline/reasons.js';
import { cut } from '../quote.js';
import {
  allowed,
  answerBytes,
  answerText,
  denied,
  parseReview,
  patched,
  type AdmissionRequest,
  type AnswerText,
  type ReviewResponse,
  type ReviewVersion,
} from './review.js';

/** What a review needs from the rest of the process. */
export interface MutateDeps extends AdmitDeps {
  /** Answers of pods of one ReplicaSet, remembered (answer-cache.ts); none: every pod decided afresh. */
  readonly answers?: AnswerCache<CachedOutcome>;
}

/** A review's outcome as remembered: without the uid, with its events computed, and its answer's text. */
interface CachedOutcome {
  readonly outcome: Omit<ReviewOutcome, 'uid'>;
  readonly text: AnswerText;
}

/**
 * A review body as read: its bytes, what one scan of them found (with the spans of
 * answer-cache.ts reviewKeyPaths), and its parse, which throws RequestError (400) when the
 * bytes are not JSON.
 */
export interface ReviewBody {
  readonly bytes: Uint8Array;
  readonly scan: JsonTextScan;
  json(): unknown;
}

/** A review answered: the outcome and the answer's bytes. */
export interface Answered {
  readonly outcome: ReviewOutcome;
  readonly answer: Buffer;
}

export type { Decision, Reason };

/** The answer and what to log about it (never pod contents). */
export interface ReviewOutcome {
  readonly response: ReviewResponse;
  readonly decision: Decision;
  readonly reason: Reason;
  readonly uid: string;
  readonly namespace: string;
  readonly pod: string;
  readonly operation: string;
  readonly dryRun: boolean;
  /** Templates selected for the pod. */
  readonly templates: readonly string[];
  /** Templates that added something in this review. */
  readonly injected: readonly string[];
  readonly patchOps: number;
  readonly message: string;
  /** Decisions worth a log field but no warning (the default container set, …). */
  readonly notes?: readonly string[];
  /** The Events this review deserves (none for dry runs: sideEffects NoneOnDryRun), computed when asked. */
  readonly events?: () => readonly AdmissionEvent[];
  /**
   * For an answer from the cache: the remembered outcome it was made from, the same object for
   * every review answered from one entry (what the log line can be prepared once for).
   */
  readonly remembered?: object;
}

/** Operations of admission.k8s.io; anything else is logged and counted as `other` (labels stay a bounded set). */
const operations = new Set(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']);

/**
 * Answers one parsed AdmissionReview, deciding afresh. Throws RequestError only when the body
 * is not a review we can answer (no version or uid); every other problem becomes a denial with
 * a reason.
 */
export async function mutate(body: unknown, deps: MutateDeps): Promise<ReviewOutcome> {
  const { version, request } = parseReview(body);
  const { podOutcome: _podOutcome, ...outcome } = await review(version, request, deps);
  return outcome;
}

/** One review decided: the outcome, and for a pod CREATE the pod's own (podOutcome). */
async function review(version: ReviewVersion, request: AdmissionRequest, deps: MutateDeps): Promise<ReviewOutcome & { readonly podOutcome?: PodOutcome }> {
  // What is logged and measured is cut: every field here can be megabytes from a direct caller.
  const operation = operations.has(request.operation) ? request.operation : 'other';
  const base = {
    uid: request.uid,
    operation,
    dryRun: request.dryRun,
    namespace: cut(request.namespace, 100),
    pod: cut(request.name, 100),
    templates: [],
    injected: [],
    patchOps: 0,
  };
  // Only pod CREATE is ours; everything else passes untouched.
  const notOurs =
    request.operation !== 'CREATE'
      ? (['operation-not-create', say('operation-not-create', cut(request.operation, 40))] as const)
      : request.kind.kind !== 'Pod' || request.kind.group !== ''
        ? (['not-a-pod', say('not-a-pod', cut(request.kind.kind, 60))] as const)
        : request.subResource
          ? (['subresource', say('subresource', cut(request.subResource, 60))] as const)
          : undefined;
  if (notOurs) return { ...base, response: allowed(version, request.uid), decision: 'allowed', reason: notOurs[0], message: notOurs[1] };
  return decide(version, request, deps, base);
}

/**
 * Answers one review body: from the answers remembered for its key text when one is (no parse
 * at all), else parsed and decided by mutate, and remembered when it was a pod CREATE whose
 * parsed request names the uid and namespace the key was read from.
 */
export async function answerReview(body: ReviewBody, deps: MutateDeps): Promise<Answered> {
  const cache = deps.answers;
  const keyText = cache && body.bytes.length <= cache.maxBodyBytes ? reviewKeyText(body.bytes, body.scan) : undefined;
  const key = keyText && (await answerKey(keyText, cache!, deps));
  const cached =
    key &&
    cache!.use(key, (hit): Answered | undefined => {
      const uid = matchedUid(keyText!);
      if (uid === undefined) return undefined;
      const { response } = hit.outcome;
      const outcome: ReviewOutcome = { ...hit.outcome, uid, response: { ...response, response: { ...response.response, uid } }, remembered: hit };
      return { outcome, answer: answerBytes(hit.text, uid) };
    });
  if (cached) return cached;
  const { version, request } = parseReview(body.json());
  const { podOutcome, ...outcome } = await review(version, request, deps);
  const text = answerText(outcome.response);
  // Only a pod CREATE, only when the parser read the uid and namespace where the scan did, and
  // only the second time its key comes (answer-cache.ts admits).
  if (key !== undefined && podOutcome && request.uid === uidOf(keyText!) && request.namespace === keyText!.namespace && cache!.admits(key)) {
    // Remembered without the pod objects (podOutcome) and the uid; events computed now.
    const { uid: _uid, events: _events, ...kept } = outcome;
    const events = admissionEvents(podOutcome, request.object);
    const remembered = { ...kept, ...(request.dryRun ? {} : { events: () => events }) };
    cache!.set(key, { outcome: remembered, text }, text.head.length + text.tail.length + 1024);
  }
  return { outcome, answer: answerBytes(text, request.uid) };
}

/**
 * The cache key of a review: its key text and the state it is decided in — the template set,
 * its namespace's labels and overrides, the Kubernetes version — by identity, and the
 * webhook's class and Pod Security action. Undefined when the state cannot be read (labels
 * unknown: decided afresh, and refused or allowed as the policy says).
 */
async function answerKey(keyText: ReviewKeyText, cache: AnswerCache<CachedOutcome>, deps: MutateDeps): Promise<AnswerKey | undefined> {
  const { namespace } = keyText;
  let labels: object;
  try {
    labels = await deps.namespaces.labelsOf(namespace);
  } catch {
    return undefined;
  }
  const state = [deps.templates(), labels, deps.namespaces.overridesOf?.(namespace), deps.kubernetesVersion?.()];
  return cache.keyOf(keyText, state, `${deps.failurePolicy ?? ''}/${deps.podSecurity ?? ''}`);
}

/** Decides one pod CREATE afresh (admit, then the answer). */
async function decide(
  version: ReviewVersion,
  request: AdmissionRequest,
  deps: MutateDeps,
  base: Pick<ReviewOutcome, 'uid' | 'operation' | 'dryRun' | 'namespace' | 'pod' | 'templates' | 'injected' | 'patchOps'>,
): Promise<ReviewOutcome & { readonly podOutcome: PodOutcome }> {
  const outcome = await admitPod({ pod: request.object, namespace: request.namespace, name: request.name }, deps);
  const summary = {
    ...base,
    namespace: outcome.namespace,
    pod: outcome.podName,
    templates: outcome.templates.map((t) => t.name),
    reason: outcome.reason,
    message: outcome.message,
    ...(outcome.notes?.length ? { notes: outcome.notes.map((n) => cut(n, 200)) } : {}),
    // A dry run has no side effects, events included.
    ...(request.dryRun ? {} : { events: () => admissionEvents(outcome, request.object) }),
  };
  switch (outcome.decision) {
    case 'denied':
      return { ...summary, podOutcome: outcome, response: denied(version, request.uid, outcome.code, outcome.message), decision: 'denied' };
    case 'allowed':
      return {
        ...summary,
        podOutcome: outcome,
        response: allowed(version, request.uid, { warnings: outcome.warnings.map((w) => w.text) }),
        decision: 'allowed',
      };
    case 'patched': {
      const ops = diff(outcome.original, outcome.injection.pod);
      const injected = outcome.injection.injected;
      const hashes = new Map(outcome.templates.map((t) => [t.name, t.hash]));
      const audit: Record<string, string> = { injected: injected.map((name) => `${name}@${hashes.get(name) ?? ''}`).join(',') };
      // The namespace's audit level, in the audit event the API server writes.
      if (outcome.podSecurityAudit) audit['pod-security-audit'] = cut(outcome.podSecurityAudit, 1000);
      return {
        ...summary,
        podOutcome: outcome,
        response: patched(version, request.uid, ops, { warnings: outcome.warnings.map((w) => w.text), auditAnnotations: audit }),
        decision: 'patched',
        injected,
        patchOps: ops.length,
      };
    }
  }
}

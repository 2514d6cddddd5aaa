/**
 * One AdmissionReview, end to end: parse, admit the pod, diff, answer. No I/O besides what
 * admission asks of the namespace label source; no clock, no logger: the outcome says what
 * happened and the HTTP layer logs and measures it.
 */
import { diff } from '../inject/diff.js';
import { admissionEvents, type AdmissionEvent } from '../pipeline/admission-events.js';
import { admitPod, type AdmitDeps, type PodOutcome } from '../pipeline/admit.js';
import { compileKeyPaths, isJsonObject, spansAt, type JsonTextScan, type KeyPaths } from '../k8s/json.js';
import { AnnotationKeys } from '../k8s/keys.js';
import { say, type Decision, type Reason } from '../pipeline/reasons.js';
import { cut } from '../quote.js';
import type { TemplateFailurePolicy } from '../templates/template.js';
import {
  allowed,
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
export type MutateDeps = AdmitDeps;

/**
 * A review body as read: its bytes, what one scan of them found (with the spans of the
 * reviewer's keyPaths), and its parse, which throws RequestError (400) when the bytes are not
 * JSON.
 */
export interface ReviewBody {
  readonly bytes: Uint8Array;
  readonly scan: JsonTextScan;
  /** The key paths the scan followed. */
  readonly paths?: KeyPaths;
  /** The parse, with the values at the `unread` byte spans left out (read as null). */
  json(unread?: readonly number[]): unknown;
}

/**
 * Where in a review the values lie that no decision reads, and that a review is parsed without
 * (http/body.ts, parseJsonBytesWithout): the pod's managedFields, a third or more of a
 * controller's pod and thousands of small objects. The answer is the answer of the whole
 * parse (a property test holds it so); the answer cache cuts the same values out of its key.
 */
export const unreadPaths: readonly (readonly string[])[] = [['request', 'object', 'metadata', 'managedFields']];

/**
 * The byte spans of a body's unread values (unreadPaths), when its scan found them where a
 * parse finds them: no object key on the way escaped, no followed key repeated.
 */
function unreadSpans(body: ReviewBody): number[] | undefined {
  if (!body.paths || body.scan.escapedKeys || body.scan.repeatedKeys) return undefined;
  return spansAt(body.scan, body.paths, unreadPaths);
}

/** A review answered: the outcome and the answer's bytes. */
export interface Answered {
  readonly outcome: ReviewOutcome;
  readonly answer: Buffer;
  /**
   * For a pod CREATE decided afresh: the request's uid and namespace as parsed, and the
   * answer's text around the uid. What a layer that remembers answers needs to know that this
   * answer is one decision about this body (its text around the uid made when asked: a layer
   * remembers few of the answers it sees).
   */
  readonly decidedPod?: { readonly uid: string; readonly namespace: string; text(): AnswerText };
}

/**
 * Which webhook a review came through (its path says it, app.ts): `all` injects every
 * template, `required` and `optional` only the templates of that failurePolicy.
 */
export type Webhook = 'all' | 'required' | 'optional';

/**
 * What answers review bodies. The HTTP layer calls it once per review; a layer around it
 * (an answer cache) can answer some bodies itself and pass the others on.
 */
export interface Reviewer {
  /** The spans of the body the reviewer reads before parsing, recorded by the body's one scan. */
  readonly keyPaths?: KeyPaths;
  answer(body: ReviewBody, webhook: Webhook): Promise<Answered>;
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
  /** Templates marked `delivery: policy` the pod reached the webhook without (warning policy-delivery-missing): the policy is absent, stale, or decides otherwise. */
  readonly policyDeliveryMissing?: readonly string[];
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
  // A simulation's dry run carries the sidecars of the templates it simulates: the rest of the chain judges that pod as it is.
  if (request.dryRun && isSimulation(request.object))
    return { ...base, response: allowed(version, request.uid), decision: 'allowed', reason: 'simulation', message: say('simulation') };
  return decide(version, request, deps, base);
}

/** Whether a pod carries the annotation of a `simulate` dry run. */
function isSimulation(pod: unknown): boolean {
  const metadata = isJsonObject(pod) && isJsonObject(pod.metadata) ? pod.metadata : undefined;
  return isJsonObject(metadata?.annotations) && Object.hasOwn(metadata.annotations, AnnotationKeys.simulation);
}

/** Answers one review body, parsed and decided by mutate's rules. */
export async function answerReview(body: ReviewBody, deps: MutateDeps): Promise<Answered> {
  const { version, request } = parseReview(body.json(unreadSpans(body)));
  const { podOutcome, ...outcome } = await review(version, request, deps);
  // The answer's text once; its parts around the uid only for a layer that remembers it (the same bytes).
  const { response } = outcome;
  return {
    outcome,
    answer: Buffer.from(JSON.stringify(response)),
    ...(podOutcome ? { decidedPod: { uid: request.uid, namespace: request.namespace, text: () => answerText(response) } } : {}),
  };
}

const freshKeyPaths = compileKeyPaths(unreadPaths);

/** The class of templates the required and the optional webhook each inject (`all` injects every one). */
export const webhookFailurePolicy = { required: 'Fail', optional: 'Ignore' } as const satisfies Record<Exclude<Webhook, 'all'>, TemplateFailurePolicy>;

/** The reviewer deciding every body afresh, each webhook with its own class of templates. */
export function createReviewer(deps: MutateDeps): Reviewer {
  const byWebhook: Readonly<Record<Webhook, MutateDeps>> = {
    all: { ...deps, leavesPolicyDelivered: true },
    required: { ...deps, failurePolicy: webhookFailurePolicy.required, leavesPolicyDelivered: true },
    optional: { ...deps, failurePolicy: webhookFailurePolicy.optional, leavesPolicyDelivered: true },
  };
  return { keyPaths: freshKeyPaths, answer: (body, webhook) => answerReview(body, byWebhook[webhook]) };
}

/** The templates an outcome warned were not delivered by their MutatingAdmissionPolicy, as an outcome field. */
function policyDeliveryMissing(outcome: PodOutcome): Pick<ReviewOutcome, 'policyDeliveryMissing'> {
  const missing = outcome.warnings.filter((w) => w.id === 'policy-delivery-missing' && w.template !== undefined).map((w) => w.template!);
  return missing.length > 0 ? { policyDeliveryMissing: missing } : {};
}

/** Decides one pod CREATE afresh (admit, then the answer). */
async function decide(
  version: ReviewVersion,
  request: AdmissionRequest,
  deps: MutateDeps,
  base: Pick<ReviewOutcome, 'uid' | 'operation' | 'dryRun' | 'namespace' | 'pod' | 'templates' | 'injected' | 'patchOps'>,
): Promise<ReviewOutcome & { readonly podOutcome: PodOutcome }> {
  const outcome = await admitPod({ pod: request.object, namespace: request.namespace, name: request.name, dryRun: request.dryRun }, deps);
  const summary = {
    ...base,
    namespace: outcome.namespace,
    pod: outcome.podName,
    templates: outcome.templates.map((t) => t.name),
    reason: outcome.reason,
    message: outcome.message,
    ...(outcome.notes?.length ? { notes: outcome.notes.map((n) => cut(n, 200)) } : {}),
    ...policyDeliveryMissing(outcome),
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

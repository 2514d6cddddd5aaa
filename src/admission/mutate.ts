/**
 * One AdmissionReview, end to end: parse, admit the pod, diff, answer. No I/O besides what
 * admission asks of the namespace label source; no clock, no logger: the outcome says what
 * happened and the HTTP layer logs and measures it.
 */
import { diff } from '../inject/diff.js';
import { admissionEvents, type AdmissionEvent } from '../pipeline/admission-events.js';
import { admitPod, type AdmitDeps, type PodOutcome } from '../pipeline/admit.js';
import { AnswerCache, withUid } from './answer-cache.js';
import { isDns1123Label } from '../k8s/label-syntax.js';
import { say, type Decision, type Reason } from '../pipeline/reasons.js';
import { cut } from '../quote.js';
import { allowed, denied, parseReview, patched, type AdmissionRequest, type ReviewResponse, type ReviewVersion } from './review.js';

/** What a review needs from the rest of the process. */
export interface MutateDeps extends AdmitDeps {
  /** Answers of pods of one ReplicaSet, remembered (answer-cache.ts); none: every pod decided afresh. */
  readonly answers?: AnswerCache<CachedOutcome>;
}

/** A review's outcome as remembered: without the uid, and with its events computed. */
interface CachedOutcome {
  readonly outcome: Omit<ReviewOutcome, 'uid' | 'dryRun' | 'events'>;
  readonly events: readonly AdmissionEvent[];
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
}

/**
 * Answers one AdmissionReview body. Throws RequestError only when the body is not a review we
 * can answer (no version or uid); every other problem becomes a denial with a reason.
 */
/** Operations of admission.k8s.io; anything else is logged and counted as `other` (labels stay a bounded set). */
const operations = new Set(['CREATE', 'UPDATE', 'DELETE', 'CONNECT']);

export async function mutate(body: unknown, deps: MutateDeps, options: { readonly cacheable?: boolean } = {}): Promise<ReviewOutcome> {
  const { version, request } = parseReview(body);
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

  // Pods of one ReplicaSet: the answer decided for the first is the answer for the others.
  const key = options.cacheable && deps.answers ? await answerKey(version, request, deps) : undefined;
  if (key !== undefined) {
    const hit = deps.answers!.get(key);
    if (hit) {
      const { events } = hit;
      return {
        ...hit.outcome,
        uid: request.uid,
        dryRun: request.dryRun,
        response: withUid(hit.outcome.response, request.uid),
        ...(request.dryRun ? {} : { events: () => events }),
      };
    }
  }
  const decided = await decide(version, request, deps, base);
  if (key !== undefined) {
    // Remembered without the pod objects (podOutcome) and the uid; events computed now.
    const { uid: _uid, dryRun: _dryRun, events: _events, podOutcome, ...outcome } = decided;
    const events = admissionEvents(podOutcome, request.object);
    deps.answers!.set(key, { outcome, events }, (outcome.response.response.patch?.length ?? 0) + 1024);
  }
  const { podOutcome: _podOutcome, ...answer } = decided;
  return answer;
}

/**
 * The cache key of a pod CREATE: the pod and the state it is decided in — the template set,
 * the namespace's labels and overrides, the Kubernetes version — by identity, and the webhook's
 * class and Pod Security action. Undefined when the state cannot be read (labels unknown:
 * decided afresh, and refused or allowed as the policy says).
 */
async function answerKey(version: ReviewVersion, request: AdmissionRequest, deps: MutateDeps): Promise<string | undefined> {
  // Only a namespace that can be one: the state is read for it before the pod is validated, and
  // an empty one would make the key read another namespace than the decision does.
  if (!isDns1123Label(request.namespace)) return undefined;
  let labels: object;
  try {
    labels = await deps.namespaces.labelsOf(request.namespace);
  } catch {
    return undefined;
  }
  const state = [deps.templates(), labels, deps.namespaces.overridesOf?.(request.namespace), deps.kubernetesVersion?.()];
  return deps.answers!.keyOf(version, request, state, `${deps.failurePolicy ?? ''}/${deps.podSecurity ?? ''}`);
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
      return { ...summary, podOutcome: outcome, response: allowed(version, request.uid, { warnings: outcome.warnings }), decision: 'allowed' };
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
        response: patched(version, request.uid, ops, { warnings: outcome.warnings, auditAnnotations: audit }),
        decision: 'patched',
        injected,
        patchOps: ops.length,
      };
    }
  }
}

/**
 * One review, end to end: parse, decide, render, inject, diff, answer. No I/O besides asking
 * the namespace label source; no clock, no logger: the outcome says what happened and the
 * HTTP layer logs and measures it.
 */
import type { Operation } from 'fast-json-patch';
import { AdmissionError } from '../errors.js';
import { diff } from '../inject/diff.js';
import { inject, ownMetadata } from '../inject/inject.js';
import { Annotations } from '../inject/keys.js';
import { indexLedger, parseLedger } from '../inject/ledger.js';
import { podDisplayName, readPod, type PodParts } from '../inject/pod.js';
import { requestedTemplates, select, type PodSkipReason } from '../selection/decide.js';
import { NamespaceLabelsUnavailable, type NamespaceLabelSource } from '../selection/namespace-labels.js';
import type { TemplateSet } from '../templates/load.js';
import type { RenderContext } from '../templates/placeholders.js';
import { render } from '../templates/render.js';
import { allowed, denied, parseReview, patched, type AdmissionRequest, type ReviewResponse } from './review.js';

/** What a review needs from the rest of the process. */
export interface MutateDeps {
  /** The template set in force (read per review, so a reload takes effect at once). */
  readonly templates: () => TemplateSet;
  readonly namespaces: NamespaceLabelSource;
}

/** `patched`: allowed with a patch; `allowed`: allowed unchanged; `denied`: allowed false. */
export type Decision = 'patched' | 'allowed' | 'denied';

/** Why: a stable id for logs and metrics. */
export type Reason =
  | 'injected'
  | 'already-injected'
  | 'nothing-to-add'
  | 'operation-not-create'
  | 'not-a-pod'
  | 'subresource'
  | PodSkipReason
  | 'invalid-pod'
  | 'unknown-template'
  | 'namespace-unknown';

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
  readonly templates: readonly string[];
  readonly patchOps: number;
  readonly message: string;
}

function contextFor(parts: PodParts, request: AdmissionRequest, namespace: string, own: { labels: Record<string, string>; annotations: Record<string, string> }, namespaceLabels: Readonly<Record<string, string>>): RenderContext {
  const { metadata, spec } = parts;
  const generateName = typeof metadata.generateName === 'string' ? metadata.generateName : '';
  const name = typeof metadata.name === 'string' && metadata.name ? metadata.name : generateName.replace(/-+$/, '');
  const serviceAccountName =
    typeof spec.serviceAccountName === 'string' && spec.serviceAccountName
      ? spec.serviceAccountName
      : typeof spec.serviceAccount === 'string' && spec.serviceAccount
        ? spec.serviceAccount
        : 'default';
  return {
    pod: { name: name || request.name, generateName, namespace, serviceAccountName, labels: own.labels, annotations: own.annotations },
    namespace: { name: namespace, labels: namespaceLabels },
  };
}

/**
 * Answers one AdmissionReview body. Throws RequestError only when the body is not a review we
 * can answer (no version or uid); every other problem becomes a denial with a reason.
 */
export async function mutate(body: unknown, deps: MutateDeps): Promise<ReviewOutcome> {
  const { version, request } = parseReview(body);
  const base = {
    uid: request.uid,
    namespace: request.namespace,
    pod: request.name,
    operation: request.operation,
    dryRun: request.dryRun,
    templates: [] as string[],
    patchOps: 0,
  };
  const pass = (reason: Reason, message: string, warnings: readonly string[] = []): ReviewOutcome => ({
    ...base,
    response: allowed(version, request.uid, { warnings }),
    decision: 'allowed',
    reason,
    message,
  });

  // Only pod CREATE is ours; everything else passes untouched.
  if (request.operation !== 'CREATE') return pass('operation-not-create', `operation ${request.operation} is not CREATE`);
  if (request.kind.kind !== 'Pod' || request.kind.group !== '') return pass('not-a-pod', `kind ${request.kind.kind} is not a core Pod`);
  if (request.subResource) return pass('subresource', `subresource ${request.subResource} is not the pod itself`);

  try {
    const parts = readPod(request.object);
    const pod = request.object as Record<string, unknown>;
    base.pod = podDisplayName(parts.metadata) || request.name;
    // Controller-created pods had no metadata.namespace before Kubernetes 1.24.
    const namespace = request.namespace || (typeof parts.metadata.namespace === 'string' ? parts.metadata.namespace : '');
    if (!namespace) throw new AdmissionError('ERR_INVALID_POD', 'the pod has no namespace: request.namespace and metadata.namespace are both empty');
    base.namespace = namespace;

    const { ledger, problem } = parseLedger(parts.annotations[Annotations.status]);
    const owner = indexLedger(ledger);
    const own = ownMetadata(parts, owner);
    const warnings: string[] = problem ? [problem] : [];
    const namespaceLabels = await deps.namespaces.labelsOf(namespace);
    const set = deps.templates();
    const selection = select({ namespace, namespaceLabels, podLabels: own.labels, podAnnotations: own.annotations }, set);
    // A template the pod asked for by name and did not get deserves a sentence.
    const requested = new Set(requestedTemplates(own.annotations));
    for (const skip of selection.skipped) if (requested.has(skip.template)) warnings.push(skip.message);
    if (selection.reason) {
      if (selection.reason === 'namespace-not-enabled' && requested.size > 0) warnings.push(`${selection.message}; requested templates are not injected`);
      return pass(selection.reason, selection.message, warnings);
    }

    const context = contextFor(parts, request, namespace, own, namespaceLabels);
    const rendered = selection.templates.map((t) => render(t, context));
    const result = inject(pod, parts, ledger, owner, rendered);
    warnings.push(...result.warnings);
    base.templates = selection.templates.map((t) => t.name);
    if (!result.changed) {
      const all = selection.templates.every((t) => Object.hasOwn(ledger.templates, t.name));
      return pass(all ? 'already-injected' : 'nothing-to-add', all ? 'the pod already carries its sidecars' : 'every item of the selected templates is already in the pod', warnings);
    }
    const ops: Operation[] = diff(pod, result.pod);
    const injected = result.injected.map((name) => `${name}@${set.byName.get(name)?.hash ?? ''}`).join(',');
    base.patchOps = ops.length;
    return {
      ...base,
      response: patched(version, request.uid, ops, { warnings, auditAnnotations: { injected } }),
      decision: 'patched',
      reason: 'injected',
      message: `injected ${result.injected.join(', ')}`,
    };
  } catch (err) {
    if (err instanceof NamespaceLabelsUnavailable) {
      if (err.policy === 'allow') return pass('namespace-unknown', err.message, [`no sidecars injected: ${err.message}`]);
      const message = `${err.message}; the pod is refused so that it does not start without its sidecars, and its controller will retry`;
      return { ...base, response: denied(version, request.uid, 503, message), decision: 'denied', reason: 'namespace-unknown', message };
    }
    if (!(err instanceof AdmissionError)) throw err;
    const reason: Reason = err.code === 'ERR_UNKNOWN_TEMPLATE' ? 'unknown-template' : 'invalid-pod';
    return { ...base, response: denied(version, request.uid, err.httpCode, err.message), decision: 'denied', reason, message: err.message };
  }
}

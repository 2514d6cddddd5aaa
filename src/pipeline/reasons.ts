/**
 * The one catalogue of outcomes: every reason a review can end with, its decision, the code of
 * a denial, and the sentence a person reads (in `kubectl`, a warning, the log line). Reason ids
 * are metric labels and the log line's `reason`; the README's list is checked against this table.
 */
import { AnnotationKeys, LabelKeys, LabelValues } from '../k8s/keys.js';
import { maxAnnotationBytes } from '../k8s/pod-validation.js';
import type { AdmissionErrorCode } from '../errors.js';
import { quoteList } from '../quote.js';
import { nearestName } from '../k8s/schema-fields.js';

/** `patched`: allowed with a patch; `allowed`: allowed unchanged; `denied`: allowed false. */
export type Decision = 'patched' | 'allowed' | 'denied';

interface ReasonSpec {
  /** The decision a review with this reason gets. */
  readonly decision: Decision;
  /** The status code of a denial. */
  readonly code?: number;
  /** When the decision differs (a policy), in words: for the README and the reader. */
  readonly otherwise?: string;
  /** The sentence. */
  readonly say: (...args: never[]) => string;
}

/** `did you mean proxy? ` for the requested names one typo away from a template's. */
function nearTemplates(unknown: readonly string[], available: readonly string[]): string {
  const near = [...new Set(unknown.slice(0, 5).flatMap((name) => nearestName(name, available) ?? []))];
  return near.length > 0 ? `did you mean ${near.join(', ')}? ` : '';
}

export const reasons = {
  // Pods injected or left as they are.
  injected: { decision: 'patched', say: (templates: readonly string[]) => `injected ${templates.join(', ')}` },
  'already-injected': { decision: 'allowed', say: () => 'the pod already carries its sidecars' },
  'nothing-to-add': { decision: 'allowed', say: () => 'every item of the selected templates is already in the pod' },
  'template-conflict': {
    decision: 'allowed',
    say: (templates: readonly string[]) => `not injected: ${templates.join(', ')} (the pod's own items are in the way)`,
  },
  'pod-opted-out': { decision: 'allowed', say: () => `pod has label ${LabelKeys.podOptOut}=${LabelValues.disabled}` },
  'mirror-pod': { decision: 'allowed', say: () => `a mirror pod (annotation ${AnnotationKeys.mirror}) belongs to the kubelet and is never injected` },
  'namespace-not-enabled': {
    decision: 'allowed',
    say: (namespace: string) => `namespace ${namespace} does not have label ${LabelKeys.namespaceOptIn}=${LabelValues.enabled}`,
  },
  'no-template-matched': { decision: 'allowed', say: () => 'no template matches this pod' },
  'other-webhook': {
    decision: 'allowed',
    say: (templates: readonly string[], policy: string) =>
      `${templates.join(', ')} ${templates.length === 1 ? 'is' : 'are'} injected by the other webhook (this one injects failurePolicy ${policy} templates)`,
  },
  'delivered-by-policy': {
    decision: 'allowed',
    say: (templates: readonly string[]) =>
      `${templates.join(', ')} ${templates.length === 1 ? 'is' : 'are'} injected by the API server's MutatingAdmissionPolicy (delivery: policy), not by this webhook`,
  },
  'cluster-unfit': {
    decision: 'allowed',
    say: (templates: readonly string[]) => `not injected: ${templates.join(', ')} left out by a rule (the warnings say which)`,
  },
  // Reviews that are not ours.
  'operation-not-create': { decision: 'allowed', say: (operation: string) => `operation ${operation} is not CREATE` },
  'not-a-pod': { decision: 'allowed', say: (kind: string) => `kind ${kind} is not a core Pod` },
  simulation: {
    decision: 'allowed',
    say: () => `a dry run of sidecar-injector simulate (annotation ${AnnotationKeys.simulation}): the pod carries the sidecars simulated; left as it is`,
  },
  subresource: { decision: 'allowed', say: (subresource: string) => `subresource ${subresource} is not the pod itself` },
  // Pods refused.
  'invalid-pod': { decision: 'denied', code: 400, say: (problem: string) => problem },
  'pod-too-large': { decision: 'denied', code: 400, say: (problem: string) => problem },
  'annotations-over-limit': {
    decision: 'denied',
    code: 400,
    say: (templates: readonly string[], bytes: number) =>
      `injecting ${templates.join(', ')} would take the pod's annotations to ${bytes} bytes, over the API server's limit of ${maxAnnotationBytes}; shorten the pod's annotations`,
  },
  'unknown-template': {
    decision: 'denied',
    code: 400,
    say: (unknown: readonly string[], available: readonly string[]) =>
      `annotation ${AnnotationKeys.request} names ${quoteList(unknown)}, which ${unknown.length === 1 ? 'is' : 'are'} not a sidecar template here (${nearTemplates(unknown, available)}available: ${available.join(', ') || 'none'}); fix the annotation or add the template`,
  },
  'invalid-override': { decision: 'denied', code: 400, say: (message: string) => `${message}; fix or remove the annotation` },
  'native-sidecars-unsupported': { decision: 'denied', code: 400, say: (message: string) => message },
  'required-sidecar-unavailable': {
    decision: 'denied',
    code: 403,
    say: (first: string, more: number) => (more > 0 ? `${first} (and ${more} more required ${more === 1 ? 'sidecar' : 'sidecars'})` : first),
  },
  'opt-out-refused': {
    decision: 'denied',
    code: 403,
    say: (templates: readonly string[], requested: readonly string[]) =>
      `pod has label ${LabelKeys.podOptOut}=${LabelValues.disabled}, and the required ${templates.length === 1 ? 'template' : 'templates'} ${templates.join(', ')} that ${templates.length === 1 ? 'applies' : 'apply'} to it ${templates.length === 1 ? 'does' : 'do'} not let a pod opt out (optOut: deny); remove the label${requested.length > 0 ? `, or stop requesting ${requested.join(', ')} in annotation ${AnnotationKeys.request}` : ''}, or ask the platform team to change the template's selectors or optOut`,
  },
  'pod-security': {
    decision: 'denied',
    code: 403,
    otherwise: 'the template is left out with a warning (--pod-security skip, the default), or injected with a warning (inject)',
    say: (message: string) => message,
  },
  'namespace-unknown': {
    decision: 'denied',
    code: 503,
    otherwise: 'allowed unchanged, with a warning, under --namespace-failure-policy allow',
    say: (cause: string) => `${cause}; the pod is refused so that it does not start without its sidecars, and its controller will retry`,
  },
  'required-template-refused': {
    decision: 'denied',
    code: 503,
    otherwise: 'nothing: a required template applies; its SidecarTemplate must be fixed (the optional webhook is not concerned)',
    say: (object: string, problem: string) =>
      `the required template of SidecarTemplate ${object} may apply to this pod, and the injector refuses that object (${problem}); the pod is refused so that it does not start without it: fix the SidecarTemplate (kubectl get sidecartemplate ${object} -o yaml shows why in its status)`,
  },
  'templates-unknown': {
    decision: 'denied',
    code: 503,
    otherwise: 'allowed unchanged, with a warning, on the optional webhook (its templates are never worth a refusal)',
    say: (cause: string) =>
      `the templates in force are not known yet: ${cause}; the pod is refused so that it does not start without a required sidecar, and its controller will retry`,
  },
} as const satisfies Record<string, ReasonSpec>;

/** Why: a stable id for logs and metrics. */
export type Reason = keyof typeof reasons;

/** Reasons that end in a denial, and those that allow. */
export type DenialReason = { [R in Reason]: (typeof reasons)[R]['decision'] extends 'denied' ? R : never }[Reason];

/** The reason a pod refused while it is read gets, by the error's code. */
export const reasonOfAdmissionError = { ERR_INVALID_POD: 'invalid-pod', ERR_POD_TOO_LARGE: 'pod-too-large' } as const satisfies Record<
  AdmissionErrorCode,
  Reason
>;

/** The sentence for `reason`, with its arguments. */
export function say<R extends Reason>(reason: R, ...args: Parameters<(typeof reasons)[R]['say']>): string {
  return (reasons[reason].say as (...a: unknown[]) => string)(...args);
}

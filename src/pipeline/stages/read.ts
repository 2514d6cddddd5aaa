/**
 * Stage 1, read: the pod parsed, its name and namespace known, and refused before any work when
 * the API server would refuse it or it is out of proportion to any real pod; a mirror pod is
 * let through as it is.
 */
import { AnnotationKeys, LabelKeys, LabelValues } from '../../k8s/keys.js';
import { isJsonObject } from '../../k8s/json.js';
import { parsePod, podDisplayName, type PodParts } from '../../k8s/pod.js';
import { admissionProblem } from '../../k8s/pod-validation.js';
import { cut } from '../../quote.js';
import type { TemplateSet } from '../../templates/set.js';
import { say } from '../reasons.js';
import { warning } from '../warnings.js';
import { denied, done, noneApply, type AdmitDeps, type PodInput, type Progress, type Step } from './outcome.js';

export interface Read {
  readonly parts: PodParts;
  /** The pod's namespace as the request or the pod says it (never empty). */
  readonly podNamespace: string;
  /** The template set in force, read once for this pod. */
  readonly loaded: TemplateSet;
}

export function readPod(input: PodInput, deps: AdmitDeps, at: Progress): Step<Read> {
  // An opted-out pod no template contests (optOut: allow everywhere) is the webhooks' only where
  // the required one is called for every pod (components/required-opt-out): left as the shipped
  // webhooks leave it, before it is even parsed, never judged by bounds it would not otherwise meet.
  const loaded = deps.templates();
  if (
    optedOut(input.pod) &&
    loaded.unavailable === undefined &&
    loaded.templates.every((t) => t.optOut === 'allow') &&
    (loaded.refusedRequired ?? []).every((r) => r.optOut === undefined)
  )
    return done({
      decision: 'allowed',
      reason: 'pod-opted-out',
      message: say('pod-opted-out'),
      warnings: [],
      podName: at.podName,
      namespace: at.namespace,
      templates: [],
      decisions: noneApply(loaded, 'pod-opted-out'),
    });
  const parts = parsePod(input.pod);
  at.podName = cut(podDisplayName(parts.metadata) || input.name, 100);
  // Controller-created pods had no metadata.namespace before Kubernetes 1.24.
  const podNamespace = input.namespace || (typeof parts.metadata.namespace === 'string' ? parts.metadata.namespace : '');
  at.namespace = cut(podNamespace, 100);
  if (!podNamespace)
    return done(denied(at, 'invalid-pod', say('invalid-pod', 'the pod has no namespace: request.namespace and metadata.namespace are both empty')));
  // Before any work: a pod the API server will reject, or one out of proportion to any real pod.
  const problem = admissionProblem(parts, podNamespace, input.name);
  if (problem) {
    const reason = problem.kind === 'invalid' ? 'invalid-pod' : 'pod-too-large';
    return done(denied(at, reason, say(reason, problem.message)));
  }
  // A replica that has not read its templates serves nothing rather than guess: a refusal on
  // the required webhook (a retry), nothing added on the optional one.
  if (loaded.unavailable !== undefined) {
    if (deps.failurePolicy === 'Ignore')
      return done({
        decision: 'allowed',
        reason: 'templates-unknown',
        message: say('templates-unknown', loaded.unavailable),
        warnings: [warning('templates-unknown', `no sidecars injected: the templates in force are not known yet: ${loaded.unavailable}`)],
        podName: at.podName,
        namespace: at.namespace,
        templates: [],
        decisions: [],
      });
    return done(denied(at, 'templates-unknown', say('templates-unknown', loaded.unavailable)));
  }
  // Mirror pods may not reference what sidecars bring; the webhook's matchConditions
  // keep them from us on clusters that have the field (match-conditions.ts), this on all.
  if (Object.hasOwn(parts.annotations, AnnotationKeys.mirror)) {
    return done({
      decision: 'allowed',
      reason: 'mirror-pod',
      message: say('mirror-pod'),
      warnings: [],
      podName: at.podName,
      namespace: at.namespace,
      templates: [],
      decisions: noneApply(loaded, 'mirror-pod'),
    });
  }
  return { next: { parts, podNamespace, loaded } };
}

/** Whether the pod as sent carries the opt-out label (read without parsing the rest). */
function optedOut(pod: unknown): boolean {
  const metadata = isJsonObject(pod) && isJsonObject(pod.metadata) ? pod.metadata : undefined;
  const labels = metadata && isJsonObject(metadata.labels) ? metadata.labels : undefined;
  return labels !== undefined && Object.hasOwn(labels, LabelKeys.podOptOut) && labels[LabelKeys.podOptOut] === LabelValues.disabled;
}

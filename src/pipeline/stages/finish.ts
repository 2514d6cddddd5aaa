/**
 * Stage 5, finish: what the injection says (collisions, the pod-level resources it grew), and
 * the outcome: a patch, or allowed as it is (already injected, nothing to add, every template
 * left out by a conflict or by the cluster), or refused when the annotations would exceed the
 * API server's limit.
 */
import type { JsonObject } from '../../k8s/json.js';
import { annotationBytes, maxAnnotationBytes } from '../../k8s/pod-validation.js';
import { describeGrowth } from '../../inject/pod-resources.js';
import { clusterWarning } from '../cluster-warnings.js';
import { say } from '../reasons.js';
import { warning } from '../warnings.js';
import { denied, type PodOutcome, type Progress } from './outcome.js';
import type { Placed } from './place.js';

export function finish(p: Placed, at: Progress): PodOutcome {
  const { injection, leftOut } = p;
  const { mine, selected } = p.parameterised;
  const { warnings, ours, prepared, notes } = selected;
  warnings.push(...injection.warnings.map((text) => warning('item-collision', text)));
  if (injection.resourceGrowth)
    warnings.push(
      warning('pod-resources-grown', clusterWarning('pod-resources-grown', injection.injected.join(', '), describeGrowth(injection.resourceGrowth))),
    );
  notes.push(...injection.notes);
  const decided = { ...mine, decisions: at.decisions };
  if (!injection.changed) {
    if (injection.injected.length === 0 && injection.present.length === 0) {
      if (injection.conflicts.length > 0 && leftOut.every((l) => l.rule === 'name-conflict' || l.rule === 'volume-conflict')) {
        const message = say(
          'template-conflict',
          injection.conflicts.map((c) => c.template),
        );
        return { ...decided, decision: 'allowed', reason: 'template-conflict', message, injection };
      }
      const message = say(
        'cluster-unfit',
        leftOut.map((l) => l.template.name),
      );
      return { ...decided, decision: 'allowed', reason: 'cluster-unfit', message, injection };
    }
    const all = injection.present.every((name) => Object.hasOwn(prepared.ledger.believed.templates, name));
    const reason = all ? 'already-injected' : 'nothing-to-add';
    return { ...decided, decision: 'allowed', reason, message: say(reason), injection };
  }
  // The API server refuses a pod whose annotations exceed the limit: say so ourselves, precisely.
  const bytes = annotationBytes((injection.pod.metadata as JsonObject).annotations as Record<string, string>);
  if (bytes > maxAnnotationBytes) return denied(at, 'annotations-over-limit', say('annotations-over-limit', injection.injected, bytes), ours);
  return {
    ...decided,
    ...(p.podSecurityAudit ? { podSecurityAudit: p.podSecurityAudit } : {}),
    decision: 'patched',
    reason: 'injected',
    message: say('injected', injection.injected),
    original: prepared.pod,
    injection,
  };
}

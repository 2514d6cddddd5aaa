/**
 * The webhook's matchConditions (admissionregistration.k8s.io/v1, CONTRACT R-73): CEL the API
 * server evaluates before calling us, built from the very constants the server uses, so that
 * what the API server skips is exactly what we would leave alone. The manifest
 * (manifests/base/mutatingwebhookconfiguration.yaml) holds these; a test keeps them equal and
 * evaluates each against the corpus pods. A condition may only exclude pods we never inject.
 */
import { celString, selectorCel } from '../k8s/cel.js';
import { AnnotationKeys } from '../k8s/keys.js';
import type { Selector } from '../k8s/selector.js';
import { everyRevision, probeAnnotation } from '../templates/rollout.js';
import type { TemplateSet } from '../templates/set.js';
import type { TemplateFailurePolicy } from '../templates/template.js';

/** One match condition: all must be true for the webhook to be called. */
export interface MatchCondition {
  readonly name: string;
  readonly expression: string;
}

export const matchConditions: readonly MatchCondition[] = [
  {
    // Mirror pods are allowed unchanged by admitPod (reason mirror-pod): no need to call us.
    name: 'not-a-mirror-pod',
    expression: `!has(object.metadata.annotations) || !('${AnnotationKeys.mirror}' in object.metadata.annotations)`,
  },
];

/**
 * The condition the elected replica keeps on each pod webhook (serving/webhook-conditions.ts):
 * the API server calls the webhook only for a pod one of its templates may apply to. Every
 * later webhook that reads it is skipped for the rest of the create too (the API server never
 * calls a webhook for the first time in its second round), so a skipped call costs the create
 * nothing: no call, no second round.
 */
export const templateConditionName = 'a-template-may-apply';

/** The annotations by which a pod asks for, carries or simulates our work: such a pod is always sent. */
const mentionKeys = [AnnotationKeys.request, AnnotationKeys.status, AnnotationKeys.simulation, probeAnnotation] as const;

/** The longest condition written; beyond it the webhook is called for every pod (the API server compiles each condition on every write). */
export const maxTemplateConditionBytes = 16_384;

const podLabels = 'object.metadata.labels';
const podAnnotations = 'object.metadata.annotations';

/** Why a webhook gets no template condition, for /status and the log. */
export type UnconditionedWhy =
  | 'turned-off'
  | 'write-refused'
  | 'templates-unknown'
  | 'a-template-selects-every-pod'
  | 'a-refused-template-of-unknown-scope'
  | 'another-class-adds-what-it-reads'
  | 'too-long';

/**
 * The condition for the webhook that injects `failurePolicy`'s templates, or why it has none
 * (it is then sent every pod, as without the condition). Exact in one direction only: false
 * just for pods on which the webhook would do nothing (no template of its class selects them
 * by their labels, and the pod neither requests, carries nor simulates a template); it may be
 * true for pods the webhook then leaves alone (a namespace selector, an operating system).
 *
 * Every revision counts (stable, candidate, previous, whether or not a rollout lets it take
 * pods), and so does a required template whose object is refused (its pods are refused, so
 * they must reach us). The required webhook runs before the optional one and is never called
 * for the first time after it: when an optional template adds a pod label or annotation the
 * required condition reads, the required webhook gets no condition.
 */
export function templateCondition(set: TemplateSet, failurePolicy: TemplateFailurePolicy): MatchCondition | { readonly none: UnconditionedWhy } {
  if (set.unavailable !== undefined) return { none: 'templates-unknown' };
  const revisions = everyRevision(set);
  const selectors: Selector[] = [];
  for (const template of revisions) {
    if (template.failurePolicy !== failurePolicy || template.injection === 'on-request') continue;
    if (template.objectSelector.requirements.length === 0) return { none: 'a-template-selects-every-pod' };
    selectors.push(template.objectSelector);
  }
  if (failurePolicy === 'Fail') {
    for (const refused of set.refusedRequired ?? []) {
      if (refused.onRequest) continue;
      if (refused.objectSelector === undefined) return { none: 'a-refused-template-of-unknown-scope' };
      if (refused.objectSelector.requirements.length === 0) return { none: 'a-template-selects-every-pod' };
      selectors.push(refused.objectSelector);
    }
    const read = new Set(selectors.flatMap((s) => s.requirements.map((r) => r.key)));
    const addedLater = revisions.some(
      (t) =>
        t.failurePolicy !== 'Fail' &&
        (t.body.labels.some(([key]) => read.has(key)) || t.body.annotations.some(([key]) => (mentionKeys as readonly string[]).includes(key))),
    );
    if (addedLater) return { none: 'another-class-adds-what-it-reads' };
  }
  const mentions = mentionKeys.map((key) => `${celString(key)} in ${podAnnotations}`).join(' || ');
  // Each selector once, in a stable order: the same set always writes the same text.
  const tests = [...new Set(selectors.map((s) => selectorCel(s, podLabels).join(' && ')))].sort();
  const expression = [`(has(${podAnnotations}) && (${mentions}))`, ...tests.map((t) => `(${t})`)].join(' || ');
  if (Buffer.byteLength(expression) > maxTemplateConditionBytes) return { none: 'too-long' };
  return { name: templateConditionName, expression };
}

/**
 * "Why did my pod not get its sidecar?", answered per template from the one decision admission
 * makes (pipeline/decision.ts) and, for a running pod, the audit's judgement of its ledger
 * (pipeline/audit.ts): injected, present, not applicable (down to the selector requirement and
 * the value seen), left out by a rule, would be refused; and for a pod that lacks a sidecar a new
 * one would get, what most likely happened when it was created and the command that fixes it. Pure.
 */
import { LabelKeys, LabelValues } from '../k8s/keys.js';
import { nearMiss } from '../k8s/near-miss.js';
import type { Labels } from '../k8s/selector.js';
import { leftOutRules, remedyFor } from '../pipeline/decision.js';
import type { PodOutcome } from '../pipeline/admit.js';
import type { PodVerdict } from '../pipeline/audit.js';
import type { TemplateSet } from '../templates/set.js';
import { skipDetail, type WorkloadContext } from './inject-manifests.js';

/** One template's answer. */
export interface TemplateAnswer {
  readonly template: string;
  /**
   * For a new pod: `injected`, `present` (already in the pod or its template), `not-applicable`,
   * `left-out` (a rule keeps it out), `would-deny` (required, cannot be injected: the pod is
   * refused). For a running pod also `current`, `stale`, `missing`, `orphaned`.
   */
  readonly state: 'injected' | 'present' | 'not-applicable' | 'left-out' | 'would-deny' | 'current' | 'stale' | 'missing' | 'orphaned';
  readonly reason: string;
  /** What to run or change. */
  readonly fix?: string;
}

/**
 * The answer for a new pod (of a workload's template, or the pod itself), per template in
 * force: the admission outcome's decisions, each explained.
 */
export function answersForNewPod(outcome: PodOutcome, set: TemplateSet, workload?: WorkloadContext, namespaceLabels?: Labels): TemplateAnswer[] {
  const optIn = outcome.reason === 'namespace-not-enabled' && namespaceLabels ? optInHint(outcome.namespace, namespaceLabels) : undefined;
  const subject = workload ? `a new pod of this ${workload.kind}` : 'the pod';
  const skips = new Map((outcome.selection?.skipped ?? []).map((s) => [s.template, s]));
  const decided = new Map(outcome.decisions.map((d) => [d.template, d]));
  return set.templates.map((template): TemplateAnswer => {
    const name = template.name;
    const decision = decided.get(name);
    if (outcome.decision === 'denied' && (!decision || decision.kind === 'inject'))
      return { template: name, state: 'would-deny', reason: `admission refuses ${subject}: ${outcome.message}` };
    // The whole pod's reason (the namespace has not opted in, the pod opted out): said once per template.
    const podWide = (): TemplateAnswer =>
      optIn
        ? { template: name, state: 'not-applicable', reason: `${outcome.message}${optIn.near ? `; ${optIn.near}` : ''}`, fix: optIn.fix }
        : { template: name, state: 'not-applicable', reason: outcome.message };
    if (!decision) return podWide();
    switch (decision.kind) {
      case 'inject': {
        // The revision admission chose (a candidate's share may take the pod).
        const revision = outcome.templates.find((t) => t.name === name)?.hash ?? template.hash;
        return { template: name, state: 'injected', reason: `admission injects it into ${subject} (revision ${revision})` };
      }
      case 'present':
        return { template: name, state: 'present', reason: `${subject} already carries it` };
      case 'left-out':
        return { template: name, state: 'left-out', reason: `${decision.rule}: ${leftOutRules[decision.rule].means}`, fix: leftOutRules[decision.rule].remedy };
      case 'cannot':
        return { template: name, state: 'would-deny', reason: `${decision.rule}: ${decision.text}`, fix: remedyFor(decision.rule, template.optOut) };
      case 'not-applicable': {
        const skip = skips.get(name);
        if (!skip && decision.why === outcome.reason) return podWide();
        return { template: name, state: 'not-applicable', reason: skip ? skipDetail(skip, workload) : `not applicable to ${subject} (${decision.why})` };
      }
    }
  });
}

/** The opt-in label a namespace lacks: a near miss among its labels, and the command that opts it in. */
function optInHint(namespace: string, labels: Labels): { near?: string; fix: string } {
  const requirement = { key: LabelKeys.namespaceOptIn, operator: 'In' as const, values: new Set([LabelValues.enabled]) };
  const near = nearMiss(requirement, labels);
  const overwrite = Object.hasOwn(labels, LabelKeys.namespaceOptIn) ? ' --overwrite' : '';
  return { ...(near ? { near } : {}), fix: `kubectl label namespace ${namespace} ${LabelKeys.namespaceOptIn}=${LabelValues.enabled}${overwrite}` };
}

/** When things happened, as far as the cluster records them (ISO times; absent when unknown). */
export interface CreationContext {
  /** The pod's creationTimestamp. */
  readonly podCreated?: string;
  /** The last change of the SidecarTemplates' spec (their managedFields). */
  readonly templatesChanged?: string;
  /** The last change of the namespace's labels (its managedFields). */
  readonly namespaceLabelsChanged?: string;
  /** Whether the templates were read from the cluster (else a folder: no history to tell). */
  readonly templatesFromCluster: boolean;
  /** The command that gives the pod's workload its sidecars again (audit's fixFor). */
  readonly fix: string;
}

/**
 * The answer for a running pod: the audit's verdict of its ledger, per template, joined with
 * the decision for a new pod of its workload (`forNewPod`); a template it lacks that a new pod
 * would get is explained from when the pod was created.
 */
export function answersForRunningPod(verdict: PodVerdict, forNewPod: readonly TemplateAnswer[], set: TemplateSet, context: CreationContext): TemplateAnswer[] {
  const judged = new Map(verdict.templates.map((t) => [t.name, t]));
  const carriesAny = verdict.templates.some((t) => t.have !== null);
  return forNewPod.map((answer): TemplateAnswer => {
    const t = judged.get(answer.template);
    if (!t) return answer;
    // What the running pod carries must not hide what its next pod meets.
    const next = answer.state === 'would-deny' || answer.state === 'left-out' ? `; a new pod: ${answer.state} — ${answer.reason}` : '';
    switch (t.state) {
      case 'current':
        return {
          template: t.name,
          state: 'current',
          reason: `carries revision ${t.have}, the one in force${next}`,
          ...(answer.fix && next ? { fix: answer.fix } : {}),
        };
      case 'stale':
        return {
          template: t.name,
          state: 'stale',
          reason: `carries revision ${t.have}; the revision in force is ${t.want} (the pod was created before the template changed, or while another revision was rolled out)${next}`,
          fix: context.fix,
        };
      case 'orphaned':
        return {
          template: t.name,
          state: 'orphaned',
          reason: `carries revision ${t.have}, but the template no longer exists or no longer selects the pod; it stays until the pod is recreated`,
          fix: context.fix,
        };
      case 'left-out':
        return answer.state === 'left-out' ? answer : { ...answer, state: 'left-out' };
      case 'missing':
        if (answer.state !== 'injected') return answer;
        return {
          template: t.name,
          state: 'missing',
          reason: missingBecause(carriesAny, set.byName.get(t.name)?.failurePolicy === 'Fail', context),
          fix: context.fix,
        };
    }
  });
}

/** What most likely happened to a pod created without a template a new pod gets. */
function missingBecause(carriesAny: boolean, required: boolean, context: CreationContext): string {
  const { podCreated, templatesChanged, namespaceLabelsChanged } = context;
  const lacks = 'a new pod gets it and this one lacks it';
  if (!context.templatesFromCluster)
    return `${lacks} with the folder's templates (--templates); whether the cluster's have it, and had it when the pod was created, is not known here`;
  const created = podCreated ? `created ${podCreated}` : 'created at a time the cluster does not say';
  // The API server's times are whole seconds: a tie says nothing.
  const before = (time: string | undefined) => podCreated !== undefined && time !== undefined && podCreated < time;
  const same = (time: string | undefined) => podCreated !== undefined && time === podCreated;
  if (before(templatesChanged))
    return `${lacks}: it was ${created}, before the templates last changed (${templatesChanged}), so the template did not exist or did not select it then`;
  if (before(namespaceLabelsChanged))
    return `${lacks}: it was ${created}, before its namespace's labels last changed (${namespaceLabelsChanged}), so the namespace may not have been opted in then`;
  if (same(templatesChanged) || same(namespaceLabelsChanged))
    return `${lacks}: it was ${created}, the second the templates or the namespace's labels last changed: either could have decided it`;
  if (carriesAny)
    return `${lacks}, though it carries other templates of ours: it was ${created} with another selection (its labels or annotations then, or a revision without this template)`;
  if (required)
    return `${lacks} and carries nothing of ours: it was ${created}, after the templates and the namespace's labels last changed, and the template is required (failurePolicy: Fail), so the injector's required webhook did not see it — it was not yet installed, its configuration did not match the pod then, or the pod was created bypassing it`;
  return `${lacks} and carries nothing of ours: it was ${created}, after the templates and the namespace's labels last changed, so the injector did not answer its admission (unreachable or too slow: an optional template, failurePolicy: Ignore, lets the pod through without its sidecar) — see the injector's logs and sidecar_injector_reviews_total around that time`;
}

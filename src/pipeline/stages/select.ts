/**
 * Stage 2, select: the revision of each template in force for this pod, what the pod already
 * carries (its ledger), the namespace's labels, which templates apply, and of those the ones
 * of this webhook's class.
 */
import { LabelKeys, LabelValues } from '../../k8s/keys.js';
import { podOs } from '../../k8s/pod.js';
import { namespaceOptedIn, requestedTemplates, select, withoutOptOut, type Selection } from '../../selection/select.js';
import { nameOf } from '../../templates/forms.js';
import { revisionsFor, rolloutSubject } from '../../templates/rollout.js';
import type { TemplateSet } from '../../templates/set.js';
import type { Template } from '../../templates/template.js';
import { matches, type Labels } from '../../k8s/selector.js';
import type { TemplateDecision } from '../decision.js';
import { preparePod, type PreparedPod } from '../inject-pod.js';
import { say } from '../reasons.js';
import { warning, type Warning } from '../warnings.js';
import { denied, done, noneApply, ordered, type AdmitDeps, type PodInput, type PodOutcome, type Progress, type Step } from './outcome.js';
import type { Read } from './read.js';

export interface Selected {
  readonly read: Read;
  /** The revisions in force for this pod (a candidate's share or the stable). */
  readonly set: TemplateSet;
  readonly prepared: PreparedPod;
  readonly namespaceLabels: Labels;
  readonly selection: Selection;
  /** The selected templates of this webhook's class. */
  readonly ours: readonly Template[];
  /** Each template's decision by name, filled by this stage and `place`. */
  readonly byName: Map<string, TemplateDecision>;
  /** Warnings and notes so far; later stages add theirs (the outcome holds these arrays). */
  readonly warnings: Warning[];
  readonly notes: string[];
  /** What every later outcome says of the pod. */
  readonly common: Pick<PodOutcome, 'podName' | 'namespace' | 'warnings' | 'notes' | 'selection' | 'templates' | 'decisions'>;
}

export async function selectTemplates(read: Read, input: PodInput, deps: AdmitDeps, at: Progress): Promise<Step<Selected>> {
  const { parts, podNamespace, loaded } = read;
  // Safe rollout: the revision of each template in force for this pod (a candidate's share or
  // the stable), chosen from what the answer cache keys on (templates/rollout.ts).
  const set = revisionsFor(loaded, rolloutSubject(parts.metadata, podNamespace, parts.labels, input.name, input.dryRun === true));
  const prepared = preparePod(input.pod, set, parts);
  const { own } = prepared;
  const warnings: Warning[] = prepared.warnings.map((text) => warning('ledger-doubt', text));
  const namespaceLabels = await deps.namespaces.labelsOf(at.namespace);
  const selection = select({ namespace: at.namespace, namespaceLabels, podLabels: own.labels, podAnnotations: own.annotations, podOs: podOs(parts) }, set);
  const notes: string[] = [];
  const byName = new Map<string, TemplateDecision>();
  for (const skip of selection.skipped) byName.set(skip.template, { template: skip.template, kind: 'not-applicable', why: skip.reason });
  at.decisions = ordered(set, byName);
  const common = { podName: at.podName, namespace: at.namespace, warnings, notes, selection, templates: selection.templates, decisions: at.decisions };
  // A template the pod asked for by name and did not get deserves a sentence; one whose os
  // the pod does not run is simply not selected (os scopes a template), said in --explain.
  const requested = new Set(requestedTemplates(own.annotations));
  for (const skip of selection.skipped) {
    if (requested.has(skip.template)) warnings.push(warning('template-not-selected', skip.message, skip.template));
    else if (skip.reason === 'os') notes.push(skip.message);
  }
  // A required template whose object the injector refuses is not in the set; a pod it may apply
  // to is refused rather than admitted without it (required means required). An opted-out pod
  // is judged as a served template would judge it: only in an opted-in namespace, by its labels
  // without the opt-out label, refused under optOut: deny, warned under warn.
  const optedOutPod = selection.reason === 'pod-opted-out';
  const scopeLabels = optedOutPod ? withoutOptOut(own.labels) : own.labels;
  const refusedInScope =
    deps.failurePolicy === 'Ignore' || selection.reason === 'namespace-not-enabled' || (optedOutPod && !namespaceOptedIn(namespaceLabels))
      ? []
      : (loaded.refusedRequired ?? []).filter(
          (r) =>
            (!optedOutPod || r.optOut !== undefined) &&
            (r.onRequest ? requested.has(r.template) : true) &&
            (r.namespaceSelector ? matches(r.namespaceSelector, namespaceLabels) : true) &&
            (r.objectSelector ? matches(r.objectSelector, scopeLabels) : true),
        );
  const missing = refusedInScope.find((r) => !optedOutPod || r.optOut === 'deny');
  if (missing)
    return done(
      optedOutPod
        ? denied(at, 'opt-out-refused', say('opt-out-refused', [missing.template], missing.onRequest ? [missing.template] : []))
        : denied(at, 'required-template-refused', say('required-template-refused', missing.object, missing.problem)),
    );
  switch (selection.reason) {
    case undefined:
      break;
    case 'unknown-template':
      return done(
        denied(
          at,
          'unknown-template',
          say(
            'unknown-template',
            selection.unknown,
            set.templates.map((t) => t.name),
          ),
        ),
      );
    case 'namespace-not-enabled': {
      const message = say('namespace-not-enabled', at.namespace);
      if (requested.size > 0) warnings.push(warning('requested-namespace-not-enabled', `${message}; requested templates are not injected`));
      return done({ ...common, decisions: noneApply(set, selection.reason), decision: 'allowed', reason: selection.reason, message });
    }
    case 'pod-opted-out': {
      // A required template may refuse the opt-out (optOut: deny) or warn about it (warn); the
      // optional webhook leaves that to the required one.
      const contested = deps.failurePolicy === 'Ignore' ? [] : (selection.optOutContested ?? []);
      const refusing = contested.filter((t) => t.optOut === 'deny');
      if (refusing.length > 0)
        return done(
          denied(
            at,
            'opt-out-refused',
            say(
              'opt-out-refused',
              refusing.map((t) => t.name),
              refusing.filter((t) => t.injection === 'on-request').map((t) => t.name),
            ),
            refusing,
          ),
        );
      // Served or refused, a required template under optOut: warn says the same.
      const warned = [...refusedInScope.filter((r) => r.optOut === 'warn').map((r) => r.template), ...contested.map((t) => t.name)];
      for (const name of warned)
        warnings.push(
          warning(
            'opt-out-of-required',
            `${name}: a required sidecar the pod opts out of (optOut: warn); remove label ${LabelKeys.podOptOut}=${LabelValues.disabled}`,
            name,
          ),
        );
      return done({ ...common, decisions: noneApply(set, selection.reason), decision: 'allowed', reason: selection.reason, message: say(selection.reason) });
    }
    default:
      return done({ ...common, decision: 'allowed', reason: selection.reason, message: say(selection.reason) });
  }
  // Selection ran over every template (a pod may request the other class's); this webhook injects its own class.
  const ofClass = deps.failurePolicy ? selection.templates.filter((t) => t.failurePolicy === deps.failurePolicy) : selection.templates;
  // A webhook leaves the templates delivered by the API server's MutatingAdmissionPolicy to it.
  // The policy runs before every webhook call, so a template of it that applies and that the pod
  // arrives without was not injected by it (the policy is not applied, stale, or decides
  // otherwise): the webhook decides it as its own then — never silently missing, a rule that
  // leaves it out said as for any template — and says why.
  // Delivered means its sidecars are in the pod, as the ledger's own: every container the
  // template adds (the same names in every form), believed as the entry's and present. A ledger
  // entry alone is a claim the pod can write itself, and the policy skips a pod whose ledger
  // names the template. A template with no container proves nothing by items (the policy writes
  // its entry even when the pod held everything already): its entry's name is taken.
  // Only a template marked for the policy asks, so the pod's container names are read then only.
  let present: Set<unknown> | undefined;
  const delivered = (t: Template) => {
    const names = [...t.body.initContainers, ...t.body.containers].map((c) => nameOf(c) as string);
    if (names.length === 0) return prepared.claimed.has(t.name);
    const entry = Object.hasOwn(prepared.ledger.believed.templates, t.name) ? prepared.ledger.believed.templates[t.name] : undefined;
    const ours = new Set([...(entry?.containers ?? []), ...(entry?.initContainers ?? [])]);
    present ??= new Set([...read.parts.containers, ...read.parts.initContainers].map((c) => c.name));
    return names.every((name) => ours.has(name) && present!.has(name));
  };
  const missingFromPolicy = deps.leavesPolicyDelivered ? ofClass.filter((t) => t.delivery === 'policy' && !delivered(t)) : [];
  for (const t of missingFromPolicy)
    warnings.push(
      warning('policy-delivery-missing', `${t.name}: not injected by the MutatingAdmissionPolicy (delivery: policy); the webhook decides it instead`, t.name),
    );
  const ours = deps.leavesPolicyDelivered ? ofClass.filter((t) => t.delivery !== 'policy' || missingFromPolicy.includes(t)) : ofClass;
  for (const t of selection.templates) {
    if (!ofClass.includes(t)) byName.set(t.name, { template: t.name, kind: 'not-applicable', why: 'other-webhook' });
    else if (!ours.includes(t)) byName.set(t.name, { template: t.name, kind: 'not-applicable', why: 'delivered-by-policy' });
  }
  if (ours.length === 0 && ofClass.length > 0) {
    return done({
      ...common,
      decisions: ordered(set, byName),
      decision: 'allowed',
      reason: 'delivered-by-policy',
      message: say(
        'delivered-by-policy',
        ofClass.map((t) => t.name),
      ),
    });
  }
  if (ours.length === 0) {
    return done({
      ...common,
      decisions: ordered(set, byName),
      decision: 'allowed',
      reason: 'other-webhook',
      message: say(
        'other-webhook',
        selection.templates.map((t) => t.name),
        deps.failurePolicy!,
      ),
    });
  }
  // Each stage's result holds the earlier one rather than a copy of it: no object grows stage by stage.
  return { next: { read, set, prepared, namespaceLabels, selection, ours, byName, warnings, notes, common } };
}

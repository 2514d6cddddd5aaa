/**
 * One pod, decided and injected: the core the webhook and the offline `render` share. Reads
 * the pod, asks the namespace label source, selects templates, renders and injects. Never
 * throws for a pod it cannot serve: every outcome is a value with a reason and a sentence.
 */
import { AdmissionError, NamespaceLabelsUnavailableError } from '../errors.js';
import { requestedTemplates, select, type Selection } from '../selection/select.js';
import { injectTemplates, preparePod } from './inject-pod.js';
import { reasonOfAdmissionError, reasons, say, type DenialReason, type Reason } from './reasons.js';
import type { NamespaceLabelSource } from '../namespaces/source.js';
import type { TemplateSet } from '../templates/set.js';
import type { JsonObject } from '../k8s/json.js';
import type { Template, TemplateFailurePolicy } from '../templates/template.js';
import type { Injection } from '../inject/inject.js';
import { AnnotationKeys } from '../k8s/keys.js';
import { parsePod, podDisplayName, podOs } from '../k8s/pod.js';
import { admissionProblem, annotationBytes, maxAnnotationBytes } from '../k8s/pod-validation.js';
import { cut } from '../quote.js';
import { runsToCompletion } from '../k8s/pod.js';
import type { VersionDecision } from '../k8s/version.js';
import { planForms } from './native-sidecars.js';
import { cannotInject, type NotApplicable, type TemplateDecision } from './decision.js';
import { warning, type Warning } from './warnings.js';
import { fitPodSecurity, type PodSecurityAction } from './pod-security-fit.js';
import { clusterWarning } from './cluster-warnings.js';
import { describeGrowth } from '../inject/pod-resources.js';
import { overrideDomain, overridesByTemplate, resolveParameters, type ResolvedParameters } from './overrides.js';
import type { ParamValue } from '../templates/placeholders.js';
import { revisionsFor, rolloutSubject } from '../templates/rollout.js';

/** What admission needs from the rest of the process. */
export interface AdmitDeps {
  /** The template set in force (read once per pod, so a reload takes effect at once). */
  readonly templates: () => TemplateSet;
  readonly namespaces: NamespaceLabelSource;
  /** The Kubernetes version the injector serves for (k8s/version.ts); undefined: unknown, current features. */
  readonly kubernetesVersion?: () => VersionDecision | undefined;
  /** What a template that would break the namespace's enforced Pod Security level gets. @default 'skip' */
  readonly podSecurity?: PodSecurityAction;
  /**
   * Inject only the templates of this failurePolicy (the webhook of that class calls its own
   * path); undefined: every template (one webhook for all).
   */
  readonly failurePolicy?: TemplateFailurePolicy;
}

interface Common {
  /** The pod's name, or its generateName (R-24). */
  readonly podName: string;
  readonly namespace: string;
  readonly message: string;
  readonly warnings: readonly Warning[];
  /** The templates selected for this pod (of this webhook's class), empty when none. */
  readonly templates: readonly Template[];
  readonly selection?: Selection;
  /** Every template's decision (pipeline/decision.ts), where the pod got that far; empty before selection. */
  readonly decisions: readonly TemplateDecision[];
  /** Decisions explained in `render --explain` and the log, not in warnings. */
  readonly notes?: readonly string[];
  /** Pod Security audit-level violations the injection introduces (for the audit event). */
  readonly podSecurityAudit?: string;
  /** Each template's declared parameters with their values and where they came from (for --explain). */
  readonly parameters?: ReadonlyMap<string, ResolvedParameters['explained']>;
}

/** The outcome for one pod. */
export type PodOutcome =
  | (Common & { readonly decision: 'patched'; readonly reason: 'injected'; readonly original: JsonObject; readonly injection: Injection })
  | (Common & { readonly decision: 'allowed'; readonly reason: Reason; readonly injection?: Injection })
  | (Common & { readonly decision: 'denied'; readonly reason: DenialReason; readonly code: number });

/** The pod to admit, with the request's namespace and name (both may be empty on the pod itself). */
export interface PodInput {
  readonly pod: unknown;
  readonly namespace: string;
  readonly name: string;
}

/** Every template of `set` not applicable to the pod, for `why`. */
const noneApply = (set: TemplateSet, why: NotApplicable): TemplateDecision[] => set.templates.map((t) => ({ template: t.name, kind: 'not-applicable', why }));

/** Decides and injects one pod. */
export async function admitPod(input: PodInput, deps: AdmitDeps): Promise<PodOutcome> {
  // Cut for messages and logs: these come from the request and are validated only below.
  let podName = cut(input.name, 100);
  let namespace = cut(input.namespace, 100);
  let decisions: readonly TemplateDecision[] = [];
  const denial = (reason: DenialReason, message: string, templates: readonly Template[] = []): PodOutcome => ({
    decision: 'denied',
    reason,
    code: reasons[reason].code,
    message,
    warnings: [],
    podName,
    namespace,
    templates,
    decisions,
  });
  try {
    const parts = parsePod(input.pod);
    podName = cut(podDisplayName(parts.metadata) || input.name, 100);
    // Controller-created pods had no metadata.namespace before Kubernetes 1.24 (R-24).
    const podNamespace = input.namespace || (typeof parts.metadata.namespace === 'string' ? parts.metadata.namespace : '');
    namespace = cut(podNamespace, 100);
    if (!podNamespace) return denial('invalid-pod', say('invalid-pod', 'the pod has no namespace: request.namespace and metadata.namespace are both empty'));
    // Before any work: a pod the API server will reject, or one out of proportion to any real pod.
    const problem = admissionProblem(parts, podNamespace, input.name);
    if (problem) {
      const reason = problem.kind === 'invalid' ? 'invalid-pod' : 'pod-too-large';
      return denial(reason, say(reason, problem.message));
    }

    const loaded = deps.templates();
    // Mirror pods may not reference what sidecars bring (R-69); the webhook's matchConditions
    // keep them from us on clusters that have the field (match-conditions.ts), this on all.
    if (Object.hasOwn(parts.annotations, AnnotationKeys.mirror)) {
      return {
        decision: 'allowed',
        reason: 'mirror-pod',
        message: say('mirror-pod'),
        warnings: [],
        podName,
        namespace,
        templates: [],
        decisions: noneApply(loaded, 'mirror-pod'),
      };
    }
    // Safe rollout: the revision of each template in force for this pod (a candidate's share or
    // the stable), chosen from what the answer cache keys on (templates/rollout.ts).
    const set = revisionsFor(loaded, rolloutSubject(parts.metadata, podNamespace, parts.labels, input.name));
    const prepared = preparePod(input.pod, set, parts);
    const { own, ledger } = prepared;
    const warnings: Warning[] = prepared.warnings.map((text) => warning('ledger-doubt', text));
    const namespaceLabels = await deps.namespaces.labelsOf(namespace);
    const selection = select({ namespace, namespaceLabels, podLabels: own.labels, podAnnotations: own.annotations, podOs: podOs(parts) }, set);
    const notes: string[] = [];
    const byName = new Map<string, TemplateDecision>();
    const decide = (d: TemplateDecision) => byName.set(d.template, d);
    const ordered = () => set.templates.map((t) => byName.get(t.name)).filter((d) => d !== undefined);
    for (const skip of selection.skipped) decide({ template: skip.template, kind: 'not-applicable', why: skip.reason });
    decisions = ordered();
    const common = { podName, namespace, warnings, notes, selection, templates: selection.templates, decisions };
    // A template the pod asked for by name and did not get deserves a sentence; one whose os
    // the pod does not run is simply not selected (os scopes a template), said in --explain.
    const requested = new Set(requestedTemplates(own.annotations));
    for (const skip of selection.skipped) {
      if (requested.has(skip.template)) warnings.push(warning('template-not-selected', skip.message, skip.template));
      else if (skip.reason === 'os') notes.push(skip.message);
    }
    switch (selection.reason) {
      case undefined:
        break;
      case 'unknown-template':
        return denial(
          'unknown-template',
          say(
            'unknown-template',
            selection.unknown,
            set.templates.map((t) => t.name),
          ),
        );
      case 'namespace-not-enabled': {
        const message = say('namespace-not-enabled', namespace);
        if (requested.size > 0) warnings.push(warning('requested-namespace-not-enabled', `${message}; requested templates are not injected`));
        return { ...common, decisions: noneApply(set, selection.reason), decision: 'allowed', reason: selection.reason, message };
      }
      case 'pod-opted-out':
        return { ...common, decisions: noneApply(set, selection.reason), decision: 'allowed', reason: selection.reason, message: say(selection.reason) };
      default:
        return { ...common, decision: 'allowed', reason: selection.reason, message: say(selection.reason) };
    }
    // Selection ran over every template (a pod may request the other class's); this webhook injects its own class.
    const ours = deps.failurePolicy ? selection.templates.filter((t) => t.failurePolicy === deps.failurePolicy) : selection.templates;
    for (const t of selection.templates) if (!ours.includes(t)) decide({ template: t.name, kind: 'not-applicable', why: 'other-webhook' });
    if (ours.length === 0) {
      return {
        ...common,
        decisions: ordered(),
        decision: 'allowed',
        reason: 'other-webhook',
        message: say(
          'other-webhook',
          selection.templates.map((t) => t.name),
          deps.failurePolicy!,
        ),
      };
    }
    // Parameter overrides: the pod's own annotations (not those we added) and the namespace's.
    const fromPod = overridesByTemplate(own.annotations);
    const fromNamespace = overridesByTemplate(deps.namespaces.overridesOf?.(namespace) ?? {});
    for (const name of fromPod.keys())
      if (!set.byName.has(name))
        warnings.push(warning('override-ignored', `annotation ${cut(`${name}${overrideDomain}…`, 100)} names no template here; ignored`));
    const overrides = new Map<string, Readonly<Record<string, ParamValue>> | undefined>();
    const parameters = new Map<string, ResolvedParameters['explained']>();
    for (const template of ours) {
      const resolved = resolveParameters(template, fromNamespace.get(template.name), fromPod.get(template.name));
      if (resolved.denial) return denial('invalid-override', say('invalid-override', resolved.denial), ours);
      warnings.push(...resolved.warnings.map((text) => warning('override-ignored', text, template.name)));
      overrides.set(template.name, resolved.overrides);
      if (resolved.explained.length > 0) parameters.set(template.name, resolved.explained);
    }
    const mine = { ...common, templates: ours, ...(parameters.size > 0 ? { parameters } : {}) };
    // Each template in the form the pod and the cluster can run, or left out by a rule.
    const names = { containers: new Set(parts.containers.map((c) => c.name)), initContainers: new Set(parts.initContainers.map((c) => c.name)) };
    const plan = planForms(ours, deps.kubernetesVersion?.(), ledger.believed, runsToCompletion(parts), (list, name) => names[list].has(name));
    warnings.push(...plan.warnings);
    if (plan.denial) return denial('native-sidecars-unsupported', say('native-sidecars-unsupported', plan.denial.message), ours);
    const place = { namespace, namespaceLabels, requestName: input.name };
    const injectOnly = (templates: readonly Template[]) => injectTemplates(prepared, templates, place, overrides);
    const inForce = deps.kubernetesVersion?.()?.version;
    const fit = fitPodSecurity(input.pod, injectOnly(plan.templates), plan.templates, namespaceLabels, deps.podSecurity ?? 'skip', injectOnly, inForce);
    warnings.push(...fit.warnings);
    if (fit.denial) return denial('pod-security', say('pod-security', fit.denial), plan.templates);
    const injection = fit.injection;
    const byTemplate = new Map(ours.map((t) => [t.name, t]));
    const leftOut = [
      ...plan.leftOut,
      ...fit.leftOut,
      ...injection.conflicts.map((c) => ({ template: byTemplate.get(c.template)!, rule: c.rule, text: c.text })),
    ];
    // Required means required: a required template that applies and cannot be injected refuses the pod.
    const cannot = leftOut.filter((l) => l.template.failurePolicy === 'Fail');
    for (const l of leftOut) {
      const kind = l.template.failurePolicy === 'Fail' ? 'cannot' : 'left-out';
      decide({ template: l.template.name, kind, rule: l.rule, text: l.text });
      if (kind === 'left-out') warnings.push({ id: 'template-left-out', text: l.text, template: l.template.name, rule: l.rule });
    }
    for (const name of injection.injected) decide({ template: name, kind: 'inject' });
    for (const name of injection.present) decide({ template: name, kind: 'present' });
    decisions = ordered();
    if (cannot.length > 0) {
      const first = cannot[0]!;
      return denial(
        'required-sidecar-unavailable',
        say('required-sidecar-unavailable', cannotInject(first.template.name, first.rule, first.text), cannot.length - 1),
        ours,
      );
    }
    warnings.push(...injection.warnings.map((text) => warning('item-collision', text)));
    if (injection.resourceGrowth)
      warnings.push(
        warning('pod-resources-grown', clusterWarning('pod-resources-grown', injection.injected.join(', '), describeGrowth(injection.resourceGrowth))),
      );
    notes.push(...injection.notes);
    const mineDecided = { ...mine, decisions };
    if (!injection.changed) {
      if (injection.injected.length === 0 && injection.present.length === 0) {
        if (injection.conflicts.length > 0 && leftOut.every((l) => l.rule === 'name-conflict' || l.rule === 'volume-conflict')) {
          return {
            ...mineDecided,
            decision: 'allowed',
            reason: 'template-conflict',
            message: say(
              'template-conflict',
              injection.conflicts.map((c) => c.template),
            ),
            injection,
          };
        }
        return {
          ...mineDecided,
          decision: 'allowed',
          reason: 'cluster-unfit',
          message: say(
            'cluster-unfit',
            leftOut.map((l) => l.template.name),
          ),
          injection,
        };
      }
      const all = injection.present.every((name) => Object.hasOwn(ledger.believed.templates, name));
      const reason = all ? 'already-injected' : 'nothing-to-add';
      return { ...mineDecided, decision: 'allowed', reason, message: say(reason), injection };
    }
    // The API server refuses a pod whose annotations exceed the limit (R-66): say so ourselves, precisely.
    const bytes = annotationBytes((injection.pod.metadata as JsonObject).annotations as Record<string, string>);
    if (bytes > maxAnnotationBytes) {
      return denial('annotations-over-limit', say('annotations-over-limit', injection.injected, bytes), ours);
    }
    return {
      ...mineDecided,
      ...(fit.audit ? { podSecurityAudit: fit.audit } : {}),
      decision: 'patched',
      reason: 'injected',
      message: say('injected', injection.injected),
      original: prepared.pod,
      injection,
    };
  } catch (err) {
    if (err instanceof NamespaceLabelsUnavailableError) {
      if (err.policy === 'allow') {
        return {
          decision: 'allowed',
          reason: 'namespace-unknown',
          message: err.message,
          warnings: [warning('namespace-unknown', `no sidecars injected: labels of namespace ${namespace} unknown: ${err.reason}`)],
          podName,
          namespace,
          templates: [],
          decisions: [],
        };
      }
      return denial('namespace-unknown', say('namespace-unknown', err.message));
    }
    if (err instanceof AdmissionError) return denial(reasonOfAdmissionError[err.code], err.message);
    throw err;
  }
}

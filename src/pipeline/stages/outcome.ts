/**
 * What deciding one pod gives (PodOutcome), what it needs (AdmitDeps), and where the decision
 * stands between its stages (Progress): the pod's name and namespace as messages quote them, and
 * each template's decision so far. The stages (read, select, parameters, place, finish) each
 * return the outcome that ends the decision, or what the next stage takes.
 */
import type { Selection } from '../../selection/select.js';
import type { NamespaceLabelSource } from '../../namespaces/source.js';
import type { TemplateSet } from '../../templates/set.js';
import type { JsonObject } from '../../k8s/json.js';
import type { Template, TemplateFailurePolicy } from '../../templates/template.js';
import type { Injection } from '../../inject/inject.js';
import type { VersionDecision } from '../../k8s/version.js';
import type { NotApplicable, TemplateDecision } from '../decision.js';
import type { Warning } from '../warnings.js';
import type { PodSecurityAction } from '../pod-security-fit.js';
import type { ResolvedParameters } from '../overrides.js';
import { reasons, type DenialReason, type Reason } from '../reasons.js';

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
  /**
   * Leave the templates with `delivery: policy` to the API server's MutatingAdmissionPolicy: the
   * webhooks do; undefined for every other reader (the audit, render, why), which expect them.
   */
  readonly leavesPolicyDelivered?: boolean;
}

interface Common {
  /** The pod's name, or its generateName. */
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
  /** The request is a dry run (nothing is stored): only then is a preflight probe's annotation honoured. */
  readonly dryRun?: boolean;
}

/** Where the decision of one pod stands: its name and namespace (cut for messages), every template's decision so far. */
export interface Progress {
  podName: string;
  namespace: string;
  decisions: readonly TemplateDecision[];
}

/** A stage's result: the outcome that ends the decision, or what the next stage takes. */
export type Step<T> = { readonly outcome: PodOutcome } | { readonly next: T };

export const done = (outcome: PodOutcome): { readonly outcome: PodOutcome } => ({ outcome });

/** The pod refused, as the decision stands. */
export function denied(at: Progress, reason: DenialReason, message: string, templates: readonly Template[] = []): PodOutcome {
  return {
    decision: 'denied',
    reason,
    code: reasons[reason].code,
    message,
    warnings: [],
    podName: at.podName,
    namespace: at.namespace,
    templates,
    decisions: at.decisions,
  };
}

/** Every template of `set` not applicable to the pod, for `why`. */
export const noneApply = (set: TemplateSet, why: NotApplicable): TemplateDecision[] =>
  set.templates.map((t) => ({ template: t.name, kind: 'not-applicable', why }));

/** The decisions in the set's order. */
export const ordered = (set: TemplateSet, byName: ReadonlyMap<string, TemplateDecision>): TemplateDecision[] =>
  set.templates.map((t) => byName.get(t.name)).filter((d) => d !== undefined);

/**
 * One decision per pod and template, shared by admission, `render --explain` and both
 * auditors: each template in force is injected, already present, not applicable to the pod,
 * left out by a rule (an optional template), or cannot be injected (a required template that
 * applies: the pod is refused). The rules that leave a template out are one table, with what
 * each means for admission, the audit and `audit --restart` (docs/decisions.md is this table). Pure.
 */
import type { TemplateSkipReason } from '../selection/select.js';
import type { Template, TemplateOptOut } from '../templates/template.js';

/** Why a template does not apply to a pod at all: scope, not a fault. */
export type NotApplicable = TemplateSkipReason | 'pod-opted-out' | 'namespace-not-enabled' | 'mirror-pod' | 'other-webhook' | 'delivered-by-policy';

/** A rule that keeps a template that applies out of a pod. */
export type LeftOutRule = keyof typeof leftOutRules;

export type TemplateDecision =
  | { readonly template: string; readonly kind: 'inject' }
  | { readonly template: string; readonly kind: 'present' }
  | { readonly template: string; readonly kind: 'not-applicable'; readonly why: NotApplicable }
  /** An optional template left out, with a warning and an Event. */
  | { readonly template: string; readonly kind: 'left-out'; readonly rule: LeftOutRule; readonly text: string }
  /** A required template that applies and cannot be injected: the pod is denied. */
  | { readonly template: string; readonly kind: 'cannot'; readonly rule: LeftOutRule; readonly text: string };

interface RuleSpec {
  /** What the rule says, for the docs' table. */
  readonly means: string;
  /** What a pod author (or the operator) can change, appended to a denial. */
  readonly remedy: string;
  /** The remedy for a template that refuses the opt-out (optOut: deny), where the remedy names opting out. */
  readonly remedyWithoutOptOut?: string;
}

/**
 * Every rule that leaves a template that applies out of a pod. Admission: an optional template
 * is left out (warning, `SidecarInjectionSkipped` Event); a required one denies the pod. Audit:
 * the state `left-out` with the rule, never `missing`; `--restart` never restarts for it.
 */
export const leftOutRules = {
  'pod-security': {
    means: 'the sidecar would make the pod violate the Pod Security level its namespace enforces (and --pod-security-action is skip, the default)',
    remedy: "the template must fit the namespace's Pod Security level, or the namespace's level change",
  },
  'native-sidecars-unsupported': {
    means: 'the template has native sidecars, the cluster runs Kubernetes below 1.29 (no native sidecars), and its nativeSidecars.fallback is skip',
    remedy: 'upgrade the cluster to Kubernetes 1.29 or later, or give the template nativeSidecars.fallback: container',
  },
  'runs-to-completion': {
    means:
      "the pod runs to completion (a Job's, or restartPolicy Never or OnFailure) and the sidecar could only be an ordinary container that never exits (no native sidecars below Kubernetes 1.29), which would keep the pod running for ever",
    remedy: `run the pod with restartPolicy Always, opt it out with label sidecar-injector.io/inject=disabled, or run Kubernetes 1.29 or later (native sidecars); a template whose containers exit by themselves declares endsOnItsOwn: true`,
    remedyWithoutOptOut: `run the pod with restartPolicy Always, or run Kubernetes 1.29 or later (native sidecars); a template whose containers exit by themselves declares endsOnItsOwn: true`,
  },
  'name-conflict': {
    means: "the pod has its own container with the name of one of the template's sidecars (its items would land in the pod's container)",
    remedy: "rename the pod's container, or remove it if it is a copy of the sidecar (the injector adds its own)",
  },
  'qos-class': {
    means:
      "the pod is Guaranteed and one of the template's containers does not state the cpu and memory limits (or, with guaranteedPods: limits-from-requests, the requests) that would keep it so: injected, it would make the pod Burstable",
    remedy:
      "give the template's containers cpu and memory limits (their requests are then taken from them in Guaranteed pods), or make the pod Burstable on purpose",
  },
  'host-network-port': {
    means:
      "the pod uses the node's network (hostNetwork) and one of the template's containers declares a port: there every declared port is a port of the node, open on its interfaces, and two such pods cannot share a node",
    remedy: "run the pod without hostNetwork, or use a template whose containers listen on no port (on the node's network, a loopback port is the node's too)",
  },
  'volume-conflict': {
    means:
      "the pod has its own volume with the name of one of the template's volumes, and it is something else (the sidecar's mounts would bind to the pod's data)",
    remedy: "rename the pod's volume",
  },
} as const satisfies Record<string, RuleSpec>;

/** What to change for `rule`; a template that refuses the opt-out (optOut: deny) is not told to be opted out of. */
export function remedyFor(rule: LeftOutRule, optOut: TemplateOptOut = 'allow'): string {
  const spec: RuleSpec = leftOutRules[rule];
  return optOut === 'deny' ? (spec.remedyWithoutOptOut ?? spec.remedy) : spec.remedy;
}

/** The sentence a required template's denial ends with: the rule's text and what to change. */
export function cannotInject(template: Pick<Template, 'name' | 'optOut'>, rule: LeftOutRule, text: string): string {
  // A conflict's text ends with its short fix for the warning it also is ("rename that volume"):
  // here the rule's whole remedy follows, so the short one goes.
  const said = text.replace(/; rename that (?:container|volume)$/, '');
  return `required sidecar ${template.name} cannot be injected: ${said}; ${remedyFor(rule, template.optOut)}`;
}

/**
 * A warning travels as a stable id beside its sentence: the sentence is for the person reading
 * `kubectl` output, the id for everything that acts on it (Events, audit states, metrics,
 * `--explain`), so rewording a sentence changes no behaviour.
 */
import type { LeftOutRule } from './decision.js';

/** Every warning id; the docs' reference lists them. */
export const warningIds = {
  'template-left-out': 'an optional template that applies was left out by a rule (the rule is in the text, and in the decision)',
  'template-not-selected': 'a template the pod requested by name is not selected for it (its selectors, its os), and says why',
  'requested-namespace-not-enabled': 'the pod requests templates but its namespace has not opted in',
  'item-collision': "an item a template adds is already in the pod (someone else's, or another template's): left as is",
  'ledger-doubt': 'the status annotation is malformed, or claims an item the pod does not hold as the template adds it',
  'override-ignored': "a namespace's override annotation, or a pod's annotation naming no template here, is ignored",
  'namespace-unknown': "the namespace's labels are unknown and --namespace-failure-policy is allow: nothing injected",
  'templates-unknown': 'the templates in force are not known yet (the SidecarTemplates not yet read from the API server): the optional webhook injects nothing',
  'native-sidecars-as-containers': 'native sidecars injected as ordinary containers: the cluster runs Kubernetes below 1.29',
  'pod-security-injected': 'templates injected though they violate the enforced Pod Security level (--pod-security-action inject)',
  'pod-security-warn': "templates make the pod violate the namespace's warn level",
  'pod-resources-grown': "the pod-level resources grew by the sidecars' share",
  'policy-delivery-missing':
    'a template delivered by the MutatingAdmissionPolicy (delivery: policy) reached the webhook missing from a pod it applies to (the policy is not applied, stale, or decides otherwise): the webhook decides it instead',
  'opt-out-of-required': 'the pod opts out of a required template that applies to it and whose optOut is warn: created without it',
  'misplaced-opt-in': "a workload carries opt-in metadata in its own metadata instead of its pod template's (render)",
} as const satisfies Record<string, string>;

export type WarningId = keyof typeof warningIds;

/** One warning: its id, its sentence, and the template it is about, if one. */
export interface Warning {
  readonly id: WarningId;
  readonly text: string;
  readonly template?: string;
  /** With `template-left-out`: the rule. */
  readonly rule?: LeftOutRule;
}

/** A warning from a sentence of another module (inject, trust, overrides) that has no id of its own. */
export const warning = (id: WarningId, text: string, template?: string): Warning => (template ? { id, text, template } : { id, text });

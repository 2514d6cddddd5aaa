/**
 * Which templates apply to a pod, and why the others do not. Pure.
 */
import { AnnotationKeys, LabelKeys, LabelValues } from '../k8s/keys.js';
import { trimSpace } from '../k8s/space.js';
import type { TemplateSet } from '../templates/set.js';
import type { PodOs, Template } from '../templates/template.js';
import { unmetRequirement, type Labels, type Requirement } from '../k8s/selector.js';

/** Why a pod gets no template at all; each id is a reason of pipeline/reasons.ts, which holds its sentence. */
export type PodSkipReason = 'pod-opted-out' | 'namespace-not-enabled' | 'no-template-matched' | 'unknown-template';

/** Why one template was not selected. */
export type TemplateSkipReason = 'namespace-selector' | 'object-selector' | 'not-requested' | 'os';

export interface TemplateSkip {
  readonly template: string;
  readonly reason: TemplateSkipReason;
  readonly message: string;
  /** With a selector reason: its first requirement the labels (the namespace's, or the pod's own) do not meet. */
  readonly unmet?: { readonly requirement: Requirement; readonly labels: Labels };
}

/** The outcome of selection: the templates to render (sorted by name) and every skip explained. */
export interface Selection {
  readonly templates: readonly Template[];
  readonly skipped: readonly TemplateSkip[];
  /** Set when `templates` is empty. */
  readonly reason?: PodSkipReason;
  /** With `unknown-template`: the requested names that are no template here. */
  readonly unknown: readonly string[];
  /**
   * With `pod-opted-out`: the templates that would apply to the pod without its opt-out label and
   * whose `optOut` is not `allow` (required templates that warn about or refuse the opt-out).
   */
  readonly optOutContested?: readonly Template[];
}

/** What selection looks at. `podLabels` are the pod's own labels (without those the injector added). */
export interface SelectionInput {
  readonly namespace: string;
  readonly namespaceLabels: Labels;
  readonly podLabels: Labels;
  readonly podAnnotations: Readonly<Record<string, string>>;
  /** The pod's operating system (`spec.os.name`); absent means linux. */
  readonly podOs?: PodOs;
}

/** The template names a pod requests with `sidecar-injector.io/templates: a,b`. */
export function requestedTemplates(annotations: Readonly<Record<string, string>>): string[] {
  const value = Object.hasOwn(annotations, AnnotationKeys.request) ? annotations[AnnotationKeys.request]! : '';
  return [...new Set(value.split(',').map(trimSpace).filter(Boolean))];
}

/**
 * Selects templates for a pod: the namespace must be opted in and the pod not opted out; then
 * each template's selectors decide, and on-request templates must also be named by the pod.
 * A pod that requests a template that does not exist gets `unknown-template`: it asked for a
 * sidecar we cannot give, and running it without is not our call (pipeline/reasons.ts says it).
 */
export function select(input: SelectionInput, set: TemplateSet): Selection {
  const { namespaceLabels, podLabels, podAnnotations } = input;
  const none = (reason: PodSkipReason, unknown: readonly string[] = []): Selection => ({ templates: [], skipped: [], reason, unknown });
  const optedIn = namespaceOptedIn(namespaceLabels);
  const requested = requestedTemplates(podAnnotations);
  if (podLabels[LabelKeys.podOptOut] === LabelValues.disabled) {
    // A template that does not let pods opt out is judged as though the label were not there
    // (whatever else the pod asks for: a request for a template that does not exist changes nothing).
    const optOutContested =
      optedIn && set.templates.some((t) => t.optOut !== 'allow')
        ? matching({ ...input, podLabels: withoutOptOut(podLabels) }, new Set(requested), set).templates.filter((t) => t.optOut !== 'allow')
        : [];
    return { ...none('pod-opted-out'), optOutContested };
  }
  if (!optedIn) return none('namespace-not-enabled');
  const unknown = requested.filter((name) => !set.byName.has(name));
  if (unknown.length > 0) return none('unknown-template', unknown);
  const { templates, skipped } = matching(input, new Set(requested), set);
  return templates.length === 0 ? { templates, skipped, reason: 'no-template-matched', unknown: [] } : { templates, skipped, unknown: [] };
}

/** Each template's own test (on request, operating system, selectors) on `input`'s labels: the templates that apply and why the others do not. */
function matching(input: SelectionInput, requestedSet: ReadonlySet<string>, set: TemplateSet): { templates: Template[]; skipped: TemplateSkip[] } {
  const { namespace, namespaceLabels, podLabels } = input;
  const templates: Template[] = [];
  const skipped: TemplateSkip[] = [];
  for (const template of set.templates) {
    if (template.injection === 'on-request' && !requestedSet.has(template.name)) {
      skipped.push({
        template: template.name,
        reason: 'not-requested',
        message: `${template.name} is on request and the pod does not name it in ${AnnotationKeys.request}`,
      });
    } else if (!template.os.includes(input.podOs ?? 'linux')) {
      skipped.push({
        template: template.name,
        reason: 'os',
        message: `${template.name} is not injected: it supports ${template.os.join(', ')} and the pod runs on ${input.podOs ?? 'linux'}`,
      });
    } else {
      const namespaceUnmet = unmetRequirement(template.namespaceSelector, namespaceLabels);
      const objectUnmet = namespaceUnmet ? undefined : unmetRequirement(template.objectSelector, podLabels);
      if (namespaceUnmet)
        skipped.push({
          template: template.name,
          reason: 'namespace-selector',
          message: `${template.name}: namespace ${namespace} does not match its namespaceSelector`,
          unmet: { requirement: namespaceUnmet, labels: namespaceLabels },
        });
      else if (objectUnmet)
        skipped.push({
          template: template.name,
          reason: 'object-selector',
          message: `${template.name}: pod labels do not match its objectSelector`,
          unmet: { requirement: objectUnmet, labels: podLabels },
        });
      else templates.push(template);
    }
  }
  return { templates, skipped };
}

/** Whether a namespace with these labels opted in to injection. */
export function namespaceOptedIn(namespaceLabels: Labels): boolean {
  return namespaceLabels[LabelKeys.namespaceOptIn] === LabelValues.enabled;
}

/** The pod's labels without the opt-out label: how a template that does not let pods opt out sees them. */
export function withoutOptOut(labels: Labels): Labels {
  const rest: Record<string, string> = Object.create(null) as Record<string, string>;
  for (const [key, value] of Object.entries(labels)) if (key !== LabelKeys.podOptOut) rest[key] = value;
  return rest;
}

/**
 * One pod, decided and injected: the core the webhook and the offline `render` share. Reads
 * the pod, asks the namespace label source, selects templates, renders and injects. Never
 * throws for a pod it cannot serve: every outcome is a value with a reason and a sentence.
 */
import { AdmissionError } from '../errors.js';
import { requestedTemplates, select, type PodSkipReason, type Selection } from '../selection/decide.js';
import { NamespaceLabelsUnavailable, type NamespaceLabelSource } from '../selection/namespace-labels.js';
import type { TemplateSet } from '../templates/load.js';
import type { RenderContext } from '../templates/placeholders.js';
import { render } from '../templates/render.js';
import type { JsonObject, Template } from '../templates/template.js';
import { inject, ownMetadata, type Injection } from './inject.js';
import { Annotations } from './keys.js';
import { indexLedger, parseLedger } from './ledger.js';
import { podDisplayName, readPod, type PodParts } from './pod.js';

/** What admission needs from the rest of the process. */
export interface AdmitDeps {
  /** The template set in force (read once per pod, so a reload takes effect at once). */
  readonly templates: () => TemplateSet;
  readonly namespaces: NamespaceLabelSource;
}

/** Why: a stable id for logs and metrics. */
export type AdmitReason =
  | 'injected'
  | 'already-injected'
  | 'nothing-to-add'
  | PodSkipReason
  | 'invalid-pod'
  | 'unknown-template'
  | 'namespace-unknown';

interface Common {
  /** The pod's name, or its generateName. */
  readonly podName: string;
  readonly namespace: string;
  readonly message: string;
  readonly warnings: readonly string[];
  /** The templates selected for this pod, empty when none. */
  readonly templates: readonly Template[];
  readonly selection?: Selection;
}

/** The outcome for one pod. */
export type PodOutcome =
  | (Common & { readonly decision: 'patched'; readonly reason: 'injected'; readonly original: JsonObject; readonly injection: Injection })
  | (Common & { readonly decision: 'allowed'; readonly reason: AdmitReason; readonly injection?: Injection })
  | (Common & { readonly decision: 'denied'; readonly reason: AdmitReason; readonly code: number });

/** The pod to admit, with the request's namespace and name (both may be empty on the pod itself). */
export interface PodInput {
  readonly pod: unknown;
  readonly namespace: string;
  readonly name: string;
}

/** The values templates are rendered with: the pod's own labels and annotations, its name or generateName, its namespace. */
export function contextFor(parts: PodParts, requestName: string, namespace: string, own: ReturnType<typeof ownMetadata>, namespaceLabels: Readonly<Record<string, string>>): RenderContext {
  const { metadata, spec } = parts;
  const generateName = typeof metadata.generateName === 'string' ? metadata.generateName : '';
  const name = typeof metadata.name === 'string' && metadata.name ? metadata.name : generateName.replace(/-+$/, '');
  const serviceAccountName =
    typeof spec.serviceAccountName === 'string' && spec.serviceAccountName
      ? spec.serviceAccountName
      : typeof spec.serviceAccount === 'string' && spec.serviceAccount
        ? spec.serviceAccount
        : 'default';
  return {
    pod: { name: name || requestName, generateName, namespace, serviceAccountName, labels: own.labels, annotations: own.annotations },
    namespace: { name: namespace, labels: namespaceLabels },
  };
}

/** Decides and injects one pod. */
export async function admitPod(input: PodInput, deps: AdmitDeps): Promise<PodOutcome> {
  let podName = input.name;
  let namespace = input.namespace;
  const denial = (reason: AdmitReason, code: number, message: string, templates: readonly Template[] = []): PodOutcome => ({
    decision: 'denied',
    reason,
    code,
    message,
    warnings: [],
    podName,
    namespace,
    templates,
  });
  try {
    const parts = readPod(input.pod);
    const pod = input.pod as JsonObject;
    podName = podDisplayName(parts.metadata) || input.name;
    // Controller-created pods had no metadata.namespace before Kubernetes 1.24.
    namespace = input.namespace || (typeof parts.metadata.namespace === 'string' ? parts.metadata.namespace : '');
    if (!namespace) return denial('invalid-pod', 400, 'the pod has no namespace: request.namespace and metadata.namespace are both empty');

    const { ledger, problem } = parseLedger(parts.annotations[Annotations.status]);
    const owner = indexLedger(ledger);
    const own = ownMetadata(parts, owner);
    const warnings: string[] = problem ? [problem] : [];
    const namespaceLabels = await deps.namespaces.labelsOf(namespace);
    const set = deps.templates();
    const selection = select({ namespace, namespaceLabels, podLabels: own.labels, podAnnotations: own.annotations }, set);
    const common = { podName, namespace, warnings, selection, templates: selection.templates };
    // A template the pod asked for by name and did not get deserves a sentence.
    const requested = new Set(requestedTemplates(own.annotations));
    for (const skip of selection.skipped) if (requested.has(skip.template)) warnings.push(skip.message);
    if (selection.reason) {
      if (selection.reason === 'namespace-not-enabled' && requested.size > 0) warnings.push(`${selection.message}; requested templates are not injected`);
      return { ...common, decision: 'allowed', reason: selection.reason, message: selection.message };
    }
    const context = contextFor(parts, input.name, namespace, own, namespaceLabels);
    const rendered = selection.templates.map((t) => render(t, context));
    const injection = inject(pod, parts, ledger, owner, rendered);
    warnings.push(...injection.warnings);
    if (!injection.changed) {
      const all = selection.templates.every((t) => Object.hasOwn(ledger.templates, t.name));
      return {
        ...common,
        decision: 'allowed',
        reason: all ? 'already-injected' : 'nothing-to-add',
        message: all ? 'the pod already carries its sidecars' : 'every item of the selected templates is already in the pod',
        injection,
      };
    }
    return { ...common, decision: 'patched', reason: 'injected', message: `injected ${injection.injected.join(', ')}`, original: pod, injection };
  } catch (err) {
    if (err instanceof NamespaceLabelsUnavailable) {
      if (err.policy === 'allow') {
        return { decision: 'allowed', reason: 'namespace-unknown', message: err.message, warnings: [`no sidecars injected: ${err.message}`], podName, namespace, templates: [] };
      }
      return denial('namespace-unknown', 503, `${err.message}; the pod is refused so that it does not start without its sidecars, and its controller will retry`);
    }
    if (err instanceof AdmissionError) return denial(err.code === 'ERR_UNKNOWN_TEMPLATE' ? 'unknown-template' : 'invalid-pod', err.httpCode, err.message);
    throw err;
  }
}

/**
 * One pod, decided and injected: the core the webhook and the offline `render` share. Reads
 * the pod, asks the namespace label source, selects templates, renders and injects. Never
 * throws for a pod it cannot serve: every outcome is a value with a reason and a sentence.
 */
import { AdmissionError } from '../errors.js';
import { requestedTemplates, select, type PodSkipReason, type Selection } from '../selection/select.js';
import { NamespaceLabelsUnavailable, type NamespaceLabelSource } from '../namespaces/source.js';
import type { TemplateSet } from '../templates/set.js';
import { contextFor } from '../templates/context.js';
import { render } from '../templates/render.js';
import type { JsonObject } from '../k8s/json.js';
import type { Template } from '../templates/template.js';
import { inject, ownMetadata, type Injection } from '../inject/inject.js';
import { AnnotationKeys } from '../k8s/keys.js';
import { indexLedger, parseLedger, type Ledger } from '../inject/ledger.js';
import { parsePod, podDisplayName, podOs } from '../k8s/pod.js';
import { checkLedger } from '../inject/trust.js';
import { admissionProblem, annotationBytes, maxAnnotationBytes } from '../k8s/pod-validation.js';
import { cut } from '../quote.js';

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
  | 'template-conflict'
  | PodSkipReason
  | 'invalid-pod'
  | 'pod-too-large'
  | 'annotations-over-limit'
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

/** Decides and injects one pod. */
export async function admitPod(input: PodInput, deps: AdmitDeps): Promise<PodOutcome> {
  // Cut for messages and logs: these come from the request and are validated only below.
  let podName = cut(input.name, 100);
  let namespace = cut(input.namespace, 100);
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
    const parts = parsePod(input.pod);
    const pod = input.pod as JsonObject;
    podName = cut(podDisplayName(parts.metadata) || input.name, 100);
    // Controller-created pods had no metadata.namespace before Kubernetes 1.24.
    const podNamespace = input.namespace || (typeof parts.metadata.namespace === 'string' ? parts.metadata.namespace : '');
    namespace = cut(podNamespace, 100);
    if (!podNamespace) return denial('invalid-pod', 400, 'the pod has no namespace: request.namespace and metadata.namespace are both empty');
    // Before any work: a pod the API server will reject, or one out of proportion to any real pod.
    const problem = admissionProblem(parts, podNamespace, input.name);
    if (problem) {
      return problem.kind === 'invalid' ? denial('invalid-pod', 400, problem.message) : denial('pod-too-large', 400, problem.message);
    }

    const set = deps.templates();
    const { ledger: claimed, problem: ledgerProblem } = parseLedger(parts.annotations[AnnotationKeys.status]);
    // The ledger is a claim: only what the pod really holds of a template counts as ours.
    const checked = checkLedger(claimed, parts, set);
    const ledger = checked.believed;
    const owner = indexLedger(ledger);
    const own = ownMetadata(parts, owner);
    const warnings: string[] = ledgerProblem ? [ledgerProblem] : [];
    warnings.push(...checked.doubts);
    const namespaceLabels = await deps.namespaces.labelsOf(namespace);
    const selection = select({ namespace, namespaceLabels, podLabels: own.labels, podAnnotations: own.annotations, podOs: podOs(parts) }, set);
    const common = { podName, namespace, warnings, selection, templates: selection.templates };
    // A template the pod asked for by name and did not get deserves a sentence.
    const requested = new Set(requestedTemplates(own.annotations));
    // So does a template skipped because of the pod's operating system.
    for (const skip of selection.skipped) if (requested.has(skip.template) || skip.reason === 'os') warnings.push(skip.message);
    if (selection.reason) {
      if (selection.reason === 'namespace-not-enabled' && requested.size > 0) warnings.push(`${selection.message}; requested templates are not injected`);
      return { ...common, decision: 'allowed', reason: selection.reason, message: selection.message };
    }
    const context = contextFor(parts, input.name, namespace, own, namespaceLabels);
    const rendered = selection.templates.map((t) => render(t, context));
    // Entries of retired templates are carried over as written; they decide nothing.
    const written = { v: 1 as const, templates: Object.assign(Object.create(null) as Ledger['templates'], checked.retired, ledger.templates) };
    const injection = inject(pod, parts, written, owner, rendered, checked.sidecars);
    warnings.push(...injection.warnings);
    if (!injection.changed) {
      const all = selection.templates.every((t) => Object.hasOwn(ledger.templates, t.name));
      const conflict = injection.conflicts.length > 0;
      return {
        ...common,
        decision: 'allowed',
        reason: conflict ? 'template-conflict' : all ? 'already-injected' : 'nothing-to-add',
        message: conflict
          ? `not injected: ${injection.conflicts.join(', ')} (the pod's own items are in the way)`
          : all
            ? 'the pod already carries its sidecars'
            : 'every item of the selected templates is already in the pod',
        injection,
      };
    }
    // The API server refuses a pod whose annotations exceed the limit: say so ourselves, precisely.
    const bytes = annotationBytes((injection.pod.metadata as JsonObject).annotations as Record<string, string>);
    if (bytes > maxAnnotationBytes) {
      return denial(
        'annotations-over-limit',
        400,
        `injecting ${injection.injected.join(', ')} would take the pod's annotations to ${bytes} bytes, over the API server's limit of ${maxAnnotationBytes}; shorten the pod's annotations`,
        selection.templates,
      );
    }
    return { ...common, decision: 'patched', reason: 'injected', message: `injected ${injection.injected.join(', ')}`, original: pod, injection };
  } catch (err) {
    if (err instanceof NamespaceLabelsUnavailable) {
      if (err.policy === 'allow') {
        return {
          decision: 'allowed',
          reason: 'namespace-unknown',
          message: err.message,
          warnings: [`no sidecars injected: labels of namespace ${namespace} unknown: ${err.reason}`],
          podName,
          namespace,
          templates: [],
        };
      }
      return denial(
        'namespace-unknown',
        503,
        `${err.message}; the pod is refused so that it does not start without its sidecars, and its controller will retry`,
      );
    }
    if (err instanceof AdmissionError) {
      const reason = err.code === 'ERR_UNKNOWN_TEMPLATE' ? 'unknown-template' : err.code === 'ERR_POD_TOO_LARGE' ? 'pod-too-large' : 'invalid-pod';
      return denial(reason, err.httpCode, err.message);
    }
    throw err;
  }
}

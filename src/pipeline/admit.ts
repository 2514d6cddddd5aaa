/**
 * One pod, decided and injected: the core the webhook and the offline `render` share. The
 * decision runs as named stages (stages/), each a function of the pod and what the process
 * knows: read → select → parameters → place → finish; the first that reaches an outcome ends it.
 * They add to one record of the decision as they go (its warnings, notes and each template's
 * decision): a stage runs once per pod.
 * Never throws for a pod it cannot serve: every outcome is a value with a reason and a sentence.
 */
import { AdmissionError, NamespaceLabelsUnavailableError } from '../errors.js';
import { cut } from '../quote.js';
import { reasonOfAdmissionError, say } from './reasons.js';
import { warning } from './warnings.js';
import { finish } from './stages/finish.js';
import { denied, type AdmitDeps, type PodInput, type PodOutcome, type Progress } from './stages/outcome.js';
import { resolveOverrides } from './stages/parameters.js';
import { placeTemplates } from './stages/place.js';
import { readPod } from './stages/read.js';
import { selectTemplates } from './stages/select.js';

export type { AdmitDeps, PodInput, PodOutcome } from './stages/outcome.js';

/** Decides and injects one pod. */
export async function admitPod(input: PodInput, deps: AdmitDeps): Promise<PodOutcome> {
  // Cut for messages and logs: these come from the request and are validated only below.
  const at: Progress = { podName: cut(input.name, 100), namespace: cut(input.namespace, 100), decisions: [] };
  try {
    const read = readPod(input, deps, at);
    if ('outcome' in read) return read.outcome;
    const selected = await selectTemplates(read.next, input, deps, at);
    if ('outcome' in selected) return selected.outcome;
    const parameterised = resolveOverrides(selected.next, deps, at);
    if ('outcome' in parameterised) return parameterised.outcome;
    const placed = placeTemplates(parameterised.next, input, deps, at);
    if ('outcome' in placed) return placed.outcome;
    return finish(placed.next, at);
  } catch (err) {
    if (err instanceof NamespaceLabelsUnavailableError) {
      if (err.policy === 'allow') {
        return {
          decision: 'allowed',
          reason: 'namespace-unknown',
          message: err.message,
          warnings: [warning('namespace-unknown', `no sidecars injected: labels of namespace ${at.namespace} unknown: ${err.reason}`)],
          podName: at.podName,
          namespace: at.namespace,
          templates: [],
          decisions: [],
        };
      }
      return denied(at, 'namespace-unknown', say('namespace-unknown', err.message));
    }
    if (err instanceof AdmissionError) return denied(at, reasonOfAdmissionError[err.code], err.message);
    throw err;
  }
}

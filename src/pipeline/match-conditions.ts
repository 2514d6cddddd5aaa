/**
 * The webhook's matchConditions (admissionregistration.k8s.io/v1, CONTRACT R-73): CEL the API
 * server evaluates before calling us, built from the very constants the server uses, so that
 * what the API server skips is exactly what we would leave alone. The manifest
 * (manifests/base/mutatingwebhookconfiguration.yaml) holds these; a test keeps them equal and
 * evaluates each against the corpus pods. A condition may only exclude pods we never inject.
 */
import { AnnotationKeys } from '../k8s/keys.js';

/** One match condition: all must be true for the webhook to be called. */
export interface MatchCondition {
  readonly name: string;
  readonly expression: string;
}

export const matchConditions: readonly MatchCondition[] = [
  {
    // Mirror pods are allowed unchanged by admitPod (reason mirror-pod): no need to call us.
    name: 'not-a-mirror-pod',
    expression: `!has(object.metadata.annotations) || !('${AnnotationKeys.mirror}' in object.metadata.annotations)`,
  },
];

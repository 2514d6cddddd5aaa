/**
 * The reviewer `serve` runs, put together in one place: each body decided afresh
 * (admission/mutate.ts), inside the layer that remembers answers for pods of one ReplicaSet
 * (admission/answer-cache/). The layer is the one line below; without it, every body is decided
 * afresh and nothing else changes.
 */
import { withAnswerCache } from './admission/answer-cache/index.js';
import { createReviewer, type MutateDeps, type Reviewer } from './admission/mutate.js';

/** What serve's reviewer reads: the deps of a decision, and the generation the answer cache keys on. */
export interface ServingDeps extends MutateDeps {
  /**
   * Names the state a decision reads besides the body and its namespace (the template set in
   * force, the Kubernetes version, the Pod Security action); changes whenever any of it does.
   */
  readonly generation: () => string;
}

/** The serving reviewer: every body decided afresh, inside each layer below, the innermost first. */
export function servingReviewer(deps: ServingDeps): Reviewer {
  const layers: readonly ((inner: Reviewer) => Reviewer)[] = [
    // Answers for pods of one ReplicaSet remembered (admission/answer-cache/).
    (inner) => withAnswerCache(inner, deps),
  ];
  return layers.reduce((inner, layer) => layer(inner), createReviewer(deps));
}

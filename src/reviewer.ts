/**
 * The reviewer `serve` runs, put together in one place: each body decided afresh
 * (admission/mutate.ts), inside the layer that remembers answers for pods of one ReplicaSet
 * (admission/answer-cache/). The layer is the one line below; without it, every body is decided
 * afresh and nothing else changes.
 */
import { withAnswerCache } from './admission/answer-cache/index.js';
import { createReviewer, type MutateDeps, type Reviewer } from './admission/mutate.js';

/**
 * The serving reviewer over `deps`. `generation` names the state a decision reads besides the
 * body and its namespace (the template set in force, the Kubernetes version, the Pod Security
 * action) and changes whenever any of it does.
 */
export function servingReviewer(deps: MutateDeps, generation: () => string): Reviewer {
  let reviewer = createReviewer(deps);
  reviewer = withAnswerCache(reviewer, { namespaces: deps.namespaces, generation });
  return reviewer;
}

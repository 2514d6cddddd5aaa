/**
 * Answers for pods of one ReplicaSet, remembered: a layer around a reviewer. A body whose key
 * (key.ts: its text without the values no decision reads) was answered before, in the same
 * state, gets that answer with its own uid, before it is parsed; every other body goes to the
 * reviewer inside, and its answer is remembered the second time its key comes.
 *
 * The state is named by generations the sources give, not by the objects they happen to hold:
 * the namespace's labels and overrides (NamespaceLabelSource.generationOf), everything else a
 * decision reads (AnswerState.generation: the template set in force, the Kubernetes version),
 * and the webhook. An answer decided while any of them changed is not remembered.
 *
 * Nothing else in the process knows this layer: without it every body is decided afresh.
 */
import type { AdmitDeps } from '../../pipeline/admit.js';
import type { AdmissionEvent } from '../../pipeline/admission-events.js';
import { answerBytes, type AnswerText } from '../review.js';
import type { Answered, ReviewOutcome, Reviewer, Webhook } from '../mutate.js';
import { AnswerCache, cutValues, matchedUid, reviewKeyPaths, reviewKeyText, uidOf, type AnswerKey, type ReviewKeyText } from './key.js';

export { AnswerCache, reviewKeyPaths } from './key.js';

/** What a decision reads besides the review body, by generation. */
export interface AnswerState {
  /**
   * Where the namespace's labels come from: the generation of a namespace's labels and
   * overrides while the source holds them. Never a look-up: a namespace the source does not
   * hold is decided afresh, and only the fresh path (a pod CREATE, parsed) looks it up.
   */
  readonly namespaces: Pick<AdmitDeps['namespaces'], 'generationOf'>;
  /**
   * A name for everything else a decision reads (the template set in force, the Kubernetes
   * version, the Pod Security action) that changes whenever any of it does.
   */
  generation(): string;
}

/**
 * A review's outcome as remembered: without the uid, with its events computed, its answer's
 * text, and the values cut out of the body it was decided for (key.ts matchedUid).
 */
export interface RememberedAnswer {
  readonly outcome: Omit<ReviewOutcome, 'uid'>;
  readonly text: AnswerText;
  readonly cut: readonly Buffer[];
}

/** A reviewer that answers from remembered answers where it can, and the cache it keeps. */
export interface CachingReviewer extends Reviewer {
  readonly cache: AnswerCache<RememberedAnswer>;
}

/** `inner` with answers remembered in `cache`, keyed by the body's key text and `state`'s generations. */
export function withAnswerCache(inner: Reviewer, state: AnswerState, cache = new AnswerCache<RememberedAnswer>()): CachingReviewer {
  /** The generation of the state a body of `namespace` is decided in; undefined when it cannot be named (not held: decided afresh). */
  const generationOf = (namespace: string, webhook: Webhook): string | undefined => {
    const labels = state.namespaces.generationOf?.(namespace);
    return labels === undefined ? undefined : `${state.generation()}/${labels}/${webhook}`;
  };

  const fromCache = (key: AnswerKey, keyText: ReviewKeyText): Answered | undefined =>
    cache.use(key, (hit): Answered | undefined => {
      const uid = matchedUid(keyText, hit.cut);
      if (uid === undefined) return undefined;
      const { response } = hit.outcome;
      const outcome: ReviewOutcome = { ...hit.outcome, uid, response: { ...response, response: { ...response.response, uid } }, remembered: hit };
      return { outcome, answer: answerBytes(hit.text, uid) };
    });

  const remember = (key: AnswerKey, keyText: ReviewKeyText, answered: Answered, text: AnswerText) => {
    // Without the pod objects (the events are computed now) and without the uid.
    const { uid: _uid, events, ...kept } = answered.outcome;
    const computed: readonly AdmissionEvent[] | undefined = events?.();
    const outcome = { ...kept, ...(computed ? { events: () => computed } : {}) };
    const cut = cutValues(keyText);
    // The answer's text, and the response object beside it that holds the same patch and
    // warnings again; the values cut out; the rest of the outcome (names, reasons, events)
    // within a kilobyte.
    const cutBytes = cut.reduce((sum, value) => sum + value.length, 0);
    cache.set(key, { outcome, text, cut }, 2 * (text.head.length + text.tail.length) + cutBytes + 1024);
  };

  return {
    keyPaths: reviewKeyPaths,
    cache,
    async answer(body, webhook) {
      const keyText = body.bytes.length <= cache.maxBodyBytes ? reviewKeyText(body.bytes, body.scan) : undefined;
      const generation = keyText && generationOf(keyText.namespace, webhook);
      const key = generation === undefined ? undefined : cache.keyOf(keyText!, generation);
      const cached = key && fromCache(key, keyText!);
      if (cached) return cached;
      const answered = await inner.answer(body, webhook);
      const decided = answered.decidedPod;
      // Only a pod CREATE, only when the parser read the uid and namespace where the scan did,
      // only when nothing changed while it was decided, and only the second time its key comes.
      if (
        key &&
        decided &&
        decided.uid === uidOf(keyText!) &&
        decided.namespace === keyText!.namespace &&
        generationOf(keyText!.namespace, webhook) === generation &&
        cache.admits(key)
      )
        remember(key, keyText!, answered, decided.text());
      return answered;
    },
  };
}

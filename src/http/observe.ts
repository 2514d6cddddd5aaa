/**
 * Observation of the HTTP side, out of the routes: the one log line per review and the
 * metrics, and the liveness bookkeeping. The log line's message is the constant `review`;
 * what happened is in its fields (`decision`, `reason`, and the sentence as `detail`), so that
 * every review is one event a log query can name.
 */
import type { Logger } from 'pino';
import type { ReviewOutcome, Webhook } from '../admission/mutate.js';
import type { Liveness } from '../liveness.js';
import type { Metrics } from '../metrics.js';
import { printable } from '../quote.js';

/** What the routes report; each call logs and measures. */
export interface Observer {
  /** A review answered, and the seconds from its body read to its answer. */
  reviewed(outcome: ReviewOutcome, seconds: number, webhook: Webhook): void;
  /** A request refused before it was a review (HTTP 4xx/503), with its code: counted and logged. */
  refused(code: string, status: number, path: string, message: string): void;
  /** A request for no route or with a wrong method: counted only (scanners would flood the log). */
  misdirected(code: 'ERR_NOT_FOUND' | 'ERR_METHOD_NOT_ALLOWED'): void;
  /** A request that failed for an internal reason (a bug): answered 500. */
  failed(err: unknown, path: string): void;
}

/** Creates the observer over a logger, the metrics and the liveness tracker. */
export function createObserver(log: Logger, metrics: Metrics, liveness: Liveness): Observer {
  // The fields a remembered answer shares with every review answered from it, written once
  // into a child logger (pino serialises a child's fields when it is made): the line of such a
  // review holds the same fields, those first. Kept as long as the cache keeps the answer.
  const prepared = new WeakMap<object, Logger>();
  const sharedFields = (outcome: ReviewOutcome) => ({
    namespace: outcome.namespace,
    pod: outcome.pod,
    operation: outcome.operation,
    decision: outcome.decision,
    reason: outcome.reason,
    detail: outcome.message,
    templates: outcome.templates,
    patchOps: outcome.patchOps,
    ...(outcome.notes ? { notes: outcome.notes } : {}),
  });
  return {
    reviewed(outcome, seconds, webhook) {
      liveness.reviewAnswered();
      metrics.reviews.inc({ operation: outcome.operation, decision: outcome.decision, reason: outcome.reason });
      for (const template of outcome.injected) metrics.injections.inc({ template });
      for (const template of outcome.policyDeliveryMissing ?? []) metrics.policyDeliveryMissing.inc({ template });
      metrics.reviewDuration.observe(seconds);
      // One line per review; never pod contents (env values can be secrets).
      const own = { uid: printable(outcome.uid), webhook, dryRun: outcome.dryRun, durationMs: Math.round(seconds * 1e6) / 1000 };
      const remembered = outcome.remembered;
      if (remembered) {
        metrics.reviewsFromCache.inc();
        let child = prepared.get(remembered);
        if (!child) prepared.set(remembered, (child = log.child(sharedFields(outcome))));
        child.info(own, 'review');
      } else log.info({ ...own, ...sharedFields(outcome) }, 'review');
    },
    refused(code, status, path, message) {
      metrics.errors.inc({ code });
      log.warn({ status, code, path }, message);
    },
    misdirected(code) {
      metrics.errors.inc({ code });
    },
    failed(err, path) {
      // Counted for liveness first: whatever fails next must not hide that reviews fail.
      if (path === '/mutate') liveness.reviewFailed();
      try {
        metrics.errors.inc({ code: 'ERR_INTERNAL' });
      } finally {
        log.error({ err, path }, 'internal error');
      }
    },
  };
}

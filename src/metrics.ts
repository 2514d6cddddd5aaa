/**
 * Prometheus metrics (prom-client), one registry per process (tests make several). Names are
 * prefixed `sidecar_injector_`; labels are bounded sets (reason ids, template names, codes).
 */
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** The injector's metrics. */
export interface Metrics {
  readonly registry: Registry;
  /** Reviews by operation, decision (patched/allowed/denied) and reason id. */
  readonly reviews: Counter<'operation' | 'decision' | 'reason'>;
  /** Injections by template (a template that added something to a pod). */
  readonly injections: Counter<'template'>;
  /** Pods that reached the webhook without a `delivery: policy` template's injection, by template: the policy is absent, stale, or decides otherwise. */
  readonly policyDeliveryMissing: Counter<'template'>;
  readonly exportedPolicyStale: Gauge;
  /** Reviews answered from the answer cache (pods of one ReplicaSet after the second). */
  readonly reviewsFromCache: Counter;
  /** Time from receiving a review's body to having its answer. */
  readonly reviewDuration: Histogram;
  /** Requests refused or failed, by error code (ERR_BODY_TOO_LARGE, ERR_INTERNAL, …). */
  readonly errors: Counter<'code'>;
  /** Increases by one each time a new template set is taken into use. */
  readonly templateGeneration: Gauge;
  /** 1 while the templates on disk are the set in use, 0 while a broken set is being refused. */
  readonly templateSetCurrent: Gauge;
  readonly templates: Gauge;
  readonly templateReloadFailures: Counter;
  /** SidecarTemplate creates and updates reviewed, by decision (allowed, denied). */
  readonly templateReviews: Counter<'decision'>;
  /** SidecarTemplates left out because they fail a check (the cluster source). */
  readonly templatesRefused: Gauge;
  /** Expiry of the serving certificate, as a Unix time in seconds. */
  readonly certificateExpiry: Gauge;
  /** 1 while a fail-closed webhook the injector armed has been set to fail open, by webhook (the certificate leader only). */
  readonly webhookFailingOpen: Gauge<'webhook'>;
  readonly namespaceCacheSize: Gauge;
  /** 1 once the cluster namespace source has completed its first list. */
  readonly namespaceCacheSynced: Gauge;
  readonly namespaceLookupFailures: Counter;
  /** Events the API server refused or did not answer (admission never waits for them). */
  readonly eventWriteFailures: Counter;
  /** Events dropped because a bound on open series was reached (per namespace or overall). */
  readonly eventsDropped: Counter;
  /** Pods per namespace, template and audit state (the leader's auditor only). */
  readonly pods: Gauge<'namespace' | 'template' | 'state'>;
  /** Preflights of candidate revisions by template and result (`passed` or the failed check's id). */
  readonly rolloutPreflights: Counter<'template' | 'result'>;
  /** 1 while a template's candidate takes pods, 0 while it is stopped (pending or failed preflight), by template. */
  readonly rolloutCandidateActive: Gauge<'template'>;
  /** Candidates halted by what their pods do, by template. */
  readonly rolloutHalts: Counter<'template'>;
  /** Pod updates in place (a sidecar's new image) by template and result: `updated`, `conflict`, `refused`, `failed`. */
  readonly inPlaceUpdates: Counter<'template' | 'result'>;
  /** 1 while this replica holds the lease, 0 while another does, by lease. */
  readonly leader: Gauge<'lease'>;
}

/** Creates the metrics in a fresh registry, with Node's default process metrics. */
export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'sidecar_injector_' });
  const registers = [registry];
  return {
    registry,
    reviews: new Counter({
      name: 'sidecar_injector_reviews_total',
      help: 'AdmissionReviews answered, by operation, decision and reason',
      labelNames: ['operation', 'decision', 'reason'],
      registers,
    }),
    injections: new Counter({ name: 'sidecar_injector_injections_total', help: 'Pods a template added something to', labelNames: ['template'], registers }),
    policyDeliveryMissing: new Counter({
      name: 'sidecar_injector_policy_delivery_missing_total',
      help: 'Pods that reached the webhook without the injection of a template marked delivery: policy (the MutatingAdmissionPolicy absent, stale, or deciding otherwise); the webhook decided it instead',
      labelNames: ['template'],
      registers,
    }),
    reviewsFromCache: new Counter({
      name: 'sidecar_injector_reviews_from_cache_total',
      help: 'AdmissionReviews answered from the answer cache, without parsing or deciding again',
      registers,
    }),
    reviewDuration: new Histogram({
      name: 'sidecar_injector_review_duration_seconds',
      help: 'Time to answer an AdmissionReview once its body is read',
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 1, 2.5],
      registers,
    }),
    errors: new Counter({ name: 'sidecar_injector_errors_total', help: 'Requests refused or failed, by error code', labelNames: ['code'], registers }),
    templateGeneration: new Gauge({
      name: 'sidecar_injector_template_generation',
      help: 'Generation of the template set in use (1 at start, +1 per reload)',
      registers,
    }),
    templateSetCurrent: new Gauge({
      name: 'sidecar_injector_template_set_current',
      help: '1 when the templates on disk are in use, 0 while a broken set is refused',
      registers,
    }),
    templates: new Gauge({
      name: 'sidecar_injector_templates',
      help: 'Templates in the set in use (0: no pod gets a sidecar)',
      registers,
    }),
    templateReloadFailures: new Counter({
      name: 'sidecar_injector_template_reload_failures_total',
      help: 'Template sets (a folder) or SidecarTemplates refused on reload',
      registers,
    }),
    templateReviews: new Counter({
      name: 'sidecar_injector_template_reviews_total',
      help: 'SidecarTemplate creates and updates reviewed, by decision',
      labelNames: ['decision'] as const,
      registers,
    }),
    templatesRefused: new Gauge({
      name: 'sidecar_injector_templates_refused',
      help: 'SidecarTemplates left out because they fail a check (not served)',
      registers,
    }),
    certificateExpiry: new Gauge({
      name: 'sidecar_injector_serving_certificate_expiry_timestamp_seconds',
      help: 'Expiry of the serving certificate (Unix time)',
      registers,
    }),
    webhookFailingOpen: new Gauge({
      name: 'sidecar_injector_webhook_failing_open',
      help: '1 while a fail-closed webhook the injector armed has a failurePolicy other than Fail (an operator lowered it), by webhook; reported by the replica that writes certificates',
      labelNames: ['webhook'],
      registers,
    }),
    exportedPolicyStale: new Gauge({
      name: 'sidecar_injector_exported_policy_stale',
      help: '1 while the MutatingAdmissionPolicy of the templates marked delivery: policy is absent or stale (an old revision, a template missing or no longer marked); reported by the leader',
      registers,
    }),
    namespaceCacheSize: new Gauge({ name: 'sidecar_injector_namespace_cache_size', help: 'Namespaces in the label cache (cluster source)', registers }),
    namespaceCacheSynced: new Gauge({
      name: 'sidecar_injector_namespace_cache_synced',
      help: '1 once the first namespace list has completed (cluster source)',
      registers,
    }),
    namespaceLookupFailures: new Counter({
      name: 'sidecar_injector_namespace_lookup_failures_total',
      help: 'Namespace look-ups that failed (labels could not be known)',
      registers,
    }),
    eventWriteFailures: new Counter({ name: 'sidecar_injector_event_write_failures_total', help: 'Events that could not be written', registers }),
    eventsDropped: new Counter({
      name: 'sidecar_injector_events_dropped_total',
      help: 'Event occurrences dropped: too many open series (per namespace or overall)',
      registers,
    }),
    pods: new Gauge({
      name: 'sidecar_injector_pods',
      help: 'Pods by namespace, template and audit state (current, stale, missing, orphaned), from the leading replica',
      labelNames: ['namespace', 'template', 'state'],
      registers,
    }),
    rolloutPreflights: new Counter({
      name: 'sidecar_injector_rollout_preflights_total',
      help: 'Preflights of candidate revisions through the admission chain, by template and result (passed, refused, not-injected, injected-twice, not-a-fixed-point, unreachable)',
      labelNames: ['template', 'result'],
      registers,
    }),
    rolloutCandidateActive: new Gauge({
      name: 'sidecar_injector_rollout_candidate_active',
      help: "1 while a template's candidate revision takes its share of new pods, 0 while it is stopped (preflight pending or failed)",
      labelNames: ['template'],
      registers,
    }),
    leader: new Gauge({
      name: 'sidecar_injector_leader',
      help: '1 while this replica holds the lease (sidecar-injector-leader: it writes the self-managed certificates and runs the continuous audit), 0 while another does',
      labelNames: ['lease'],
      registers,
    }),
    inPlaceUpdates: new Counter({
      name: 'sidecar_injector_in_place_updates_total',
      help: 'Writes that give running pods a template revision in place (new sidecar resources by a resize, then images and ledger by an update), by template and result: updated, resized, conflict, refused, failed',
      labelNames: ['template', 'result'],
      registers,
    }),
    rolloutHalts: new Counter({
      name: 'sidecar_injector_rollout_halts_total',
      help: 'Candidate revisions halted because their pods have the sidecar crash-looping, restarting or unable to start, by template',
      labelNames: ['template'],
      registers,
    }),
  };
}

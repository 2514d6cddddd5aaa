/**
 * The rollout controller, a runnable on every replica: each candidate revision's preflight
 * through the cluster's admission chain (at the first `begin()`, on every reload of the
 * templates and every five minutes), the gate that keeps a candidate that has not passed from
 * taking pods, and the automatic halt of a candidate whose pods fail or whose workloads cannot
 * create pods (a look every minute while a candidate exists). Each result is measured and
 * logged; an Event on the candidate's SidecarTemplate says when a candidate's preflight starts failing
 * and when it is halted.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock, Timer } from '../clock.js';
import { EventRecorder } from '../kube-api/events.js';
import type { Runnable } from '../runtime/runnable.js';
import type { TemplateSet } from '../templates/set.js';
import type { TemplateSource } from '../templates/store.js';
import { sidecarTemplateResource } from '../templates/resource.js';
import { candidateKey, type CandidateProgress } from '../templates/object-status.js';
import { lookAtCandidates } from './look.js';
import { Preflights, apiServerDryRun, apiServerNamespaceLabels } from './preflight.js';

/** How often a candidate in rollout is preflighted again (and at once on every reload). */
const preflightIntervalMs = 5 * 60_000;
/** After the first preflight, how long a probe our webhook did not inject is tried again soon, and how soon. */
const startupWindowMs = 60_000;
const startupRetryMs = 5_000;
/** How often the pods and workloads of the candidates are looked at for the automatic halt. */
const healthIntervalMs = 60_000;

/** The metrics the controller moves (metrics.ts's, by shape). */
export interface RolloutMetrics {
  readonly rolloutPreflights: { inc(labels: { template: string; result: string }): void };
  readonly rolloutCandidateActive: { reset(): void; set(labels: { template: string }, value: number): void };
  readonly rolloutHalts: { inc(labels: { template: string }): void };
  readonly eventWriteFailures: { inc(): void };
}

/** What the rollout's preflights and halt need. */
export interface RolloutOptions {
  /** Where probe pods are created with dryRun=All. */
  readonly namespace: string;
  /** Unhealthy pods and refused workloads that halt a candidate. */
  readonly haltAfter: number;
  /** How long a candidate's sidecar may stay not ready before its pod counts as unhealthy. */
  readonly notReadyGraceMs: number;
  readonly kubeConfig: KubeConfig;
  readonly templates: TemplateSource;
  readonly log: Logger;
  readonly metrics: RolloutMetrics;
  /** Runs the periodic preflight and health look, and stamps results and Events. */
  readonly clock: Clock;
  /** `reportingInstance` of those Events (the replica's pod name). */
  readonly instance: string;
  /** The uid of the SidecarTemplate named so, as last listed: an Event names it, so that `kubectl describe` finds it. */
  readonly uidOf?: (object: string) => string | undefined;
}

/** The candidate's health at the last look, as /status shows it. */
interface HealthStatus {
  readonly template: string;
  readonly revision: string;
  readonly pods: number;
  readonly restarting: number;
  readonly notReady: number;
  readonly refusedWorkloads: number;
  readonly checkedAt: string;
}

export class RolloutController implements Runnable {
  readonly name = 'rollout';
  private readonly events: EventRecorder | undefined;
  private readonly preflights: Preflights;
  /** The candidate revisions whose last preflight failed, with why: an Event when one starts failing or fails for another reason. */
  private readonly failing = new Map<string, string>();
  private eventCount = 0;
  /**
   * Until the first run (begin(), once the server answers) and for a while after it, a probe our
   * webhook did not inject, or a webhook the chain could not call, may only mean that the
   * Service's endpoints are changing (a lone replica at start, the replica it replaces leaving
   * between the two dry runs): tried again within seconds, with no Event.
   */
  private begunAt: number | undefined;
  private retry: Timer | undefined;
  private timer: Timer | undefined;
  private healthTimer: Timer | undefined;
  private health: HealthStatus[] = [];
  /** One look at a time: a look that takes longer than the period is not started again over it. */
  private watching = false;
  private readonly run = () =>
    void this.preflights
      .run(this.options.templates.current())
      .then(() => {
        // Revisions no longer candidates are forgotten with their results.
        const current = new Set(this.preflights.status().results.map((r) => `${r.template}@${r.revision}`));
        for (const key of this.failing.keys()) if (!current.has(key)) this.failing.delete(key);
      })
      .catch((err: unknown) => this.options.log.error({ err: (err as Error).message }, 'candidate preflight'))
      .finally(() => this.measure());

  constructor(private readonly options: RolloutOptions) {
    const { kubeConfig, log, metrics, clock } = options;
    this.events = new EventRecorder({
      kubeConfig,
      log: log.child({ component: 'rollout-events' }),
      instance: options.instance,
      clock,
      onFailure: () => metrics.eventWriteFailures.inc(),
    });
    this.preflights = new Preflights(
      options.namespace,
      apiServerDryRun(kubeConfig),
      () => new Date(clock.now()),
      (result) => {
        metrics.rolloutPreflights.inc({ template: result.template, result: result.passed ? 'passed' : result.failure! });
        const key = `${result.template}@${result.revision}`;
        if (result.passed) {
          this.failing.delete(key);
          log.info(result, 'candidate preflight passed');
          return;
        }
        if (
          (result.failure === 'not-injected' || result.failure === 'unreachable') &&
          this.begunAt !== undefined &&
          clock.now() - this.begunAt < startupWindowMs
        ) {
          log.info(
            result,
            `candidate preflight: the probe was not injected, or a webhook could not be called, yet; trying again in ${startupRetryMs / 1000} s (the Service's endpoints may still be changing)`,
          );
          this.retry ??= clock.after(startupRetryMs, () => {
            this.retry = undefined;
            this.run();
          });
          return;
        }
        log.warn(result, 'candidate preflight failed: the candidate takes no pod');
        if (this.failing.get(key) === result.failure) return;
        this.failing.set(key, result.failure!);
        this.tell(
          result.template,
          `${key}#${++this.eventCount}`,
          'RolloutPreflightFailed',
          'Preflight',
          `Candidate revision ${result.revision} of template ${result.template} failed its preflight (${result.failure}): ${result.message}. ` +
            `It takes no pod; new pods get the stable revision. Fix the candidate, or delete its SidecarTemplate to abort; the preflight runs again on every change of the templates and every five minutes.`,
        );
      },
      apiServerNamespaceLabels(kubeConfig),
    );
  }

  /** Starts the automatic halt's look; the preflights wait for `begin()`. */
  start(): void {
    this.healthTimer = this.options.clock.every(healthIntervalMs, () => {
      if (this.watching) return;
      this.watching = true;
      void this.watchHealth()
        .catch((err: unknown) => this.options.log.error({ err: (err as Error).message }, 'candidate health'))
        .finally(() => (this.watching = false));
    });
  }

  /** Runs the first preflight and starts the periodic ones: once the server answers, so that a lone replica can inject its own probe. */
  begin(): void {
    if (this.begunAt !== undefined) return;
    this.begunAt = this.options.clock.now();
    this.options.templates.on('reload', this.run);
    this.timer = this.options.clock.every(preflightIntervalMs, this.run);
    this.run();
  }

  /** The set in force: `set` with each candidate that has not passed its preflight, or was halted, stopped. */
  gate(set: TemplateSet): TemplateSet {
    return this.preflights.gate(set);
  }

  /** Moves whenever the gate's answer may have. */
  generation(): number {
    return this.preflights.generation();
  }

  status() {
    return {
      replica: this.options.instance,
      ...this.preflights.status(),
      candidates: [...(this.preflights.gate(this.options.templates.current()).rollouts?.values() ?? [])]
        .filter((r) => r.candidate)
        .map((r) => ({
          template: r.name,
          revision: r.candidate!.hash,
          share: r.stanza!.share,
          takesPods: r.stopped === undefined,
          ...(r.stopped ? { stopped: r.stopped } : {}),
        })),
      health: this.health,
    };
  }

  /** Each candidate revision's preflight, halt and last health look, by `candidateKey`: what its SidecarTemplate's status shows. */
  progress(): Map<string, CandidateProgress> {
    const { results, halted } = this.preflights.status();
    const progress = new Map<string, CandidateProgress>();
    for (const rollout of this.options.templates.current().rollouts?.values() ?? []) {
      if (!rollout.candidate) continue;
      const key = candidateKey(rollout.name, rollout.candidate.hash);
      const result = results.find((r) => r.template === rollout.name && r.revision === rollout.candidate!.hash);
      const halt = halted.find((h) => h.candidate === key);
      const look = this.health.find((h) => h.template === rollout.name && h.revision === rollout.candidate!.hash);
      progress.set(key, {
        replica: this.options.instance,
        preflight: result
          ? {
              state: result.passed ? 'passed' : 'failed',
              ...(result.failure ? { failure: result.failure } : {}),
              message: result.message,
              checkedAt: result.checkedAt,
            }
          : { state: 'pending' },
        ...(halt ? { halted: halt.why } : {}),
        ...(look
          ? {
              health: {
                pods: look.pods,
                restarting: look.restarting,
                notReady: look.notReady,
                refusedWorkloads: look.refusedWorkloads,
                checkedAt: look.checkedAt,
              },
            }
          : {}),
      });
    }
    return progress;
  }

  /** Resolves when the Events started so far are written (tests). */
  settled(): Promise<void> {
    return this.events?.settled() ?? Promise.resolve();
  }

  stop(): void {
    this.timer?.cancel();
    this.retry?.cancel();
    this.healthTimer?.cancel();
    this.options.templates.off('reload', this.run);
    this.events?.stop();
  }

  /** Each candidate revision a series of its own: two templates failing in one minute are two Events. */
  private tell(template: string, candidate: string, reason: string, action: string, note: string): void {
    // The candidate's own object: `kubectl describe sidecartemplate` shows why it takes no pod.
    const name = this.options.templates.current().rollouts?.get(template)?.candidate?.object;
    if (name === undefined) return;
    const uid = this.options.uidOf?.(name);
    this.events?.record({
      regarding: { apiVersion: sidecarTemplateResource.apiVersion, kind: sidecarTemplateResource.kind, namespace: '', name, ...(uid ? { uid } : {}) },
      type: 'Warning',
      reason,
      action,
      note,
      series: candidate,
    });
  }

  private measure(): void {
    const set = this.preflights.gate(this.options.templates.current());
    this.options.metrics.rolloutCandidateActive.reset();
    for (const r of set.rollouts?.values() ?? [])
      if (r.candidate) this.options.metrics.rolloutCandidateActive.set({ template: r.name }, r.stopped === undefined ? 1 : 0);
  }

  /** The automatic halt: what the pods with a candidate do and whether its workloads can create pods (halt.ts). */
  private async watchHealth(): Promise<void> {
    const { kubeConfig, haltAfter, notReadyGraceMs, clock, log, metrics } = this.options;
    // The set in force: a candidate stopped (preflight pending or failed) takes no workload, so no refusal is its.
    const set = this.preflights.gate(this.options.templates.current());
    if (![...(set.rollouts?.values() ?? [])].some((r) => r.candidate)) {
      this.health = [];
      return;
    }
    const now = clock.now();
    const count = await lookAtCandidates({
      kubeConfig,
      set,
      thresholds: { unhealthyPods: haltAfter, restarts: 3, notReadyGraceMs },
      now,
      onRefusalsUnknown: (err) => log.warn({ err: err.message }, 'candidate health: workloads that cannot create pods not counted'),
    });
    const checkedAt = new Date(now).toISOString();
    this.health = [...count.health.values()].map((h) => ({
      template: h.template,
      revision: h.revision,
      pods: h.pods,
      restarting: h.restarting,
      notReady: h.notReady,
      refusedWorkloads: h.refused,
      checkedAt,
    }));
    for (const [template, { revision, why }] of count.halts())
      if (this.preflights.halt(template, revision, why)) {
        metrics.rolloutHalts.inc({ template });
        log.warn({ template, revision, why }, 'candidate halted: it takes no pod');
        this.tell(
          template,
          `${template}@${revision}`,
          'RolloutHalted',
          'Halt',
          `Candidate revision ${revision} of template ${template} is ${why}. It takes no new pod; new pods get the stable revision. ` +
            `Abort (delete the candidate's SidecarTemplate, or set share: 0) or write a fixed candidate, then move the pods that got it with sidecar-injector audit --restart stale.`,
        );
      }
    this.measure();
  }
}

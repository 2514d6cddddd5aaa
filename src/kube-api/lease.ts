/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it:
 * the holder renews the lease every `retryPeriodMs`; another replica takes it over when it has
 * seen the same record, unchanged, for `leaseDurationMs` (time measured on its own clock, from
 * when it observed the record: clocks of different nodes are never compared). Every write
 * carries the resourceVersion read, so two replicas cannot both win: the API server refuses
 * the second with 409 Conflict. A leader that cannot renew within `renewDeadlineMs` stops
 * leading before another can take over.
 *
 * One departure from client-go, for the hand-over: a replica that stops releases the lease
 * (holder emptied), and the others read it every `followPeriodMs` (1 s) rather than every retry
 * period, and at the moment it would expire when that comes sooner, so that one of them leads
 * within about a second of a release. That costs each follower one GET a second; a watch would
 * cost less but needs the right to watch Leases.
 */
import { EventEmitter } from 'node:events';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { systemClock, type Clock, type Timer } from '../clock.js';
import { KubernetesApiError } from '../errors.js';
import { microTime, requestJson } from './request.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';

export interface LeaderElectionOptions {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  readonly namespace: string;
  readonly name: string;
  /** This replica (its pod name). */
  readonly identity: string;
  /** @default 15000 */
  readonly leaseDurationMs?: number;
  /** @default 10000 */
  readonly renewDeadlineMs?: number;
  /** How often the leader renews, and a replica tries again after a failed request. @default 2000 */
  readonly retryPeriodMs?: number;
  /**
   * How often a replica reads a lease another holds: it takes over within about this long of
   * the holder's release. Never longer than `retryPeriodMs`. @default 1000
   */
  readonly followPeriodMs?: number;
  /** Paces the renewals and measures the lease. @default systemClock */
  readonly clock?: Clock;
}

interface Lease {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string; leaseTransitions?: number };
}

/** Emits `leading` when this replica becomes the leader and `following` when it stops. */
export class LeaderElector extends EventEmitter {
  private leading = false;
  private stopped = true;
  private timer: Timer | undefined;
  /** The record last seen, and when (on this clock) it was first seen in that form. */
  private observed: { key: string; at: number } | undefined;
  /** When the last successful renewal was *sent* (never when it was answered: a late answer must not extend leadership). */
  private lastRenew = 0;
  private previousRenewal: Date | undefined;
  private deadlineTimer: Timer | undefined;
  private readonly leaseDurationMs: number;
  private readonly renewDeadlineMs: number;
  private readonly retryPeriodMs: number;
  private readonly followPeriodMs: number;
  private readonly path: string;
  private readonly clock: Clock;

  constructor(private readonly options: LeaderElectionOptions) {
    super();
    this.leaseDurationMs = options.leaseDurationMs ?? 15_000;
    this.renewDeadlineMs = options.renewDeadlineMs ?? 10_000;
    this.retryPeriodMs = options.retryPeriodMs ?? 2000;
    this.followPeriodMs = Math.min(this.retryPeriodMs, options.followPeriodMs ?? 1000);
    this.clock = options.clock ?? systemClock;
    this.path = apiPath(apiResources.leases, { namespace: options.namespace });
  }

  isLeader(): boolean {
    return this.leading;
  }

  /** What /status shows. */
  status(): { identity: string; leading: boolean; lease: string } {
    return { identity: this.options.identity, leading: this.leading, lease: `${this.options.namespace}/${this.options.name}` };
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.tick();
  }

  /** Stops; a leader releases the lease (holder emptied) so that another replica takes over at its next read. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.timer?.cancel();
    this.deadlineTimer?.cancel();
    if (!this.leading) return;
    this.setLeading(false);
    try {
      const lease = (await requestJson(
        this.options.kubeConfig,
        'GET',
        apiPath(apiResources.leases, { namespace: this.options.namespace, name: this.options.name }),
        5000,
      )) as Lease;
      if (lease.spec?.holderIdentity !== this.options.identity) return;
      await requestJson(this.options.kubeConfig, 'PUT', apiPath(apiResources.leases, { namespace: this.options.namespace, name: this.options.name }), 5000, {
        body: { ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1 } },
      });
    } catch (err) {
      this.options.log.warn({ err: (err as Error).message }, 'could not release the lease; it expires by itself');
    }
  }

  private setLeading(leading: boolean): void {
    if (leading === this.leading) return;
    this.leading = leading;
    this.options.log.info({ identity: this.options.identity, lease: this.options.name }, leading ? 'leading' : 'no longer leading');
    this.emit(leading ? 'leading' : 'following');
  }

  /**
   * Leadership lasts `renewDeadlineMs` from the last renewal sent, and not a moment longer:
   * another replica takes over no sooner than `leaseDurationMs` after it saw that renewal,
   * which was committed after it was sent. A timer enforces it even while a request hangs.
   */
  private renewed(sentAt: number): void {
    this.lastRenew = sentAt;
    this.deadlineTimer?.cancel();
    this.deadlineTimer = this.clock.after(Math.max(0, this.renewDeadlineMs - (this.clock.now() - sentAt)), () => {
      if (this.clock.now() - this.lastRenew >= this.renewDeadlineMs) this.setLeading(false);
    });
    if (!this.stopped) this.setLeading(true);
  }

  /** How long a request may take: for a leader, no longer than what is left of its deadline. */
  private requestTimeout(): number {
    return this.leading ? Math.max(50, Math.min(5000, this.renewDeadlineMs - (this.clock.now() - this.lastRenew))) : 5000;
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    let next = this.retryPeriodMs;
    try {
      next = await this.tryAcquireOrRenew();
    } catch (err) {
      this.options.log.warn({ err: (err as Error).message }, 'lease update failed');
    }
    if (this.leading && this.clock.now() - this.lastRenew >= this.renewDeadlineMs) this.setLeading(false);
    if (this.stopped) return;
    this.timer = this.clock.after(next, () => void this.tick());
  }

  /** One try; resolves with the wait before the next: the retry period, or the follow period while another holds the lease. */
  private async tryAcquireOrRenew(): Promise<number> {
    const { kubeConfig, identity, name, namespace } = this.options;
    const sentAt = this.clock.now();
    const now = new Date(sentAt);
    const record = { holderIdentity: identity, leaseDurationSeconds: Math.ceil(this.leaseDurationMs / 1000), renewTime: microTime(now) };
    let lease: Lease;
    try {
      lease = (await requestJson(
        kubeConfig,
        'GET',
        apiPath(apiResources.leases, { namespace: this.options.namespace, name: name }),
        this.requestTimeout(),
      )) as Lease;
    } catch (err) {
      if (!(err instanceof KubernetesApiError && err.statusCode === 404)) throw err;
      await requestJson(kubeConfig, 'POST', this.path, this.requestTimeout(), {
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace },
          spec: { ...record, acquireTime: microTime(now), leaseTransitions: 0 },
        },
      });
      // Stopped meanwhile: never lead after stop() returned.
      if (this.stopped) return this.retryPeriodMs;
      this.renewed(sentAt);
      return this.retryPeriodMs;
    }
    const spec = lease.spec ?? {};
    const key = `${spec.holderIdentity ?? ''}\0${spec.renewTime ?? ''}\0${lease.metadata?.resourceVersion ?? ''}`;
    if (this.observed?.key !== key) this.observed = { key, at: this.clock.now() };
    const held = spec.holderIdentity && spec.holderIdentity !== identity;
    const duration = (spec.leaseDurationSeconds ?? 15) * 1000;
    const left = this.observed.at + duration - this.clock.now();
    if (held && left > 0) {
      this.setLeading(false);
      // Read again soon (a release is seen within the follow period), and at the moment the record expires.
      return Math.min(this.followPeriodMs, left);
    }
    const mine = spec.holderIdentity === identity;
    const next = {
      ...lease,
      spec: {
        ...spec,
        ...record,
        acquireTime: mine ? spec.acquireTime : microTime(now),
        leaseTransitions: mine ? (spec.leaseTransitions ?? 0) : (spec.leaseTransitions ?? 0) + 1,
      },
    };
    if (this.stopped) return this.retryPeriodMs;
    // Taking the lease over: when the leader before (another replica, or this one before it
    // lost the lease) last said it was alive.
    const before = this.leading ? undefined : spec.renewTime;
    try {
      await requestJson(kubeConfig, 'PUT', apiPath(apiResources.leases, { namespace: this.options.namespace, name: name }), this.requestTimeout(), {
        body: next,
      });
    } catch (err) {
      // Someone else wrote first (409): not ours this round.
      if (err instanceof KubernetesApiError && err.statusCode === 409) {
        this.setLeading(false);
        return this.followPeriodMs;
      }
      throw err;
    }
    if (!this.leading && before !== undefined) {
      const at = Date.parse(before);
      this.previousRenewal = Number.isNaN(at) ? undefined : new Date(at);
    }
    if (!this.stopped) this.renewed(sentAt);
    return this.retryPeriodMs;
  }

  /**
   * When the lease was last renewed before this replica took it (the leader before, or this
   * one before it lost the lease); undefined when it created the lease (nobody led before).
   */
  lastRenewalBeforeMe(): Date | undefined {
    return this.previousRenewal;
  }
}

/**
 * Starts and stops the runnables of the process in order (controller-runtime's manager):
 * sources first (reviews read them), then the one leader election (what runs everywhere may ask
 * it whether this replica leads: the certificates), then the others, then the servers that take
 * traffic; the leader-only runnables start on the election's `leading` and stop on `following`.
 * A start that fails stops, in reverse order, everything started before it, and rejects.
 *
 * Leader-only runnables start only once everything else runs: a replica that leads while it
 * starts (or fails to) runs no audit. `stop()` goes the other way, each stop awaited before
 * the next begins, so that what a part uses is still there while it stops: the runnables end
 * their leader work (quiesce), the leader-only runnables stop, and then the election
 * (the lease released, so another replica leads within about a second), the servers (they
 * drain while the sources still answer), the others, the sources last. A part that fails to
 * stop, or takes longer than its limit, is logged and the next one stops all the same: a stop
 * never hangs the exit. `ready()` and `status()` are gathered from the runnables.
 */
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../clock.js';
import type { LeaderElection, Runnable, RunnableGroup } from './runnable.js';

export interface ManagerOptions {
  readonly log: Logger;
  /** Longest wait for one part's stop. @default 10000 */
  readonly stopTimeoutMs?: number;
  /** Times the stops. @default systemClock */
  readonly clock?: Clock;
  /** The one leader election: started after the sources, released first at the stop; without it leader-only runnables never start. */
  readonly election?: LeaderElection;
  /** Told each time this replica starts or stops leading (the leader gauge). */
  readonly onLeading?: (leading: boolean) => void;
}

export class Manager {
  private readonly groups = new Map<RunnableGroup, Runnable[]>([
    ['source', []],
    ['other', []],
    ['server', []],
    ['leader', []],
  ]);
  /** Started runnables that run everywhere, in the order they started. */
  private readonly started: Runnable[] = [];
  /** Leader-only runnables running now. */
  private leading: Runnable[] = [];
  /** Leading and following, one transition at a time. */
  private transitions: Promise<void> = Promise.resolve();
  /** Whether the election says this replica leads (the leader-only runnables follow it once running). */
  private lead = false;
  private phase: 'new' | 'starting' | 'running' | 'stopping' = 'new';
  /** The election was started (and is released at the stop). */
  private electing = false;
  private stopping: Promise<void> | undefined;
  private readonly stopTimeoutMs: number;
  private readonly clock: Clock;

  constructor(private readonly options: ManagerOptions) {
    this.stopTimeoutMs = options.stopTimeoutMs ?? 10_000;
    this.clock = options.clock ?? systemClock;
  }

  /** Adds a runnable to `group` (before `start()`). */
  add(runnable: Runnable, group: RunnableGroup = 'other'): this {
    if (this.phase !== 'new') throw new Error(`${runnable.name} added after the start`);
    this.groups.get(group)!.push(runnable);
    return this;
  }

  /** Starts the sources, the election, the others and the servers, in that order; rejects (after stopping what started) when a start fails. */
  async start(): Promise<void> {
    if (this.phase !== 'new') throw new Error('the manager starts once');
    this.phase = 'starting';
    if (!(await this.startGroup('source'))) return;
    const { election } = this.options;
    if (election) {
      election.on('leading', () => this.transition(true));
      election.on('following', () => this.transition(false));
      this.options.onLeading?.(false);
      election.start();
      this.electing = true;
    }
    if (!(await this.startGroup('other')) || !(await this.startGroup('server'))) return;
    this.phase = 'running';
    // A lead won while starting takes effect now.
    if (this.lead) this.transition(true);
  }

  /** Starts one group in order; false when the start stopped (a failure rejects). */
  private async startGroup(group: Exclude<RunnableGroup, 'leader'>): Promise<boolean> {
    for (const runnable of this.groups.get(group)!) {
      try {
        await runnable.start();
      } catch (err) {
        this.options.log.error({ part: runnable.name, err: (err as Error).message }, 'part failed to start; stopping what started');
        await this.stop();
        throw err;
      }
      this.started.push(runnable);
      if (this.stopping) return false;
    }
    return true;
  }

  /** The parts' names, in the order they stop. */
  stopOrder(): string[] {
    const leader = this.groups.get('leader')!;
    return [...leader.map((r) => r.name).reverse(), ...(this.options.election ? ['leader election'] : []), ...this.started.map((r) => r.name).reverse()];
  }

  /** True when every started runnable that can say is ready (and none is stopping). */
  ready(): boolean {
    return this.phase === 'running' && this.started.every((r) => r.ready?.() ?? true);
  }

  /** Each started runnable's status by name, and every leader-only one's (it says whether it leads). */
  status(): Record<string, unknown> {
    const status: Record<string, unknown> = {};
    for (const r of [...this.started, ...this.groups.get('leader')!]) if (r.status) status[r.name] = r.status();
    return status;
  }

  /** Whether this replica leads now. */
  isLeader(): boolean {
    return this.options.election?.isLeader() ?? false;
  }

  /** Stops everything that started, in the reverse order (leader-only first); idempotent. */
  stop(): Promise<void> {
    return (this.stopping ??= this.stopAll());
  }

  private transition(leading: boolean): void {
    if (this.lead !== leading) {
      this.lead = leading;
      this.options.onLeading?.(leading);
    }
    if (this.phase !== 'running') return;
    this.transitions = this.transitions.then(async () => {
      if (this.stopping || this.lead !== leading) return;
      if (leading) {
        if (this.leading.length > 0) return;
        for (const runnable of this.groups.get('leader')!) {
          try {
            await runnable.start();
            this.leading.push(runnable);
          } catch (err) {
            this.options.log.error({ part: runnable.name, err: (err as Error).message }, 'leader-only part failed to start');
          }
        }
      } else await this.stopLeading();
    });
    // A transition that fails is logged; the next one still runs.
    this.transitions = this.transitions.catch((err: unknown) => this.options.log.error({ err: (err as Error).message }, 'leader transition failed'));
  }

  private async stopLeading(): Promise<void> {
    const running = [...this.leading].reverse();
    this.leading = [];
    for (const runnable of running) await this.stopOne(runnable.name, () => runnable.stop());
  }

  private async stopAll(): Promise<void> {
    this.phase = 'stopping';
    // Leader work ends before the lease goes: no round of the next leader runs beside one of ours.
    for (const runnable of [...this.started].reverse()) if (runnable.quiesce) await this.stopOne(`${runnable.name} (leader work)`, () => runnable.quiesce!());
    // A transition under way finishes first (bounded): its runnables are then stopped here.
    await this.stopOne('leader transition', () => this.transitions);
    await this.stopLeading();
    if (this.options.election && this.electing) {
      await this.stopOne('leader election', () => this.options.election!.stop());
      if (this.lead) this.options.onLeading?.(false);
      this.lead = false;
    }
    for (const runnable of [...this.started].reverse()) await this.stopOne(runnable.name, () => runnable.stop());
  }

  private async stopOne(name: string, stop: () => void | Promise<void>): Promise<void> {
    let timer: { cancel(): void } | undefined;
    const limit = new Promise<'timeout'>((resolve) => (timer = this.clock.after(this.stopTimeoutMs, () => resolve('timeout'))));
    try {
      const result = await Promise.race([Promise.resolve().then(stop), limit]);
      if (result === 'timeout') this.options.log.warn({ part: name, timeoutMs: this.stopTimeoutMs }, 'part did not stop in time; going on');
      else this.options.log.debug({ part: name }, 'stopped');
    } catch (err) {
      this.options.log.warn({ part: name, err: (err as Error).message }, 'part failed to stop; going on');
    } finally {
      timer?.cancel();
    }
  }
}

/**
 * The parts of a running process, stopped in order. Each part is added once it has started;
 * `stop()` stops them in the reverse order, each stop awaited before the next begins, so that
 * what a part uses is still there while it stops (the auditor releases its Lease through the
 * API client before anything else goes; the server drains before the sources it reads stop).
 * A part that fails to stop, or takes longer than its limit, is logged and the next one stops
 * all the same: a stop never hangs the exit.
 */
import type { Logger } from 'pino';
import { systemClock, type Clock } from '../clock.js';

/** One started part: its name (for the log) and how it stops. */
export interface Part {
  readonly name: string;
  stop(): void | Promise<void>;
}

export interface RuntimeOptions {
  readonly log: Logger;
  /** Longest wait for one part's stop. @default 10000 */
  readonly stopTimeoutMs?: number;
  /** Times the stops. @default systemClock */
  readonly clock?: Clock;
}

export class Runtime {
  private readonly parts: Part[] = [];
  private stopping: Promise<void> | undefined;
  private readonly stopTimeoutMs: number;
  private readonly clock: Clock;

  constructor(private readonly options: RuntimeOptions) {
    this.stopTimeoutMs = options.stopTimeoutMs ?? 10_000;
    this.clock = options.clock ?? systemClock;
  }

  /** Adds a started part (it stops before every part added earlier); throws once stopping. */
  add(name: string, stop: () => void | Promise<void>): void {
    if (this.stopping) throw new Error(`${name} started while the process is stopping`);
    this.parts.push({ name, stop });
  }

  /** The parts' names, in the order they stop. */
  stopOrder(): string[] {
    return this.parts.map((p) => p.name).reverse();
  }

  /** Stops every part, last added first, each awaited; resolves once all have stopped. Idempotent. */
  stop(): Promise<void> {
    return (this.stopping ??= this.stopAll());
  }

  private async stopAll(): Promise<void> {
    for (const part of this.parts.reverse()) {
      let timer: { cancel(): void } | undefined;
      const limit = new Promise<'timeout'>((resolve) => (timer = this.clock.after(this.stopTimeoutMs, () => resolve('timeout'))));
      try {
        const result = await Promise.race([Promise.resolve().then(() => part.stop()), limit]);
        if (result === 'timeout') this.options.log.warn({ part: part.name, timeoutMs: this.stopTimeoutMs }, 'part did not stop in time; going on');
        else this.options.log.debug({ part: part.name }, 'stopped');
      } catch (err) {
        this.options.log.warn({ part: part.name, err: (err as Error).message }, 'part failed to stop; going on');
      } finally {
        timer?.cancel();
      }
    }
  }
}

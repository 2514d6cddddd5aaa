/**
 * A clock tests move by hand: `advance(ms)` runs every timer that falls due, in order, each at
 * its own time, and lets the promise jobs each one starts run before the next. Nothing waits
 * on the machine's time.
 */
import type { Clock, Timer } from '../../src/clock.js';

interface Pending {
  at: number;
  readonly seq: number;
  readonly fn: () => void;
  readonly every: number | undefined;
  cancelled: boolean;
}

export class FakeClock implements Clock {
  private time: number;
  private seq = 0;
  private readonly timers = new Set<Pending>();
  /** Timers fired so far. */
  fired = 0;

  constructor(start = Date.parse('2026-11-20T10:00:00Z')) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  after(ms: number, fn: () => void): Timer {
    return this.add(ms, fn, undefined);
  }

  every(ms: number, fn: () => void): Timer {
    return this.add(ms, fn, Math.max(1, ms));
  }

  private add(ms: number, fn: () => void, every: number | undefined): Timer {
    const pending: Pending = { at: this.time + Math.max(0, ms), seq: this.seq++, fn, every, cancelled: false };
    this.timers.add(pending);
    return {
      cancel: () => {
        pending.cancelled = true;
        this.timers.delete(pending);
      },
    };
  }

  /** Timers waiting to fire. */
  get pending(): number {
    return this.timers.size;
  }

  /** Moves time forward by `ms`, firing each timer that falls due at its time, oldest first. */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    for (;;) {
      let next: Pending | undefined;
      for (const t of this.timers) if (t.at <= end && (!next || t.at < next.at || (t.at === next.at && t.seq < next.seq))) next = t;
      if (!next) break;
      this.time = Math.max(this.time, next.at);
      if (next.every === undefined) this.timers.delete(next);
      else next.at += next.every;
      this.fired++;
      next.fn();
      await settle();
    }
    this.time = end;
    await settle();
  }
}

/** Lets promise jobs and I/O callbacks already due run (one turn of the event loop). */
function settle(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Time as a dependency. Everything that waits or measures (the lease, events, the reflector,
 * the namespace source, the connection sweep, the auditor's debounce) is given a clock, so that
 * tests drive time instead of sleeping through it. The system clock is the one used in
 * production; tests use a fake one (test/helpers/fake-clock.ts).
 */

/** A pending timer; cancelling one that has fired or been cancelled does nothing. */
export interface Timer {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` once, `ms` from now. The timer never keeps the process alive by itself. */
  after(ms: number, fn: () => void): Timer;
  /** Runs `fn` every `ms`, until cancelled. Never keeps the process alive by itself. */
  every(ms: number, fn: () => void): Timer;
}

/** The machine's clock and Node's timers (unref'd: the servers keep the process alive, not a timer). */
export const systemClock: Clock = {
  now: () => Date.now(),
  after(ms, fn) {
    const timer = setTimeout(fn, ms);
    timer.unref();
    return { cancel: () => clearTimeout(timer) };
  },
  every(ms, fn) {
    const timer = setInterval(fn, ms);
    timer.unref();
    return { cancel: () => clearInterval(timer) };
  },
};

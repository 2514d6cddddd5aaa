import { until } from './until.js';

/** Keeps `workers` requests in flight until stopped, collecting answers and failures. */
export interface Load<T> {
  readonly results: T[];
  readonly failures: unknown[];
  /** Resolves once `count` more answers have arrived. */
  waitFor(count: number): Promise<void>;
  /** Stops sending and resolves when every request in flight has ended. */
  stop(): Promise<void>;
}

export function startLoad<T>(workers: number, send: () => Promise<T>): Load<T> {
  const results: T[] = [];
  const failures: unknown[] = [];
  let running = true;
  const done = Promise.all(
    Array.from({ length: workers }, async () => {
      while (running) {
        try {
          results.push(await send());
        } catch (err) {
          failures.push(err);
        }
      }
    }),
  );
  return {
    results,
    failures,
    async waitFor(count) {
      const target = results.length + count;
      await until(() => results.length >= target, `${count} more answers`);
    },
    async stop() {
      running = false;
      await done;
    },
  };
}

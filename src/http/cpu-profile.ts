/**
 * A CPU profile of the running process on request (`serve --profiling on`: GET
 * /debug/cpu-profile?seconds=N on the operations listener), for the place `--cpu-prof` cannot
 * reach: a replica inside the cluster, answering what kube-apiserver really sends (Node refuses
 * `--cpu-prof` in NODE_OPTIONS). V8's sampling profiler through the in-process inspector
 * session: no port is opened, nothing runs while no profile is asked for, one profile at a
 * time. The answer is a `.cpuprofile` (Chrome DevTools, `npm run bench:profile -- --read FILE`).
 */
import { Session } from 'node:inspector/promises';
import type { Clock } from '../clock.js';
import { RequestError } from '../errors.js';

/** The longest profile one request may ask for. */
export const maxProfileSeconds = 120;

/** The seconds a query asks for: a whole number from 1 to maxProfileSeconds, else a 400 saying so. */
export function profileSeconds(text: string | undefined): number {
  if (text === undefined) return 10;
  if (!/^[0-9]{1,3}$/.test(text) || Number(text) < 1 || Number(text) > maxProfileSeconds)
    throw new RequestError(
      400,
      'ERR_PROFILE_SECONDS',
      `seconds: expected a whole number from 1 to ${maxProfileSeconds} (got ${JSON.stringify(text.slice(0, 20))})`,
    );
  return Number(text);
}

export class CpuProfiler {
  private running = false;

  constructor(private readonly clock: Clock) {}

  /** Samples every thread's JavaScript for `seconds` (a 409 while another profile runs); resolves with the profile. */
  async profile(seconds: number, samplingIntervalUs = 500): Promise<unknown> {
    if (this.running) throw new RequestError(409, 'ERR_PROFILE_RUNNING', 'a CPU profile is being taken already; ask again when it is done');
    this.running = true;
    const session = new Session();
    session.connect();
    try {
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: samplingIntervalUs });
      await session.post('Profiler.start');
      await new Promise<void>((resolve) => this.clock.after(seconds * 1000, resolve));
      const { profile } = await session.post('Profiler.stop');
      return profile;
    } finally {
      session.disconnect();
      this.running = false;
    }
  }
}

/**
 * `sidecar-injector serve`: reads the configuration, starts the injector's runnables through
 * one manager (serving/injector.ts), and on SIGTERM/SIGINT stops them in reverse order, each
 * stop awaited (the audit first: its Lease is released at once, so another replica, reading it
 * every second, leads within about a second; then the server drains; the sources it read from
 * go last), then exits 0.
 */
import { pino } from 'pino';
import { systemClock, type Clock } from '../clock.js';
import { loadConfig } from '../config.js';
import { startInjector, type Injector } from '../serving/injector.js';

export type { Injector };

/** Starts the injector; installs SIGTERM/SIGINT handlers that shut it down and exit 0. */
export async function serve(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, clock: Clock = systemClock): Promise<Injector> {
  const config = loadConfig(env, argv);
  const log = pino({ level: config.logLevel, base: { service: 'sidecar-injector' } });
  const injector = await startInjector(config, log, clock);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => void injector.shutdown(signal).then(() => process.exit(0)));
  }
  return injector;
}

/**
 * `sidecar-injector serve`: reads the configuration, makes the injector's runnables
 * (serving/injector.ts), installs the SIGTERM/SIGINT handlers, then starts them through one
 * manager. A signal, during the start too, stops what started in reverse order, each stop
 * awaited (the audit first, then the election releases its Lease, so another replica, reading it
 * every second, leads within about a second; then the server drains; the sources it read from go
 * last), then exits 0.
 */
import { pino } from 'pino';
import { systemClock, type Clock } from '../clock.js';
import { loadConfig } from '../config.js';
import { createInjector, type Injector } from '../serving/injector.js';

export type { Injector };

/** Starts the injector; resolves once it listens (or once a signal stopped the start). */
export async function serve(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, clock: Clock = systemClock): Promise<Injector> {
  const config = loadConfig(env, argv);
  const log = pino({ level: config.logLevel, base: { service: 'sidecar-injector' } });
  const injector = await createInjector(config, log, clock);
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => void injector.shutdown(signal).then(() => process.exit(0)));
  }
  await injector.start();
  return injector;
}

/**
 * The world's child processes: each one's output kept in a log file of the world's state
 * folder, stopped with SIGTERM and, after a bound, SIGKILL; waits that poll a condition with a
 * bound on the number of checks (never a sleep standing in for "long enough").
 */
import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';

export interface Managed {
  readonly name: string;
  readonly child: ChildProcess;
  readonly log: string;
  /** The exit code (or signal name) once it has exited. */
  readonly exited: Promise<number | string>;
  stop(graceMs?: number): Promise<number | string>;
}

export function startProcess(name: string, command: string, args: readonly string[], log: string, options: SpawnOptions = {}): Managed {
  const fd = openSync(log, 'a');
  // A process group of its own: a Ctrl-C in the terminal (SIGINT to the foreground group) reaches
  // the world, which stops its processes in order; it never kills etcd or containerd under the
  // API server or the kubelet first. The world's PID namespace still ends them all if it dies.
  const child = spawn(command, args, { detached: true, ...options, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')));
  let stopping: Promise<number | string> | undefined;
  const stop = (graceMs = 10_000) =>
    (stopping ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      const result = await exited;
      clearTimeout(timer);
      return result;
    })());
  return { name, child, log, exited, stop };
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Checks `condition` every `everyMs` until it holds; fails after `checks` checks, or at once when
 * `alive` (a process the condition depends on) has exited.
 */
export async function waitUntil(
  what: string,
  condition: () => Promise<boolean> | boolean,
  { checks = 600, everyMs = 100, alive }: { checks?: number; everyMs?: number; alive?: Managed } = {},
): Promise<void> {
  let dead: number | string | undefined;
  void alive?.exited.then((code) => (dead = code));
  for (let i = 0; i < checks; i++) {
    if (dead !== undefined) throw new Error(`${alive!.name} exited (${dead}) while waiting for ${what}; see ${alive!.log}`);
    try {
      if (await condition()) return;
    } catch {
      // Not yet: a refused connection is what "not started" looks like.
    }
    await pause(everyMs);
  }
  throw new Error(`${what} did not happen in ${checks} checks${alive ? `; see ${alive.log}` : ''}`);
}

/**
 * `pass` run again and again, each run `periodMs` after the last one ended, as a controller's
 * loop: a failed run is logged (the first and every twentieth in a row) and the next one tries again.
 */
export class Loop {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private failures = 0;

  constructor(
    private readonly name: string,
    private readonly periodMs: number,
    private readonly pass: () => Promise<void>,
  ) {}

  start(): void {
    const tick = () => {
      this.running = this.pass()
        .then(() => {
          this.failures = 0;
        })
        .catch((err: unknown) => {
          if (++this.failures % 20 === 1) console.error(`${this.name}: ${(err as Error).message}`);
        })
        .finally(() => {
          if (this.timer !== undefined) this.timer = setTimeout(tick, this.periodMs);
        });
    };
    this.timer = setTimeout(tick, 0);
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }
}

/**
 * Rounds of a leader's writer: one pass at a time, on every change of what it follows (an
 * emitter's event) and every `intervalMs`; a call during a pass asks for exactly one more after
 * it. A failed pass goes to `failed` and the next round tries again.
 */
import type { Clock, Timer } from '../clock.js';

export interface RoundsOptions {
  readonly clock: Clock;
  readonly intervalMs: number;
  /** What a round does. */
  readonly pass: () => Promise<void>;
  /** A pass that threw. */
  readonly failed: (err: unknown) => void;
  /** Rounds also on every `event` of `emitter` (a new template set). */
  readonly follow?: { readonly emitter: { on(event: string, f: () => void): unknown; off(event: string, f: () => void): unknown }; readonly event: string };
}

export class Rounds {
  private timer: Timer | undefined;
  private running = false;
  private again = false;
  private stopped = true;
  private readonly onEvent = () => this.round();

  constructor(private readonly options: RoundsOptions) {}

  get isStopped(): boolean {
    return this.stopped;
  }

  start(): void {
    this.stopped = false;
    this.options.follow?.emitter.on(this.options.follow.event, this.onEvent);
    this.timer = this.options.clock.every(this.options.intervalMs, () => this.round());
    this.round();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.options.follow?.emitter.off(this.options.follow.event, this.onEvent);
  }

  /** Resolves once the round under way (if any) and the one it asked for are done (tests). */
  async settled(): Promise<void> {
    while (this.running) await new Promise((resolve) => setTimeout(resolve, 1));
  }

  /** One pass; a call during a pass asks for one more after it. */
  round(): void {
    if (this.stopped) return;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    void this.options
      .pass()
      .catch(this.options.failed)
      .finally(() => {
        this.running = false;
        if (this.again && !this.stopped) {
          this.again = false;
          this.round();
        }
      });
  }
}

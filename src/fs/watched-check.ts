/**
 * Runs a check of some files when their directories change, and periodically as well (file
 * events are unreliable on some volume types, and a mounted ConfigMap or Secret changes by a
 * symlink swap). Checks never overlap: a change during a check runs it once more right after.
 */
import { EventEmitter } from 'node:events';
import { watch, type FSWatcher } from 'node:fs';

class WatchedCheck {
  private watchers: FSWatcher[] = [];
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;

  /** `once` must not throw: it reports its own failures. */
  constructor(
    private readonly dirs: readonly string[],
    private readonly once: () => Promise<void>,
  ) {}

  /** Watches the directories and runs the check every `intervalMs`. */
  start(intervalMs: number): void {
    for (const dir of new Set(this.dirs)) {
      try {
        const watcher = watch(dir, () => void this.check());
        watcher.on('error', () => undefined);
        this.watchers.push(watcher);
      } catch {
        // The periodic check still covers this directory.
      }
    }
    this.timer = setInterval(() => void this.check(), intervalMs);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    for (const watcher of this.watchers) watcher.close();
    this.watchers = [];
  }

  /** Runs the check now (or after the one in progress); resolves when done. */
  check(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      do {
        this.again = false;
        await this.once();
      } while (this.again);
    })().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }
}

/**
 * The base of what reloads from files (templates, the serving certificate): start watches
 * and checks every `intervalMs`, stop ends that, reloadNow checks at once. Subclasses say what
 * a check does; they emit `reload` and `rejected` (see reloadable.ts).
 */
export abstract class WatchedFiles extends EventEmitter {
  private readonly watched: WatchedCheck;

  protected constructor(
    dirs: readonly string[],
    private readonly intervalMs: number,
  ) {
    super();
    this.watched = new WatchedCheck(dirs, () => this.checkOnce());
  }

  /** Reads the files and takes a changed, valid value into use; never throws (it emits `rejected`). */
  protected abstract checkOnce(): Promise<void>;

  /** Watches the directories, and checks every `intervalMs` as well. */
  start(): void {
    this.watched.start(this.intervalMs);
  }

  stop(): void {
    this.watched.stop();
  }

  /** Reads the files now; resolves when done. */
  reloadNow(): Promise<void> {
    return this.watched.check();
  }
}

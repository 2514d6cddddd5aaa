/**
 * A reflector: one collection of the Kubernetes API (namespaces, nodes) kept in memory from a
 * list and a watch. The namespace label source and the cluster version source both use it.
 *
 * The list/watch protocol (https://kubernetes.io/docs/reference/using-api/api-concepts/):
 * list (page by page), then watch from the list's resourceVersion; every event and BOOKMARK
 * advances the resourceVersion; a watch the server ends normally is resumed from it; `410
 * Gone` (as an HTTP status or an ERROR event) means the history is compacted: list again,
 * replacing the whole cache, which also drops objects deleted meanwhile; any other failure is
 * retried from the last resourceVersion with exponential backoff, so a dropped connection
 * misses no change. A watch that delivers nothing, not even a BOOKMARK, for `watchStallMs`
 * is presumed dead and restarted.
 *
 * @kubernetes/client-node provides the in-cluster configuration (token file re-read on
 * rotation, CA) and the watch stream; lists are plain requests (request.ts) with a timeout.
 */
import { EventEmitter } from 'node:events';
import type { KubeConfig } from '@kubernetes/client-node';
import { Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { systemClock, type Clock, type Timer } from '../clock.js';
import { acceptFor, listAll, listPages, type Representation } from './request.js';

/** An object of the collection, as far as the reflector reads it. */
export interface ApiObject {
  metadata?: { name?: string; resourceVersion?: string };
}

/** Tunables shared by every reflector. */
export interface ReflectorTuning {
  /** Timeout of each page of a list. @default 60000 */
  readonly listTimeoutMs?: number;
  /** Objects per list page (`limit`). @default 500 */
  readonly listPageSize?: number;
  /** A watch silent this long is restarted: the API server sends a BOOKMARK about once a minute. @default 120000 */
  readonly watchStallMs?: number;
  /** First and largest retry delay after a failed list or watch. @default 500, 30000 */
  readonly backoffInitialMs?: number;
  readonly backoffMaxMs?: number;
  /** How long the server may hold one watch before ending it. @default 300 */
  readonly watchTimeoutSeconds?: number;
  /** Paces retries and notices a stalled watch. @default systemClock */
  readonly clock?: Clock;
}

export interface ReflectorOptions<T extends ApiObject> extends ReflectorTuning {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  /** The collection's path, e.g. `/api/v1/namespaces`. */
  readonly path: string;
  /** What the objects are called in log lines, e.g. `namespace`. */
  readonly what: string;
  /** A complete list replaced everything known (unless `listInto` takes the list page by page). */
  readonly replace: (items: readonly T[]) => void;
  /**
   * Takes a list page by page instead (`begin`, then `page` per page, then `end` once the list
   * is complete; `begin` again if it restarts): a list of 100,000 pods never sits in memory whole.
   */
  readonly listInto?: { begin(): void; page(items: readonly T[]): void; end(): void };
  /** What the list and the watch ask for (request.ts `metadataOnly` for PartialObjectMetadata), each with its own `Accept`. */
  readonly accept?: Representation;
  /** One object was added, changed or deleted. */
  readonly apply: (type: 'ADDED' | 'MODIFIED' | 'DELETED', object: T) => void;
}

/**
 * Emits `reload` (item count) after each list, `rejected` (err) on a failed list or watch,
 * `change` (type, name) per event, `watch` (resourceVersion) when a watch opens, `stall`.
 */
export class Reflector<T extends ApiObject> extends EventEmitter {
  private resourceVersion = '';
  private synced = false;
  private stopped = true;
  private watchController: AbortController | undefined;
  private retryTimer: Timer | undefined;
  private stallTimer: Timer | undefined;
  private readonly clock: Clock;
  private backoffMs: number;
  private readonly watch: Watch;
  private readonly listTimeoutMs: number;
  private readonly listPageSize: number;
  private readonly watchStallMs: number;
  private readonly backoffInitialMs: number;
  private readonly backoffMaxMs: number;
  private readonly watchTimeoutSeconds: number;
  /** When the current watch last delivered anything (an event or a BOOKMARK). */
  private lastWatchActivity = 0;
  private stalled = false;
  /** Counts watches started or superseded: a watch acts only while its generation is current. */
  private watchGeneration = 0;
  /** Counts lists started, and stops: a list delivers only while its generation is current. */
  private listGeneration = 0;
  /**
   * Set by an event the caller could not apply, cleared when a watch after it ends as the server
   * ends it: until then a list does not reset the backoff, so an object that always fails is
   * listed again ever more slowly, not once per event.
   */
  private applyFailing = false;

  constructor(private readonly options: ReflectorOptions<T>) {
    super();
    // The watch asks for what the list asks for, in the single-object form (each event is one
    // object): the client's Watch takes its headers from the config.
    const accept = acceptFor(options.accept ?? 'object', 'watch');
    const config = options.kubeConfig;
    this.watch = new Watch(
      options.accept === 'metadata'
        ? (Object.assign(Object.create(config), {
            applyToFetchOptions: (opts: { headers?: Record<string, string> }) => config.applyToFetchOptions({ ...opts, headers: { ...opts.headers, accept } }),
          }) as KubeConfig)
        : config,
    );
    this.listTimeoutMs = options.listTimeoutMs ?? 60_000;
    this.listPageSize = options.listPageSize ?? 500;
    this.watchStallMs = options.watchStallMs ?? 120_000;
    this.backoffInitialMs = options.backoffInitialMs ?? 500;
    this.backoffMaxMs = options.backoffMaxMs ?? 30_000;
    this.watchTimeoutSeconds = options.watchTimeoutSeconds ?? 300;
    this.backoffMs = this.backoffInitialMs;
    this.clock = options.clock ?? systemClock;
  }

  /** True once the first list has completed. */
  isSynced(): boolean {
    return this.synced;
  }

  /** The resourceVersion of the last list, event or bookmark. */
  version(): string {
    return this.resourceVersion;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.relist();
  }

  stop(): void {
    this.stopped = true;
    this.listGeneration++;
    this.retryTimer?.cancel();
    this.stallTimer?.cancel();
    this.stallTimer = undefined;
    this.watchController?.abort();
    this.watchController = undefined;
  }

  /** Lists again now, replacing everything (the watch restarts from the new list); resolves after the list or its failure. */
  async relistNow(): Promise<void> {
    // The running watch is superseded: its end must not start another one beside the new list's.
    this.watchGeneration++;
    this.watchController?.abort();
    this.watchController = undefined;
    const listed = new Promise<void>((resolve) => {
      const done = () => {
        this.off('reload', done);
        this.off('rejected', done);
        resolve();
      };
      this.on('reload', done);
      this.on('rejected', done);
    });
    void this.relist();
    await listed;
  }

  private async relist(): Promise<void> {
    if (this.stopped) return;
    const generation = ++this.listGeneration;
    try {
      const { count, resourceVersion } = await this.listAll(generation);
      // Superseded (stopped, restarted, or another list begun meanwhile): its result is not ours to use.
      if (this.stopped || generation !== this.listGeneration) return;
      this.resourceVersion = resourceVersion;
      this.synced = true;
      if (!this.applyFailing) this.backoffMs = this.backoffInitialMs;
      this.options.log.info({ count, resourceVersion }, `${this.options.what}s listed`);
      this.emit('reload', count);
      await this.startWatch();
    } catch (err) {
      this.retry('list', err as Error, () => this.relist());
    }
  }

  /** Every object, page by page, into `listInto` or `replace`; an expired continue token (410) restarts the list (request.ts). */
  private async listAll(generation: number): Promise<{ count: number; resourceVersion: string }> {
    const current = () => !this.stopped && generation === this.listGeneration;
    const options = {
      pageSize: this.listPageSize,
      timeoutMs: this.listTimeoutMs,
      ...(this.options.accept ? { accept: this.options.accept } : {}),
      stopped: () => !current(),
    };
    const restarted = () => this.options.log.info(`${this.options.what} list continue token expired (410 Gone); listing again from the start`);
    const into = this.options.listInto;
    if (!into) {
      const { items, resourceVersion } = await listAll<T>(this.options.kubeConfig, this.options.path, { ...options, onRestart: restarted });
      if (current()) this.options.replace(items);
      return { count: items.length, resourceVersion };
    }
    let count = 0;
    into.begin();
    const onRestart = () => {
      restarted();
      count = 0;
      if (current()) into.begin();
    };
    const resourceVersion = await listPages<T>(this.options.kubeConfig, this.options.path, { ...options, onRestart }, (page) => {
      count += page.length;
      if (current()) into.page(page);
    });
    if (current()) into.end();
    return { count, resourceVersion };
  }

  private watchForStall(): void {
    this.stallTimer?.cancel();
    this.stallTimer = this.clock.every(Math.max(10, Math.min(10_000, this.watchStallMs / 4)), () => {
      if (!this.watchController || this.clock.now() - this.lastWatchActivity < this.watchStallMs) return;
      this.options.log.warn(
        { silentForMs: this.clock.now() - this.lastWatchActivity, resourceVersion: this.resourceVersion },
        `${this.options.what} watch delivered nothing, not even a bookmark; restarting it`,
      );
      this.emit('stall');
      const controller = this.watchController;
      this.watchController = undefined;
      this.stalled = true;
      controller.abort();
    });
  }

  private async startWatch(): Promise<void> {
    if (this.stopped) return;
    const from = this.resourceVersion;
    let relistNeeded = false;
    let errorEvent: string | undefined;
    let eventsSeen = 0;
    const started = this.clock.now();
    const generation = ++this.watchGeneration;
    this.lastWatchActivity = started;
    this.stalled = false;
    /** Set when an event could not be applied: the watch is ended and the collection listed again. */
    let applyFailure: Error | undefined;
    let controller: AbortController | undefined;
    const onEvent = (type: string, object: T & { code?: number; message?: string }) => {
      if (generation !== this.watchGeneration || applyFailure) return;
      this.lastWatchActivity = this.clock.now();
      switch (type) {
        case 'ADDED':
        case 'MODIFIED':
        case 'DELETED':
          try {
            this.options.apply(type, object);
          } catch (err) {
            // The client's Watch swallows what its callback throws: the event would be lost and
            // what is known would differ from the server. The watch ends; a list replaces everything.
            applyFailure = err instanceof Error ? err : new Error(String(err));
            this.applyFailing = true;
            controller?.abort();
            this.options.log.error(
              { err: applyFailure.message, type, name: object?.metadata?.name },
              `${this.options.what} watch event could not be applied; listing again`,
            );
            return;
          }
          break;
        case 'BOOKMARK':
          break;
        case 'ERROR':
          // The API server reports an expired resourceVersion as an ERROR event with code 410.
          if (object.code === 410) relistNeeded = true;
          else errorEvent = `ERROR event, code ${String(object.code)}: ${String(object.message ?? '').slice(0, 200)}`;
          this.options.log.warn({ code: object.code, message: object.message }, `${this.options.what} watch error event`);
          return;
        default:
          return;
      }
      eventsSeen++;
      if (object.metadata?.resourceVersion) this.resourceVersion = object.metadata.resourceVersion;
      this.emit('change', type, object.metadata?.name);
    };
    let ended = false;
    const onDone = (err: unknown) => {
      ended = true;
      if (generation !== this.watchGeneration) return;
      this.watchController = undefined;
      if (this.stopped) return;
      const status = (err as { statusCode?: number } | null)?.statusCode;
      if (applyFailure) {
        this.resourceVersion = '';
        this.retry('watch', applyFailure, () => this.relist());
      } else if (relistNeeded || status === 410) {
        this.options.log.info({ resourceVersion: this.resourceVersion }, `${this.options.what} watch expired (410 Gone); listing again`);
        this.resourceVersion = '';
        void this.relist();
      } else if (this.stalled) {
        this.retry('watch', new Error(`no event or bookmark for ${this.watchStallMs} ms`), () => this.startWatch());
      } else if (err || errorEvent) {
        this.retry('watch', err instanceof Error ? err : new Error(errorEvent ?? String(err)), () => this.startWatch());
      } else if (eventsSeen === 0 && this.clock.now() - started < 1000) {
        // Ended at once with nothing delivered: a failure in disguise, not the server's timeout.
        this.retry('watch', new Error('the watch ended at once without events'), () => this.startWatch());
      } else {
        // The server ended the watch (timeoutSeconds): resume from the last resourceVersion.
        if (eventsSeen > 0) this.backoffMs = this.backoffInitialMs;
        this.applyFailing = false;
        void this.startWatch();
      }
    };
    try {
      controller = await this.watch.watch(
        this.options.path,
        { resourceVersion: from, allowWatchBookmarks: true, timeoutSeconds: this.watchTimeoutSeconds },
        onEvent,
        onDone,
      );
      // Superseded while it was opening (relistNow, stop), or an event already failed: close it
      // rather than keep it. Ended already (an answer other than 200): onDone has retried.
      if (generation !== this.watchGeneration || this.stopped || applyFailure || ended) {
        controller.abort();
        return;
      }
      this.watchController = controller;
      this.watchForStall();
      this.emit('watch', from);
    } catch (err) {
      this.retry('watch', err as Error, () => this.startWatch());
    }
  }

  private retry(what: 'list' | 'watch', err: Error, again: () => Promise<void>): void {
    if (this.stopped) return;
    const delay = Math.round(this.backoffMs * (0.8 + Math.random() * 0.4));
    this.backoffMs = Math.min(this.backoffMs * 2, this.backoffMaxMs);
    this.options.log.warn({ err: err.message, retryInMs: delay, synced: this.synced }, `${this.options.what} ${what} failed`);
    this.emit('rejected', err);
    this.retryTimer?.cancel();
    this.retryTimer = this.clock.after(delay, () => void again());
  }
}

/**
 * Namespace labels from the cluster: every namespace's labels kept in memory from a list and
 * a watch of Namespaces (a reflector), and one live GET on a cache miss.
 *
 * The list/watch protocol (https://kubernetes.io/docs/reference/using-api/api-concepts/):
 * list, then watch from the list's resourceVersion; every event and BOOKMARK advances the
 * resourceVersion; a watch the server ends normally is resumed from it; `410 Gone` (as an HTTP
 * status or an ERROR event) means the history is compacted: list again, replacing the whole
 * cache, which also drops namespaces deleted meanwhile; any other failure is retried from the
 * last resourceVersion with exponential backoff, so a dropped connection misses no change.
 *
 * @kubernetes/client-node provides the in-cluster configuration (token file re-read on
 * rotation, CA) and the watch stream; list and get are plain requests with its TLS and auth
 * options, so that each carries its own timeout.
 */
import { EventEmitter } from 'node:events';
import type { Reloadable } from '../reloadable.js';
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { KubernetesApiError, NamespaceLabelsUnavailableError, type NamespaceFailurePolicy } from '../errors.js';
import { metadataNameLabel, type NamespaceLabelSource } from './source.js';
import type { Labels } from '../k8s/selector.js';

/** Tunables of the cluster source. */
export interface ClusterSourceOptions {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  /** What a review gets when labels cannot be known. */
  readonly failurePolicy: NamespaceFailurePolicy;
  /** Timeout of the live GET on a cache miss. @default 2000 */
  readonly lookupTimeoutMs?: number;
  /** Timeout of each page of a list: a large cluster's list takes longer than a look-up. @default 60000 */
  readonly listTimeoutMs?: number;
  /** Namespaces per list page (`limit`). @default 500 */
  readonly listPageSize?: number;
  /**
   * A watch that delivers nothing (no event, no BOOKMARK) for this long is presumed dead and
   * restarted: the API server sends a BOOKMARK about once a minute. @default 120000
   */
  readonly watchStallMs?: number;
  /** Live look-ups of namespaces missing from the cache: at most this many at once… @default 4 */
  readonly maxConcurrentLookups?: number;
  /** …and at most this many per second. @default 20 */
  readonly maxLookupsPerSecond?: number;
  /** Failed look-ups remembered at most (the oldest are forgotten first). @default 1024 */
  readonly maxRememberedFailures?: number;
  /** First and largest retry delay after a failed list or watch. @default 500, 30000 */
  readonly backoffInitialMs?: number;
  readonly backoffMaxMs?: number;
  /** How long the server may hold one watch before ending it. @default 300 */
  readonly watchTimeoutSeconds?: number;
  /** How long a failed look-up is remembered, so that a storm of pods does not become a storm of GETs. @default 1000 */
  readonly negativeCacheMs?: number;
}

interface NamespaceObject {
  metadata?: { name?: string; resourceVersion?: string; labels?: Record<string, string> };
}

/** The cluster source: `start()` begins list and watch; `stop()` ends them. */
/** What /status shows about the cluster source. */
export interface ClusterSourceStatus {
  readonly source: 'cluster';
  readonly ready: boolean;
  readonly namespaces: number;
  readonly failurePolicy: NamespaceFailurePolicy;
  readonly resourceVersion: string;
}

export class ClusterNamespaceSource extends EventEmitter implements NamespaceLabelSource, Reloadable<ReadonlyMap<string, Labels>, ClusterSourceStatus> {
  readonly kind = 'cluster';
  /** Emits `reload` (count) after each list, `rejected` (err) on a failed list or watch, `change` (type, name), `watch` (resourceVersion), `stall`, `lookup-failed` (namespace) — for logs, metrics and tests. */
  private readonly labels = new Map<string, Labels>();
  private readonly inFlight = new Map<string, Promise<Labels>>();
  private readonly failures = new Map<string, { until: number; error: NamespaceLabelsUnavailableError }>();
  private resourceVersion = '';
  private synced = false;
  private stopped = true;
  private watchController: AbortController | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private backoffMs: number;
  private readonly watch: Watch;
  private readonly lookupTimeoutMs: number;
  private readonly backoffInitialMs: number;
  private readonly backoffMaxMs: number;
  private readonly watchTimeoutSeconds: number;
  private readonly negativeCacheMs: number;
  private readonly listTimeoutMs: number;
  private readonly listPageSize: number;
  private readonly watchStallMs: number;
  private readonly maxConcurrentLookups: number;
  private readonly maxLookupsPerSecond: number;
  private readonly maxRememberedFailures: number;
  /** When the current watch last delivered anything (an event or a BOOKMARK). */
  private lastWatchActivity = 0;
  private stallTimer: NodeJS.Timeout | undefined;
  private lookupsThisSecond = { second: 0, count: 0 };

  constructor(private readonly options: ClusterSourceOptions) {
    super();
    this.watch = new Watch(options.kubeConfig);
    this.lookupTimeoutMs = options.lookupTimeoutMs ?? 2000;
    this.backoffInitialMs = options.backoffInitialMs ?? 500;
    this.backoffMaxMs = options.backoffMaxMs ?? 30_000;
    this.watchTimeoutSeconds = options.watchTimeoutSeconds ?? 300;
    this.negativeCacheMs = options.negativeCacheMs ?? 1000;
    this.listTimeoutMs = options.listTimeoutMs ?? 60_000;
    this.listPageSize = options.listPageSize ?? 500;
    this.watchStallMs = options.watchStallMs ?? 120_000;
    this.maxConcurrentLookups = options.maxConcurrentLookups ?? 4;
    this.maxLookupsPerSecond = options.maxLookupsPerSecond ?? 20;
    this.maxRememberedFailures = options.maxRememberedFailures ?? 1024;
    this.backoffMs = this.backoffInitialMs;
  }

  /** True once the first list has completed (readiness). */
  isReady(): boolean {
    return this.synced;
  }

  /** Number of namespaces in the cache. */
  size(): number {
    return this.labels.size;
  }

  /** The cache: namespace name → labels. */
  current(): ReadonlyMap<string, Labels> {
    return this.labels;
  }

  status(): ClusterSourceStatus {
    return {
      source: 'cluster',
      ready: this.synced,
      namespaces: this.labels.size,
      failurePolicy: this.options.failurePolicy,
      resourceVersion: this.resourceVersion,
    };
  }

  /** Lists again now, replacing the cache (the watch restarts from the new list). */
  async reloadNow(): Promise<void> {
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

  /** Starts listing and watching in the background. */
  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    void this.relist();
  }

  /** Stops the watch and any pending retry. */
  stop(): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    clearInterval(this.stallTimer);
    this.stallTimer = undefined;
    this.watchController?.abort();
    this.watchController = undefined;
  }

  async labelsOf(namespace: string): Promise<Labels> {
    const cached = this.labels.get(namespace);
    if (cached) return cached;
    const failed = this.failures.get(namespace);
    if (failed && failed.until > Date.now()) throw failed.error;
    let pending = this.inFlight.get(namespace);
    if (!pending) {
      // Look-ups are bounded: a storm of reviews naming unknown namespaces is not a storm of GETs.
      const refusal = this.lookupRefusal();
      if (refusal) {
        this.emit('lookup-failed', namespace);
        throw new NamespaceLabelsUnavailableError(namespace, refusal, this.options.failurePolicy);
      }
      pending = this.lookup(namespace).finally(() => this.inFlight.delete(namespace));
      this.inFlight.set(namespace, pending);
    }
    return pending;
  }

  /** Why a live look-up may not start now, or undefined. */
  private lookupRefusal(): string | undefined {
    if (this.inFlight.size >= this.maxConcurrentLookups) return `not in the cache, and ${this.inFlight.size} look-ups are already running`;
    const second = Math.floor(Date.now() / 1000);
    if (this.lookupsThisSecond.second !== second) this.lookupsThisSecond = { second, count: 0 };
    if (this.lookupsThisSecond.count >= this.maxLookupsPerSecond) return `not in the cache, and ${this.maxLookupsPerSecond} look-ups were made this second`;
    this.lookupsThisSecond.count++;
    return undefined;
  }

  /** Remembers a failed look-up for a moment; the map is bounded, oldest first out. */
  private rememberFailure(namespace: string, error: NamespaceLabelsUnavailableError): void {
    const now = Date.now();
    this.failures.delete(namespace);
    if (this.failures.size >= this.maxRememberedFailures) {
      for (const [name, failure] of this.failures) if (failure.until <= now) this.failures.delete(name);
      while (this.failures.size >= this.maxRememberedFailures) this.failures.delete(this.failures.keys().next().value as string);
    }
    this.failures.set(namespace, { until: now + this.negativeCacheMs, error });
  }

  /** One live GET of a namespace missing from the cache (created a moment before its first pod). */
  private async lookup(namespace: string): Promise<Labels> {
    try {
      const object = (await this.request(`/api/v1/namespaces/${encodeURIComponent(namespace)}`)) as NamespaceObject;
      // A watch event may have arrived meanwhile; it is at least as new as this answer.
      return this.labels.get(namespace) ?? this.store(object);
    } catch (err) {
      // The cause first: warnings are cut at 120 characters.
      const reason = err instanceof KubernetesApiError && err.statusCode === 404 ? 'it does not exist' : `API look-up failed: ${(err as Error).message}`;
      const error = new NamespaceLabelsUnavailableError(namespace, reason, this.options.failurePolicy);
      this.rememberFailure(namespace, error);
      this.options.log.warn({ namespace, err: (err as Error).message, policy: this.options.failurePolicy }, 'namespace labels unavailable');
      this.emit('lookup-failed', namespace);
      throw error;
    }
  }

  private store(object: NamespaceObject): Labels {
    const name = object.metadata?.name ?? '';
    const labels = Object.freeze({ ...(object.metadata?.labels ?? {}), [metadataNameLabel]: name });
    this.labels.set(name, labels);
    this.failures.delete(name);
    return labels;
  }

  private async relist(): Promise<void> {
    if (this.stopped) return;
    try {
      const { items, resourceVersion } = await this.listAll();
      if (this.stopped) return;
      this.labels.clear();
      for (const item of items) this.store(item);
      this.resourceVersion = resourceVersion;
      this.synced = true;
      this.backoffMs = this.backoffInitialMs;
      this.options.log.info({ namespaces: this.labels.size, resourceVersion: this.resourceVersion }, 'namespaces listed');
      this.emit('reload', this.labels.size);
      await this.startWatch();
    } catch (err) {
      this.retry('list', err as Error, () => this.relist());
    }
  }

  /**
   * Lists every namespace, page by page (`limit`, `continue`), each page with the list
   * timeout. An expired continue token (410) restarts the list from the beginning.
   */
  private async listAll(): Promise<{ items: NamespaceObject[]; resourceVersion: string }> {
    type Page = { metadata?: { resourceVersion?: string; continue?: string }; items?: NamespaceObject[] };
    for (let attempt = 0; ; attempt++) {
      const items: NamespaceObject[] = [];
      let token = '';
      let resourceVersion = '';
      try {
        do {
          const query = new URLSearchParams({ limit: String(this.listPageSize) });
          if (token) query.set('continue', token);
          const page = (await this.request(`/api/v1/namespaces?${query}`, this.listTimeoutMs)) as Page;
          for (const item of page.items ?? []) items.push(item);
          resourceVersion = page.metadata?.resourceVersion ?? resourceVersion;
          token = page.metadata?.continue ?? '';
          if (this.stopped) return { items, resourceVersion };
        } while (token);
        return { items, resourceVersion };
      } catch (err) {
        if (!(err instanceof KubernetesApiError && err.statusCode === 410 && token && attempt < 3)) throw err;
        this.options.log.info('namespace list continue token expired (410 Gone); listing again from the start');
      }
    }
  }

  /** Restarts a watch that has delivered nothing for `watchStallMs` (a silently dead connection). */
  private watchForStall(): void {
    clearInterval(this.stallTimer);
    this.stallTimer = setInterval(
      () => {
        if (!this.watchController || Date.now() - this.lastWatchActivity < this.watchStallMs) return;
        this.options.log.warn(
          { silentForMs: Date.now() - this.lastWatchActivity, resourceVersion: this.resourceVersion },
          'namespace watch delivered nothing, not even a bookmark; restarting it',
        );
        this.emit('stall');
        const controller = this.watchController;
        this.watchController = undefined;
        this.stalled = true;
        controller.abort();
      },
      Math.max(10, Math.min(10_000, this.watchStallMs / 4)),
    );
    this.stallTimer.unref();
  }

  private stalled = false;
  /** Counts watches started or superseded: a watch acts only while its generation is current. */
  private watchGeneration = 0;

  private async startWatch(): Promise<void> {
    if (this.stopped) return;
    const from = this.resourceVersion;
    let relistNeeded = false;
    let errorEvent: string | undefined;
    let eventsSeen = 0;
    const started = Date.now();
    const generation = ++this.watchGeneration;
    this.lastWatchActivity = started;
    this.stalled = false;
    const onEvent = (type: string, object: NamespaceObject & { code?: number; message?: string }) => {
      if (generation !== this.watchGeneration) return;
      this.lastWatchActivity = Date.now();
      switch (type) {
        case 'ADDED':
        case 'MODIFIED':
          this.store(object);
          break;
        case 'DELETED':
          this.labels.delete(object.metadata?.name ?? '');
          break;
        case 'BOOKMARK':
          break;
        case 'ERROR':
          // The API server reports an expired resourceVersion as an ERROR event with code 410.
          if (object.code === 410) relistNeeded = true;
          else errorEvent = `ERROR event, code ${String(object.code)}: ${String(object.message ?? '').slice(0, 200)}`;
          this.options.log.warn({ code: object.code, message: object.message }, 'namespace watch error event');
          return;
        default:
          return;
      }
      eventsSeen++;
      if (object.metadata?.resourceVersion) this.resourceVersion = object.metadata.resourceVersion;
      this.emit('change', type, object.metadata?.name);
    };
    const onDone = (err: unknown) => {
      if (generation !== this.watchGeneration) return;
      this.watchController = undefined;
      if (this.stopped) return;
      const status = (err as { statusCode?: number } | null)?.statusCode;
      if (relistNeeded || status === 410) {
        this.options.log.info({ resourceVersion: this.resourceVersion }, 'namespace watch expired (410 Gone); listing again');
        this.resourceVersion = '';
        void this.relist();
      } else if (this.stalled) {
        this.retry('watch', new Error(`no event or bookmark for ${this.watchStallMs} ms`), () => this.startWatch());
      } else if (err || errorEvent) {
        this.retry('watch', err instanceof Error ? err : new Error(errorEvent ?? String(err)), () => this.startWatch());
      } else if (eventsSeen === 0 && Date.now() - started < 1000) {
        // Ended at once with nothing delivered: a failure in disguise, not the server's timeout.
        this.retry('watch', new Error('the watch ended at once without events'), () => this.startWatch());
      } else {
        // The server ended the watch (timeoutSeconds): resume from the last resourceVersion.
        if (eventsSeen > 0) this.backoffMs = this.backoffInitialMs;
        void this.startWatch();
      }
    };
    try {
      const controller = await this.watch.watch(
        '/api/v1/namespaces',
        { resourceVersion: from, allowWatchBookmarks: true, timeoutSeconds: this.watchTimeoutSeconds },
        onEvent,
        onDone,
      );
      // Superseded while it was opening (reloadNow, stop): close it rather than keep two.
      if (generation !== this.watchGeneration || this.stopped) {
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
    this.options.log.warn({ err: err.message, retryInMs: delay, synced: this.synced }, `namespace ${what} failed`);
    this.emit('rejected', err);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => void again(), delay);
    this.retryTimer.unref();
  }

  /** A GET with the kubeconfig's TLS and credentials, and a timeout. */
  private async request(path: string, timeoutMs = this.lookupTimeoutMs): Promise<unknown> {
    const cluster = this.options.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('no current cluster in the kubeconfig');
    const options: https.RequestOptions = { method: 'GET', headers: { accept: 'application/json' } };
    await this.options.kubeConfig.applyToHTTPSOptions(options);
    const url = new URL(cluster.server + path);
    return new Promise((resolve, reject) => {
      const req = https.request(url, { ...options, agent: undefined, signal: AbortSignal.timeout(timeoutMs) }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status < 200 || status > 299) return reject(new KubernetesApiError(status, `GET ${path}: HTTP ${status}`));
          try {
            resolve(JSON.parse(text));
          } catch {
            reject(new Error(`GET ${path}: the answer is not JSON`));
          }
        });
      });
      req.on('error', (err) =>
        reject(err.name === 'AbortError' || err.name === 'TimeoutError' ? new Error(`GET ${path}: no answer within ${timeoutMs} ms`) : err),
      );
      req.end();
    });
  }
}

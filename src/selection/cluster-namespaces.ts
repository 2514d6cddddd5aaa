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
import https from 'node:https';
import type { KubeConfig } from '@kubernetes/client-node';
import { Watch } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { metadataNameLabel, NamespaceLabelsUnavailable, type NamespaceFailurePolicy, type NamespaceLabelSource } from './namespace-labels.js';
import type { Labels } from './selector.js';

/** Tunables of the cluster source. */
export interface ClusterSourceOptions {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  /** What a review gets when labels cannot be known. */
  readonly failurePolicy: NamespaceFailurePolicy;
  /** Timeout of the live GET on a cache miss, and of each list. @default 2000 */
  readonly lookupTimeoutMs?: number;
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

/** An HTTP answer other than 2xx, with its status code. */
class HttpStatusError extends Error {
  constructor(
    readonly statusCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** The cluster source: `start()` begins list and watch; `stop()` ends them. */
export class ClusterNamespaceSource implements NamespaceLabelSource {
  readonly kind = 'cluster';
  /** Emits `list` (count), `watch` (resourceVersion), `change` (type, name), `error` (err) — for logs, metrics and tests. */
  readonly events = new EventEmitter();
  private readonly labels = new Map<string, Labels>();
  private readonly inFlight = new Map<string, Promise<Labels>>();
  private readonly failures = new Map<string, { until: number; error: NamespaceLabelsUnavailable }>();
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

  constructor(private readonly options: ClusterSourceOptions) {
    this.watch = new Watch(options.kubeConfig);
    this.lookupTimeoutMs = options.lookupTimeoutMs ?? 2000;
    this.backoffInitialMs = options.backoffInitialMs ?? 500;
    this.backoffMaxMs = options.backoffMaxMs ?? 30_000;
    this.watchTimeoutSeconds = options.watchTimeoutSeconds ?? 300;
    this.negativeCacheMs = options.negativeCacheMs ?? 1000;
    this.backoffMs = this.backoffInitialMs;
    // An EventEmitter without an error listener throws on 'error'; failures are reported, not fatal.
    this.events.on('error', () => undefined);
  }

  /** True once the first list has completed (readiness). */
  isReady(): boolean {
    return this.synced;
  }

  /** Number of namespaces in the cache. */
  size(): number {
    return this.labels.size;
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
      pending = this.lookup(namespace).finally(() => this.inFlight.delete(namespace));
      this.inFlight.set(namespace, pending);
    }
    return pending;
  }

  /** One live GET of a namespace missing from the cache (created a moment before its first pod). */
  private async lookup(namespace: string): Promise<Labels> {
    try {
      const object = (await this.request(`/api/v1/namespaces/${encodeURIComponent(namespace)}`)) as NamespaceObject;
      // A watch event may have arrived meanwhile; it is at least as new as this answer.
      return this.labels.get(namespace) ?? this.store(object);
    } catch (err) {
      const reason =
        err instanceof HttpStatusError && err.statusCode === 404
          ? `namespace ${namespace} does not exist`
          : `the Kubernetes API did not answer a look-up of namespace ${namespace} (${(err as Error).message})`;
      const error = new NamespaceLabelsUnavailable(namespace, reason, this.options.failurePolicy);
      this.failures.set(namespace, { until: Date.now() + this.negativeCacheMs, error });
      this.options.log.warn({ namespace, err: (err as Error).message, policy: this.options.failurePolicy }, 'namespace labels unavailable');
      this.events.emit('lookup-failed', namespace);
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
      const list = (await this.request('/api/v1/namespaces')) as { metadata?: { resourceVersion?: string }; items?: NamespaceObject[] };
      if (this.stopped) return;
      this.labels.clear();
      for (const item of list.items ?? []) this.store(item);
      this.resourceVersion = list.metadata?.resourceVersion ?? '';
      this.synced = true;
      this.backoffMs = this.backoffInitialMs;
      this.options.log.info({ namespaces: this.labels.size, resourceVersion: this.resourceVersion }, 'namespaces listed');
      this.events.emit('list', this.labels.size);
      await this.startWatch();
    } catch (err) {
      this.retry('list', err as Error, () => this.relist());
    }
  }

  private async startWatch(): Promise<void> {
    if (this.stopped) return;
    const from = this.resourceVersion;
    let relistNeeded = false;
    let eventsSeen = 0;
    const onEvent = (type: string, object: NamespaceObject & { code?: number; message?: string }) => {
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
          this.options.log.warn({ code: object.code, message: object.message }, 'namespace watch error event');
          return;
        default:
          return;
      }
      eventsSeen++;
      if (object.metadata?.resourceVersion) this.resourceVersion = object.metadata.resourceVersion;
      this.events.emit('change', type, object.metadata?.name);
    };
    const onDone = (err: unknown) => {
      this.watchController = undefined;
      if (this.stopped) return;
      const status = (err as { statusCode?: number } | null)?.statusCode;
      if (relistNeeded || status === 410) {
        this.options.log.info({ resourceVersion: this.resourceVersion }, 'namespace watch expired (410 Gone); listing again');
        this.resourceVersion = '';
        void this.relist();
      } else if (err) {
        this.retry('watch', err as Error, () => this.startWatch());
      } else {
        // The server ended the watch (timeoutSeconds): resume from the last resourceVersion.
        if (eventsSeen > 0) this.backoffMs = this.backoffInitialMs;
        void this.startWatch();
      }
    };
    try {
      this.watchController = await this.watch.watch(
        '/api/v1/namespaces',
        { resourceVersion: from, allowWatchBookmarks: true, timeoutSeconds: this.watchTimeoutSeconds },
        onEvent,
        onDone,
      );
      this.events.emit('watch', from);
    } catch (err) {
      this.retry('watch', err as Error, () => this.startWatch());
    }
  }

  private retry(what: 'list' | 'watch', err: Error, again: () => Promise<void>): void {
    if (this.stopped) return;
    const delay = Math.round(this.backoffMs * (0.8 + Math.random() * 0.4));
    this.backoffMs = Math.min(this.backoffMs * 2, this.backoffMaxMs);
    this.options.log.warn({ err: err.message, retryInMs: delay, synced: this.synced }, `namespace ${what} failed`);
    this.events.emit('error', err);
    clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => void again(), delay);
    this.retryTimer.unref();
  }

  /** A GET with the kubeconfig's TLS and credentials, and a timeout. */
  private async request(path: string): Promise<unknown> {
    const cluster = this.options.kubeConfig.getCurrentCluster();
    if (!cluster) throw new Error('no current cluster in the kubeconfig');
    const options: https.RequestOptions = { method: 'GET', headers: { accept: 'application/json' } };
    await this.options.kubeConfig.applyToHTTPSOptions(options);
    const url = new URL(cluster.server + path);
    return new Promise((resolve, reject) => {
      const req = https.request(url, { ...options, agent: undefined, signal: AbortSignal.timeout(this.lookupTimeoutMs) }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status < 200 || status > 299) return reject(new HttpStatusError(status, `GET ${path}: HTTP ${status}`));
          try {
            resolve(JSON.parse(text));
          } catch {
            reject(new Error(`GET ${path}: the answer is not JSON`));
          }
        });
      });
      req.on('error', (err) => reject(err.name === 'AbortError' ? new Error(`GET ${path}: no answer within ${this.lookupTimeoutMs} ms`) : err));
      req.end();
    });
  }
}

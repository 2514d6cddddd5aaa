/**
 * Namespace labels from the cluster: every namespace's labels kept in memory by a reflector
 * (a list and a watch of Namespaces, kube-api/reflector.ts), and one live GET on a cache miss,
 * bounded in concurrency and rate, with failures remembered for a moment.
 */
import { systemClock, type Clock } from '../clock.js';
import { EventEmitter } from 'node:events';
import type { Reloadable } from '../reloadable.js';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { KubernetesApiError, NamespaceLabelsUnavailableError, type NamespaceFailurePolicy } from '../errors.js';
import { metadataNameLabel, overrideAnnotations, type NamespaceLabelSource } from './source.js';
import type { Labels } from '../k8s/selector.js';
import { isDns1123Label } from '../k8s/label-syntax.js';
import { Reflector, type ReflectorTuning } from '../kube-api/reflector.js';
import { getJson } from '../kube-api/request.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';

/** Tunables of the cluster source. */
export interface ClusterSourceOptions extends ReflectorTuning {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  /** What a review gets when labels cannot be known. */
  readonly failurePolicy: NamespaceFailurePolicy;
  /** Timeout of the live GET on a cache miss. @default 2000 */
  readonly lookupTimeoutMs?: number;
  /** Live look-ups of namespaces missing from the cache: at most this many at once… @default 4 */
  readonly maxConcurrentLookups?: number;
  /** …and at most this many per second. @default 20 */
  readonly maxLookupsPerSecond?: number;
  /** Failed look-ups remembered at most (the oldest are forgotten first). @default 1024 */
  readonly maxRememberedFailures?: number;
  /** How long a failed look-up is remembered, so that a storm of pods does not become a storm of GETs. @default 1000 */
  readonly negativeCacheMs?: number;
}

interface NamespaceObject {
  metadata?: { name?: string; resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
}

const noOverrides: Readonly<Record<string, string>> = Object.freeze(Object.create(null));

function sameLabels(a: Labels, b: Labels): boolean {
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && a[k] === b[k]);
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
  /** Emits the reflector's `reload` (count), `rejected` (err), `change` (type, name), `watch` (resourceVersion), `stall`; and `lookup-failed` (namespace) — for logs, metrics and tests. */
  private readonly labels = new Map<string, Labels>();
  /** Override annotations of the namespaces that have any (most have none: nothing is kept for them). */
  private readonly overrides = new Map<string, Readonly<Record<string, string>>>();
  /** Each namespace's generation: a new number whenever its labels or overrides change (generationOf). */
  private readonly generations = new Map<string, number>();
  private lastGeneration = 0;
  private readonly inFlight = new Map<string, Promise<Labels>>();
  private readonly failures = new Map<string, { until: number; error: NamespaceLabelsUnavailableError }>();
  private readonly reflector: Reflector<NamespaceObject>;
  private readonly lookupTimeoutMs: number;
  private readonly negativeCacheMs: number;
  private readonly maxConcurrentLookups: number;
  private readonly maxLookupsPerSecond: number;
  private readonly maxRememberedFailures: number;
  private lookupsThisSecond = { second: 0, count: 0 };
  private readonly clock: Clock;

  constructor(private readonly options: ClusterSourceOptions) {
    super();
    this.lookupTimeoutMs = options.lookupTimeoutMs ?? 2000;
    this.negativeCacheMs = options.negativeCacheMs ?? 1000;
    this.maxConcurrentLookups = options.maxConcurrentLookups ?? 4;
    this.maxLookupsPerSecond = options.maxLookupsPerSecond ?? 20;
    this.maxRememberedFailures = options.maxRememberedFailures ?? 1024;
    this.clock = options.clock ?? systemClock;
    this.reflector = new Reflector<NamespaceObject>({
      ...options,
      path: apiPath(apiResources.namespaces),
      what: 'namespace',
      replace: (items) => {
        // A namespace listed as it was keeps its generation; one gone loses it.
        const before = { labels: new Map(this.labels), overrides: new Map(this.overrides) };
        this.labels.clear();
        this.overrides.clear();
        for (const item of items) this.store(item, before);
        for (const name of this.generations.keys()) if (!this.labels.has(name)) this.generations.delete(name);
      },
      apply: (type, object) => {
        if (type === 'DELETED') {
          const name = object.metadata?.name ?? '';
          this.labels.delete(name);
          this.overrides.delete(name);
          this.generations.delete(name);
        } else this.store(object);
      },
    });
    for (const event of ['reload', 'rejected', 'change', 'watch', 'stall']) this.reflector.on(event, (...args: unknown[]) => this.emit(event, ...args));
  }

  /** True once the first list has completed (readiness). */
  isReady(): boolean {
    return this.reflector.isSynced();
  }

  /** Number of namespaces in the cache. */
  size(): number {
    return this.labels.size;
  }

  /** True when the namespace is in the cache: listed, watched or found by a live look-up. */
  exists(namespace: string): boolean {
    return this.labels.has(namespace);
  }

  /** The cache: namespace name → labels. */
  current(): ReadonlyMap<string, Labels> {
    return this.labels;
  }

  status(): ClusterSourceStatus {
    return {
      source: 'cluster',
      ready: this.reflector.isSynced(),
      namespaces: this.labels.size,
      failurePolicy: this.options.failurePolicy,
      resourceVersion: this.reflector.version(),
    };
  }

  /** Lists again now, replacing the cache (the watch restarts from the new list). */
  reloadNow(): Promise<void> {
    return this.reflector.relistNow();
  }

  /** Starts listing and watching in the background. */
  start(): void {
    this.reflector.start();
  }

  /** Stops the watch and any pending retry. */
  stop(): void {
    this.reflector.stop();
  }

  async labelsOf(namespace: string): Promise<Labels> {
    const cached = this.labels.get(namespace);
    if (cached) return cached;
    const failed = this.failures.get(namespace);
    if (failed && failed.until > this.clock.now()) throw failed.error;
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
    const second = Math.floor(this.clock.now() / 1000);
    if (this.lookupsThisSecond.second !== second) this.lookupsThisSecond = { second, count: 0 };
    if (this.lookupsThisSecond.count >= this.maxLookupsPerSecond) return `not in the cache, and ${this.maxLookupsPerSecond} look-ups were made this second`;
    this.lookupsThisSecond.count++;
    return undefined;
  }

  /** Remembers a failed look-up for a moment; the map is bounded, oldest first out. */
  private rememberFailure(namespace: string, error: NamespaceLabelsUnavailableError): void {
    const now = this.clock.now();
    this.failures.delete(namespace);
    if (this.failures.size >= this.maxRememberedFailures) {
      for (const [name, failure] of this.failures) if (failure.until <= now) this.failures.delete(name);
      while (this.failures.size >= this.maxRememberedFailures) this.failures.delete(this.failures.keys().next().value as string);
    }
    this.failures.set(namespace, { until: now + this.negativeCacheMs, error });
  }

  /** One live GET of a namespace missing from the cache (created a moment before its first pod). */
  private async lookup(namespace: string): Promise<Labels> {
    // A name no namespace can have (".", "", "a/b") would make the GET another request entirely.
    if (!isDns1123Label(namespace)) throw new NamespaceLabelsUnavailableError(namespace, 'it is not a namespace name', this.options.failurePolicy);
    try {
      const object = (await getJson(this.options.kubeConfig, apiPath(apiResources.namespaces, { name: namespace }), this.lookupTimeoutMs)) as NamespaceObject;
      // A watch event may have arrived meanwhile; it is at least as new as this answer.
      if (object?.metadata?.name !== namespace) throw new Error(`GET of namespace ${namespace} answered with another object`);
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

  /** The namespace's parameter overrides (`<template>.sidecar-injector.io/<name>` annotations) as last seen. */
  overridesOf(namespace: string): Readonly<Record<string, string>> {
    return this.overrides.get(namespace) ?? noOverrides;
  }

  /** The generation of the namespace's labels and overrides as held now; undefined when it is not held. */
  generationOf(namespace: string): number | undefined {
    return this.generations.get(namespace);
  }

  private store(
    object: NamespaceObject,
    held: { labels: ReadonlyMap<string, Labels>; overrides: ReadonlyMap<string, Readonly<Record<string, string>>> } = {
      labels: this.labels,
      overrides: this.overrides,
    },
  ): Labels {
    const name = object.metadata?.name ?? '';
    const labels = Object.freeze({ ...(object.metadata?.labels ?? {}), [metadataNameLabel]: name });
    const before = held.labels.get(name);
    this.labels.set(name, labels);
    // Most namespace events change nothing a selector reads: say so only when the labels did.
    if (before && !sameLabels(before, labels)) this.emit('labels-changed', name);
    const overrides = overrideAnnotations(object.metadata?.annotations);
    const overridesBefore = held.overrides.get(name) ?? noOverrides;
    if (Object.keys(overrides).length > 0) this.overrides.set(name, overrides);
    else this.overrides.delete(name);
    if (!before || !sameLabels(before, labels) || !sameLabels(overridesBefore, overrides) || !this.generations.has(name))
      this.generations.set(name, ++this.lastGeneration);
    this.failures.delete(name);
    return labels;
  }
}

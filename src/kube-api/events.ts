/**
 * Events (events.k8s.io/v1) on the objects a person looks at: what the injector did to the
 * pods of a workload, where `kubectl describe` and `kubectl get events` show it. Written after
 * the admission answer, never delaying it; a failure to write is logged and counted, never
 * felt by admission. Aggregated as the API server's own recorder does: the first occurrence of
 * an (object, reason) in a window is written at once, later ones only count, and at the end of
 * the window one update sets the series (count, last time): at most two writes per object and
 * reason per window, however many pods a ReplicaSet creates.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { systemClock, type Clock, type Timer } from '../clock.js';
import { getJson, metadataOnly, microTime, requestJson } from './request.js';
import { workloadApiVersion, workloadPath } from '../k8s/workloads.js';
import type { ObjectReference } from '../k8s/object-reference.js';
import { isDns1123Subdomain } from '../k8s/label-syntax.js';
import { KubernetesApiError } from '../errors.js';
import { randomInt } from 'node:crypto';
import { apiPath, apiResources } from '../k8s/api-paths.js';

/**
 * An Event's name as client-go's recorder makes it: the object's name, a dot, and the time in
 * nanoseconds as hex (here milliseconds and a random rest, so that two replicas' Events of one
 * millisecond do not collide). A name the API server would refuse (an owner a pod made up) is
 * replaced by `sidecar-injector`. Never generateName: the API server validates a generateName
 * as a name prefix, where a trailing dot is invalid.
 */
export function eventName(objectName: string, at: Date): string {
  const prefix = objectName.length <= 200 && isDns1123Subdomain(objectName) ? objectName : 'sidecar-injector';
  const nanos = BigInt(at.getTime()) * 1_000_000n + BigInt(randomInt(1_000_000));
  return `${prefix}.${nanos.toString(16)}`;
}

/** The object an event is about (`namespace` empty for a cluster-scoped one). */
export type EventSubject = ObjectReference;

/** Where an Event about `regarding` is written: its namespace, or `default` for a cluster-scoped object (as the API server requires). */
export function eventNamespace(regarding: EventSubject): string {
  return regarding.namespace === '' ? 'default' : regarding.namespace;
}

/**
 * verifyClaim against the cluster: the workload a review names exists with the uid it names (one
 * metadata-only GET, which the injector's `get` on workloads allows). Any other kind does not hold.
 */
export function clusterClaimCheck(kubeConfig: KubeConfig, timeoutMs = 5000): (regarding: EventSubject) => Promise<boolean> {
  return async (regarding) => {
    const path = workloadPath(regarding.kind, regarding.namespace, regarding.name);
    // The apiVersion too: an Event names its object by all four.
    if (!path || !regarding.uid || regarding.apiVersion !== workloadApiVersion(regarding.kind)) return false;
    try {
      const object = (await getJson(kubeConfig, path, timeoutMs, metadataOnly)) as { metadata?: { uid?: unknown } } | undefined;
      return object?.metadata?.uid === regarding.uid;
    } catch (err) {
      if (err instanceof KubernetesApiError && err.statusCode === 404) return false;
      throw err;
    }
  };
}

export interface EventInput {
  readonly regarding: EventSubject;
  readonly type: 'Normal' | 'Warning';
  readonly reason: string;
  /** A sentence; cut at 1 KiB (the API server's limit on `note`). */
  readonly note: string;
  /** What the injector did or was doing. @default 'Inject' */
  readonly action?: string;
  /**
   * What tells this occurrence from others of the same reason on the same object (a template
   * revision on its SidecarTemplate): a series of its own, never counted into theirs. @default none
   */
  readonly series?: string;
  /**
   * `regarding` is what a review claims (a pod's controlling owner): anyone who can reach the
   * webhook port can send a review naming any object. Such an Event counts and is written only
   * once `verifyClaim` found that object with the uid it names. @default false
   */
  readonly claimed?: boolean;
}

export interface EventRecorderOptions {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  /** `reportingInstance`: which replica wrote it (its pod name). */
  readonly instance: string;
  /** The aggregation window. @default 60000 */
  readonly windowMs?: number;
  /** Distinct (object, reason) pairs tracked at once; beyond it new ones are dropped, counted. @default 5000 */
  readonly maxSeries?: number;
  /**
   * …and per namespace: anyone who may create pods in a namespace can name any owner in it,
   * so one namespace must not use up the others' share. @default 100
   */
  readonly maxSeriesPerNamespace?: number;
  /** Told of every write that failed (for a metric). */
  readonly onFailure?: () => void;
  /** Told of every occurrence dropped because a bound was reached or its namespace is unknown (for a metric). */
  readonly onDrop?: () => void;
  /**
   * True for a namespace known to exist (the namespace source's `exists`). An event in any
   * other is dropped before it is counted against a bound: reviews name namespaces, and one
   * that does not exist would cost a POST answered 404, and could spend the series that a real
   * denial in a real namespace needs. @default every namespace exists
   */
  readonly namespaceExists?: (namespace: string) => boolean;
  /**
   * Whether a claimed subject exists with its uid (a GET of the object): until it answers true,
   * a claimed Event neither counts against a bound nor is written. Unset: claimed Events are
   * written as any other (tests, a recorder without the cluster).
   */
  readonly verifyClaim?: (regarding: EventSubject) => Promise<boolean>;
  /** Claims checked at once, in all and per namespace; beyond, a claim to check is dropped (counted). @default 32, 4 */
  readonly maxClaimChecks?: number;
  readonly maxClaimChecksPerNamespace?: number;
  /** Times the window and stamps the events. @default systemClock */
  readonly clock?: Clock;
}

/** A claim checked: whether it held, and until when the answer is kept. */
interface ClaimAnswer {
  readonly holds: boolean;
  readonly until: number;
}

/** How long a claim's answer is kept: a true one for ten minutes (a ReplicaSet's pods come for a while), a false one a minute. */
const claimHoldsMs = 10 * 60_000;
const claimFailsMs = 60_000;
/** Claims' answers kept at most; the oldest goes first. */
const maxClaimAnswers = 4096;
/** Occurrences of one claim waiting for its check, at most: beyond, they are counted as dropped. */
const maxWaitingPerClaim = 100;

interface Series {
  readonly input: EventInput;
  count: number;
  last: Date;
  /** The written event's name, once the first write succeeded. */
  name?: string;
  timer?: Timer;
}

const reportingController = 'sidecar-injector.io/injector';

/** `note` within the API server's 1,024 bytes (UTF-8), cut on a character boundary. */
export function noteWithin(note: string, maxBytes = 1024): string {
  if (Buffer.byteLength(note) <= maxBytes) return note;
  let cut = note.slice(0, maxBytes);
  while (Buffer.byteLength(cut) > maxBytes - 3) cut = cut.slice(0, -1);
  return `${cut}…`;
}

export class EventRecorder {
  private readonly series = new Map<string, Series>();
  private readonly perNamespace = new Map<string, number>();
  private readonly windowMs: number;
  private readonly maxSeries: number;
  private readonly maxSeriesPerNamespace: number;
  private readonly clock: Clock;
  private stopped = false;
  /** Writes started and not yet settled (tests and shutdown wait for them). */
  private pending = new Set<Promise<void>>();
  dropped = 0;
  /** Occurrences dropped because their namespace is not known to exist. */
  unknownNamespace = 0;
  /** Occurrences dropped because the object their review claimed is not there with that uid. */
  unverified = 0;
  private readonly claims = new Map<string, ClaimAnswer>();
  /** Claims being checked: the occurrences waiting for the answer. */
  private readonly checking = new Map<string, EventInput[]>();
  private readonly checkingPerNamespace = new Map<string, number>();

  constructor(private readonly options: EventRecorderOptions) {
    this.windowMs = options.windowMs ?? 60_000;
    this.maxSeries = options.maxSeries ?? 5000;
    this.maxSeriesPerNamespace = options.maxSeriesPerNamespace ?? 100;
    this.clock = options.clock ?? systemClock;
  }

  /** Records one occurrence; returns at once (the write, if any, runs in the background). */
  record(input: EventInput): void {
    if (this.stopped) return;
    const { regarding } = input;
    if (this.options.namespaceExists && !this.options.namespaceExists(regarding.namespace)) {
      this.unknownNamespace++;
      this.options.onDrop?.();
      return;
    }
    if (input.claimed && this.options.verifyClaim) {
      const claim = `${regarding.namespace}\0${regarding.apiVersion}\0${regarding.kind}\0${regarding.name}\0${regarding.uid ?? ''}`;
      const answer = this.claims.get(claim);
      if (answer === undefined || answer.until <= this.clock.now()) return this.check(claim, input);
      if (!answer.holds) {
        this.unverified++;
        this.options.onDrop?.();
        return;
      }
    }
    this.count(input);
  }

  /** Checks a claimed subject once, holding its occurrences meanwhile; they count once it holds. */
  private check(claim: string, input: EventInput): void {
    const waiting = this.checking.get(claim);
    if (waiting) {
      if (waiting.length < maxWaitingPerClaim) waiting.push(input);
      else this.drop();
      return;
    }
    const namespace = input.regarding.namespace;
    const inNamespace = this.checkingPerNamespace.get(namespace) ?? 0;
    if (this.checking.size >= (this.options.maxClaimChecks ?? 32) || inNamespace >= (this.options.maxClaimChecksPerNamespace ?? 4)) return this.drop();
    this.checking.set(claim, [input]);
    this.checkingPerNamespace.set(namespace, inNamespace + 1);
    const settle = (holds: boolean | undefined) => {
      const inputs = this.checking.get(claim) ?? [];
      this.checking.delete(claim);
      const left = (this.checkingPerNamespace.get(namespace) ?? 1) - 1;
      if (left > 0) this.checkingPerNamespace.set(namespace, left);
      else this.checkingPerNamespace.delete(namespace);
      if (this.stopped) return;
      // No answer (the API server failing): nothing kept, these occurrences dropped, the next one asks again.
      if (holds !== undefined) {
        if (this.claims.size >= maxClaimAnswers) this.claims.delete(this.claims.keys().next().value!);
        this.claims.set(claim, { holds, until: this.clock.now() + (holds ? claimHoldsMs : claimFailsMs) });
      }
      if (holds) for (const waiting of inputs) this.count(waiting);
      else {
        if (holds === false) this.unverified += inputs.length;
        else this.dropped += inputs.length;
        for (let i = 0; i < inputs.length; i++) this.options.onDrop?.();
      }
    };
    this.track(
      this.options.verifyClaim!(input.regarding).then(settle, (err: unknown) => {
        this.options.log.warn({ err: (err as Error).message, kind: input.regarding.kind, namespace }, 'event subject could not be checked; event dropped');
        settle(undefined);
      }),
    );
  }

  private drop(): void {
    this.dropped++;
    this.options.onDrop?.();
  }

  /** Counts one occurrence into its series: the first of a window is written, the others counted. */
  private count(input: EventInput): void {
    if (this.stopped) return;
    const { regarding } = input;
    const key = `${regarding.namespace}\0${regarding.kind}\0${regarding.name}\0${input.reason}\0${input.series ?? ''}`;
    const existing = this.series.get(key);
    if (existing) {
      existing.count++;
      existing.last = new Date(this.clock.now());
      return;
    }
    const open = this.perNamespace.get(regarding.namespace) ?? 0;
    if (this.series.size >= this.maxSeries || open >= this.maxSeriesPerNamespace) return this.drop();
    const series: Series = { input, count: 1, last: new Date(this.clock.now()) };
    this.series.set(key, series);
    this.perNamespace.set(regarding.namespace, open + 1);
    this.track(this.create(series));
    series.timer = this.clock.after(this.windowMs, () => {
      this.series.delete(key);
      const left = (this.perNamespace.get(regarding.namespace) ?? 1) - 1;
      if (left > 0) this.perNamespace.set(regarding.namespace, left);
      else this.perNamespace.delete(regarding.namespace);
      if (series.count > 1 && series.name) this.track(this.update(series));
    });
  }

  /** Resolves when every write started so far has settled. */
  async settled(): Promise<void> {
    while (this.pending.size > 0) await Promise.all([...this.pending]);
  }

  /** Stops recording; open windows are dropped (their first event is written). */
  stop(): void {
    this.stopped = true;
    for (const series of this.series.values()) series.timer?.cancel();
    this.series.clear();
    this.perNamespace.clear();
  }

  private track(write: Promise<void>): void {
    const done = write.finally(() => this.pending.delete(done));
    this.pending.add(done);
  }

  private async create(series: Series): Promise<void> {
    const { regarding, type, reason, note, action = 'Inject' } = series.input;
    const body = {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      // A cluster-scoped object's Events live in `default`: the only namespace the API server allows them in.
      metadata: { name: eventName(regarding.name, series.last), namespace: eventNamespace(regarding) },
      eventTime: microTime(series.last),
      reportingController,
      reportingInstance: this.options.instance.slice(0, 128),
      action,
      reason,
      type,
      note: noteWithin(note),
      regarding: {
        apiVersion: regarding.apiVersion,
        kind: regarding.kind,
        namespace: regarding.namespace,
        name: regarding.name,
        ...(regarding.uid ? { uid: regarding.uid } : {}),
      },
    };
    try {
      const created = (await requestJson(this.options.kubeConfig, 'POST', apiPath(apiResources.events, { namespace: eventNamespace(regarding) }), 5000, {
        body,
      })) as { metadata?: { name?: string } } | undefined;
      series.name = created?.metadata?.name;
    } catch (err) {
      this.failed(err, reason, regarding);
    }
  }

  private async update(series: Series): Promise<void> {
    const { regarding, reason } = series.input;
    const path = apiPath(apiResources.events, { namespace: eventNamespace(regarding), name: series.name! });
    try {
      await requestJson(this.options.kubeConfig, 'PATCH', path, 5000, {
        body: { series: { count: series.count, lastObservedTime: microTime(series.last) } },
        contentType: 'application/merge-patch+json',
      });
    } catch (err) {
      // The Event is gone before its series was counted (its namespace deleted, or the API
      // server's Event TTL): there is nothing left to count, and nothing failed.
      if (err instanceof KubernetesApiError && err.statusCode === 404) {
        this.options.log.debug({ reason, kind: regarding.kind, name: regarding.name, namespace: regarding.namespace }, 'event gone before its series update');
        return;
      }
      this.failed(err, reason, regarding);
    }
  }

  private failed(err: unknown, reason: string, regarding: EventSubject): void {
    this.options.onFailure?.();
    this.options.log.warn(
      {
        err: (err as Error).message,
        // The API server's own words (cut), so that a refused write says why.
        ...(err instanceof KubernetesApiError && err.detail ? { detail: err.detail } : {}),
        reason,
        kind: regarding.kind,
        name: regarding.name,
        namespace: regarding.namespace,
      },
      'event not written',
    );
  }
}

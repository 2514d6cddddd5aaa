/**
 * Answers for pods of one ReplicaSet, remembered. A Deployment's pods reach the webhook as the
 * same object but for a few fields no decision reads (the request's uid, `managedFields` and
 * their timestamps), so an answer depends only on the rest of the pod, the request's name and
 * namespace, and the state it was decided in: the template set, the namespace's labels and
 * override annotations, the Kubernetes version, and the webhook it came through. The key holds
 * all of these (the state by object identity: each is replaced, never changed, when it
 * changes), so a cached answer is the answer a fresh decision would give — a property test
 * holds it so. Bounded in entries and bytes; only bodies of ordinary size are cached (app.ts).
 */
import type { AdmissionRequest, ReviewResponse, ReviewVersion } from './review.js';
import { isJsonObject, scanJsonText } from '../k8s/json.js';

/** What is remembered of one answer: everything but the request's uid. */
export interface CachedAnswer<T> {
  readonly value: T;
  readonly bytes: number;
}

/** Fields of a pod's metadata no decision reads, and that differ between pods of one ReplicaSet. */
const volatileMetadata = new Set(['managedFields', 'creationTimestamp', 'uid', 'resourceVersion']);

export class AnswerCache<T> {
  private readonly entries = new Map<string, CachedAnswer<T>>();
  private bytes = 0;
  private readonly ids = new WeakMap<object, number>();
  private nextId = 1;
  hits = 0;
  misses = 0;

  constructor(
    readonly maxEntries = 256,
    readonly maxBytes = 16 * 1024 * 1024,
  ) {}

  /** A small number naming an object (a state in force) for as long as it lives. */
  private id(object: object | undefined): number {
    if (!object) return 0;
    let id = this.ids.get(object);
    if (id === undefined) this.ids.set(object, (id = this.nextId++));
    return id;
  }

  /**
   * The key of a request decided in `state` (objects in force, by identity), or undefined when
   * the request cannot be cached (not an object pod).
   */
  keyOf(version: ReviewVersion, request: AdmissionRequest, state: readonly (object | undefined)[], extra: string): string | undefined {
    const pod = request.object;
    if (!isJsonObject(pod) || !isJsonObject(pod.metadata)) return undefined;
    // Null prototype: a `__proto__` key is copied as a key, never taken for the prototype.
    const metadata: Record<string, unknown> = Object.create(null);
    for (const key of Object.keys(pod.metadata)) if (!volatileMetadata.has(key)) metadata[key] = pod.metadata[key];
    const states = state.map((s) => this.id(s)).join(',');
    // The request's fields first, each quoted: no pod text can be mistaken for them.
    return `${JSON.stringify([version, request.namespace, request.name, states, extra])}${JSON.stringify({ ...pod, metadata })}`;
  }

  get(key: string): T | undefined {
    const hit = this.entries.get(key);
    if (!hit) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    // Most recently used last.
    this.entries.delete(key);
    this.entries.set(key, hit);
    return hit.value;
  }

  set(key: string, value: T, valueBytes: number): void {
    const bytes = key.length * 2 + valueBytes;
    if (bytes > this.maxBytes / 8) return;
    const old = this.entries.get(key);
    if (old) {
      this.bytes -= old.bytes;
      this.entries.delete(key);
    }
    this.entries.set(key, { value, bytes });
    this.bytes += bytes;
    while (this.entries.size > this.maxEntries || this.bytes > this.maxBytes) {
      const [oldestKey, oldest] = this.entries.entries().next().value as [string, CachedAnswer<T>];
      this.entries.delete(oldestKey);
      this.bytes -= oldest.bytes;
    }
  }

  size(): { entries: number; bytes: number } {
    return { entries: this.entries.size, bytes: this.bytes };
  }
}

/**
 * True when JSON text says nothing its parsed form would lose: JSON.stringify writes a number
 * too large for a double (`1e400`, parsed as Infinity) as `null` and `-0` as `0`, so bodies with
 * such numbers would share keys with bodies that differ. Such bodies (never sent by the API
 * server) are decided afresh. The body reader finds this in its one scan (http/body.ts).
 */
export function keyFaithful(bytes: Uint8Array): boolean {
  return scanJsonText(bytes, Infinity, Infinity).plainNumbers;
}

/** The response of a cached answer, for a request with another uid. */
export function withUid(response: ReviewResponse, uid: string): ReviewResponse {
  return { ...response, response: { ...response.response, uid } };
}

/**
 * The auditor inside the server: every pod of the cluster judged continuously from a
 * metadata-only list and watch (pipeline/audit.ts decides, exactly as `sidecar-injector audit`
 * does), exported as `sidecar_injector_pods{namespace,template,state}`, with a Warning Event on
 * the owner of a pod that goes `missing`. Only the leader runs it (kube-api/lease.ts).
 *
 * Memory is bounded per pod, whatever a pod carries (pods are written by anyone who may
 * create them, and changed by UPDATE, which the webhook never sees): only the label keys a
 * template's objectSelector reads (and the opt-out), the ledger read into template → hash (at
 * most 16, from a ledger of at most 64 KiB: a larger one counts as unreadable), the templates
 * request cut at 1 KiB, a well-formed controlling owner — and the verdict as one string of
 * names of templates in force. Measured by `npm run bench:audit`.
 */
import { EventEmitter } from 'node:events';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { AnnotationKeys } from '../k8s/keys.js';
import { metadataNameLabel } from '../namespaces/source.js';
import type { Labels } from '../k8s/selector.js';
import type { ObjectReference } from '../k8s/object-reference.js';
import { getJson, metadataOnly } from '../kube-api/request.js';
import { Reflector, type ReflectorTuning } from '../kube-api/reflector.js';
import { rolloutLabelKeys } from '../templates/rollout.js';
import {
  fixFor,
  judgedLabelKeys,
  type ListedMetadata,
  judgePod,
  podFacts,
  workloadOfPod,
  refineVerdict,
  type PodFacts,
  type PodState,
  type PodVerdict,
  type TemplateState,
} from '../pipeline/audit.js';
import { PodTemplateDecisions, type DecisionInputs } from './pod-template-decisions.js';
import { controllingOwner, namespaceReference } from '../k8s/object-reference.js';
import { ownerFactsOf, ownerKey, readOwnersLookup, workloadOfOwner, type OwnerFacts } from '../k8s/owners.js';
import { objectPath, workloadKinds } from '../k8s/workloads.js';
import { isJsonObject } from '../k8s/json.js';
import type { AdmissionEvent } from '../pipeline/admission-events.js';
import type { TemplateSet } from '../templates/set.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';

/** The gauge the auditor sets (prom-client's Gauge fits). */
export interface PodGauge {
  set(labels: { namespace: string; template: string; state: string }, value: number): void;
  remove(labels: { namespace: string; template: string; state: string }): void;
}

export interface PodAuditorOptions extends ReflectorTuning {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  readonly templates: () => TemplateSet;
  /** A namespace's labels, from the namespace source's cache; undefined when unknown. */
  readonly namespaceLabels: (namespace: string) => Labels | undefined;
  readonly gauge: PodGauge;
  /** Where the Warning Event of a pod gone missing goes. */
  readonly onMissing?: (event: AdmissionEvent) => void;
  /**
   * When the auditing replica before this one last said it was alive (the Lease's last renewal
   * when this replica took it); undefined when none ever audited. A missing pod of the first
   * list created after it was seen by no audit being created (every replica was down, or none
   * led): it gets its Event then.
   */
  readonly unseenSince?: () => Date | undefined;
  /** Namespaces with series of their own at most; the rest are counted under `(other)`. @default 500 */
  readonly maxNamespaces?: number;
  /**
   * Admission's inputs (its namespace source, version and Pod Security action): with them, a pod
   * metadata calls missing a template is decided again on its workload's pod template, so a
   * template a rule leaves out is `left-out`, never `missing` (pod-template-decisions.ts).
   */
  readonly decide?: Omit<DecisionInputs, 'templates'>;
}

interface PodMetadataObject {
  metadata?: ListedMetadata;
}

/**
 * A pod as kept: plain strings and one shared owner object, no maps (a Map or a dictionary-mode
 * object per pod would cost more than the rest together). Decoded for judging only.
 */
interface StoredPod {
  readonly namespace: string;
  readonly name: string;
  /** Its own labels among those judging reads: `key=value` joined by a NUL (neither holds one). */
  readonly labels: string;
  /** Its ledger as template → hash: `name=hash` joined by a NUL. */
  readonly ledger: string;
  readonly requested: string | undefined;
  readonly mirror: boolean;
  readonly owner: ObjectReference | undefined;
  /** What buckets it for a candidate's share (templates/rollout.ts). */
  readonly workload: PodFacts['workload'];
  /** Its creationTimestamp in ms (NaN when absent). */
  readonly created: number;
  /** Its `controller-revision-hash` label (a StatefulSet's or DaemonSet's template revision), cut. */
  readonly revision: string | undefined;
  /** The pod's state, and each template's as `name=state` joined by `,` (names of templates in force, or `(other)`). */
  state: PodState;
  states: string;
}

/** `[[k, v], …]` → `k=v\0k=v`, and back. */
function pack(entries: Iterable<readonly [string, string]>): string {
  return [...entries].map(([k, v]) => `${k}=${v}`).join('\0');
}
function unpack(text: string): [string, string][] {
  return text ? text.split('\0').map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)]) : [];
}

/** The labels of `keys` a pod has, each value cut to a label value's length. */
function pickLabels(raw: unknown, keys: Iterable<string>): Record<string, string> {
  const labels: Record<string, string> = Object.create(null);
  if (raw && typeof raw === 'object')
    for (const key of keys) {
      const value = (raw as Record<string, unknown>)[key];
      if (Object.hasOwn(raw, key) && typeof value === 'string') labels[key] = value.slice(0, 63);
    }
  return labels;
}

const other = '(other)';
/** Bounds of what is kept per pod. */
const maxLedgerBytes = 64 * 1024;
const maxLedgerTemplates = 16;
const maxRequestLength = 1024;
/** Missing pods no audit saw created, announced at most this many at a start (each reads its owners). */
const maxUnseenAnnounced = 500;

/** The per-template states of a verdict, as stored: only names of templates in force become labels. */
function encode(verdict: PodVerdict, set: TemplateSet): string {
  // A pod counts once per series: many retired names are one "(other)".
  return [...new Set(verdict.templates.map((t) => `${set.byName.has(t.name) ? t.name : other}=${t.state}`))].join(',');
}

export class PodAuditor extends EventEmitter {
  private readonly pods = new Map<string, StoredPod>();
  private readonly counts = new Map<string, number>();
  private readonly gaugeNamespaces = new Set<string>();
  private readonly reflector: Reflector<PodMetadataObject>;
  private listing: Map<string, StoredPod> | undefined;
  /** The label keys kept: those the templates read; when they change, the pods are listed again. */
  private labelKeys: ReadonlySet<string>;
  /** Pods whose ledger was too large to read (counted as having none). */
  oversized = 0;
  private synced = false;
  private readonly maxNamespaces: number;
  private readonly decisions: PodTemplateDecisions | undefined;

  constructor(private readonly options: PodAuditorOptions) {
    super();
    this.maxNamespaces = options.maxNamespaces ?? 500;
    this.decisions = options.decide && new PodTemplateDecisions(options.kubeConfig, { ...options.decide, templates: options.templates });
    this.labelKeys = judgedLabelKeys(options.templates());
    this.reflector = new Reflector<PodMetadataObject>({
      // Small pages: each pod's metadata can be large.
      listPageSize: 100,
      ...options,
      path: apiPath(apiResources.pods),
      what: 'pod',
      accept: metadataOnly,
      replace: () => {},
      listInto: {
        begin: () => (this.listing = new Map()),
        page: (items) => {
          for (const item of items) {
            const pod = this.read(item);
            if (pod) this.listing!.set(`${pod.namespace}/${pod.name}`, pod);
          }
        },
        end: () => {
          this.pods.clear();
          for (const [key, pod] of this.listing!) this.pods.set(key, pod);
          this.listing = undefined;
          const first = !this.synced && !this.unseenAnnounced;
          this.synced = true;
          this.recount();
          if (first) this.announceUnseen();
        },
      },
      apply: (type, object) => {
        const name = object.metadata?.name;
        const namespace = object.metadata?.namespace;
        if (typeof name !== 'string' || typeof namespace !== 'string') return;
        const key = `${namespace}/${name}`;
        const before = this.pods.get(key);
        if (before) this.count(before, -1);
        if (type === 'DELETED') {
          this.pods.delete(key);
          return;
        }
        const pod = this.read(object)!;
        this.pods.set(key, pod);
        this.count(pod, +1);
        if (pod.state === 'missing' || pod.state === 'stale') this.confirm(key, pod, before?.state !== 'missing');
      },
    });
    for (const event of ['reload', 'rejected', 'change']) this.reflector.on(event, (...args: unknown[]) => this.emit(event, ...args));
  }

  start(): void {
    this.reflector.start();
  }

  /** Stops watching and removes every series it set (another replica now audits). */
  stop(): void {
    this.unseenAnnounced = false;
    this.reflector.stop();
    for (const key of this.counts.keys()) this.options.gauge.remove(labelsOf(key));
    this.counts.clear();
    this.gaugeNamespaces.clear();
    this.pods.clear();
    this.ownersRead.clear();
    this.decisions?.clear();
    this.synced = false;
  }

  /**
   * The templates changed: judge every pod again — or, when the templates now read label keys
   * that were not kept, list the pods again.
   */
  templatesChanged(): void {
    const keys = judgedLabelKeys(this.options.templates());
    if ([...keys].some((k) => !this.labelKeys.has(k))) {
      this.labelKeys = keys;
      void this.reflector.relistNow();
      return;
    }
    this.labelKeys = keys;
    this.recount();
  }

  /** Judges every pod again: a namespace's labels changed. */
  recount(): void {
    for (const key of this.counts.keys()) this.options.gauge.remove(labelsOf(key));
    this.counts.clear();
    this.gaugeNamespaces.clear();
    // The templates, a namespace or the version may have changed: every decision is made again.
    this.decisions?.clear();
    for (const [key, pod] of this.pods) {
      this.judgeInto(pod);
      this.count(pod, +1);
      if (pod.state === 'missing' || pod.state === 'stale') this.confirm(key, pod, false);
    }
    this.emit('recount', this.pods.size);
  }

  /**
   * A pod metadata calls `missing` or `stale`: decided again on its workload's pod template, as
   * admission decides a new pod of it. Its state and the gauge follow; `newly` pods still
   * missing then get their Event. Without admission's inputs, metadata's verdict stands.
   */
  private confirm(key: string, pod: StoredPod, newly: boolean): void {
    if (!this.decisions) {
      if (newly && pod.state === 'missing') this.missing(pod);
      return;
    }
    const ref = { namespace: pod.namespace, name: pod.name, ...(pod.owner ? { owner: pod.owner } : {}), ...(pod.revision ? { revision: pod.revision } : {}) };
    const judged = pod.state;
    void this.decisions.decisionsFor(ref).then((found) => {
      // Judged again meanwhile (an update, a recount) or gone: that judgement stands.
      if (this.pods.get(key) !== pod || pod.state !== judged) return;
      if (found) {
        const verdict = refineVerdict(this.verdictOf(pod), found);
        if (verdict.state !== pod.state || this.encode(verdict) !== pod.states) {
          this.count(pod, -1);
          pod.state = verdict.state;
          pod.states = this.encode(verdict);
          this.count(pod, +1);
        }
      }
      if (newly && pod.state === 'missing') this.missing(pod);
      this.emit('confirmed', key, pod.state);
    });
  }

  status(): { pods: number; synced: boolean; states: Partial<Record<PodState, number>>; oversizedLedgers: number } {
    const states: Partial<Record<PodState, number>> = {};
    for (const pod of this.pods.values()) states[pod.state] = (states[pod.state] ?? 0) + 1;
    return { pods: this.pods.size, synced: this.synced, states, oversizedLedgers: this.oversized };
  }

  /** Pods per template and state, over every namespace (what a SidecarTemplate's status shows). */
  templateCounts(): Map<string, Partial<Record<TemplateState, number>>> {
    const out = new Map<string, Partial<Record<TemplateState, number>>>();
    for (const [key, value] of this.counts) {
      const { template, state } = labelsOf(key);
      const counts = out.get(template) ?? out.set(template, {}).get(template)!;
      counts[state as TemplateState] = (counts[state as TemplateState] ?? 0) + value;
    }
    return out;
  }

  private read(object: PodMetadataObject): StoredPod | undefined {
    const metadata = object.metadata;
    if (typeof metadata?.name !== 'string' || typeof metadata.namespace !== 'string') return undefined;
    const annotation = (key: string) => {
      const value = metadata.annotations?.[key];
      return typeof value === 'string' ? value : undefined;
    };
    let status = annotation(AnnotationKeys.status);
    if (status !== undefined && status.length > maxLedgerBytes) {
      this.oversized++;
      status = undefined;
    }
    // Only the label keys judging reads, and the annotations of ours, into the facts (pipeline/audit.ts).
    const labels = pickLabels(metadata.labels, this.labelKeys);
    const facts = podFacts({
      namespace: metadata.namespace,
      name: metadata.name,
      labels,
      annotations: {
        ...(status !== undefined ? { [AnnotationKeys.status]: status } : {}),
        ...(annotation(AnnotationKeys.request) !== undefined
          ? { [AnnotationKeys.request]: annotation(AnnotationKeys.request)!.slice(0, maxRequestLength) }
          : {}),
        ...(annotation(AnnotationKeys.mirror) !== undefined ? { [AnnotationKeys.mirror]: '' } : {}),
      },
    });
    // At most 16 ledger entries, each name a template name could be (a DNS-1123 label: no `=`, no NUL).
    const ledger: [string, string][] = [];
    for (const [name, hash] of facts.ledgerHashes) {
      if (ledger.length >= maxLedgerTemplates) break;
      if (/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/.test(name)) ledger.push([name, hash.slice(0, 64).replace(/\0/g, '')]);
    }
    const pod: StoredPod = {
      namespace: facts.namespace,
      labels: pack(Object.entries(facts.ownLabels).map(([k, v]) => [k, v.replace(/\0/g, '')] as const)),
      ledger: pack(ledger),
      requested: facts.requested,
      mirror: facts.mirror,
      name: metadata.name.slice(0, 253),
      created: typeof metadata.creationTimestamp === 'string' ? Date.parse(metadata.creationTimestamp) : NaN,
      owner: controllingOwner(metadata.ownerReferences, metadata.namespace),
      // From all its labels: those judging reads may not yet hold a Deployment's pod-template-hash.
      workload: workloadOfPod({
        namespace: metadata.namespace,
        name: metadata.name,
        labels: pickLabels(metadata.labels, rolloutLabelKeys),
        annotations: {},
        ...(typeof metadata.generateName === 'string' ? { generateName: metadata.generateName } : {}),
        ownerReferences: metadata.ownerReferences,
      }),
      revision: typeof metadata.labels?.['controller-revision-hash'] === 'string' ? metadata.labels['controller-revision-hash'].slice(0, 64) : undefined,
      state: 'not-selected',
      states: '',
    };
    this.judgeInto(pod);
    return pod;
  }

  /** Judges the pod from what is kept of its metadata (pipeline/audit.ts). */
  private verdictOf(pod: StoredPod): PodVerdict {
    const labels = this.options.namespaceLabels(pod.namespace) ?? { [metadataNameLabel]: pod.namespace };
    const ownLabels: Record<string, string> = Object.create(null);
    for (const [k, v] of unpack(pod.labels)) ownLabels[k] = v;
    const facts: PodFacts = {
      namespace: pod.namespace,
      ownLabels,
      requested: pod.requested,
      mirror: pod.mirror,
      ledgerHashes: new Map(unpack(pod.ledger)),
      workload: pod.workload,
    };
    return judgePod(facts, labels, this.options.templates());
  }

  private encode(verdict: PodVerdict): string {
    return encode(verdict, this.options.templates());
  }

  /** Judges the pod and stores the verdict on it. */
  private judgeInto(pod: StoredPod): void {
    const verdict = this.verdictOf(pod);
    pod.state = verdict.state;
    pod.states = this.encode(verdict);
  }

  /** Adds (+1) or takes (-1) the pod from the counts and the gauge. */
  private count(pod: StoredPod, delta: number): void {
    if (!pod.states) return;
    const namespace = this.gaugeNamespace(pod.namespace);
    for (const entry of pod.states.split(',')) {
      const at = entry.indexOf('=');
      const key = `${namespace}\0${entry.slice(0, at)}\0${entry.slice(at + 1)}`;
      const value = (this.counts.get(key) ?? 0) + delta;
      if (value > 0) {
        this.counts.set(key, value);
        this.options.gauge.set(labelsOf(key), value);
      } else {
        this.counts.delete(key);
        this.options.gauge.remove(labelsOf(key));
      }
    }
  }

  /** The namespace label of a series: its own, unless too many namespaces already have series. */
  private gaugeNamespace(namespace: string): string {
    if (this.gaugeNamespaces.has(namespace)) return namespace;
    if (this.gaugeNamespaces.size >= this.maxNamespaces) return other;
    this.gaugeNamespaces.add(namespace);
    return namespace;
  }

  /** Whether the first list since start has announced the missing pods no audit saw created. */
  private unseenAnnounced = false;

  /**
   * The missing pods of the first list that no audit saw being created (created after the last
   * auditor's last renewal): each gets its Event, as a pod seen going missing does (bounded).
   */
  private announceUnseen(): void {
    this.unseenAnnounced = true;
    const renewed = this.options.unseenSince?.()?.getTime();
    if (renewed === undefined || Number.isNaN(renewed)) return;
    // A creationTimestamp has whole seconds, a renewal microseconds: a pod created in the second
    // of the last renewal may have come after it (a leader that renewed once more while it
    // stopped), so that second counts as unseen. At worst a pod is announced twice, never not at all.
    const since = Math.floor(renewed / 1000) * 1000 - 1;
    let announced = 0;
    for (const [key, pod] of this.pods) {
      if (announced >= maxUnseenAnnounced) break;
      if (pod.state !== 'missing' || !(pod.created > since)) continue;
      announced++;
      this.confirm(key, pod, true);
    }
  }

  private missing(pod: StoredPod): void {
    if (!this.synced || !this.options.onMissing) return;
    const lacking = pod.states
      .split(',')
      .filter((entry) => entry.endsWith('=missing'))
      .map((entry) => entry.slice(0, entry.indexOf('=')));
    void this.workloadOf(pod).then((regarding) => {
      const fix = fixFor(pod.namespace, regarding.kind === 'Namespace' ? { kind: 'Pod', name: pod.name } : regarding);
      this.options.onMissing?.({ regarding, type: 'Warning', reason: 'SidecarsMissing', note: `pod ${pod.name} lacks ${lacking.join(', ')}; ${fix}` });
    });
  }

  /** The owners read for Events (ReplicaSets, Jobs: whose own owner is the workload), by ownerKey; bounded, oldest first out. */
  private readonly ownersRead = new Map<string, OwnerFacts>();

  /**
   * The workload to tell (resolveWorkload): a ReplicaSet's Deployment or a Job's CronJob (one
   * metadata-only GET per owner, remembered), else the pod's owner, else its namespace.
   */
  private async workloadOf(pod: StoredPod): Promise<ObjectReference> {
    const owner = pod.owner;
    if (!owner) return namespaceReference(pod.namespace);
    const kind = workloadKinds.get(owner.kind);
    const key = ownerKey(owner);
    if (kind?.ownedBy && kind.apiVersion === owner.apiVersion && !this.ownersRead.has(key)) {
      let facts: OwnerFacts = {};
      try {
        const read = (await getJson(this.options.kubeConfig, objectPath(kind, owner.namespace, owner.name), 5000, metadataOnly)) as { metadata?: unknown };
        if (isJsonObject(read.metadata)) facts = ownerFactsOf(read.metadata, owner.namespace);
      } catch {
        // Gone or unreadable: the owner itself is told.
      }
      if (this.ownersRead.size >= 1000) this.ownersRead.delete(this.ownersRead.keys().next().value as string);
      this.ownersRead.set(key, facts);
    }
    return workloadOfOwner(owner, readOwnersLookup(this.ownersRead, noKinds)) ?? namespaceReference(pod.namespace);
  }
}

/** The Events' reads are single GETs: no kind is read in full, so no owner is known absent. */
const noKinds: ReadonlySet<string> = new Set();

function labelsOf(key: string): { namespace: string; template: string; state: string } {
  const [namespace, template, state] = key.split('\0') as [string, string, string];
  return { namespace, template, state };
}

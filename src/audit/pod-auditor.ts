/**
 * The auditor inside the server: every pod of the cluster judged continuously from a
 * metadata-only list and watch (pipeline/audit.ts decides, exactly as `sidecar-injector audit`
 * does), exported as `sidecar_injector_pods{namespace,template,state}`, with a Warning Event on
 * the owner of a pod that goes `missing`. Only the leader runs it (kube-api/lease.ts).
 *
 * Memory (measured by `npm run bench:audit`): per pod only what the judgement reads — its
 * labels (the parsed object itself: pods of one workload share its shape), the three
 * annotations of ours (ledger, templates request, mirror marker) as plain strings, its
 * controlling owner (one object per owner, shared by its pods) — and its verdict as one string.
 */
import { EventEmitter } from 'node:events';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { AnnotationKeys } from '../k8s/keys.js';
import type { Labels } from '../k8s/selector.js';
import type { ObjectReference } from '../k8s/object-reference.js';
import { metadataOnly } from '../kube-api/request.js';
import { Reflector, type ReflectorTuning } from '../kube-api/reflector.js';
import { auditPod, controllerOf, fixFor, type PodState, type PodVerdict } from '../pipeline/audit.js';
import type { AdmissionEvent } from '../pipeline/admission-events.js';
import type { TemplateSet } from '../templates/set.js';

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
  /** Namespaces with series of their own at most; the rest are counted under `(other)`. @default 500 */
  readonly maxNamespaces?: number;
}

interface PodMetadataObject {
  metadata?: { name?: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string>; ownerReferences?: unknown };
}

interface StoredPod {
  readonly namespace: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly status: string | undefined;
  readonly request: string | undefined;
  readonly mirror: boolean;
  readonly owner: ObjectReference | undefined;
  /** The pod's state, and each template's as `name=state` joined by `,` (template names have neither). */
  state: PodState;
  states: string;
}

const other = '(other)';

/** The per-template states of a verdict, as stored. */
function encode(verdict: PodVerdict): string {
  return verdict.templates.map((t) => `${t.name}=${t.state}`).join(',');
}

export class PodAuditor extends EventEmitter {
  private readonly pods = new Map<string, StoredPod>();
  private readonly counts = new Map<string, number>();
  private readonly gaugeNamespaces = new Set<string>();
  private readonly reflector: Reflector<PodMetadataObject>;
  private listing: Map<string, StoredPod> | undefined;
  private synced = false;
  private readonly maxNamespaces: number;

  constructor(private readonly options: PodAuditorOptions) {
    super();
    this.maxNamespaces = options.maxNamespaces ?? 500;
    this.reflector = new Reflector<PodMetadataObject>({
      ...options,
      path: '/api/v1/pods',
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
          this.synced = true;
          this.recount();
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
        if (pod.state === 'missing' && before?.state !== 'missing') this.missing(pod);
      },
    });
    for (const event of ['reload', 'rejected', 'change']) this.reflector.on(event, (...args: unknown[]) => this.emit(event, ...args));
  }

  start(): void {
    this.reflector.start();
  }

  /** Stops watching and removes every series it set (another replica now audits). */
  stop(): void {
    this.reflector.stop();
    for (const key of this.counts.keys()) this.options.gauge.remove(labelsOf(key));
    this.counts.clear();
    this.gaugeNamespaces.clear();
    this.pods.clear();
    this.owners.clear();
    this.synced = false;
  }

  /** Judges every pod again: the templates or a namespace's labels changed. */
  recount(): void {
    for (const key of this.counts.keys()) this.options.gauge.remove(labelsOf(key));
    this.counts.clear();
    this.gaugeNamespaces.clear();
    for (const pod of this.pods.values()) {
      this.judgeInto(pod);
      this.count(pod, +1);
    }
    this.emit('recount', this.pods.size);
  }

  status(): { pods: number; synced: boolean; states: Partial<Record<PodState, number>> } {
    const states: Partial<Record<PodState, number>> = {};
    for (const pod of this.pods.values()) states[pod.state] = (states[pod.state] ?? 0) + 1;
    return { pods: this.pods.size, synced: this.synced, states };
  }

  /** Owners, one object each, shared by their pods. */
  private readonly owners = new Map<string, ObjectReference>();

  private read(object: PodMetadataObject): StoredPod | undefined {
    const metadata = object.metadata;
    if (typeof metadata?.name !== 'string' || typeof metadata.namespace !== 'string') return undefined;
    // The parsed labels object itself, when it is a map of strings (it is, from the API server).
    const raw = metadata.labels;
    const labels = raw && typeof raw === 'object' && Object.values(raw).every((v) => typeof v === 'string') ? raw : {};
    const annotation = (key: string) => {
      const value = metadata.annotations?.[key];
      return typeof value === 'string' ? value : undefined;
    };
    const pod: StoredPod = {
      namespace: metadata.namespace,
      name: metadata.name,
      labels,
      status: annotation(AnnotationKeys.status),
      request: annotation(AnnotationKeys.request),
      mirror: annotation(AnnotationKeys.mirror) !== undefined,
      owner: this.ownerOf(metadata.namespace, metadata.ownerReferences),
      state: 'not-selected',
      states: '',
    };
    this.judgeInto(pod);
    return pod;
  }

  private ownerOf(namespace: string, references: unknown): ObjectReference | undefined {
    const controller = controllerOf(references);
    if (!controller) return undefined;
    const ref = (references as { apiVersion?: unknown; uid?: unknown; controller?: unknown }[]).find((r) => r?.controller === true);
    if (typeof ref?.apiVersion !== 'string') return undefined;
    const uid = typeof ref.uid === 'string' ? ref.uid : '';
    const key = `${namespace}\0${ref.apiVersion}\0${controller.kind}\0${controller.name}\0${uid}`;
    let owner = this.owners.get(key);
    if (!owner)
      this.owners.set(key, (owner = { apiVersion: ref.apiVersion, kind: controller.kind, namespace, name: controller.name, ...(uid ? { uid } : {}) }));
    return owner;
  }

  /** Judges the pod (pipeline/audit.ts) and stores the verdict on it. */
  private judgeInto(pod: StoredPod): PodVerdict {
    const labels = this.options.namespaceLabels(pod.namespace) ?? { 'kubernetes.io/metadata.name': pod.namespace };
    const annotations: Record<string, string> = Object.create(null);
    if (pod.status !== undefined) annotations[AnnotationKeys.status] = pod.status;
    if (pod.request !== undefined) annotations[AnnotationKeys.request] = pod.request;
    if (pod.mirror) annotations[AnnotationKeys.mirror] = '';
    const verdict = auditPod({ namespace: pod.namespace, name: pod.name, labels: pod.labels, annotations }, labels, this.options.templates());
    pod.state = verdict.state;
    pod.states = encode(verdict);
    return verdict;
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

  private missing(pod: StoredPod): void {
    if (!this.synced || !this.options.onMissing) return;
    const lacking = pod.states
      .split(',')
      .filter((entry) => entry.endsWith('=missing'))
      .map((entry) => entry.slice(0, entry.indexOf('=')));
    const regarding = pod.owner ?? { apiVersion: 'v1', kind: 'Namespace', namespace: pod.namespace, name: pod.namespace };
    const fix = pod.owner ? fixFor(pod.namespace, pod.owner) : fixFor(pod.namespace, { kind: 'Pod', name: pod.name });
    this.options.onMissing({ regarding, type: 'Warning', reason: 'SidecarsMissing', note: `pod ${pod.name} lacks ${lacking.join(', ')}; ${fix}` });
  }
}

function labelsOf(key: string): { namespace: string; template: string; state: string } {
  const [namespace, template, state] = key.split('\0') as [string, string, string];
  return { namespace, template, state };
}

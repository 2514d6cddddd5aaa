/**
 * Admission's own decision for a new pod of a workload, for both auditors: a pod's metadata
 * cannot show its operating system, security context or restart policy, so where metadata says
 * a template is missing, the workload's pod template (the pod's ReplicaSet, StatefulSet,
 * DaemonSet, Job or ReplicationController; the pod itself without such an owner) is read and
 * decided by `admitPod`, with the same namespace source, Kubernetes version and Pod Security
 * action as admission. Answers are remembered per owner and revision, bounded in count.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { admitPod } from '../pipeline/admit.js';
import type { TemplateDecision } from '../pipeline/decision.js';
import type { PodSecurityAction } from '../pipeline/pod-security-fit.js';
import type { NamespaceLabelSource } from '../namespaces/source.js';
import type { TemplateSet } from '../templates/set.js';
import type { VersionDecision } from '../k8s/version.js';
import type { ObjectReference } from '../k8s/object-reference.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { podFromTemplate, podTemplateOf } from '../k8s/workloads.js';
import { getJson } from '../kube-api/request.js';
import { isWorkloadKind, workloadPath } from '../k8s/workloads.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';

/** What deciding needs: admission's own inputs. */
export interface DecisionInputs {
  readonly templates: () => TemplateSet;
  readonly namespaces: NamespaceLabelSource;
  readonly kubernetesVersion?: () => VersionDecision | undefined;
  /** @default 'skip' */
  readonly podSecurity?: PodSecurityAction;
}

/** The pod to decide for: where it lives, its controlling owner, and its controller's revision label if any. */
export interface AuditedPodRef {
  readonly namespace: string;
  readonly name: string;
  readonly owner?: ObjectReference;
  /** `controller-revision-hash` (StatefulSets, DaemonSets): their template changes in place. */
  readonly revision?: string;
}

export type Decisions = ReadonlyMap<string, TemplateDecision>;

/** Reads of the API server under way at once, at most: a cluster of thousands of workloads is read a few at a time. */
const maxInFlight = 8;
/** Decisions waiting for a read, at most; beyond, a pod keeps the verdict of its metadata until asked again. */
const maxWaiting = 10_000;

export class PodTemplateDecisions {
  private readonly remembered = new Map<string, Promise<Decisions | undefined>>();
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];
  /** Bumped by clear(): work queued before it is dropped when its turn comes, never done twice over. */
  private generation = 0;

  constructor(
    private readonly kubeConfig: KubeConfig,
    private readonly inputs: DecisionInputs,
    private readonly maxEntries = 5000,
    private readonly timeoutMs = 10_000,
  ) {}

  /** Forgets every answer: the templates, a namespace or the version changed. */
  clear(): void {
    this.remembered.clear();
    this.generation++;
  }

  /**
   * The decision per template for a new pod like `pod`; undefined when it cannot be known (the
   * owner is gone or unreadable, has no pod template, or the pod cannot be decided at all).
   */
  decisionsFor(pod: AuditedPodRef): Promise<Decisions | undefined> {
    const owner = pod.owner && isWorkloadKind(pod.owner.kind) ? pod.owner : undefined;
    const key = owner ? `${pod.namespace}\0${owner.kind}\0${owner.name}\0${owner.uid ?? ''}\0${pod.revision ?? ''}` : `${pod.namespace}\0Pod\0${pod.name}`;
    let answer = this.remembered.get(key);
    if (answer) {
      // Least recently used goes first: a hit moves to the end.
      this.remembered.delete(key);
      this.remembered.set(key, answer);
      return answer;
    }
    if (this.waiting.length >= maxWaiting) return Promise.resolve(undefined);
    const generation = this.generation;
    answer = this.paced(() => (generation === this.generation ? this.decide(pod, owner) : Promise.resolve(undefined))).catch(() => undefined);
    if (this.remembered.size >= this.maxEntries) this.remembered.delete(this.remembered.keys().next().value as string);
    this.remembered.set(key, answer);
    return answer;
  }

  private async paced<T>(work: () => Promise<T>): Promise<T> {
    if (this.inFlight >= maxInFlight) await new Promise<void>((resolve) => this.waiting.push(resolve));
    this.inFlight++;
    try {
      return await work();
    } finally {
      this.inFlight--;
      this.waiting.shift()?.();
    }
  }

  private async decide(pod: AuditedPodRef, owner: ObjectReference | undefined): Promise<Decisions | undefined> {
    let subject: JsonObject;
    if (owner) {
      const object = await getJson(this.kubeConfig, workloadPath(owner.kind, pod.namespace, owner.name)!, this.timeoutMs);
      if (!isJsonObject(object) || !isJsonObject(object.metadata)) return undefined;
      // The owner a pod names is its claim: it counts only with that uid.
      if (owner.uid && object.metadata.uid !== owner.uid) return undefined;
      const found = podTemplateOf(owner.kind, object);
      if (!found) return undefined;
      subject = podFromTemplate(found.template, {
        name: owner.name,
        namespace: pod.namespace,
        owner: { apiVersion: owner.apiVersion, kind: owner.kind, name: owner.name, ...(owner.uid ? { uid: owner.uid } : {}), controller: true },
      });
    } else {
      const object = await getJson(this.kubeConfig, apiPath(apiResources.pods, { namespace: pod.namespace, name: pod.name }), this.timeoutMs);
      if (!isJsonObject(object)) return undefined;
      subject = object;
    }
    const outcome = await admitPod({ pod: subject, namespace: pod.namespace, name: '' }, this.inputs);
    if (outcome.decisions.length === 0) return undefined;
    return new Map(outcome.decisions.map((d) => [d.template, d]));
  }
}

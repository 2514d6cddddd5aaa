/**
 * The in-place updater, a leader-only runnable (`--in-place-updates on`): every round it lists the
 * pods of the namespaces labelled for it and gives each one that runs a template at another
 * revision than the one it should carry, where in-place.ts allows it, the new sidecar resources by
 * a resize (pods/resize, where the API server serves it) and, once the kubelet runs them, the new
 * images and the ledger by one update of the pod — each write with the pod's resourceVersion, so
 * that a pod changed meanwhile is a 409 and judged again next round. Brakes: one pod of a workload at a time (a workload with a pod
 * whose sidecars are not ready waits, unless the pod to update is that one: a rollback must reach
 * the pods a broken image broke); at most `maxUnsettled` pods it updated or resized whose sidecars
 * have not yet restarted (or taken up their resources) and become ready, across the cluster (so a broken image without a candidate to
 * halt reaches that many pods, and stops there); `maxPerRound` writes a round; a pod whose update
 * was refused is not tried again before it changes. What the injector may change in a pod is
 * bounded by the API server, not by this code: the in-place-updates component's
 * ValidatingAdmissionPolicy refuses any other update by the injector's ServiceAccount, and no pod
 * is updated while that policy or its binding cannot be read.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { KubernetesApiError } from '../errors.js';
import type { JsonObject } from '../k8s/json.js';
import type { Labels } from '../k8s/selector.js';
import { servesPodResize } from '../kube-api/discovery.js';
import { listPages, requestJson } from '../kube-api/request.js';
import { Rounds } from '../runtime/rounds.js';
import { everyRevision } from '../templates/rollout.js';
import { candidateKey, type InPlaceProgress } from '../templates/object-status.js';
import type { TemplateSet } from '../templates/set.js';
import { cut } from '../quote.js';
import { LabelKeys, LabelValues } from '../k8s/keys.js';
import { metadataOf, planBounds, planInPlace, rollsBack, sidecarsSettled, workloadMaxUnavailable, type InPlacePlan, type InPlaceSkip } from './in-place.js';

/** The ValidatingAdmissionPolicy and binding that bound the injector's pod updates (manifests/components/in-place-updates). */
export const inPlacePolicyName = 'sidecar-injector-in-place-updates';
const policyObjects = [
  { kind: 'ValidatingAdmissionPolicy', path: `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${inPlacePolicyName}` },
  { kind: 'ValidatingAdmissionPolicyBinding', path: `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/${inPlacePolicyName}` },
];

export interface InPlaceUpdaterOptions {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  readonly clock: Clock;
  /** The set in force, candidates gated (what admission serves). */
  readonly templates: () => TemplateSet;
  /** Every namespace's labels, as the namespace source holds them: the pods of those labelled for in-place updates are listed. */
  readonly namespaces: () => ReadonlyMap<string, Labels>;
  readonly metrics: { readonly inPlaceUpdates: { inc(labels: { template: string; result: string }): void } };
  /** @default 10000 */
  readonly intervalMs?: number;
  /** Pod updates (and conflicts) per round at most. @default 20 */
  readonly maxPerRound?: number;
  /** Pods updated whose sidecars have not restarted and become ready, at most, across the cluster. @default 5 */
  readonly maxUnsettled?: number;
}

/** Workloads held at once between the list and the updates: beyond it, a workload waits for a later round. */
const maxWorkloadsHeld = 2_000;
/** Pods to update held at once beyond the first of each workload (each a pod object). */
const maxPlansHeld = 2_000;
/** Workloads whose pods are counted (for a share of them, inPlaceMaxUnavailable: "N%"); one beyond counts the pods it has to update. */
const maxWorkloadsCounted = 20_000;

/** A workload in one round: its pods with sidecars not settled, and the pods to update. */
interface WorkloadRound {
  unsettled: number;
  /** Pods not settled whose every move is a rollback (rollsBack): bounded only by the round. */
  readonly rollbackPlans: InPlacePlan[];
  /** Other pods not settled: one a round, as the pods its bound allows beside them. */
  readonly unsettledPlans: InPlacePlan[];
  readonly settledPlans: InPlacePlan[];
  /** Settled pods with a write, held or not. */
  settledWritable: number;
  /** The strictest inPlaceMaxUnavailable of every pod to update seen, held or not (planBounds). */
  readonly bounds: { pods: number; percent: number };
}
/** Pods remembered as updated (until taken up) or refused (until changed). */
const maxRemembered = 10_000;

/** What /status shows of the last round. */
export interface InPlaceRound {
  readonly at: string;
  /** Pods updated in this round (new images and the ledger's revisions). */
  readonly updated: number;
  /** Pods whose sidecars were resized in this round (their update follows once the kubelet runs the new resources). */
  readonly resized: number;
  /** Whether the API server serves pods/resize (its discovery lists it). */
  readonly resizeServed?: boolean;
  /** Pods that could be updated and wait for a later round (their workload's turn, or the round's bound). */
  readonly pending: number;
  /** Workloads with a pod to update that wait for another pod's sidecars to be ready. */
  readonly waitingWorkloads: number;
  /** Templates a pod runs stale that stay so until it is recreated, by why. */
  readonly recreateNeeded: Partial<Record<InPlaceSkip, number>>;
  readonly refused: number;
  readonly failed: number;
  /** Pods updated whose sidecars have not yet restarted and become ready. */
  readonly unsettled: number;
  /** Set while no pod is updated because the policy that bounds the updates cannot be read: why. */
  readonly policyMissing?: string;
}

export class InPlaceUpdater {
  readonly name = 'in-place-updates';
  private readonly rounds: Rounds;
  private last: InPlaceRound | undefined;
  private total = 0;
  /** Pods updated toward each revision (candidateKey) since this replica began leading. */
  private readonly updatedTotal = new Map<string, number>();
  private lastProgress: ReadonlyMap<string, InPlaceProgress> = new Map();
  /** Pods this replica updated, by uid: each changed container's containerID before (settled once another one runs, ready). */
  private readonly updatedPods = new Map<string, ReadonlyMap<string, string | undefined>>();
  /** Pods whose update the API server refused, by uid: the resourceVersion refused (tried again once it changes). */
  private readonly refusedPods = new Map<string, string>();
  private policyWarned = false;

  constructor(private readonly options: InPlaceUpdaterOptions) {
    this.rounds = new Rounds({
      clock: options.clock,
      intervalMs: options.intervalMs ?? 10_000,
      pass: () => this.pass(),
      failed: (err) => options.log.error({ err: (err as Error).message }, 'in-place update round'),
    });
  }

  start(): void {
    this.rounds.start();
  }

  stop(): void {
    this.rounds.stop();
  }

  /** Asks for a round now (the templates changed). */
  round(): void {
    this.rounds.round();
  }

  /** Resolves once the round under way (if any) and the one it asked for are done (tests). */
  settled(): Promise<void> {
    return this.rounds.settled();
  }

  /** The last round's progress toward each revision (candidateKey): what the SidecarTemplate status shows. */
  progress(): ReadonlyMap<string, InPlaceProgress> {
    return this.lastProgress;
  }

  status(): { inPlaceUpdated: number; lastRound?: InPlaceRound } {
    return { inPlaceUpdated: this.total, ...(this.last ? { lastRound: this.last } : {}) };
  }

  /** Why the policy that bounds the updates cannot be relied on, or undefined when it and its binding are there. */
  private async policyProblem(): Promise<string | undefined> {
    for (const { kind, path } of policyObjects) {
      try {
        await requestJson(this.options.kubeConfig, 'GET', path, 10_000);
      } catch (err) {
        const status = err instanceof KubernetesApiError ? err.statusCode : undefined;
        return status === 404
          ? `${kind} ${inPlacePolicyName} is not installed (apply the in-place-updates component)`
          : `cannot read ${kind} ${inPlacePolicyName}: ${cut((err as Error).message, 200)}`;
      }
    }
    return undefined;
  }

  private async pass(): Promise<void> {
    const { kubeConfig, log, clock } = this.options;
    const set = this.options.templates();
    if (set.unavailable !== undefined || !everyRevision(set).some((t) => t.updateStrategy === 'inPlace')) {
      this.lastProgress = new Map();
      return;
    }
    const at = new Date(clock.now()).toISOString();
    const policyMissing = await this.policyProblem();
    if (policyMissing) {
      if (!this.policyWarned) log.warn({ why: policyMissing }, 'no pod is updated in place while the policy that bounds the updates is missing');
      this.policyWarned = true;
      this.last = { at, updated: 0, resized: 0, pending: 0, waitingWorkloads: 0, recreateNeeded: {}, refused: 0, failed: 0, unsettled: 0, policyMissing };
      this.lastProgress = new Map();
      return;
    }
    this.policyWarned = false;
    // No resize is tried while discovery cannot be read.
    const resizeServed = await servesPodResize(kubeConfig);
    // Per workload: its pods with sidecars not settled, and the pods to update — those first (an
    // update takes nothing further away: a rollback must reach the pods a broken image broke),
    // then the others as listed.
    const workloads = new Map<string, WorkloadRound>();
    const maxPerRound = this.options.maxPerRound ?? 20;
    const maxUnsettled = this.options.maxUnsettled ?? 5;
    const podsPerWorkload = new Map<string, number>();
    let plansHeld = 0;
    const recreateNeeded: Partial<Record<InPlaceSkip, number>> = {};
    let updatable = 0;
    let unsettledOfOurs = 0;
    const seen = new Set<string>();
    // Per revision a pod should carry (candidateKey): pods that get it only when recreated, and pods that can get it in place.
    const recreatePerRevision = new Map<string, number>();
    const pendingPerRevision = new Map<string, number>();
    const add = (map: Map<string, number>, key: string) => map.set(key, (map.get(key) ?? 0) + 1);
    // Only the namespaces that opted in to in-place updates are listed, one after the other, page by page.
    const optedIn = [...this.options.namespaces()].filter(([, labels]) => labels[LabelKeys.namespaceInPlace] === LabelValues.enabled);
    for (const [namespace, labels] of optedIn) {
      if (this.rounds.isStopped) return;
      let restarted = false;
      const onPage = (pods: readonly JsonObject[]) => {
        if (restarted) return;
        for (const pod of pods) {
          const metadata = metadataOf(pod);
          if (!metadata) continue;
          const uid = typeof (pod.metadata as JsonObject).uid === 'string' ? ((pod.metadata as JsonObject).uid as string) : '';
          seen.add(uid);
          const ours = this.updatedPods.get(uid);
          const settled = sidecarsSettled(pod, ours);
          if (ours && settled) this.updatedPods.delete(uid);
          else if (ours) unsettledOfOurs++;
          const plan = planInPlace(pod, labels, set, { resize: resizeServed });
          if (!plan) continue;
          if (podsPerWorkload.has(plan.workload) || podsPerWorkload.size < maxWorkloadsCounted)
            podsPerWorkload.set(plan.workload, (podsPerWorkload.get(plan.workload) ?? 0) + 1);
          for (const { template, to, why } of plan.skipped) {
            recreateNeeded[why] = (recreateNeeded[why] ?? 0) + 1;
            add(recreatePerRevision, candidateKey(template, to));
          }
          for (const move of plan.moves) add(pendingPerRevision, candidateKey(move.template, move.to));
          const write = plan.resize ?? plan.updated;
          if (settled && !write) continue;
          let workload = workloads.get(plan.workload);
          if (!workload) {
            if (workloads.size >= maxWorkloadsHeld) continue;
            workloads.set(
              plan.workload,
              (workload = {
                unsettled: 0,
                rollbackPlans: [],
                unsettledPlans: [],
                settledPlans: [],
                settledWritable: 0,
                bounds: { pods: Infinity, percent: Infinity },
              }),
            );
          }
          if (!settled) workload.unsettled++;
          // A pod whose update was refused waits until it changes.
          if (!write || this.refusedPods.get(uid) === (pod.metadata as JsonObject).resourceVersion) continue;
          updatable++;
          const bounds = planBounds(plan, set);
          workload.bounds.pods = Math.min(workload.bounds.pods, bounds.pods);
          workload.bounds.percent = Math.min(workload.bounds.percent, bounds.percent);
          if (settled) workload.settledWritable++;
          // No more pods of a workload than a round could write to it; beyond the first of each, a bound across workloads.
          const held = workload.rollbackPlans.length + workload.unsettledPlans.length + workload.settledPlans.length;
          if (held > 0 && plansHeld >= maxPlansHeld) continue;
          const list = settled ? workload.settledPlans : rollsBack(plan, set) ? workload.rollbackPlans : workload.unsettledPlans;
          const cap = settled ? Math.min(maxPerRound, workload.bounds.pods) : list === workload.unsettledPlans ? 1 : maxPerRound;
          if (list.length >= cap) continue;
          list.push(plan);
          plansHeld++;
        }
      };
      // An expired continue token would list the namespace again: the round is dropped, and a new one starts over.
      await listPages<JsonObject>(
        kubeConfig,
        `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
        { stopped: () => this.rounds.isStopped || restarted, onRestart: () => (restarted = true) },
        onPage,
      );
      if (restarted) {
        this.rounds.round();
        return;
      }
    }
    // Pods gone are forgotten.
    for (const uid of this.updatedPods.keys()) if (!seen.has(uid)) this.updatedPods.delete(uid);
    for (const uid of this.refusedPods.keys()) if (!seen.has(uid)) this.refusedPods.delete(uid);

    const progress = new Map<string, { updated: number; pending: number; waitingWorkloads: number; recreateNeeded: number; refused: number; failed: number }>();
    const toward = (key: string) => {
      let entry = progress.get(key);
      if (!entry) progress.set(key, (entry = { updated: 0, pending: 0, waitingWorkloads: 0, recreateNeeded: 0, refused: 0, failed: 0 }));
      return entry;
    };
    for (const [key, count] of recreatePerRevision) toward(key).recreateNeeded = count;
    for (const [key, count] of pendingPerRevision) toward(key).pending = count;
    const keysOf = (plan: InPlacePlan) => new Set(plan.moves.map((m) => candidateKey(m.template, m.to)));
    let updated = 0;
    let resized = 0;
    let refused = 0;
    let failed = 0;
    let writes = 0;
    /** Sends the plan's write (a resize first, else the update): true when the API server took it. */
    const write = async (plan: InPlacePlan): Promise<boolean> => {
      // New resources first, through pods/resize; the images and the ledger once the kubelet runs them.
      const resizing = plan.resize !== undefined;
      const body = (plan.resize ?? plan.updated)!;
      const metadata = body.metadata as { namespace: string; name: string; uid?: string; resourceVersion?: string };
      const path = `/api/v1/namespaces/${encodeURIComponent(metadata.namespace)}/pods/${encodeURIComponent(metadata.name)}${resizing ? '/resize' : ''}`;
      const count = (result: 'updated' | 'resized' | 'conflict' | 'refused' | 'failed') => {
        for (const move of plan.moves) this.options.metrics.inPlaceUpdates.inc({ template: move.template, result });
        for (const key of keysOf(plan)) {
          const entry = toward(key);
          if (result === 'updated') {
            entry.updated++;
            entry.pending--;
            this.updatedTotal.set(key, (this.updatedTotal.get(key) ?? 0) + 1);
          } else if (result === 'refused' || result === 'failed') entry[result]++;
        }
      };
      try {
        // The object as listed, with its resourceVersion: a pod changed since is a 409.
        await requestJson(kubeConfig, 'PUT', path, 10_000, { body });
      } catch (err) {
        if (err instanceof KubernetesApiError && err.statusCode === 409) {
          count('conflict');
          return false;
        }
        // A refusal (403, 422: the in-place policy, a webhook, pod validation) is the cluster's word:
        // logged and counted, and the pod is not tried again before it changes.
        const refusal = err instanceof KubernetesApiError && (err.statusCode === 403 || err.statusCode === 422 || err.statusCode === 400);
        if (refusal) {
          refused++;
          if (metadata.uid && metadata.resourceVersion && this.refusedPods.size < maxRemembered) this.refusedPods.set(metadata.uid, metadata.resourceVersion);
        } else failed++;
        count(refusal ? 'refused' : 'failed');
        const detail = err instanceof KubernetesApiError ? err.detail : undefined;
        log.warn(
          { pod: `${metadata.namespace}/${metadata.name}`, err: cut((err as Error).message, 200), ...(detail ? { detail: cut(detail, 500) } : {}) },
          'in-place update not made',
        );
        return false;
      }
      if (resizing) resized++;
      else {
        updated++;
        this.total++;
      }
      count(resizing ? 'resized' : 'updated');
      if (metadata.uid && (this.updatedPods.has(metadata.uid) || this.updatedPods.size < maxRemembered)) {
        if (!this.updatedPods.has(metadata.uid)) unsettledOfOurs++;
        // A resize is taken up once the kubelet runs the new resources (sidecarsSettled); an image once another container runs.
        // After a resize, no image has changed yet: nothing waits for another container.
        this.updatedPods.set(
          metadata.uid,
          resizing ? new Map() : new Map(plan.moves.flatMap((m) => m.images.map((i) => [i.container, i.containerID] as const))),
        );
      }
      log.info(
        { pod: `${metadata.namespace}/${metadata.name}`, moves: plan.moves },
        resizing ? 'sidecar resources resized in place' : 'sidecar images and revisions updated in place',
      );
      return true;
    };
    let waitingWorkloads = 0;
    const turns = [...workloads].map(([key, workload]) => {
      const pods = podsPerWorkload.get(key) ?? workload.rollbackPlans.length + workload.unsettledPlans.length + workload.settledPlans.length;
      // At most inPlaceMaxUnavailable pods of a workload without settled sidecars (the strictest of its templates'; one unless they say more).
      const limit = workloadMaxUnavailable(workload.bounds, pods);
      return { workload, limit, unsettled: workload.unsettled, next: 0, waited: false };
    });
    let roundFull = false;
    writing: {
      // First the rollbacks of pods whose sidecars are not settled: taking a broken candidate back
      // takes nothing further away, so only the round's bound holds them (a halt reaches every
      // pod a broken image broke at once). Then, of each workload, one other pod not settled (it
      // takes nothing further away either, but what it gets is new): bounded by neither brake, as
      // the one pod its workload may always have unsettled.
      for (const { workload } of turns)
        for (const plan of [...workload.rollbackPlans, ...workload.unsettledPlans]) {
          if (this.rounds.isStopped || writes >= maxPerRound) {
            roundFull = true;
            break writing;
          }
          writes++;
          await write(plan);
        }
      // Then settled pods, one of each workload a turn (no workload takes the cluster-wide brake
      // before the others had a pod): a workload waits while its bound of pods are not settled, and
      // every one waits while maxUnsettled pods updated across the cluster are not taken up.
      for (let progressed = true; progressed;) {
        progressed = false;
        for (const turn of turns) {
          const plan = turn.workload.settledPlans[turn.next];
          if (!plan || turn.waited) continue;
          if (turn.unsettled >= turn.limit || unsettledOfOurs >= maxUnsettled) {
            turn.waited = true;
            continue;
          }
          if (this.rounds.isStopped || writes >= maxPerRound) {
            roundFull = true;
            break writing;
          }
          writes++;
          turn.next++;
          progressed = true;
          if (await write(plan)) turn.unsettled++;
        }
      }
    }
    // A workload with settled pods it could not be given for its bound or the brake waits (one the
    // round's end left out is pending, not waiting).
    for (const turn of turns) {
      if (!turn.waited && (roundFull || turn.next >= turn.workload.settledWritable)) continue;
      waitingWorkloads++;
      const plan = turn.workload.settledPlans[turn.next] ?? turn.workload.settledPlans[0];
      if (plan) for (const revision of keysOf(plan)) toward(revision).waitingWorkloads++;
    }
    // Totals only for revisions the set still has: a dropped revision's count goes with it.
    const revisions = new Set(everyRevision(set).map((t) => candidateKey(t.name, t.hash)));
    for (const key of this.updatedTotal.keys()) if (!revisions.has(key)) this.updatedTotal.delete(key);
    for (const key of this.updatedTotal.keys()) toward(key);
    this.lastProgress = new Map(
      [...progress].filter(([key]) => revisions.has(key)).map(([key, p]) => [key, { ...p, updated: this.updatedTotal.get(key) ?? 0, checkedAt: at }]),
    );
    this.last = {
      at,
      updated,
      resized,
      pending: updatable - updated,
      waitingWorkloads,
      recreateNeeded,
      refused,
      failed,
      unsettled: unsettledOfOurs,
      resizeServed,
    };
  }
}

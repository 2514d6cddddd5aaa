/**
 * The in-place updater, a leader-only runnable (`--in-place-updates on`): every round it lists the
 * pods and gives each one that runs a template at another revision than the one it should carry,
 * where in-place.ts allows it, the new sidecar images by one update of the pod — with the pod's
 * resourceVersion, so that a pod changed meanwhile is a 409 and judged again next round. One pod
 * of a workload at a time: a workload with a pod whose sidecars have not taken up their image
 * and become ready waits, and so does every workload after `maxPerRound` updates. What the
 * injector may change in a pod is bounded by the API server, not by this code: the generated
 * ValidatingAdmissionPolicy (manifests/in-place-policy.ts) refuses any other update by the
 * injector's ServiceAccount.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { KubernetesApiError } from '../errors.js';
import type { JsonObject } from '../k8s/json.js';
import type { Labels } from '../k8s/selector.js';
import { listPages, requestJson } from '../kube-api/request.js';
import { Rounds } from '../runtime/rounds.js';
import { everyRevision } from '../templates/rollout.js';
import { candidateKey, type InPlaceProgress } from '../templates/object-status.js';
import type { TemplateSet } from '../templates/set.js';
import { cut } from '../quote.js';
import { LabelKeys, LabelValues } from '../k8s/keys.js';
import { metadataOf, planInPlace, sidecarsSettled, type InPlacePlan, type InPlaceSkip } from './in-place.js';

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
  /** Pod updates per round at most. @default 20 */
  readonly maxPerRound?: number;
}

/** Workloads held at once between the list and the updates: beyond it, a workload waits for a later round. */
const maxWorkloadsHeld = 10_000;

/** What /status shows of the last round. */
export interface InPlaceRound {
  readonly at: string;
  /** Pods updated in this round. */
  readonly updated: number;
  /** Pods that could be updated and wait for a later round (their workload's turn, or the round's bound). */
  readonly pending: number;
  /** Workloads with a pod to update that wait for another pod's sidecars to be ready. */
  readonly waitingWorkloads: number;
  /** Templates a pod runs stale that stay so until it is recreated, by why. */
  readonly recreateNeeded: Partial<Record<InPlaceSkip, number>>;
  readonly refused: number;
  readonly failed: number;
}

export class InPlaceUpdater {
  readonly name = 'in-place-updates';
  private readonly rounds: Rounds;
  private last: InPlaceRound | undefined;
  private total = 0;
  /** Pods updated toward each revision (candidateKey) since this replica began leading. */
  private readonly updatedTotal = new Map<string, number>();
  private lastProgress: ReadonlyMap<string, InPlaceProgress> = new Map();

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

  private async pass(): Promise<void> {
    const { kubeConfig, log, clock } = this.options;
    const set = this.options.templates();
    if (set.unavailable !== undefined || !everyRevision(set).some((t) => t.updateStrategy === 'inPlace')) {
      this.lastProgress = new Map();
      return;
    }
    // Per workload: the pods still taking up an update (or unready), and the one pod to update —
    // one of those if it has a move (a rollback of a broken image must reach the pod it broke),
    // else the first listed.
    let workloads = new Map<string, { unsettled: Set<string>; plan?: InPlacePlan; planUnsettled: boolean }>();
    let recreateNeeded: Partial<Record<InPlaceSkip, number>> = {};
    let updatable = 0;
    // Per revision a pod should carry (candidateKey): pods that get it only when recreated, and pods that can get it in place.
    let recreatePerRevision = new Map<string, number>();
    let pendingPerRevision = new Map<string, number>();
    const forget = () => {
      workloads = new Map();
      recreateNeeded = {};
      updatable = 0;
      recreatePerRevision = new Map();
      pendingPerRevision = new Map();
    };
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
          const plan = planInPlace(pod, labels, set);
          if (!plan) continue;
          for (const { template, to, why } of plan.skipped) {
            recreateNeeded[why] = (recreateNeeded[why] ?? 0) + 1;
            add(recreatePerRevision, candidateKey(template, to));
          }
          for (const move of plan.moves) add(pendingPerRevision, candidateKey(move.template, move.to));
          const settled = sidecarsSettled(pod);
          if (settled && !plan.updated) continue;
          let workload = workloads.get(plan.workload);
          if (!workload) {
            if (workloads.size >= maxWorkloadsHeld) continue;
            workloads.set(plan.workload, (workload = { unsettled: new Set(), planUnsettled: false }));
          }
          if (!settled) workload.unsettled.add(metadata.name);
          if (!plan.updated) continue;
          updatable++;
          if (!workload.plan || (!settled && !workload.planUnsettled)) {
            workload.plan = plan;
            workload.planUnsettled = !settled;
          }
        }
      };
      // An expired continue token would list the namespace again: what it gave is forgotten with the rest, and a new round starts over.
      await listPages<JsonObject>(
        kubeConfig,
        `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
        { stopped: () => this.rounds.isStopped || restarted, onRestart: () => (restarted = true) },
        onPage,
      );
      if (restarted) {
        forget();
        this.rounds.round();
        return;
      }
    }
    const at = new Date(clock.now()).toISOString();
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
    let refused = 0;
    let failed = 0;
    const maxPerRound = this.options.maxPerRound ?? 20;
    let waitingWorkloads = 0;
    for (const { unsettled, plan, planUnsettled } of workloads.values()) {
      if (!plan) continue;
      // At most one pod of a workload without its sidecars ready: the one updated now, if it is that one.
      if (unsettled.size > (planUnsettled ? 1 : 0)) {
        waitingWorkloads++;
        for (const key of keysOf(plan)) toward(key).waitingWorkloads++;
        continue;
      }
      if (this.rounds.isStopped || updated + refused + failed >= maxPerRound) break;
      const metadata = plan.updated!.metadata as { namespace: string; name: string };
      const path = `/api/v1/namespaces/${encodeURIComponent(metadata.namespace)}/pods/${encodeURIComponent(metadata.name)}`;
      const count = (result: 'updated' | 'conflict' | 'refused' | 'failed') => {
        for (const move of plan.moves) this.options.metrics.inPlaceUpdates.inc({ template: move.template, result });
        for (const key of keysOf(plan)) {
          const entry = toward(key);
          if (result === 'updated') {
            entry.updated++;
            entry.pending--;
            this.updatedTotal.set(key, (this.updatedTotal.get(key) ?? 0) + 1);
          } else if (result !== 'conflict') entry[result]++;
        }
      };
      try {
        // The object as listed, with its resourceVersion: a pod changed since is a 409.
        await requestJson(kubeConfig, 'PUT', path, 10_000, { body: plan.updated });
        updated++;
        this.total++;
        count('updated');
        log.info({ pod: `${metadata.namespace}/${metadata.name}`, moves: plan.moves }, 'sidecar images updated in place');
      } catch (err) {
        if (err instanceof KubernetesApiError && err.statusCode === 409) {
          count('conflict');
          continue;
        }
        // A refusal (403, 422: the in-place policy, a webhook, pod validation) is the cluster's word: logged and counted, tried again next round.
        const refusal = err instanceof KubernetesApiError && (err.statusCode === 403 || err.statusCode === 422 || err.statusCode === 400);
        if (refusal) refused++;
        else failed++;
        count(refusal ? 'refused' : 'failed');
        const detail = err instanceof KubernetesApiError ? err.detail : undefined;
        log.warn(
          { pod: `${metadata.namespace}/${metadata.name}`, err: cut((err as Error).message, 200), ...(detail ? { detail: cut(detail, 500) } : {}) },
          'in-place update not made',
        );
      }
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
      pending: updatable - updated,
      waitingWorkloads,
      recreateNeeded,
      refused,
      failed,
    };
  }
}

/**
 * One look at the candidates in rollout for the automatic halt (halt.ts): every pod of the
 * cluster, page by page, and the workloads whose controllers cannot create pods (refusals.ts).
 * Pods are tenant-writable and up to etcd's object limit each: the pages are bounded in bytes
 * (request.ts), so a look costs its page bound in memory however large the pods are.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { listPages } from '../kube-api/request.js';
import type { TemplateSet } from '../templates/set.js';
import { HealthCount, type HaltThresholds } from './halt.js';
import { refusedWorkloads } from './refusals.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';

export interface LookOptions {
  readonly kubeConfig: KubeConfig;
  /** The set in force: a stopped candidate takes no workload, so no refusal is its. */
  readonly set: TemplateSet;
  readonly thresholds: HaltThresholds;
  /** Milliseconds since the epoch. */
  readonly now: number;
  /** The most bytes of one page of pods or Events (listPages). @default its own */
  readonly maxPageBytes?: number;
  /** Told when the workloads that cannot create pods could not be counted (no `list` on Events, say): the pods still count. */
  readonly onRefusalsUnknown?: (err: Error) => void;
}

/** Counts the candidates' pods and refused workloads; read the result's `health` and `halts()`. */
export async function lookAtCandidates(options: LookOptions): Promise<HealthCount> {
  const { kubeConfig, set, thresholds, now, maxPageBytes } = options;
  let count = new HealthCount(set, thresholds, now);
  await listPages(
    kubeConfig,
    apiPath(apiResources.pods),
    { pageSize: 500, ...(maxPageBytes ? { maxPageBytes } : {}), onRestart: () => (count = new HealthCount(set, thresholds, now)) },
    (page) => page.forEach((pod) => count.add(pod)),
  );
  try {
    for (const workload of await refusedWorkloads(kubeConfig, { now, ...(maxPageBytes ? { maxPageBytes } : {}) })) count.addRefused(workload);
  } catch (err) {
    options.onRefusalsUnknown?.(err as Error);
  }
  return count;
}

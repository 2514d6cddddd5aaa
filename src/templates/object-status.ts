/**
 * A SidecarTemplate's status: what the injector makes of the object — the template and revision
 * it holds, its role (stable, candidate with its share, previous), whether it is served, stopped
 * or refused, the continuous audit's pod counts, and the conditions a GitOps health check reads
 * (`Ready`, `Halted`, `RolledOut`), and for a candidate the elected replica's preflight, halt and
 * health look. Pure: the writer (serving/template-status.ts) supplies what it knows and writes
 * the result when it differs from what is stored.
 */
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { cut } from '../quote.js';
import type { TemplateSet } from './set.js';

/** A candidate revision as the elected replica's rollout controller sees it. */
export interface CandidateProgress {
  /** The replica whose preflights and halts these are. */
  readonly replica: string;
  readonly preflight: {
    readonly state: 'passed' | 'failed' | 'pending';
    readonly failure?: string;
    readonly message?: string;
    readonly checkedAt?: string;
  };
  /** Why it was halted. */
  readonly halted?: string;
  /** The last health look: pods with the candidate, restarting, not ready, workloads that cannot create pods. */
  readonly health?: {
    readonly pods: number;
    readonly restarting: number;
    readonly notReady: number;
    readonly refusedWorkloads: number;
    readonly checkedAt: string;
  };
}

/** In-place updates toward one revision, as the elected replica's last round saw them (rollout/in-place-updater.ts). */
export interface InPlaceProgress {
  /** Pods given this revision in place since the replica began leading. */
  readonly updated: number;
  /** Pods that can get it in place and wait for a later round. */
  readonly pending: number;
  /** Workloads waiting for one of their pods' sidecars to be ready before the next. */
  readonly waitingWorkloads: number;
  /** Pods that run another revision and get this one only when recreated (an update in place is not allowed for them). */
  readonly recreateNeeded: number;
  /** Updates the API server refused (a policy, validation) or that failed, in the last round. */
  readonly refused: number;
  readonly failed: number;
  readonly checkedAt: string;
}

/** The key of a candidate revision in a progress map. */
export const candidateKey = (template: string, revision: string) => `${template}@${revision}`;

export interface ObjectStatusInput {
  /** The object's metadata.name and generation. */
  readonly name: string;
  readonly generation?: number;
  /** The set in force, candidates gated (a stopped one says why). */
  readonly set: TemplateSet;
  /** The object's problems when it is refused (as `check` prints them). */
  readonly refused?: readonly string[];
  /** The audit's pods per state for each template; undefined while unknown. */
  readonly counts?: ReadonlyMap<string, Readonly<Partial<Record<string, number>>>>;
  /** Each candidate revision's preflight, halt and health by `candidateKey`; undefined where no preflight runs. */
  readonly progress?: ReadonlyMap<string, CandidateProgress>;
  /** In-place updates toward each revision by `candidateKey`; undefined where none run. */
  readonly inPlace?: ReadonlyMap<string, InPlaceProgress>;
  /** The status stored now: a condition that keeps its status keeps its lastTransitionTime. */
  readonly stored?: unknown;
  /** RFC 3339, for a condition that changes now. */
  readonly now: string;
}

type Condition = {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime?: string;
};

/** Where the object stands in the set. */
function place(name: string, set: TemplateSet) {
  for (const template of set.templates) if ((template.object ?? template.name) === name) return { role: 'stable' as const, template };
  for (const rollout of set.rollouts?.values() ?? []) {
    if (rollout.candidate?.object === name) return { role: 'candidate' as const, template: rollout.candidate, rollout };
    if (rollout.previous?.object === name) return { role: 'previous' as const, template: rollout.previous, rollout };
  }
  return undefined;
}

/** The status the object should have. */
export function objectStatus(input: ObjectStatusInput): JsonObject {
  const { name, set } = input;
  const observed = input.generation !== undefined ? { observedGeneration: input.generation } : {};
  const conditions: Condition[] = [];
  const condition = (type: string, status: Condition['status'], reason: string, message: string) =>
    conditions.push({ type, status, reason, message: cut(message, 1000), ...observed });
  const status: JsonObject = { ...observed };
  const found = input.refused ? undefined : place(name, set);
  if (input.refused) {
    status.state = 'Refused';
    status.message = cut(`not served: ${input.refused.slice(0, 5).join('; ')}`, 1000);
    condition('Ready', 'False', 'Refused', status.message as string);
  } else if (!found) {
    status.state = 'Unknown';
    status.message = 'not yet taken in by the injector';
    condition('Ready', 'Unknown', 'Pending', status.message as string);
  } else {
    const { role, template } = found;
    status.template = template.name;
    status.revision = template.hash;
    status.role = role;
    condition('Ready', 'True', 'Accepted', `revision ${template.hash} of template ${template.name} passes every check`);
    if (role === 'stable') {
      status.state = 'Serving';
      status.message = `in force for every pod it selects${set.rollouts?.get(template.name)?.candidate ? " outside its candidate's share" : ''}`;
    } else if (role === 'candidate') {
      const { rollout } = found;
      status.share = `${rollout.stanza!.share}%`;
      const progress = input.progress?.get(candidateKey(template.name, template.hash));
      if (progress) {
        const { preflight, halted, health } = progress;
        status.preflight = {
          state: preflight.state,
          replica: cut(progress.replica, 253),
          ...(preflight.failure ? { failure: preflight.failure } : {}),
          ...(preflight.message ? { message: cut(preflight.message, 1000) } : {}),
          ...(preflight.checkedAt ? { checkedAt: preflight.checkedAt } : {}),
        };
        if (halted) status.halted = cut(halted, 1000);
        if (health) status.health = { ...health };
      }
      if (rollout.stopped !== undefined) {
        status.state = 'Stopped';
        status.message = cut(`takes no pod: ${rollout.stopped}`, 1000);
        const reason = rollout.stopped.startsWith('preflight pending')
          ? 'PreflightPending'
          : rollout.stopped.startsWith('preflight failed')
            ? 'PreflightFailed'
            : rollout.stopped.startsWith('preflight not run')
              ? 'PreflightNotRun'
              : 'Halted';
        condition('Halted', 'True', reason, status.message as string);
      } else {
        status.state = 'Candidate';
        status.message = `in force for ${rollout.stanza!.share}% of the eligible workloads`;
        condition('Halted', 'False', 'Taking', status.message as string);
      }
    } else {
      status.state = 'Previous';
      status.message = 'kept for a one-edit rollback; takes no pod';
    }
    const inPlace = role !== 'previous' ? input.inPlace?.get(candidateKey(template.name, template.hash)) : undefined;
    if (inPlace) status.inPlace = { ...inPlace };
    const counts = input.counts?.get(template.name);
    if (role !== 'previous') {
      if (!input.counts) condition('RolledOut', 'Unknown', 'NotAudited', 'the continuous audit has not counted the pods yet');
      else {
        const pods = { current: counts?.current ?? 0, stale: counts?.stale ?? 0, missing: counts?.missing ?? 0, leftOut: counts?.['left-out'] ?? 0 };
        status.pods = pods;
        if (role === 'candidate') condition('RolledOut', 'False', 'Candidate', 'a candidate is rolled out when promoted to the stable revision');
        else if (pods.stale + pods.missing === 0)
          condition('RolledOut', 'True', 'AllCurrent', `${pods.current} pod(s) carry this revision; none stale or missing`);
        else
          condition(
            'RolledOut',
            'False',
            pods.missing > 0 ? 'PodsMissing' : 'PodsStale',
            `${pods.stale} pod(s) carry an older revision and ${pods.missing} lack the sidecar (sidecar-injector audit names them)`,
          );
      }
    }
  }
  // A condition whose status did not change keeps the time it last changed.
  const before = new Map<string, JsonObject>();
  const stored = isJsonObject(input.stored) && Array.isArray(input.stored.conditions) ? input.stored.conditions : [];
  for (const c of stored) if (isJsonObject(c) && typeof c.type === 'string') before.set(c.type, c);
  status.conditions = conditions.map((c) => {
    const was = before.get(c.type);
    const since = was && was.status === c.status && typeof was.lastTransitionTime === 'string' ? was.lastTransitionTime : input.now;
    return { ...c, lastTransitionTime: since };
  });
  return status;
}

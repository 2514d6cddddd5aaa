/**
 * The elected replica writes each SidecarTemplate's status (templates/object-status.ts): on
 * every change of the templates and every `intervalMs`, each object whose status should differ
 * from the stored one gets a merge patch of its status subresource — nothing else of the
 * object is ever written. Writes are sequential and bounded per round; a failed write is
 * logged and tried again next round.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import { Rounds } from '../runtime/rounds.js';
import { KubernetesApiError } from '../errors.js';
import { canonicalJson, isJsonObject, mergePatchBetween } from '../k8s/json.js';
import { requestJson } from '../kube-api/request.js';
import { problemLine } from '../pipeline/template-check.js';
import { objectStatus, type CandidateProgress, type InPlaceProgress } from '../templates/object-status.js';
import { sidecarTemplatePath } from '../templates/resource.js';
import type { TemplateSet } from '../templates/set.js';
import type { TemplateObjects } from './template-objects.js';

export interface TemplateStatusOptions {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  readonly clock: Clock;
  readonly objects: TemplateObjects;
  /** The set in force, candidates gated. */
  readonly inForce: () => TemplateSet;
  /** The audit's pods per template and state; undefined while unknown. */
  readonly counts: () => ReadonlyMap<string, Readonly<Partial<Record<string, number>>>> | undefined;
  /** Each candidate's preflight, halt and health as this replica's rollout controller sees them; absent where no preflight runs. */
  readonly progress?: () => ReadonlyMap<string, CandidateProgress>;
  /** In-place updates toward each revision, from this replica's updater; absent where none run. */
  readonly inPlace?: () => ReadonlyMap<string, InPlaceProgress>;
  /** @default 15000 */
  readonly intervalMs?: number;
  /** Status writes per round at most. @default 50 */
  readonly maxWritesPerRound?: number;
}

/** How long a status the API server stored only in part is not sent again unchanged. */
const prunedRetryMs = 10 * 60_000;

/** Without the times a condition carries: what tells a status that must be written from one that is there. */
function comparable(status: unknown): string {
  if (!isJsonObject(status)) return 'null';
  const conditions = Array.isArray(status.conditions)
    ? status.conditions.map((c) => (isJsonObject(c) ? Object.fromEntries(Object.entries(c).filter(([k]) => k !== 'lastTransitionTime')) : c))
    : null;
  return canonicalJson({ ...status, conditions });
}

export class TemplateStatusWriter {
  private written = 0;
  private failures = 0;
  /** Objects whose last write the API server stored only in part: what was sent, and what it kept. */
  private readonly pruned = new Map<string, { desired: string; stored: string; at: number }>();
  private readonly rounds: Rounds;

  constructor(private readonly options: TemplateStatusOptions) {
    this.rounds = new Rounds({
      clock: options.clock,
      intervalMs: options.intervalMs ?? 15_000,
      pass: () => this.pass(),
      failed: (err) => options.log.error({ err: (err as Error).message }, 'SidecarTemplate status round'),
      follow: { emitter: options.objects, event: 'reload' },
    });
  }

  start(): void {
    this.rounds.start();
  }

  stop(): void {
    this.rounds.stop();
  }

  status() {
    return { statusWrites: this.written, statusWriteFailures: this.failures };
  }

  /** Resolves once the round under way (if any) and the one it asked for are done (tests). */
  settled(): Promise<void> {
    return this.rounds.settled();
  }

  /** One pass over the objects; a call during a pass asks for one more after it. */
  round(): void {
    this.rounds.round();
  }

  private async pass(): Promise<void> {
    const { objects, kubeConfig, log, clock } = this.options;
    if (!objects.ready()) return;
    const set = this.options.inForce();
    const counts = this.options.counts();
    const progress = this.options.progress?.();
    const inPlace = this.options.inPlace?.();
    const refusals = objects.refusals();
    const now = new Date(clock.now()).toISOString().replace(/\.\d{3}Z$/, 'Z');
    let writes = 0;
    for (const name of this.pruned.keys()) if (!objects.stored().has(name)) this.pruned.delete(name);
    for (const [name, object] of objects.stored()) {
      if (this.rounds.isStopped || writes >= (this.options.maxWritesPerRound ?? 50)) return;
      const metadata = isJsonObject(object.metadata) ? object.metadata : {};
      const refused = refusals.get(name);
      const desired = objectStatus({
        name,
        ...(typeof metadata.generation === 'number' ? { generation: metadata.generation } : {}),
        set,
        ...(refused ? { refused: refused.map(problemLine) } : {}),
        ...(counts ? { counts } : {}),
        ...(progress ? { progress } : {}),
        ...(inPlace ? { inPlace } : {}),
        stored: object.status,
        now,
      });
      const want = comparable(desired);
      const have = comparable(object.status);
      if (want === have) continue;
      // The API server kept less than was sent last time (a CRD older than the injector prunes
      // the fields it does not know): sending it again would change nothing, every round.
      // Tried again every `prunedRetryMs`: the CRD may have been upgraded meanwhile.
      const pruned = this.pruned.get(name);
      if (pruned && pruned.desired === want && pruned.stored === have && clock.now() - pruned.at < prunedRetryMs) continue;
      writes++;
      try {
        // A merge patch: a field the status no longer has is sent as null at any depth (else it
        // stays), the conditions whole (a merge patch replaces a list).
        // Preconditions: the object this status was computed from (uid and resourceVersion). An
        // object changed meanwhile (a new generation, deleted and created again under the name)
        // is a 409 or 422, and the next round computes from what is stored then.
        const preconditions = Object.fromEntries(['uid', 'resourceVersion'].filter((k) => typeof metadata[k] === 'string').map((k) => [k, metadata[k]]));
        const answer = await requestJson(kubeConfig, 'PATCH', sidecarTemplatePath(name, 'status'), 10_000, {
          body: { metadata: preconditions, status: mergePatchBetween(object.status, desired) },
          contentType: 'application/merge-patch+json',
        });
        this.written++;
        const stored = isJsonObject(answer) ? answer.status : undefined;
        const kept = comparable(stored);
        if (kept !== want) {
          if (!this.pruned.has(name))
            log.warn(
              { sidecarTemplate: name },
              'the API server stored less of the SidecarTemplate status than was written: is its CustomResourceDefinition older than the injector? Apply the one of this release (kubectl apply -k manifests/, or the chart’s crds/)',
            );
          this.pruned.set(name, { desired: want, stored: kept, at: clock.now() });
        } else this.pruned.delete(name);
      } catch (err) {
        // Deleted meanwhile: nothing to write. Changed meanwhile: the next round writes what it should be then.
        if (err instanceof KubernetesApiError && (err.statusCode === 404 || err.statusCode === 409)) continue;
        this.failures++;
        log.warn({ err: (err as Error).message, sidecarTemplate: name }, 'SidecarTemplate status not written; trying again next round');
      }
    }
  }
}

/**
 * On the elected replica: reads the exported MutatingAdmissionPolicy and its binding (by name)
 * at start, every `intervalMs` and soon after the templates change, and says whether they hold
 * the templates marked `delivery: policy` at the revisions in force
 * (manifests/exported-state.ts): in /status (`exportedPolicy`), the metric
 * `sidecar_injector_exported_policy_stale`, and a log line when the state changes.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Gauge } from 'prom-client';
import type { Logger } from 'pino';
import type { Clock, Timer } from '../clock.js';
import { KubernetesApiError } from '../errors.js';
import { exportedPolicyName, mutatingPolicyApiVersions, type MutatingPolicyApiVersion } from '../manifests/mutating-policies.js';
import { exportedPolicyState, type ExportedPolicyState } from '../manifests/exported-state.js';
import { cut } from '../quote.js';
import type { TemplateSet } from '../templates/set.js';
import { getJson } from '../kube-api/request.js';

/** The exported objects' paths in one API version (v1 from 1.36; the beta where 1.34 and 1.35 serve it behind its feature gate). */
const pathsIn = (version: MutatingPolicyApiVersion) => {
  const apis = `/apis/admissionregistration.k8s.io/${version}`;
  return { policy: `${apis}/mutatingadmissionpolicies/${exportedPolicyName}`, binding: `${apis}/mutatingadmissionpolicybindings/${exportedPolicyName}` };
};
/** A read of a resource the API server does not serve in that version (a 404 that names no object). */
const notServed = Symbol('not served');

export interface ExportedPolicyWatchOptions {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  readonly clock: Clock;
  /** The stable templates in force. */
  readonly templates: () => TemplateSet;
  readonly stale: Gauge;
  /** @default 60000 */
  readonly intervalMs?: number;
  /** After a template change. @default 2000 */
  readonly afterChangeMs?: number;
  /** @default 5000 */
  readonly requestTimeoutMs?: number;
}

/** What /status shows. */
export interface ExportedPolicyStatus extends Partial<ExportedPolicyState> {
  /** When it was last read (ISO), if ever. */
  readonly checkedAt?: string;
  /** Why the last read failed (the last state read stays). */
  readonly error?: string;
}

export class ExportedPolicyWatch {
  private timer: Timer | undefined;
  private soon: Timer | undefined;
  private state: ExportedPolicyState | undefined;
  private checkedAt: number | undefined;
  private error: string | undefined;
  private running = false;
  private looking: Promise<void> | undefined;

  constructor(private readonly options: ExportedPolicyWatchOptions) {}

  start(): void {
    this.running = true;
    this.timer = this.options.clock.every(this.options.intervalMs ?? 60_000, () => void this.look());
    void this.look();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.timer?.cancel();
    this.soon?.cancel();
    await this.looking;
    // A replica that no longer leads says nothing it cannot keep true.
    this.state = undefined;
    this.checkedAt = undefined;
    this.error = undefined;
  }

  /** The templates changed: look again shortly (a move to the policy is applied with the policy, in either order). */
  templatesReloaded(): void {
    if (!this.running) return;
    this.soon?.cancel();
    this.soon = this.options.clock.after(this.options.afterChangeMs ?? 2000, () => void this.look());
  }

  /** Empty on a replica that does not lead (the leader reads and says it). */
  status(): ExportedPolicyStatus {
    return {
      ...(this.state ?? {}),
      ...(this.checkedAt !== undefined ? { checkedAt: new Date(this.checkedAt).toISOString() } : {}),
      ...(this.error ? { error: this.error } : {}),
    };
  }

  /** One read; never two at once. */
  look(): Promise<void> {
    this.looking ??= this.read().finally(() => (this.looking = undefined));
    return this.looking;
  }

  private async read(): Promise<void> {
    const { kubeConfig, requestTimeoutMs = 5000, log } = this.options;
    const get = async (path: string, name: string): Promise<unknown> => {
      try {
        return await getJson(kubeConfig, path, requestTimeoutMs);
      } catch (err) {
        // The object missing is an answer; the resource not served in this version is not.
        if (err instanceof KubernetesApiError && err.statusCode === 404) return (err.detail ?? '').includes(`"${name}" not found`) ? undefined : notServed;
        throw err;
      }
    };
    try {
      let read: [unknown, unknown] | undefined;
      for (const version of mutatingPolicyApiVersions) {
        const paths = pathsIn(version);
        const both = await Promise.all([get(paths.policy, exportedPolicyName), get(paths.binding, exportedPolicyName)]);
        if (both[0] !== notServed && both[1] !== notServed) {
          read = both;
          break;
        }
      }
      if (!read) throw new Error(`no MutatingAdmissionPolicy API answered: a 404 for the resource itself in ${mutatingPolicyApiVersions.join(' and ')}`);
      const [policy, binding] = read;
      if (!this.running) return;
      const next = exportedPolicyState(this.options.templates(), { policy, binding });
      this.checkedAt = this.options.clock.now();
      this.error = undefined;
      if (next.state !== this.state?.state || next.problem !== this.state?.problem) {
        if (next.problem) log.warn({ exportedPolicy: next.state }, next.problem);
        else if (this.state) log.info({ exportedPolicy: next.state }, `the exported policy is ${next.state}`);
      }
      this.state = next;
      this.options.stale.set(next.state === 'absent' || next.state === 'stale' ? 1 : 0);
    } catch (err) {
      if (!this.running) return;
      const message = cut((err as KubernetesApiError).detail ?? (err as Error).message, 300);
      if (message !== this.error) log.warn({ err: message }, `the exported policy ${exportedPolicyName} could not be read`);
      this.error = message;
    }
  }
}

/**
 * The elected replica keeps each pod webhook's template condition (pipeline/match-conditions.ts
 * templateCondition) in the MutatingWebhookConfiguration: on every new template set and every
 * `intervalMs`, it reads the configuration and, for the webhook that calls `/mutate/required`
 * and the one that calls `/mutate/optional`, writes the condition the set asks for, or removes
 * ours when the set asks for none, in one strategic merge patch that touches nothing else
 * (other conditions, the caBundle, an operator's failurePolicy). The API server then calls the
 * webhook only for the pods a template may apply to.
 *
 * What is written is always as wide as the set in force or wider, never narrower for long: a
 * new template is served by the replicas as soon as they read it and the condition follows in
 * the same moment; while no replica leads, the condition last written stays (the pods a new
 * template selects beyond it are not sent until a leader writes it). A failed write is logged
 * and tried again next round.
 */
import type { Logger } from 'pino';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Clock } from '../clock.js';
import { Rounds } from '../runtime/rounds.js';
import { webhookFailurePolicy } from '../admission/mutate.js';
import { webhookPaths } from '../app.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';
import { KubernetesApiError } from '../errors.js';
import { requestJson } from '../kube-api/request.js';
import { templateCondition, templateConditionName, type MatchCondition, type UnconditionedWhy } from '../pipeline/match-conditions.js';
import { everyRevision } from '../templates/rollout.js';
import type { TemplateFailurePolicy } from '../templates/template.js';
import type { TemplateSource } from '../templates/store.js';

export interface WebhookConditionsOptions {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  readonly clock: Clock;
  readonly templates: TemplateSource;
  /** The MutatingWebhookConfiguration holding the pod webhooks. */
  readonly configurationName: string;
  /** False (`--match-conditions off`): the leader removes the entries it wrote, so every pod is sent. @default true */
  readonly enabled?: boolean;
  /** @default 60000 */
  readonly intervalMs?: number;
}

/** The paths of the pod webhooks (app.ts serves them) and the class of templates each injects. */
const classByPath: ReadonlyMap<string, TemplateFailurePolicy> = new Map(
  webhookPaths.flatMap(([path, webhook]) => (webhook === 'all' ? [] : [[path, webhookFailurePolicy[webhook]] as const])),
);

/** The path a webhook calls: its Service's path, or its URL's. */
function pathOf(webhook: JsonObject): string | undefined {
  const client = isJsonObject(webhook.clientConfig) ? webhook.clientConfig : {};
  if (isJsonObject(client.service)) return typeof client.service.path === 'string' ? client.service.path : undefined;
  if (typeof client.url !== 'string') return undefined;
  try {
    return new URL(client.url).pathname;
  } catch {
    return undefined;
  }
}

/** What one webhook has of ours, and what it should have. */
export interface ConditionChange {
  readonly webhook: string;
  readonly desired: MatchCondition | undefined;
  readonly why?: UnconditionedWhy;
}

/**
 * The strategic merge patch that puts each pod webhook's condition as the set asks, or undefined
 * when every one already is; with the changes, for the log. Pure.
 */
export function conditionsPatch(
  configuration: unknown,
  desiredFor: (failurePolicy: TemplateFailurePolicy) => MatchCondition | { readonly none: UnconditionedWhy },
): { patch: JsonObject; changes: ConditionChange[] } | undefined {
  const webhooks = isJsonObject(configuration) && Array.isArray(configuration.webhooks) ? configuration.webhooks.filter(isJsonObject) : [];
  const changes: ConditionChange[] = [];
  const entries: JsonObject[] = [];
  for (const webhook of webhooks) {
    const path = pathOf(webhook);
    const failurePolicy = path === undefined ? undefined : classByPath.get(path);
    if (failurePolicy === undefined || typeof webhook.name !== 'string') continue;
    const wanted = desiredFor(failurePolicy);
    const desired = 'none' in wanted ? undefined : wanted;
    const conditions = Array.isArray(webhook.matchConditions) ? webhook.matchConditions.filter(isJsonObject) : [];
    const current = conditions.find((c) => c.name === templateConditionName);
    if (desired ? current?.expression === desired.expression : current === undefined) continue;
    changes.push({ webhook: webhook.name, desired, ...('none' in wanted ? { why: wanted.none } : {}) });
    // Merged by name: the other conditions stay as they are.
    entries.push({
      name: webhook.name,
      matchConditions: [desired ? { name: desired.name, expression: desired.expression } : { name: templateConditionName, $patch: 'delete' }],
    });
  }
  if (entries.length === 0) return undefined;
  // Written over what was read, or not at all: a leader that lost the lease meanwhile never
  // writes over its successor's condition (a 409, and its next round never comes).
  const resourceVersion = isJsonObject(configuration) && isJsonObject(configuration.metadata) ? configuration.metadata.resourceVersion : undefined;
  return { patch: { ...(typeof resourceVersion === 'string' ? { metadata: { resourceVersion } } : {}), webhooks: entries }, changes };
}

export class WebhookConditions {
  private written = 0;
  private failures = 0;
  private lastError: string | undefined;
  private unconditioned: Partial<Record<TemplateFailurePolicy, UnconditionedWhy>> = {};
  /** The revisions (name@hash) the conditions in the configuration were last found or written to cover. */
  private covered: readonly string[] = [];
  private readonly path: string;
  private readonly rounds: Rounds;

  constructor(private readonly options: WebhookConditionsOptions) {
    this.path = apiPath(apiResources.mutatingWebhookConfigurations, { name: options.configurationName });
    this.rounds = new Rounds({
      clock: options.clock,
      intervalMs: options.intervalMs ?? 60_000,
      pass: async () => {
        await this.pass();
        this.lastError = undefined;
      },
      failed: (err) => {
        this.failures++;
        this.lastError = (err as Error).message;
        options.log.warn(
          { err: (err as Error).message, webhookConfiguration: options.configurationName },
          'webhook matchConditions not written; trying again next round',
        );
      },
      follow: { emitter: options.templates, event: 'reload' },
    });
  }

  start(): void {
    this.rounds.start();
  }

  stop(): void {
    this.rounds.stop();
  }

  status() {
    return {
      conditionWrites: this.written,
      conditionWriteFailures: this.failures,
      coveredTemplates: this.covered,
      ...(Object.keys(this.unconditioned).length > 0 ? { everyPodSentTo: this.unconditioned } : {}),
      ...(this.lastError ? { lastError: this.lastError } : {}),
    };
  }

  /** Resolves once the round under way (if any) and the one it asked for are done (tests). */
  settled(): Promise<void> {
    return this.rounds.settled();
  }

  private async pass(): Promise<void> {
    const { kubeConfig, templates } = this.options;
    const set = templates.current();
    const enabled = this.options.enabled ?? true;
    const unconditioned: Partial<Record<TemplateFailurePolicy, UnconditionedWhy>> = {};
    const desiredFor = (failurePolicy: TemplateFailurePolicy) => {
      const wanted = enabled ? templateCondition(set, failurePolicy) : { none: 'turned-off' as const };
      if ('none' in wanted) unconditioned[failurePolicy] = wanted.none;
      return wanted;
    };
    const configuration = await requestJson(kubeConfig, 'GET', this.path, 10_000);
    const change = conditionsPatch(configuration, desiredFor);
    try {
      await this.write(
        change,
        unconditioned,
        everyRevision(set).map((t) => `${t.name}@${t.hash}`),
      );
    } catch (err) {
      // A condition that cannot be written as the set asks (a policy guarding webhook
      // configurations, 64 conditions already) must not stay narrower than the set: the leader
      // removes its entries instead, so that every pod is sent, and says why.
      const removal =
        this.rounds.isStopped || !change?.changes.some((c) => c.desired) ? undefined : conditionsPatch(configuration, () => ({ none: 'write-refused' }));
      if (removal && !(err instanceof KubernetesApiError && err.statusCode === 409))
        await this.write(removal, { Fail: 'write-refused', Ignore: 'write-refused' }, []).catch(() => undefined);
      throw err;
    }
  }

  /** Writes `change` (nothing when undefined); on success, what the conditions now are is what /status says. */
  private async write(
    change: ReturnType<typeof conditionsPatch>,
    unconditioned: Partial<Record<TemplateFailurePolicy, UnconditionedWhy>>,
    covered: readonly string[],
  ): Promise<void> {
    if (this.rounds.isStopped) return;
    if (change) {
      await requestJson(this.options.kubeConfig, 'PATCH', `${this.path}?fieldManager=sidecar-injector`, 10_000, {
        body: change.patch,
        contentType: 'application/strategic-merge-patch+json',
      });
      this.written++;
      this.options.log.info(
        {
          webhookConfiguration: this.options.configurationName,
          webhooks: change.changes.map((c) => (c.desired ? c.webhook : `${c.webhook} (every pod: ${c.why})`)),
        },
        'webhook matchConditions written',
      );
    }
    this.unconditioned = unconditioned;
    this.covered = covered;
  }
}

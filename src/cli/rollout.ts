/**
 * `sidecar-injector rollout status`: per template, the stable revision, the candidate with its
 * share and scope, and the previous revision, from the templates directory; from the cluster (a
 * metadata-only list of pods, read page by page), how many workloads and pods run each revision;
 * and, from the injector's `/status` read through the API server's service proxy, each
 * candidate's preflight, halt and health as the replica that answered sees them.
 */
import { ConfigError, KubernetesApiError, UsageError } from '../errors.js';
import { parseOptions } from '../options.js';
import { parseLedger } from '../inject/ledger.js';
import { AnnotationKeys } from '../k8s/keys.js';
import type { Selector } from '../k8s/selector.js';
import { getJson, listPages, metadataOnly } from '../kube-api/request.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { isDns1123Label } from '../k8s/label-syntax.js';
import type { ListedMetadata } from '../pipeline/audit.js';
import { loadTemplateDir } from '../templates/load.js';
import { printable } from '../quote.js';
import { templatesInForce, type ObjectState } from './cluster-reads.js';
import { rolloutSubject, bucketKey, type Rollout } from '../templates/rollout.js';
import type { TemplateSet } from '../templates/set.js';
import { rolloutOptions } from './usage.js';
import { loadKubeConfig } from '../kube-api/kubeconfig.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';
import type { CommandIo } from './io.js';

export type RolloutIo = Pick<CommandIo, 'stdout'>;

/** What a revision is to the templates directory. */
export type RevisionRole = 'stable' | 'candidate' | 'previous' | 'other';

/** One template's revisions, as `-o json` prints them. */
export interface TemplateRollout {
  readonly template: string;
  readonly stable: string;
  readonly candidate?: { readonly revision: string; readonly share: number; readonly namespaces?: readonly string[]; readonly podSelector: string };
  readonly previous?: string;
}

/** Workloads and pods that run one revision of a template. */
export interface RevisionCount {
  readonly template: string;
  readonly revision: string;
  readonly role: RevisionRole;
  readonly workloads: number;
  readonly pods: number;
}

/** One candidate as the injector sees it: whether it takes pods, its preflight, its halt and its health. */
export interface CandidateState {
  readonly template: string;
  readonly revision: string;
  readonly takesPods: boolean;
  /** Why it takes no pod (a preflight pending or failed, a halt). */
  readonly stopped?: string;
  readonly preflight: { readonly state: 'passed' | 'failed' | 'pending'; readonly failure?: string; readonly message?: string; readonly checkedAt?: string };
  /** Why it was halted. */
  readonly halted?: string;
  /** The last health look: pods with the candidate, restarting, not ready, refused workloads. */
  readonly health?: {
    readonly pods: number;
    readonly restarting: number;
    readonly notReady: number;
    readonly refusedWorkloads: number;
    readonly checkedAt: string;
  };
}

/** What the injector's /status says of the rollout, or why it could not be read. */
export interface InjectorRollout {
  /** The Service it was read from (`namespace/name:port`). */
  readonly from: string;
  /** The replica that answered. */
  readonly replica?: string;
  /** False when the injector runs no preflight (no --rollout-probe-namespace): candidates take their share when loaded. */
  readonly preflight?: boolean;
  readonly candidates?: readonly CandidateState[];
  /** Why the status could not be read. */
  readonly error?: string;
}

export interface RolloutReport {
  readonly templates: readonly TemplateRollout[];
  /** Each SidecarTemplate's status as the injector wrote it; undefined with a folder. */
  readonly objects?: readonly ObjectState[];
  /** Undefined with --offline. */
  readonly pods?: readonly RevisionCount[];
  /** Undefined with --offline. */
  readonly injector?: InjectorRollout;
}

/** A selector as `kubectl get -l` writes one; `*` for everything. */
export function selectorText(selector: Selector): string {
  if (selector.requirements.length === 0) return '*';
  return selector.requirements
    .map(({ key, operator, values }) => {
      const list = [...values].sort().join(',');
      if (operator === 'Exists') return key;
      if (operator === 'DoesNotExist') return `!${key}`;
      if (operator === 'In') return values.size === 1 ? `${key}=${list}` : `${key} in (${list})`;
      return `${key} notin (${list})`;
    })
    .join(',');
}

/** The revisions of every template of `set`, by name. */
export function templateRollouts(set: TemplateSet): TemplateRollout[] {
  return set.templates.map((t) => {
    const rollout: Rollout | undefined = set.rollouts?.get(t.name);
    const { candidate, stanza, previous } = rollout ?? {};
    return {
      template: t.name,
      stable: t.hash,
      ...(candidate && stanza
        ? {
            candidate: {
              revision: candidate.hash,
              share: stanza.share,
              ...(stanza.namespaces ? { namespaces: [...stanza.namespaces].sort() } : {}),
              podSelector: selectorText(stanza.podSelector),
            },
          }
        : {}),
      ...(previous ? { previous: previous.hash } : {}),
    };
  });
}

/** Counts workloads and pods per template revision from pods' metadata (their ledgers, as written). */
export class RevisionCounter {
  private readonly counts = new Map<string, { template: string; revision: string; workloads: Set<string>; pods: number }>();

  constructor(private readonly set: TemplateSet) {}

  add(metadata: ListedMetadata): void {
    if (typeof metadata.namespace !== 'string' || typeof metadata.name !== 'string') return;
    const status = metadata.annotations?.[AnnotationKeys.status];
    if (typeof status !== 'string') return;
    const { ledger } = parseLedger(status);
    const labels = metadata.labels && typeof metadata.labels === 'object' ? metadata.labels : {};
    const workload = bucketKey(rolloutSubject(metadata, metadata.namespace, labels));
    for (const [template, { hash }] of Object.entries(ledger.templates)) {
      // Only the templates of the directory: a pod can write any ledger.
      if (!this.set.byName.has(template)) continue;
      const key = `${template}@${hash.slice(0, 64)}`;
      let count = this.counts.get(key);
      if (!count) {
        // Bounded: a forged ledger may name any hash; past a few hundred revisions, the rest are one `other`.
        const revision = this.counts.size < 256 ? hash.slice(0, 64) : '(other)';
        const at = `${template}@${revision}`;
        count = this.counts.get(at) ?? { template, revision, workloads: new Set(), pods: 0 };
        this.counts.set(at, count);
      }
      count.pods++;
      if (count.workloads.size < 100_000) count.workloads.add(workload);
    }
  }

  /** The counts, by template, then stable, candidate, previous and other revisions. */
  result(): RevisionCount[] {
    const order: RevisionRole[] = ['stable', 'candidate', 'previous', 'other'];
    return [...this.counts.values()]
      .map(({ template, revision, workloads, pods }) => ({ template, revision, role: this.roleOf(template, revision), workloads: workloads.size, pods }))
      .sort((a, b) =>
        a.template !== b.template ? (a.template < b.template ? -1 : 1) : order.indexOf(a.role) - order.indexOf(b.role) || (a.revision < b.revision ? -1 : 1),
      );
  }

  private roleOf(template: string, revision: string): RevisionRole {
    const rollout = this.set.rollouts?.get(template);
    if (this.set.byName.get(template)?.hash === revision) return 'stable';
    if (rollout?.candidate?.hash === revision) return 'candidate';
    if (rollout?.previous?.hash === revision) return 'previous';
    return 'other';
  }
}

function columns(header: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [line(header), ...rows.map(line)].join('\n') + '\n';
}

/** The report as text: one line per template, then one per revision running in the cluster. */
export function formatRollout(report: RolloutReport): string {
  const templates = columns(
    ['TEMPLATE', 'STABLE', 'CANDIDATE', 'SHARE', 'SCOPE', 'PREVIOUS'],
    report.templates.map((t) => [
      t.template,
      t.stable,
      t.candidate?.revision ?? '-',
      t.candidate ? `${t.candidate.share}%` : '-',
      t.candidate
        ? [t.candidate.namespaces ? `namespaces ${t.candidate.namespaces.join(',')}` : 'all namespaces', `pods ${t.candidate.podSelector}`].join('; ')
        : '-',
      t.previous ?? '-',
    ]),
  );
  const objects = report.objects?.length
    ? `\n${columns(
        ['SIDECARTEMPLATE', 'ROLE', 'SHARE', 'STATE', 'CURRENT', 'STALE', 'MISSING', 'MESSAGE'],
        report.objects.map((o) => [
          printable(o.name),
          printable(o.role ?? '-'),
          printable(o.share ?? '-'),
          printable(o.state ?? 'no status yet'),
          String(o.pods?.current ?? '-'),
          String(o.pods?.stale ?? '-'),
          String(o.pods?.missing ?? '-'),
          printable(o.message ?? ''),
        ]),
      )}`
    : '';
  if (!report.pods) return `${templates}${objects}`;
  const injector = report.injector ? `\n${formatInjector(report.injector)}` : '';
  const pods = columns(
    ['TEMPLATE', 'REVISION', 'ROLE', 'WORKLOADS', 'PODS'],
    report.pods.map((c) => [c.template, c.revision, c.role, String(c.workloads), String(c.pods)]),
  );
  return `${templates}${objects}\n${report.pods.length > 0 ? pods : 'no pod carries one of these templates\n'}${injector}`;
}

/** `NS/SERVICE[:PORT]`, checked. */
export function parseInjectorService(text: string): { namespace: string; name: string; port: number } {
  const match = /^([^/]+)\/([^/:]+)(?::(\d{1,5}))?$/.exec(text);
  const port = Number(match?.[3] ?? '8443');
  if (!match || !isDns1123Label(match[1]!) || !isDns1123Label(match[2]!) || port < 1 || port > 65535)
    throw new ConfigError([`--injector: expected NAMESPACE/SERVICE or NAMESPACE/SERVICE:PORT (got ${JSON.stringify(text).slice(0, 80)})`]);
  return { namespace: match[1]!, name: match[2]!, port };
}

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value.slice(0, 2000) : undefined);
const count = (value: unknown): number => (typeof value === 'number' && Number.isFinite(value) ? value : 0);

/** The candidates of serve's `/status` → `rollout`, joined by candidate revision: state, preflight result, halt and health. */
export function candidateStates(rollout: JsonObject): CandidateState[] {
  const list = (value: unknown) => (Array.isArray(value) ? value.filter(isJsonObject) : []);
  const results = list(rollout.results);
  const halted = list(rollout.halted);
  const health = list(rollout.health);
  return list(rollout.candidates).map((c) => {
    const template = text(c.template) ?? '';
    const revision = text(c.revision) ?? '';
    const result = results.find((r) => r.template === template && r.revision === revision);
    const halt = halted.find((h) => h.candidate === `${template}@${revision}`);
    const look = health.find((h) => h.template === template && h.revision === revision);
    const stopped = text(c.stopped);
    const failure = text(result?.failure);
    const message = text(result?.message);
    const checkedAt = text(result?.checkedAt);
    const haltedWhy = text(halt?.why);
    return {
      template,
      revision,
      takesPods: c.takesPods === true,
      ...(stopped ? { stopped } : {}),
      preflight: {
        state: !result ? 'pending' : result.passed === true ? 'passed' : 'failed',
        ...(failure ? { failure } : {}),
        ...(message ? { message } : {}),
        ...(checkedAt ? { checkedAt } : {}),
      },
      ...(haltedWhy ? { halted: haltedWhy } : {}),
      ...(look
        ? {
            health: {
              pods: count(look.pods),
              restarting: count(look.restarting),
              notReady: count(look.notReady),
              refusedWorkloads: count(look.refusedWorkloads),
              checkedAt: text(look.checkedAt) ?? '',
            },
          }
        : {}),
    };
  });
}

/** Reads the injector's /status through the API server's service proxy (`get` on `services/proxy` of that Service). */
async function injectorRollout(
  kubeConfig: Parameters<typeof getJson>[0],
  service: { namespace: string; name: string; port: number },
): Promise<InjectorRollout> {
  const from = `${service.namespace}/${service.name}:${service.port}`;
  // As kubectl writes it: `https:NAME:PORT` (both names are DNS labels, nothing to escape).
  const path = apiPath(apiResources.services, { namespace: service.namespace, name: `https:${service.name}:${service.port}`, subresource: 'proxy/status' });
  let status: unknown;
  try {
    status = await getJson(kubeConfig, path, 15_000);
  } catch (err) {
    const why = err instanceof KubernetesApiError ? (err.detail ?? err.message) : (err as Error).message;
    // A proxy that cannot connect (503) is often a NetworkPolicy that keeps the API server off the metrics port.
    const hint =
      err instanceof KubernetesApiError && err.statusCode === 503 && /error trying to reach service/.test(why)
        ? ` (the API server must reach the Service's port ${service.port}: where a NetworkPolicy is enforced, admit it, e.g. manifests/components/restricted-ingress)`
        : '';
    return { from, error: `cannot read the injector's /status through the API server's service proxy: ${why.slice(0, 500)}${hint}` };
  }
  if (!isJsonObject(status)) return { from, error: "the injector's /status is not a JSON object" };
  const rollout = isJsonObject(status.rollout) ? status.rollout : undefined;
  const replica = rollout ? text(rollout.replica) : undefined;
  if (!rollout) return { from, preflight: false };
  return { from, ...(replica ? { replica } : {}), preflight: true, candidates: candidateStates(rollout) };
}

/** The injector's view as text: a line per candidate, and why each that takes no pod does not. */
function formatInjector(injector: InjectorRollout): string {
  const source = `injector ${injector.from}${injector.replica ? ` (replica ${injector.replica})` : ''}`;
  if (injector.error) return `${source}: ${injector.error}\n`;
  if (!injector.preflight) return `${source}: runs no preflight (no --rollout-probe-namespace): each candidate takes its share as soon as it is loaded\n`;
  const candidates = injector.candidates ?? [];
  if (candidates.length === 0) return `${source}: no candidate\n`;
  const table = columns(
    ['TEMPLATE', 'CANDIDATE', 'TAKES PODS', 'PREFLIGHT', 'CHECKED', 'HALTED', 'PODS', 'RESTARTING', 'NOT READY', 'REFUSED', 'LOOKED'],
    candidates.map((c) => [
      c.template,
      c.revision,
      c.takesPods ? 'yes' : 'no',
      c.preflight.state === 'failed' ? `failed (${c.preflight.failure ?? '?'})` : c.preflight.state,
      c.preflight.checkedAt ?? '-',
      c.halted ? 'yes' : 'no',
      c.health ? String(c.health.pods) : '-',
      c.health ? String(c.health.restarting) : '-',
      c.health ? String(c.health.notReady) : '-',
      c.health ? String(c.health.refusedWorkloads) : '-',
      c.health?.checkedAt || '-',
    ]),
  );
  const why = candidates.filter((c) => c.stopped).map((c) => `${c.template}: ${c.stopped}\n`);
  return `${source}:\n${table}${why.join('')}`;
}

/** Runs `rollout status`; returns the exit code. */
export async function rollout(argv: readonly string[], io: RolloutIo, env: Readonly<Record<string, string | undefined>> = {}): Promise<number> {
  const { values, positionals } = parseOptions('rollout', rolloutOptions, argv, env, ['status']);
  if (positionals[0] !== 'status')
    throw new UsageError(
      `rollout: expected the subcommand status (got ${JSON.stringify(positionals[0] ?? '').slice(0, 40)}); see sidecar-injector rollout --help`,
    );
  const output = (values.output as string | undefined) ?? 'text';
  if (output !== 'text' && output !== 'json') throw new ConfigError([`-o: expected text or json (got ${JSON.stringify(output).slice(0, 40)})`]);
  const dir = values.templates as string | undefined;
  if (values.offline && dir === undefined) throw new ConfigError(['--offline shows a folder: give --templates DIR']);
  const kubeConfig = values.offline
    ? undefined
    : await loadKubeConfig(values.kubeconfig as string | undefined, {
        fallback: 'default',
        hint: ' (--offline shows a --templates folder only)',
      });
  // The cluster's SidecarTemplates by default (as the injector checks them), a folder when given.
  const inForce = kubeConfig ? await templatesInForce(kubeConfig, dir) : undefined;
  const set = inForce ? inForce.set : await loadTemplateDir(dir!);
  const report: { templates: TemplateRollout[]; objects?: readonly ObjectState[]; pods?: RevisionCount[]; injector?: InjectorRollout } = {
    templates: templateRollouts(set),
    ...(inForce?.objects ? { objects: inForce.objects } : {}),
  };
  if (kubeConfig) {
    const service = parseInjectorService((values.injector as string | undefined) ?? rolloutOptions.injector.default);
    const namespace = values.namespace as string | undefined;
    let counter = new RevisionCounter(set);
    await listPages<{ metadata?: ListedMetadata }>(
      kubeConfig,
      apiPath(apiResources.pods, namespace ? { namespace } : {}),
      { accept: metadataOnly, pageSize: 500, onRestart: () => (counter = new RevisionCounter(set)) },
      (page) => page.forEach((pod) => pod.metadata && counter.add(pod.metadata)),
    );
    report.pods = counter.result();
    report.injector = await injectorRollout(kubeConfig, service);
  }
  io.stdout.write(output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : formatRollout(report));
  return 0;
}

/**
 * `sidecar-injector rollout status`: per template, the stable revision, the candidate with its
 * share and scope, and the previous revision (the cluster's SidecarTemplates, or a folder); each
 * SidecarTemplate's status as the injector's elected replica wrote it — for a candidate its
 * preflight, halt and health; and from the cluster (a metadata-only list of pods, read page by
 * page), how many workloads and pods run each revision.
 */
import { ConfigError, UsageError } from '../errors.js';
import { parseOptions } from '../options.js';
import { parseLedger } from '../inject/ledger.js';
import { AnnotationKeys } from '../k8s/keys.js';
import type { Selector } from '../k8s/selector.js';
import { listPages, metadataOnly } from '../kube-api/request.js';
import type { ListedMetadata } from '../pipeline/audit.js';
import { loadTemplateDir } from '../templates/load.js';
import { printableLine } from '../quote.js';
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

export interface RolloutReport {
  readonly templates: readonly TemplateRollout[];
  /** Each SidecarTemplate's status as the injector wrote it; undefined with a folder. */
  readonly objects?: readonly ObjectState[];
  /** Undefined with --offline. */
  readonly pods?: readonly RevisionCount[];
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
          printableLine(o.name),
          printableLine(o.role ?? '-'),
          printableLine(o.share ?? '-'),
          printableLine(o.state ?? 'no status yet'),
          String(o.pods?.current ?? '-'),
          String(o.pods?.stale ?? '-'),
          String(o.pods?.missing ?? '-'),
          printableLine(o.message ?? ''),
        ]),
      )}`
    : '';
  const candidates = formatCandidates(report.objects ?? []) + formatInPlace(report.objects ?? []);
  if (!report.pods) return `${templates}${objects}${candidates}`;
  const pods = columns(
    ['TEMPLATE', 'REVISION', 'ROLE', 'WORKLOADS', 'PODS'],
    report.pods.map((c) => [c.template, c.revision, c.role, String(c.workloads), String(c.pods)]),
  );
  return `${templates}${objects}${candidates}\n${report.pods.length > 0 ? pods : 'no pod carries one of these templates\n'}`;
}

/** The candidates' objects as text: preflight, halt and last health look as the elected replica wrote them (why one takes no pod is its MESSAGE above). */
function formatCandidates(objects: readonly ObjectState[]): string {
  const candidates = objects.filter((o) => o.role === 'candidate');
  if (candidates.length === 0) return '';
  const replicas = [...new Set(candidates.map((c) => c.preflight?.replica).filter((r) => r !== undefined))];
  const table = columns(
    ['CANDIDATE', 'REVISION', 'PREFLIGHT', 'CHECKED', 'HALTED', 'PODS', 'RESTARTING', 'NOT READY', 'REFUSED', 'LOOKED'],
    candidates.map((c) => [
      printableLine(c.name),
      printableLine(c.revision ?? '-'),
      c.preflight ? printableLine(c.preflight.state === 'failed' ? `failed (${c.preflight.failure ?? '?'})` : c.preflight.state) : '-',
      printableLine(c.preflight?.checkedAt ?? '-'),
      c.halted !== undefined ? 'yes' : 'no',
      c.health ? String(c.health.pods) : '-',
      c.health ? String(c.health.restarting) : '-',
      c.health ? String(c.health.notReady) : '-',
      c.health ? String(c.health.refusedWorkloads) : '-',
      printableLine(c.health?.checkedAt ?? '-'),
    ]),
  );
  const seen = replicas.length > 0 ? ` (as replica ${replicas.map((r) => printableLine(r)).join(', ')} sees them)` : '';
  return `\ncandidates${seen}:\n${table}`;
}

/** The objects whose revision running pods are given in place, as text: what the elected replica's last round saw. */
function formatInPlace(objects: readonly ObjectState[]): string {
  const moving = objects.filter((o) => o.inPlace);
  if (moving.length === 0) return '';
  const table = columns(
    ['SIDECARTEMPLATE', 'REVISION', 'UPDATED', 'PENDING', 'WAITING', 'RECREATE', 'REFUSED', 'FAILED', 'CHECKED'],
    moving.map((o) => {
      const p = o.inPlace!;
      return [
        printableLine(o.name),
        printableLine(o.revision ?? '-'),
        String(p.updated),
        String(p.pending),
        String(p.waitingWorkloads),
        String(p.recreateNeeded),
        String(p.refused),
        String(p.failed),
        printableLine(p.checkedAt ?? '-'),
      ];
    }),
  );
  return `
in place (pods given the revision without a new pod):
${table}`;
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
  const report: { templates: TemplateRollout[]; objects?: readonly ObjectState[]; pods?: RevisionCount[] } = {
    templates: templateRollouts(set),
    ...(inForce?.objects ? { objects: inForce.objects } : {}),
  };
  if (kubeConfig) {
    const namespace = values.namespace as string | undefined;
    let counter = new RevisionCounter(set);
    await listPages<{ metadata?: ListedMetadata }>(
      kubeConfig,
      apiPath(apiResources.pods, namespace ? { namespace } : {}),
      { accept: metadataOnly, pageSize: 500, onRestart: () => (counter = new RevisionCounter(set)) },
      (page) => page.forEach((pod) => pod.metadata && counter.add(pod.metadata)),
    );
    report.pods = counter.result();
  }
  io.stdout.write(output === 'json' ? `${JSON.stringify(report, null, 2)}\n` : formatRollout(report));
  return 0;
}

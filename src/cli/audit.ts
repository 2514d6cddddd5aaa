/**
 * `sidecar-injector audit`: which running pods lack their sidecars or run stale ones. Lists
 * namespaces, then ReplicaSets and Jobs (to find each pod's workload) and pods, all with
 * metadata-only lists read page by page; judges each pod with the admission selection code
 * (pipeline/audit.ts); prints one line per workload, or the whole report as JSON.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig } from '../kube-api/kubeconfig.js';
import { clusterReadFailure, ConfigError } from '../errors.js';
import { metadataNameLabel } from '../namespaces/source.js';
import { parseOptions } from '../options.js';
import {
  auditPod,
  fixFor,
  groupByOwner,
  lacksTemplates,
  podStates,
  refineVerdict,
  restartedForAnnotation,
  restartPlan,
  restartRecord,
  reportOwner,
  type AuditedOwner,
  type ListedMetadata,
  type AuditedPod,
  type PodState,
  type RestartPlan,
} from '../pipeline/audit.js';
import { templatesInForce } from './cluster-reads.js';
import { getJson, listPages, metadataOnly, requestJson } from '../kube-api/request.js';
import { controllingOwner } from '../k8s/object-reference.js';
import { ownerFactsOf, ownerKey, readOwnersLookup, type OwnerFacts } from '../k8s/owners.js';
import { collectionPath, kindsWhere, objectPath, workloadKinds } from '../k8s/workloads.js';
import { PodTemplateDecisions } from '../audit/pod-template-decisions.js';
import { overrideAnnotations, type NamespaceLabelSource } from '../namespaces/source.js';
import type { VersionDecision } from '../k8s/version.js';
import type { PodSecurityAction } from '../pipeline/pod-security-fit.js';
import { auditOptions } from './usage.js';
import { decideFlags, versionDecision } from './decide-flags.js';
import type { Labels } from '../k8s/selector.js';
import type { TemplateSet } from '../templates/set.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';
import type { CommandIo } from './io.js';

/** Output streams, so that tests need no process. */
export type AuditIo = CommandIo;

/** The whole report, as `-o json` prints it. */
export interface AuditReport {
  readonly pods: readonly AuditedPod[];
  readonly owners: readonly AuditedOwner[];
  /** What each restartable workload was restarted for (`kind/namespace/name` → its annotation): not printed. */
  readonly restartedFor?: ReadonlyMap<string, string>;
}

/** How admission decides, for the audit to decide the same. */
export interface AuditDecisionOptions {
  readonly kubernetesVersion?: VersionDecision;
  readonly podSecurity?: PodSecurityAction;
}

const stringMap = (value: unknown): Record<string, string> => {
  const out: Record<string, string> = Object.create(null);
  if (value && typeof value === 'object') for (const [k, v] of Object.entries(value)) if (typeof v === 'string') out[k] = v;
  return out;
};

/** Reads the cluster and judges every pod (of `namespace`, or all). */
export async function auditCluster(kubeConfig: KubeConfig, set: TemplateSet, namespace?: string, decide: AuditDecisionOptions = {}): Promise<AuditReport> {
  const options = { accept: metadataOnly, pageSize: 500 };
  // Namespace labels: one GET for one namespace, a list for all.
  const namespaceLabels = new Map<string, Labels>();
  const namespaceOverrides = new Map<string, Readonly<Record<string, string>>>();
  const keepNamespace = (metadata: ListedMetadata | undefined) => {
    if (typeof metadata?.name !== 'string') return;
    namespaceLabels.set(metadata.name, { ...stringMap(metadata.labels), [metadataNameLabel]: metadata.name });
    namespaceOverrides.set(metadata.name, overrideAnnotations(metadata.annotations));
  };
  if (namespace)
    keepNamespace(
      ((await getJson(kubeConfig, apiPath(apiResources.namespaces, { name: namespace }), 30_000, metadataOnly)) as { metadata?: ListedMetadata }).metadata,
    );
  else
    await listPages<{ metadata?: ListedMetadata }>(
      kubeConfig,
      apiPath(apiResources.namespaces),
      { ...options, onRestart: () => namespaceLabels.clear() },
      (page) => page.forEach((o) => keepNamespace(o.metadata)),
    );
  // The workloads that exist (their uids), and the owners of ReplicaSets and Jobs: pod →
  // ReplicaSet → Deployment, pod → Job → CronJob. A pod's ownerReference counts only when it names one of these.
  const read = new Map<string, OwnerFacts>();
  const listed = kindsWhere((k) => k.listedByAudit);
  const restartedFor = new Map<string, string>();
  for (const workload of listed) {
    const { kind } = workload;
    await listPages<{ metadata?: ListedMetadata & { uid?: string } }>(kubeConfig, collectionPath(workload, namespace), options, (page) => {
      for (const { metadata } of page) {
        if (typeof metadata?.name !== 'string' || typeof metadata.namespace !== 'string' || typeof metadata.uid !== 'string') continue;
        const key = ownerKey({ kind, namespace: metadata.namespace, name: metadata.name });
        read.set(key, ownerFactsOf(workload.ownedBy ? metadata : { uid: metadata.uid }, metadata.namespace));
        const restarted = stringMap(metadata.annotations)[restartedForAnnotation];
        if (restarted !== undefined && workload.restartable) restartedFor.set(key, restarted.slice(0, 4096));
      }
    });
  }
  const owners = readOwnersLookup(read, new Set(listed.map((k) => k.kind)));
  const labelsOf = (ns: string) => namespaceLabels.get(ns) ?? { [metadataNameLabel]: ns };
  // Admission's own decision for a new pod of each workload whose pods metadata says lack a template.
  const namespaces: NamespaceLabelSource = {
    kind: 'audit',
    labelsOf: async (ns) => labelsOf(ns),
    overridesOf: (ns) => namespaceOverrides.get(ns) ?? {},
    isReady: () => true,
    status: () => ({}),
  };
  const decisions = new PodTemplateDecisions(kubeConfig, {
    templates: () => set,
    namespaces,
    ...(decide.kubernetesVersion ? { kubernetesVersion: () => decide.kubernetesVersion } : {}),
    ...(decide.podSecurity ? { podSecurity: decide.podSecurity } : {}),
  });
  let pods: AuditedPod[] = [];
  let refinements: Promise<void>[] = [];
  await listPages<{ metadata?: ListedMetadata }>(
    kubeConfig,
    apiPath(apiResources.pods, namespace ? { namespace } : {}),
    {
      ...options,
      onRestart: () => {
        pods = [];
        refinements = [];
      },
    },
    (page) => {
      for (const { metadata } of page) {
        if (typeof metadata?.name !== 'string' || typeof metadata.namespace !== 'string') continue;
        const labels = stringMap(metadata.labels);
        const pod = {
          namespace: metadata.namespace,
          name: metadata.name,
          labels,
          annotations: stringMap(metadata.annotations),
          ...(typeof metadata.generateName === 'string' ? { generateName: metadata.generateName } : {}),
          ownerReferences: metadata.ownerReferences,
        };
        const audited: AuditedPod = {
          namespace: pod.namespace,
          name: pod.name,
          owner: reportOwner(pod, owners),
          ...auditPod(pod, labelsOf(pod.namespace), set),
        };
        const index = pods.push(audited) - 1;
        if (!lacksTemplates(audited)) continue;
        const list = pods;
        const owner = controllingOwner(metadata.ownerReferences, pod.namespace);
        const revision = labels['controller-revision-hash'];
        refinements.push(
          decisions
            .decisionsFor({ namespace: pod.namespace, name: pod.name, ...(owner ? { owner } : {}), ...(revision !== undefined ? { revision } : {}) })
            .then((found) => {
              if (found) list[index] = { ...audited, ...refineVerdict(audited, found) };
            }),
        );
      }
    },
  );
  await Promise.all(refinements);
  pods.sort((a, b) => (a.namespace + '\0' + a.name < b.namespace + '\0' + b.name ? -1 : 1));
  return { pods, owners: groupByOwner(pods), restartedFor };
}

/** One line per workload: namespace, workload, pods, counts per state, and the fix when something is missing or stale. */
export function formatAudit(report: AuditReport): string {
  const rows = report.owners.map((o) => {
    const states = podStates.filter((s) => o.states[s]).map((s) => `${s} ${o.states[s]}`);
    const needsFix = (o.states.missing ?? 0) + (o.states.stale ?? 0) + (o.states.orphaned ?? 0) > 0;
    const rules = [
      ...new Set(
        report.pods
          .filter((p) => p.namespace === o.namespace && p.owner.kind === o.kind && p.owner.name === o.name)
          .flatMap((p) => p.templates.filter((t) => t.rule).map((t) => `${t.name}: ${t.rule}`)),
      ),
    ];
    const fix = needsFix ? fixFor(o.namespace, o) : rules.length > 0 ? `left out by rule (${rules.join('; ')}): docs/decisions.md` : '-';
    return [o.namespace, `${o.kind.toLowerCase()}/${o.name}`, String(o.pods), states.join(', '), fix];
  });
  const header = ['NAMESPACE', 'WORKLOAD', 'PODS', 'STATES', 'FIX'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: readonly string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  const totals = podStates.map((s) => [s, report.pods.filter((p) => p.state === s).length] as const).filter(([, n]) => n > 0);
  return `${[line(header), ...rows.map(line)].join('\n')}\n\n${report.pods.length} pods${totals.length ? `: ${totals.map(([s, n]) => `${s} ${n}`).join(', ')}` : ''}\n`;
}

/** `missing,stale` → the states, or a problem naming the one that is not a state. */
function statesOption(flag: string, raw: unknown, problems: string[]): PodState[] {
  const states = String(raw ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  const unknown = states.filter((s) => !podStates.includes(s as PodState));
  if (unknown.length > 0)
    problems.push(`--${flag}: ${unknown.map((s) => JSON.stringify(s.slice(0, 40))).join(', ')} is not a state (expected ${podStates.join(', ')})`);
  return states as PodState[];
}

/**
 * Restarts each workload as `kubectl rollout restart` does: the pod template annotation
 * `kubectl.kubernetes.io/restartedAt`, so the workload's rollout strategy and
 * PodDisruptionBudgets apply. Paced: at most `perMinute` a minute.
 */
async function restartAll(
  kubeConfig: KubeConfig,
  plan: RestartPlan,
  restartedFor: ReadonlyMap<string, string>,
  perMinute: number,
  dryRun: boolean,
  io: AuditIo,
  delay: (ms: number) => Promise<void>,
  now: () => Date,
): Promise<void> {
  for (const { owner, why } of plan.untouched) io.stdout.write(`not restarted: ${owner.kind.toLowerCase()}/${owner.name} in ${owner.namespace} (${why})\n`);
  for (const [i, owner] of plan.restart.entries()) {
    const target = `${owner.kind.toLowerCase()}/${owner.name} in ${owner.namespace}`;
    if (dryRun) {
      io.stdout.write(`would restart ${target}\n`);
      continue;
    }
    if (i > 0) await delay(60_000 / perMinute);
    const path = objectPath(workloadKinds.get(owner.kind)!, owner.namespace, owner.name);
    // The template revisions it is restarted for, on the workload itself (not its pod template, which would roll it again).
    const body = {
      metadata: { annotations: { [restartedForAnnotation]: restartRecord(owner, restartedFor.get(ownerKey(owner))) } },
      spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': now().toISOString() } } } },
    };
    try {
      await requestJson(kubeConfig, 'PATCH', path, 30_000, { body, contentType: 'application/strategic-merge-patch+json' });
      io.stdout.write(`restarted ${target}\n`);
    } catch (err) {
      io.stderr.write(`could not restart ${target}: ${(err as Error).message}\n`);
    }
  }
}

/** Runs `audit`; returns the exit code (0, or 3 when --fail-on states are found). */
export async function audit(
  argv: readonly string[],
  io: AuditIo,
  env: Readonly<Record<string, string | undefined>> = {},
  delay: (ms: number) => Promise<void> = (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  now: () => Date = () => new Date(),
): Promise<number> {
  const { values } = parseOptions('audit', auditOptions, argv, env);
  const output = (values.output as string | undefined) ?? 'text';
  const problems: string[] = [];
  if (output !== 'text' && output !== 'json') problems.push(`-o: expected text or json (got ${JSON.stringify(output).slice(0, 40)})`);
  const failOn = statesOption('fail-on', values['fail-on'], problems);
  const restartStates = statesOption('restart', values.restart, problems);
  const perMinute = Number(values['max-per-minute'] ?? '10');
  if (!Number.isInteger(perMinute) || perMinute < 1 || perMinute > 60_000) {
    problems.push(`--max-per-minute: expected a whole number from 1 to 60000 (got ${JSON.stringify(String(values['max-per-minute'])).slice(0, 40)})`);
  }
  if (values['dry-run'] && restartStates.length === 0) problems.push('--dry-run goes with --restart');
  const { flagVersion, podSecurity } = decideFlags(values, problems);
  if (restartStates.length > 0 && output === 'json') problems.push('--restart writes what it does as text: leave out -o json');
  if (problems.length > 0) throw new ConfigError(problems);
  const kubeConfig = await loadKubeConfig(values.kubeconfig as string | undefined, { fallback: 'default' });
  // The cluster's SidecarTemplates by default (as the injector checks them), a folder when given; none yet is no error.
  const inForce = await templatesInForce(kubeConfig, values.templates as string | undefined);
  const set = inForce.set;
  for (const refused of inForce.refused.slice(0, 20))
    io.stderr.write(`audit: sidecartemplate/${refused.name} is refused by the injector and not in force: ${refused.problems.slice(0, 3).join('; ')}\n`);
  if (set.templates.length === 0) io.stderr.write(`audit: no templates in ${inForce.from}: no pod can lack a sidecar\n`);
  let report: AuditReport;
  try {
    const kubernetesVersion = await versionDecision(kubeConfig, flagVersion, 30_000);
    report = await auditCluster(kubeConfig, set, values.namespace as string | undefined, { kubernetesVersion, podSecurity });
  } catch (err) {
    throw clusterReadFailure('the cluster', err);
  }
  const { restartedFor, ...printed } = report;
  io.stdout.write(output === 'json' ? `${JSON.stringify(printed)}\n` : formatAudit(report));
  if (restartStates.length > 0)
    await restartAll(
      kubeConfig,
      restartPlan(report.owners, restartStates, restartedFor),
      restartedFor ?? new Map(),
      perMinute,
      Boolean(values['dry-run']),
      io,
      delay,
      now,
    );
  return report.pods.some((p) => failOn.includes(p.state)) ? 3 : 0;
}

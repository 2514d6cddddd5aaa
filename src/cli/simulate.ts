/**
 * `sidecar-injector simulate --templates DIR`: what a change of templates does to every workload
 * in scope, before any pod gets it. For each workload (Deployment, StatefulSet, DaemonSet, Job,
 * CronJob, ReplicationController, a ReplicaSet no Deployment owns, a bare pod), the pod its
 * controller would create is decided with the templates in force and with the new ones (the
 * admission code, locally), and the new pod is sent as a dry-run create through the cluster's own
 * admission chain — other webhooks and policies, Pod Security, LimitRanges, quotas; the injector
 * stands aside for a simulation's dry run (it carries the sidecars simulated) — and the answer is
 * decided again for a fixed point. A refused workload is sent again as the templates in force make
 * it: refused then too, it was refused before the change. Nothing is stored. Exit 3 when the
 * change would make any workload refused.
 */
import { ConfigError } from '../errors.js';
import { printable } from '../quote.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { AnnotationKeys } from '../k8s/keys.js';
import { controllingOwner } from '../k8s/object-reference.js';
import { withoutInjected } from '../inject/authored.js';
import type { Labels } from '../k8s/selector.js';
import { collectionPath, kindsWhere, podFromTemplate, podTemplateOf } from '../k8s/workloads.js';
import { loadKubeConfig } from '../kube-api/kubeconfig.js';
import { listPages } from '../kube-api/request.js';
import {
  podOf,
  podResources,
  qosOf,
  refusedBy,
  sidecarChange,
  stillCompletes,
  type PodResources,
  type RefusedBy,
  type SidecarChange,
} from '../manifests/simulate.js';
import { metadataNameLabel, overrideAnnotations, type NamespaceLabelSource } from '../namespaces/source.js';
import { parseOptions } from '../options.js';
import { admitPod, type AdmitDeps } from '../pipeline/admit.js';
import { apiServerDryRun, resubmittable } from '../rollout/preflight.js';
import { loadTemplateDir } from '../templates/load.js';
import type { TemplateSet } from '../templates/set.js';
import { stringMap, templatesInForce } from './cluster-reads.js';
import { decideFlags, versionDecision } from './decide-flags.js';
import { simulateOptions } from './usage.js';
import type { CommandIo } from './io.js';

export type SimulateIo = CommandIo;

/** One workload's result. */
export interface SimulatedWorkload {
  readonly namespace: string;
  readonly kind: string;
  readonly name: string;
  readonly sidecars: SidecarChange;
  readonly qos: { readonly before: string; readonly after: string };
  /** The pod's cpu and memory, requested and limited, before and after (what quotas and LimitRanges count). */
  readonly resources: { readonly before: PodResources; readonly after: PodResources };
  /**
   * `admitted`; `refused` (by whom, the API server's message: the change's doing, the pod as the
   * templates in force make it is admitted); `refused-before` (refused, and so is the pod the
   * templates in force make: not the change's doing); `not-fixed-point` (decided again, the
   * admitted pod gets another patch); `unchanged` (no sidecar changes: not sent).
   */
  readonly verdict: 'admitted' | 'refused' | 'refused-before' | 'not-fixed-point' | 'unchanged';
  readonly refusedBy?: RefusedBy;
  readonly refuser?: string;
  readonly message?: string;
  /** For a Job's or CronJob's pods: whether they still run to completion. */
  readonly completes?: boolean;
}

export interface SimulateReport {
  readonly workloads: readonly SimulatedWorkload[];
  readonly summary: { readonly byVerdict: Readonly<Record<string, number>>; readonly byNamespace: Readonly<Record<string, Readonly<Record<string, number>>>> };
  /** Set when --max-failures stopped the run. */
  readonly stoppedEarly?: boolean;
}

const timeoutMs = 30_000;
const runsToCompletion = new Set(['Job', 'CronJob']);

/** A workload in scope: its kind, namespace, name, the pod a new one would be, and its own labels. */
interface Subject {
  readonly kind: string;
  readonly namespace: string;
  readonly name: string;
  readonly pod: JsonObject;
}

/** What of a stored pod a new create would not carry: what the API server sets, and its status. */
function asNewPod(pod: JsonObject): JsonObject {
  const { nodeName: _nodeName, ...spec } = isJsonObject(pod.spec) ? pod.spec : {};
  return { ...resubmittable(pod), spec };
}

/**
 * The pod a dry run sends: marked as a simulation (the injector stands aside, it carries the
 * sidecars simulated) and, when it has a name, sent under a generated one so that the verdict is
 * about the change and not about the pod of that name that exists (`already exists`).
 */
function dryRunPod(pod: JsonObject): JsonObject {
  const { name, ...metadata } = isJsonObject(pod.metadata) ? pod.metadata : {};
  const annotations = isJsonObject(metadata.annotations) ? metadata.annotations : {};
  return {
    ...pod,
    metadata: {
      ...metadata,
      ...(typeof name === 'string' && name !== '' ? { generateName: `${name.slice(0, 200)}-` } : {}),
      annotations: { ...annotations, [AnnotationKeys.simulation]: 'true' },
    },
  };
}

/** Every workload in scope: each kind's objects whose pods are not another workload's, and bare pods. */
async function workloadsInScope(kubeConfig: Parameters<typeof listPages>[0], namespace: string | undefined, inForce: TemplateSet): Promise<Subject[]> {
  const subjects: Subject[] = [];
  const scope = namespace === undefined ? {} : { namespace };
  for (const kind of kindsWhere((k) => k.createsPods || k.kind === 'Deployment' || k.kind === 'CronJob')) {
    await listPages<JsonObject>(kubeConfig, collectionPath(kind, namespace), { pageSize: 100, timeoutMs, onRestart: () => subjects.splice(0) }, (page) => {
      for (const object of page) {
        const metadata = isJsonObject(object.metadata) ? object.metadata : {};
        if (typeof metadata.name !== 'string' || typeof metadata.namespace !== 'string') continue;
        // A Deployment's ReplicaSets and a CronJob's Jobs are simulated through their owner.
        const owner = controllingOwner(metadata.ownerReferences, metadata.namespace);
        if (owner && kind.ownedBy === owner.kind) continue;
        const found = podTemplateOf(kind.kind, object);
        if (!found) continue;
        const uid = typeof metadata.uid === 'string' ? metadata.uid : undefined;
        const pod = podFromTemplate(found.template, {
          name: metadata.name,
          namespace: metadata.namespace,
          owner: { apiVersion: kind.apiVersion, kind: kind.kind, name: metadata.name, ...(uid ? { uid } : {}), controller: true },
        });
        subjects.push({ kind: kind.kind, namespace: metadata.namespace, name: metadata.name, pod });
      }
    });
  }
  await listPages<JsonObject>(kubeConfig, apiPath(apiResources.pods, scope), { pageSize: 100, timeoutMs }, (page) => {
    for (const object of page) {
      const metadata = isJsonObject(object.metadata) ? object.metadata : {};
      if (typeof metadata.name !== 'string' || typeof metadata.namespace !== 'string') continue;
      if (controllingOwner(metadata.ownerReferences, metadata.namespace)) continue;
      // Its re-create starts from its author's manifest: what the injector added is taken out.
      subjects.push({ kind: 'Pod', namespace: metadata.namespace, name: metadata.name, pod: withoutInjected(asNewPod(object), inForce) });
    }
  });
  return subjects;
}

/**
 * Runs `simulate`; returns the exit code: 3 when the change would make any workload refused or
 * not a fixed point (with --strict, also when a workload is refused before the change too).
 */
export async function simulate(argv: readonly string[], io: SimulateIo, env: Readonly<Record<string, string | undefined>> = {}): Promise<number> {
  const { values } = parseOptions('simulate', simulateOptions, argv, env);
  const problems: string[] = [];
  const dir = values.templates as string | undefined;
  if (dir === undefined) problems.push('--templates DIR (the new templates) is required');
  const output = (values.output as string | undefined) ?? 'text';
  if (output !== 'text' && output !== 'json') problems.push(`-o: expected text or json (got ${JSON.stringify(output).slice(0, 80)})`);
  const rate = Number(values.rate ?? '20');
  if (!Number.isFinite(rate) || rate <= 0 || rate > 1000)
    problems.push(`--rate: expected dry runs per second, more than 0 and at most 1000 (got ${JSON.stringify(String(values.rate)).slice(0, 40)})`);
  const maxFailures = values['max-failures'] === undefined ? Infinity : Number(values['max-failures']);
  if (!(maxFailures === Infinity || (Number.isInteger(maxFailures) && maxFailures >= 1)))
    problems.push(`--max-failures: expected a whole number from 1 (got ${JSON.stringify(String(values['max-failures'])).slice(0, 40)})`);
  const strict = values.strict === true;
  const { flagVersion, podSecurity } = decideFlags(values, problems);
  if (problems.length > 0) throw new ConfigError(problems);
  const next = await loadTemplateDir(dir!, { allowEmpty: true });
  const kubeConfig = await loadKubeConfig(values.kubeconfig as string | undefined, { fallback: 'default' });
  const inForce = await templatesInForce(kubeConfig, undefined);
  for (const refused of inForce.refused.slice(0, 20))
    io.stderr.write(`simulate: sidecartemplate/${refused.name} is refused by the injector and not in force: ${refused.problems.slice(0, 3).join('; ')}\n`);
  const version = await versionDecision(kubeConfig, flagVersion, timeoutMs);
  const namespace = values.namespace as string | undefined;

  // Every namespace's labels and override annotations, as admission reads them.
  const namespaceLabels = new Map<string, Labels>();
  const namespaceOverrides = new Map<string, Readonly<Record<string, string>>>();
  await listPages<JsonObject>(kubeConfig, apiPath(apiResources.namespaces), { pageSize: 500, timeoutMs }, (page) => {
    for (const object of page) {
      const metadata = isJsonObject(object.metadata) ? object.metadata : {};
      if (typeof metadata.name !== 'string') continue;
      namespaceLabels.set(metadata.name, { ...stringMap(metadata.labels), [metadataNameLabel]: metadata.name });
      namespaceOverrides.set(metadata.name, overrideAnnotations(stringMap(metadata.annotations)));
    }
  });
  const namespaces: NamespaceLabelSource = {
    kind: 'simulate',
    labelsOf: async (ns) => namespaceLabels.get(ns) ?? { [metadataNameLabel]: ns },
    overridesOf: (ns) => namespaceOverrides.get(ns) ?? {},
    isReady: () => true,
    status: () => ({}),
  };
  const depsOf = (set: TemplateSet): AdmitDeps => ({ templates: () => set, namespaces, kubernetesVersion: () => version, podSecurity });
  const before = depsOf(inForce.set);
  const after = depsOf(next);
  const dryRun = apiServerDryRun(kubeConfig, timeoutMs);

  const subjects = await workloadsInScope(kubeConfig, namespace, inForce.set);
  io.stderr.write(`simulate: ${subjects.length} workload(s); templates in force from ${inForce.from}, new from ${dir}\n`);
  const workloads: SimulatedWorkload[] = [];
  let failures = 0;
  let lastSent = 0;
  let stoppedEarly = false;
  for (const [i, subject] of subjects.entries()) {
    if (failures >= maxFailures) {
      stoppedEarly = true;
      break;
    }
    if (i > 0 && i % 100 === 0) io.stderr.write(`simulate: ${i} of ${subjects.length}\n`);
    const input = { pod: subject.pod, namespace: subject.namespace, name: subject.kind === 'Pod' ? subject.name : '' };
    const was = await admitPod(input, before);
    const now = await admitPod(input, after);
    const sidecars = sidecarChange(was, now);
    const newPod = podOf(now, subject.pod);
    const common = {
      namespace: subject.namespace,
      kind: subject.kind,
      name: subject.name,
      sidecars,
      qos: { before: qosOf(podOf(was, subject.pod)), after: qosOf(newPod) },
      resources: { before: podResources(podOf(was, subject.pod)), after: podResources(newPod) },
      ...(runsToCompletion.has(subject.kind) ? { completes: stillCompletes(now) } : {}),
    };
    if (now.decision === 'denied') {
      const before = was.decision === 'denied';
      if (!before || strict) failures++;
      workloads.push({ ...common, verdict: before ? 'refused-before' : 'refused', refusedBy: 'injector', message: now.message.slice(0, 1000) });
      continue;
    }
    if (!sidecars.added.length && !sidecars.removed.length && !sidecars.changed.length && was.decision === now.decision) {
      workloads.push({ ...common, verdict: 'unchanged' });
      continue;
    }
    // Polite: at most `rate` dry runs a second.
    const send = async (pod: JsonObject) => {
      const wait = lastSent + 1000 / rate - Date.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      lastSent = Date.now();
      return dryRun(subject.namespace, dryRunPod(pod));
    };
    const answer = await send(newPod);
    if (!answer.admitted) {
      // Refused: is it the change? The pod as the templates in force make it, sent the same way.
      const before = was.decision === 'denied' || !(await send(podOf(was, subject.pod))).admitted;
      if (!before || strict) failures++;
      const by = refusedBy(answer.message);
      workloads.push({
        ...common,
        verdict: before ? 'refused-before' : 'refused',
        refusedBy: by.by,
        ...(by.name ? { refuser: by.name } : {}),
        message: answer.message.slice(0, 1000),
      });
      continue;
    }
    // The pod as the chain made it, decided again with the new templates: a fixed point gets no patch.
    const stored = resubmittable(answer.pod);
    const storedMetadata = isJsonObject(stored.metadata) ? stored.metadata : {};
    const { [AnnotationKeys.simulation]: _marker, ...storedAnnotations } = isJsonObject(storedMetadata.annotations) ? storedMetadata.annotations : {};
    const again = await admitPod({ ...input, pod: { ...stored, metadata: { ...storedMetadata, annotations: storedAnnotations } } }, after);
    if (again.decision === 'patched') {
      failures++;
      workloads.push({
        ...common,
        verdict: 'not-fixed-point',
        message: `decided again after the chain, it gets another patch: ${again.message}`.slice(0, 1000),
      });
    } else workloads.push({ ...common, verdict: 'admitted' });
  }
  // Null-prototype maps: a namespace may be called `constructor`.
  const byVerdict: Record<string, number> = Object.create(null);
  const byNamespace: Record<string, Record<string, number>> = Object.create(null);
  for (const w of workloads) {
    byVerdict[w.verdict] = (byVerdict[w.verdict] ?? 0) + 1;
    const ns = (byNamespace[w.namespace] ??= Object.create(null) as Record<string, number>);
    ns[w.verdict] = (ns[w.verdict] ?? 0) + 1;
  }
  const report: SimulateReport = { workloads, summary: { byVerdict, byNamespace }, ...(stoppedEarly ? { stoppedEarly } : {}) };
  io.stdout.write(printable(output === 'json' ? `${JSON.stringify(report)}\n` : formatSimulation(report)));
  return failures > 0 ? 3 : 0;
}

const verdicts: readonly SimulatedWorkload['verdict'][] = ['admitted', 'refused', 'refused-before', 'not-fixed-point', 'unchanged'];

/** The text report: the counts, each failure's first examples, then one line per workload that changes. */
export function formatSimulation(report: SimulateReport): string {
  const lines: string[] = [];
  // In one order whatever came first: a CI log compares from run to run.
  const counts = verdicts
    .filter((verdict) => report.summary.byVerdict[verdict])
    .map((verdict) => `${verdict} ${report.summary.byVerdict[verdict]}`)
    .join(', ');
  lines.push(`${report.workloads.length} workload(s): ${counts || 'none'}${report.stoppedEarly ? ' (stopped early: --max-failures)' : ''}`);
  // The first examples of each failure: by verdict and who refused.
  const groups = new Map<string, SimulatedWorkload[]>();
  for (const w of report.workloads) {
    if (w.verdict !== 'refused' && w.verdict !== 'refused-before' && w.verdict !== 'not-fixed-point') continue;
    const key = `${w.verdict.toUpperCase()}${w.refusedBy ? ` by ${w.refusedBy}${w.refuser ? ` ${w.refuser}` : ''}` : ''}`;
    groups.set(key, [...(groups.get(key) ?? []), w]);
  }
  for (const [key, members] of groups) {
    lines.push(`  ${key}: ${members.length} workload(s), e.g.`);
    for (const w of members.slice(0, 2)) lines.push(`    ${w.kind} ${w.namespace}/${w.name}: ${w.message ?? ''}`);
  }
  for (const w of report.workloads) {
    if (w.verdict === 'unchanged') continue;
    const change = [...w.sidecars.added.map((s) => `+${s}`), ...w.sidecars.removed.map((s) => `-${s}`), ...w.sidecars.changed.map((s) => `~${s}`)].join(' ');
    const qos = w.qos.before === w.qos.after ? '' : `; QoS ${w.qos.before} → ${w.qos.after}`;
    const { before, after } = w.resources;
    const resources = (['requests', 'limits'] as const)
      .flatMap((kind) =>
        (['cpu', 'memory'] as const).filter((r) => before[kind][r] !== after[kind][r]).map((r) => `${kind} ${r} ${before[kind][r]} → ${after[kind][r]}`),
      )
      .join(', ');
    const completes = w.completes === false ? '; its pods would never complete' : '';
    lines.push(`${w.namespace} ${w.kind}/${w.name}: ${w.verdict}; ${change || 'no sidecar change'}${resources ? `; ${resources}` : ''}${qos}${completes}`);
  }
  return `${lines.join('\n')}\n`;
}

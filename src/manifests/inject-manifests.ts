/**
 * Offline injection of manifests: finds the pod template of each workload (Pod, Deployment,
 * StatefulSet, DaemonSet, ReplicaSet, ReplicationController, Job, CronJob; List items too),
 * runs the very same admission code as the webhook on it, and writes the result back. Every
 * other object is left exactly as it is. Explains each decision in sentences.
 */
import { qosClass } from '../k8s/qos.js';
import { admitPod, type AdmitDeps, type PodOutcome } from '../pipeline/admit.js';
import { podItemKinds, type LedgerEntry } from '../inject/ledger.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { AnnotationKeys, LabelKeys } from '../k8s/keys.js';
import { clusterWarning } from '../pipeline/cluster-warnings.js';
import { podFromTemplate, podTemplateOf, workloadKinds } from '../k8s/workloads.js';
import { nearMiss } from '../k8s/near-miss.js';
import { requirementPhrase, unmetBecause, unmetRequirement, type Labels } from '../k8s/selector.js';
import type { TemplateSkip } from '../selection/select.js';

/** What happened to one object. */
export interface InjectedManifest {
  /** The object to write: the input itself when unchanged. */
  readonly object: unknown;
  readonly changed: boolean;
  /** True when the webhook would refuse the pod (explained in `explanation`). */
  readonly refused: boolean;
  /** `Kind namespace/name`. */
  readonly label: string;
  /** Sentences for `--explain`; the first says what happened. */
  readonly explanation: readonly string[];
}

function describeEntry(entry: LedgerEntry | undefined): string {
  if (!entry) return '';
  const parts: string[] = [];
  for (const kind of podItemKinds) {
    if (entry[kind]?.length) parts.push(`${kind} ${entry[kind]!.join(', ')}`);
  }
  for (const [container, items] of Object.entries(entry.appContainers ?? {})) {
    const added = [
      ...(items.env ?? []).map((e) => `env ${e}`),
      ...(items.envFrom ?? []).map((e) => `envFrom ${e}`),
      ...(items.volumeMounts ?? []).map((m) => `mount ${m}`),
    ];
    if (added.length) parts.push(`${added.join(', ')} in ${container}`);
  }
  return parts.length ? ` (${parts.join('; ')})` : '';
}

/** A workload whose pod template was decided: its kind, its own labels, and where its pod template sits. */
export interface WorkloadContext {
  readonly kind: string;
  readonly labels: Labels;
  readonly path: readonly string[];
}

/**
 * Why a template was skipped, down to the selector requirement that failed and the value seen;
 * for a workload, whether its own labels would have met it (pods get only their template's).
 */
export function skipDetail(skip: TemplateSkip, workload?: WorkloadContext): string {
  const detail = skip.message.replace(`${skip.template}: `, '');
  if (!skip.unmet) return detail;
  const { requirement, labels } = skip.unmet;
  const namespaceSide = skip.reason === 'namespace-selector';
  const whose = namespaceSide ? 'the namespace' : workload ? 'the pod template' : 'the pod';
  const near = nearMiss(requirement, labels);
  const because = `${detail}: it needs ${requirementPhrase(requirement)}, and ${unmetBecause(requirement, labels, whose)}${near ? `; ${near}` : ''}`;
  // Only a label the pod lacks can be moved to it: for NotIn and DoesNotExist the fix is removing one.
  const positive = requirement.operator === 'In' || requirement.operator === 'Exists';
  if (namespaceSide || !workload || !positive || unmetRequirement({ requirements: [requirement] }, workload.labels)) return because;
  return `${because}; the ${workload.kind}'s own labels meet it, but its pods get only ${[...workload.path, 'metadata', 'labels'].join('.')}: put the label there`;
}

/** The sentences explaining an outcome. */
function explain(outcome: PodOutcome, assumedOptIn: boolean, workload?: WorkloadContext): string[] {
  const lines: string[] = [];
  if (outcome.decision === 'denied') {
    lines.push(`refused: ${outcome.message}`);
    return lines;
  }
  if (outcome.decision === 'patched') lines.push(`injected ${outcome.injection.injected.join(', ')}`);
  else if (outcome.reason === 'already-injected') lines.push(`unchanged: already carries ${outcome.templates.map((t) => t.name).join(', ')}`);
  else lines.push(`not injected: ${outcome.message}`);
  if (assumedOptIn && outcome.reason !== 'namespace-not-enabled' && outcome.reason !== 'pod-opted-out')
    lines.push(`namespace ${outcome.namespace}: assumed opted in (no --namespace-labels or --namespace-label given)`);
  const injection = outcome.injection;
  for (const template of outcome.templates) {
    if (injection?.injected.includes(template.name)) {
      lines.push(`${template.name}: injected${describeEntry(injection.ledger.templates[template.name])}`);
    } else if (injection?.present.includes(template.name)) {
      lines.push(`${template.name}: selected; nothing to add (already present)`);
    }
  }
  for (const [template, parameters] of outcome.parameters ?? []) {
    lines.push(`${template}: parameters ${parameters.map((p) => `${p.name}=${JSON.stringify(p.value)} (${p.source})`).join(', ')}`);
  }
  for (const skip of outcome.selection?.skipped ?? []) lines.push(`${skip.template}: skipped — ${skipDetail(skip, workload)}`);
  if (outcome.decision === 'patched') {
    const from = qosClass(isJsonObject(outcome.original.spec) ? outcome.original.spec : {});
    const to = qosClass(isJsonObject(outcome.injection.pod.spec) ? outcome.injection.pod.spec : {});
    lines.push(`QoS class: ${from === to ? `${to}, as before` : `${from} → ${to}`}`);
  }
  for (const warning of outcome.warnings) lines.push(`warning: ${warning.text}`);
  for (const note of outcome.notes ?? []) lines.push(`note: ${note}`);
  return lines;
}

function setPath(object: JsonObject, path: readonly string[], value: JsonObject): JsonObject {
  const [key, ...rest] = path;
  if (key === undefined) return value;
  return { ...object, [key]: setPath((object[key] ?? {}) as JsonObject, rest, value) };
}

/** Options of an offline render. */
export interface ManifestOptions {
  /** Namespace for objects that name none (and overriding theirs when set). */
  readonly namespace?: string;
  readonly defaultNamespace: string;
  /** True when no namespace labels were given and every namespace counts as opted in. */
  readonly assumedOptIn: boolean;
}

/** Injects one object (recursing into `List` items). */
export async function injectManifest(object: unknown, options: ManifestOptions, deps: AdmitDeps): Promise<InjectedManifest> {
  if (!isJsonObject(object)) return { object, changed: false, refused: false, label: 'a document that is not an object', explanation: ['left as is'] };
  const kind = typeof object.kind === 'string' ? object.kind : '';
  const metadata = isJsonObject(object.metadata) ? object.metadata : {};
  const name = typeof metadata.name === 'string' ? metadata.name : '';
  const namespace = options.namespace ?? (typeof metadata.namespace === 'string' && metadata.namespace ? metadata.namespace : options.defaultNamespace);
  const label = `${kind || 'object'} ${namespace}/${name}`;
  if (kind === 'List' && Array.isArray(object.items)) {
    const items = await Promise.all(object.items.map((item) => injectManifest(item, options, deps)));
    const changed = items.some((i) => i.changed);
    return {
      object: changed ? { ...object, items: items.map((i) => i.object) } : object,
      changed,
      refused: items.some((i) => i.refused),
      label: `List (${items.length} items)`,
      explanation: items.flatMap((i) => [`${i.label}: ${i.explanation[0] ?? ''}`, ...i.explanation.slice(1).map((l) => `  ${l}`)]),
    };
  }
  if (kind === 'Pod') {
    const outcome = await admitPod({ pod: object, namespace, name }, deps);
    const changed = outcome.decision === 'patched';
    return {
      object: changed ? outcome.injection.pod : object,
      changed,
      refused: outcome.decision === 'denied',
      label,
      explanation: explain(outcome, options.assumedOptIn),
    };
  }
  // Own keys only: a kind of `constructor` or `__proto__` is no workload.
  if (!workloadKinds.has(kind)) return { object, changed: false, refused: false, label, explanation: ['not a workload; left as is'] };
  const found = podTemplateOf(kind, object);
  if (!found) return { object, changed: false, refused: false, label, explanation: ['has no pod template; left as is'] };
  const { path, template } = found;
  const templateMetadata = isJsonObject(template.metadata) ? template.metadata : {};
  const misplaced = misplacedOptIn(kind, metadata, templateMetadata, path);
  const pod = podFromTemplate(template, { name, namespace });
  const outcome = await admitPod({ pod, namespace, name: '' }, deps);
  const workloadLabels = isJsonObject(metadata.labels) ? (metadata.labels as Labels) : {};
  const explanation = [...explain(outcome, options.assumedOptIn, { kind, labels: workloadLabels, path }), ...misplaced];
  if (outcome.decision !== 'patched') return { object, changed: false, refused: outcome.decision === 'denied', label, explanation };
  explanation.push(...previewedPodName(kind, name, outcome.injection.injected, deps));
  const injected = outcome.injection.pod;
  const { generateName: _generateName, namespace: _namespace, ...newMetadata } = injected.metadata as JsonObject;
  const newTemplate = { ...template, metadata: newMetadata, spec: injected.spec };
  return { object: setPath(object, path, newTemplate), changed: true, refused: false, label, explanation };
}

/** How the controllers of these kinds name their pods, where the name is not the workload's own plus a random suffix. */
const controllerPodNames: Readonly<Record<string, (name: string) => string>> = {
  Deployment: (name) => `${name}-<pod-template-hash>-<random> after their ReplicaSet`,
  StatefulSet: (name) => `${name}-<ordinal>`,
  CronJob: (name) => `${name}-<scheduled time>-<random> after their Job`,
};

/**
 * A warning when an injected template reads the pod's name and the workload's controller names
 * its pods in a way no offline preview can know (a ReplicaSet's hash, an ordinal, a Job's time):
 * the cluster renders the pod's own name where this preview shows the workload's.
 */
function previewedPodName(kind: string, name: string, injected: readonly string[], deps: AdmitDeps): string[] {
  const named = Object.hasOwn(controllerPodNames, kind) ? controllerPodNames[kind]!(name) : undefined;
  if (!named) return [];
  const set = deps.templates();
  const reading = injected.filter((t) => set.byName.get(t)?.references.some((r) => r.source === 'pod.name' || r.source === 'pod.generateName'));
  return reading.length ? [`warning: ${clusterWarning('pod-name-previewed', reading.join(', '), kind, named, name)}`] : [];
}

/**
 * Warnings for opt-in or opt-out metadata put on the workload instead of its pod template:
 * pods never see the workload's own labels and annotations (a common mistake).
 */
function misplacedOptIn(kind: string, workload: JsonObject, podTemplate: JsonObject, path: readonly string[]): string[] {
  const lines: string[] = [];
  const has = (metadata: JsonObject, field: 'labels' | 'annotations', key: string) => isJsonObject(metadata[field]) && Object.hasOwn(metadata[field], key);
  const where = path.join('.');
  if (has(workload, 'labels', LabelKeys.podOptOut) && !has(podTemplate, 'labels', LabelKeys.podOptOut)) {
    lines.push(`warning: ${clusterWarning('misplaced-opt-in', kind, `label ${LabelKeys.podOptOut}`, where)}`);
  }
  if (has(workload, 'annotations', AnnotationKeys.request) && !has(podTemplate, 'annotations', AnnotationKeys.request)) {
    lines.push(`warning: ${clusterWarning('misplaced-opt-in', kind, `annotation ${AnnotationKeys.request}`, where)}`);
  }
  return lines;
}

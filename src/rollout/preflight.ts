/**
 * The preflight of a candidate revision through the cluster's own admission chain: a probe pod
 * per candidate is created with `dryRun=All` in a namespace the operator names, so the API
 * server runs every mutating webhook (ours included: the probe's annotation makes it inject
 * the candidate), every policy, Pod Security and validation, and stores nothing. Passed when
 * the probe is admitted, carries the candidate's containers exactly once, and is a fixed point
 * of the whole chain (a second dry run of the result changes nothing). A candidate takes no
 * real pod before its revision has passed.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { KubernetesApiError } from '../errors.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { AnnotationKeys, LabelKeys, LabelValues } from '../k8s/keys.js';
import { nearMiss } from '../k8s/near-miss.js';
import { requirementPhrase, unmetBecause, unmetRequirement, type Labels } from '../k8s/selector.js';
import { metadataNameLabel } from '../namespaces/source.js';
import { cut } from '../quote.js';
import { requestJson } from '../kube-api/request.js';
import { probeAnnotation, stopCandidates } from '../templates/rollout.js';
import type { TemplateSet } from '../templates/set.js';
import type { Template } from '../templates/template.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';

/** Why a preflight failed: stable ids (the metric's `result` label, `/status`, the Event). */
export type PreflightFailure = 'refused' | 'not-injected' | 'injected-twice' | 'not-a-fixed-point' | 'unreachable';
export const preflightFailures: readonly PreflightFailure[] = ['refused', 'not-injected', 'injected-twice', 'not-a-fixed-point', 'unreachable'];

/** One candidate's preflight. */
export interface PreflightResult {
  readonly template: string;
  readonly revision: string;
  readonly passed: boolean;
  /** With a failure: which check. */
  readonly failure?: PreflightFailure;
  /** What happened, in a sentence: the API server's words where it refused. */
  readonly message: string;
  readonly checkedAt: string;
}

/** The API server's answer to a dry-run create: the pod as it would be stored, or its refusal. */
export type DryRunAnswer =
  | { readonly admitted: true; readonly pod: JsonObject; readonly warnings?: readonly string[] }
  | { readonly admitted: false; readonly status: number; readonly message: string };

/** Creates `pod` in `namespace` with dryRun=All. */
export type DryRunCreate = (namespace: string, pod: JsonObject) => Promise<DryRunAnswer>;

/** A dry-run create through the API server of `kubeConfig` (the injector's service account: create on pods of that namespace). */
export function apiServerDryRun(kubeConfig: KubeConfig, timeoutMs = 30_000): DryRunCreate {
  return async (namespace, pod) => {
    try {
      let warnings: string[] = [];
      const answer = await requestJson(kubeConfig, 'POST', `${apiPath(apiResources.pods, { namespace })}?dryRun=All`, timeoutMs, {
        body: pod,
        onWarnings: (said) => (warnings = said),
      });
      if (!isJsonObject(answer)) return { admitted: false, status: 0, message: 'the API server answered with no pod' };
      return { admitted: true, pod: answer, ...(warnings.length > 0 ? { warnings } : {}) };
    } catch (err) {
      if (err instanceof KubernetesApiError && err.statusCode !== 0) return { admitted: false, status: err.statusCode, message: err.detail ?? err.message };
      throw err;
    }
  };
}

/**
 * Labels that satisfy a template's objectSelector as far as one pod can (`In`: its first value,
 * `Exists`: `probe`; `NotIn` and `DoesNotExist`: left out), so that the candidate selects the probe.
 */
function selectedLabels(template: Template): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const { key, operator, values } of template.objectSelector.requirements) {
    if (operator === 'In') labels[key] = [...values].sort()[0]!;
    else if (operator === 'Exists') labels[key] = 'probe';
  }
  return labels;
}

/**
 * The probe pod for a candidate: one pause container that runs as the restricted Pod Security
 * level asks (so that the probe namespace's level judges the sidecar, not the probe), asking
 * for the template by name (an on-request template), named by generateName.
 */
export function probePod(candidate: Template): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: `rollout-probe-${candidate.name.slice(0, 40)}-`,
      labels: { ...selectedLabels(candidate), 'app.kubernetes.io/name': 'sidecar-injector-rollout-probe' },
      annotations: { [probeAnnotation]: `${candidate.name}@${candidate.hash}`, [AnnotationKeys.request]: candidate.name },
    },
    spec: {
      ...(candidate.os.includes('linux') ? {} : { os: { name: candidate.os[0]! } }),
      securityContext: { runAsNonRoot: true, runAsUser: 65535, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'probe',
          image: 'registry.k8s.io/pause:3.10',
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
        },
      ],
    },
  };
}

/** What a create may set on a pod, left out of the second dry run (as a client resubmitting it would). */
export function resubmittable(pod: JsonObject): JsonObject {
  const metadata = isJsonObject(pod.metadata) ? { ...pod.metadata } : {};
  for (const key of ['uid', 'resourceVersion', 'creationTimestamp', 'managedFields', 'generation', 'selfLink']) delete metadata[key];
  const { status: _status, ...rest } = pod;
  return { ...rest, metadata };
}

/** What the fixed point compares: the pod as the chain made it (its labels, annotations and spec). */
function content(pod: JsonObject): unknown {
  const metadata = isJsonObject(pod.metadata) ? pod.metadata : {};
  return { labels: metadata.labels ?? {}, annotations: metadata.annotations ?? {}, spec: pod.spec };
}

/** JSON with sorted keys, for comparing two pods. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (isJsonObject(value))
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`)
      .join(',')}}`;
  return JSON.stringify(value) ?? 'null';
}

/** The names of the containers the candidate's revision added, from the pod's ledger; undefined when it has none. */
function injectedNames(pod: JsonObject, candidate: Template): string[] | undefined {
  const annotations = isJsonObject(pod.metadata) && isJsonObject(pod.metadata.annotations) ? pod.metadata.annotations : {};
  const raw = annotations[AnnotationKeys.status];
  if (typeof raw !== 'string') return undefined;
  try {
    const entry = (JSON.parse(raw) as { templates?: Record<string, { hash?: unknown; containers?: unknown; initContainers?: unknown }> }).templates?.[
      candidate.name
    ];
    if (!entry || entry.hash !== candidate.hash) return undefined;
    const names = [...(Array.isArray(entry.containers) ? entry.containers : []), ...(Array.isArray(entry.initContainers) ? entry.initContainers : [])];
    return names.filter((n): n is string => typeof n === 'string');
  } catch {
    return undefined;
  }
}

/** How often each container name occurs in the pod's containers and init containers. */
function nameCounts(pod: JsonObject): Map<string, number> {
  const counts = new Map<string, number>();
  const spec = isJsonObject(pod.spec) ? pod.spec : {};
  for (const list of [spec.containers, spec.initContainers])
    if (Array.isArray(list)) for (const c of list) if (isJsonObject(c) && typeof c.name === 'string') counts.set(c.name, (counts.get(c.name) ?? 0) + 1);
  return counts;
}

/**
 * Whether the chain's refusal is a webhook it could not call (kube-apiserver answers 500
 * "Internal error occurred: failed calling webhook ..." for a webhook with failurePolicy Fail
 * that it cannot reach or that answers no review): a verdict on the chain's state, not on the
 * candidate, so it counts as unreachable. A replica whose endpoint left the Service between the
 * two dry runs is the common case.
 */
function callFailed(answer: { readonly status: number; readonly message: string }): boolean {
  return answer.status === 500 && answer.message.includes('failed calling webhook');
}

/** The labels of a namespace as the API server holds them; undefined when they cannot be read. */
export type NamespaceLabelsRead = (namespace: string) => Promise<Labels | undefined>;

/** A namespace's labels read from the API server of `kubeConfig` (the injector may get namespaces). */
export function apiServerNamespaceLabels(kubeConfig: KubeConfig, timeoutMs = 5000): NamespaceLabelsRead {
  return async (namespace) => {
    try {
      const object = await requestJson(kubeConfig, 'GET', apiPath(apiResources.namespaces, { name: namespace }), timeoutMs);
      const metadata = isJsonObject(object) && isJsonObject(object.metadata) ? object.metadata : {};
      const labels = isJsonObject(metadata.labels) ? metadata.labels : {};
      return {
        ...Object.fromEntries(Object.entries(labels).filter((e): e is [string, string] => typeof e[1] === 'string')),
        [metadataNameLabel]: namespace,
      };
    } catch {
      return undefined;
    }
  };
}

/**
 * Why the probe namespace kept the candidate out, from its labels, with the fix: the namespace
 * not opted in, or the candidate's own namespaceSelector not selecting it. Undefined when
 * neither (then the webhook was not reached, or another webhook took the sidecar out).
 */
export function probeKeptOut(candidate: Template, namespace: string, labels: Labels): string | undefined {
  if (labels[LabelKeys.namespaceOptIn] !== LabelValues.enabled) {
    const near = nearMiss({ key: LabelKeys.namespaceOptIn, operator: 'In', values: new Set([LabelValues.enabled]) }, labels);
    return `the probe namespace ${namespace} is not opted in (it needs label ${LabelKeys.namespaceOptIn}=${LabelValues.enabled}${near ? `; ${near}` : ''}); fix: kubectl label namespace ${namespace} ${LabelKeys.namespaceOptIn}=${LabelValues.enabled} --overwrite`;
  }
  const unmet = unmetRequirement(candidate.namespaceSelector, labels);
  if (!unmet) return undefined;
  const give =
    unmet.operator === 'In'
      ? `give the probe namespace that label (kubectl label namespace ${namespace} ${unmet.key}=${[...unmet.values].sort()[0]!} --overwrite), or `
      : unmet.operator === 'Exists'
        ? `give the probe namespace that label (kubectl label namespace ${namespace} ${unmet.key}=probe), or `
        : '';
  return `the candidate's namespaceSelector does not select the probe namespace ${namespace}: it needs ${requirementPhrase(unmet)}, and ${unmetBecause(unmet, labels, 'the namespace')}; fix: ${give}use a probe namespace labelled as the namespaces the template serves`;
}

/** Runs one candidate's probe through the chain: a dry-run create, its checks, and a second dry run of the result. */
export async function preflight(
  candidate: Template,
  namespace: string,
  dryRun: DryRunCreate,
  now: () => Date,
  namespaceLabels?: NamespaceLabelsRead,
): Promise<PreflightResult> {
  const done = (failure: PreflightFailure | undefined, message: string): PreflightResult => ({
    template: candidate.name,
    revision: candidate.hash,
    passed: failure === undefined,
    ...(failure ? { failure } : {}),
    message: cut(message, 1000),
    checkedAt: now().toISOString(),
  });
  const subject = `the probe pod of ${candidate.name}@${candidate.hash} in namespace ${namespace}`;
  let first: DryRunAnswer;
  try {
    first = await dryRun(namespace, probePod(candidate));
  } catch (err) {
    return done('unreachable', `${subject} could not be created (dry run): ${(err as Error).message}`);
  }
  if (!first.admitted)
    return callFailed(first)
      ? done('unreachable', `the admission chain could not call a webhook for ${subject} (HTTP ${first.status}): ${first.message}`)
      : done('refused', `the admission chain refused ${subject} (HTTP ${first.status}): ${first.message}`);
  const names = injectedNames(first.pod, candidate);
  if (!names || names.length === 0) {
    const labels = await namespaceLabels?.(namespace);
    const keptOut = labels && probeKeptOut(candidate, namespace, labels);
    // The injector's warning says why it left the template out (a Pod Security level the sidecar
    // violates, a conflict): `<template> not injected: …`. Any webhook or policy of the chain may
    // write warnings, so it is quoted as the answer's, bounded, and decides nothing.
    const said = first.warnings?.find((w) => w.startsWith(`${candidate.name} not injected`));
    return done(
      'not-injected',
      keptOut
        ? `${subject} came back without the candidate's sidecar: ${keptOut}`
        : said
          ? `${subject} came back without the candidate's sidecar, and the chain's answer warned: ${said.slice(0, 600)}`
          : labels
            ? `${subject} came back without the candidate's sidecar: the probe namespace is opted in and the candidate's namespaceSelector selects it; was the injector's webhook reached, and does no other webhook take the sidecar out?`
            : `${subject} came back without the candidate's sidecar: is the namespace opted in (label ${LabelKeys.namespaceOptIn}=${LabelValues.enabled}) and reached by the injector's webhook, and does no other webhook take the sidecar out?`,
    );
  }
  const counts = nameCounts(first.pod);
  const twice = names.filter((n) => (counts.get(n) ?? 0) !== 1);
  if (twice.length > 0) return done('injected-twice', `${subject} holds container ${twice[0]} ${counts.get(twice[0]!) ?? 0} times, not once`);
  let second: DryRunAnswer;
  try {
    second = await dryRun(namespace, resubmittable(first.pod));
  } catch (err) {
    return done('unreachable', `the second dry run of ${subject} could not be made: ${(err as Error).message}`);
  }
  if (!second.admitted)
    return callFailed(second)
      ? done('unreachable', `the admission chain could not call a webhook for ${subject} the second time (HTTP ${second.status}): ${second.message}`)
      : done('not-a-fixed-point', `the admission chain refused ${subject} the second time (HTTP ${second.status}): ${second.message}`);
  if (canonical(content(second.pod)) !== canonical(content(first.pod)))
    return done('not-a-fixed-point', `a second pass of the admission chain changed ${subject}: a webhook of the chain is not idempotent with this sidecar`);
  return done(undefined, `${subject} was admitted by the chain with the sidecar once, and a second pass changed nothing`);
}

/** Told of each result (a metric, an Event on the candidate's SidecarTemplate, the log). */
export type PreflightListener = (result: PreflightResult) => void;

/** Why a candidate takes no pod on a replica that runs no preflight (no --rollout-probe-namespace). */
export const preflightNotRun =
  'preflight not run: this replica has no --rollout-probe-namespace (the rollout-preflight component), and a candidate takes no pod without a passed preflight';

const ungated = new WeakMap<TemplateSet, TemplateSet>();

/**
 * `set` as a replica without the preflight serves it: every candidate stopped (the same set
 * object for the same input, for the answer cache), so that replicas started without the
 * preflight's overlay never make a candidate live.
 */
export function withoutPreflight(set: TemplateSet): TemplateSet {
  if (!set.rollouts) return set;
  let gated = ungated.get(set);
  if (!gated) {
    const stopped = new Map([...set.rollouts.values()].filter((r) => r.candidate).map((r) => [r.name, preflightNotRun] as const));
    gated = stopCandidates(set, stopped);
    ungated.set(set, gated);
  }
  return gated;
}

/**
 * The preflights of a running injector: which candidate revisions passed, and the set in force
 * with every other candidate stopped. `gate` answers the same set object for the same inputs,
 * so the answer cache (which keys on the set by identity) stays exact.
 */
export class Preflights {
  private readonly results = new Map<string, PreflightResult>();
  /** Candidate revisions halted by what their pods do (halt.ts), by `template@revision`: why. */
  private readonly halted = new Map<string, string>();
  private gated: { from: TemplateSet; version: number; set: TemplateSet } | undefined;
  private version = 0;
  private running: Promise<void> | undefined;

  constructor(
    private readonly namespace: string,
    private readonly dryRun: DryRunCreate,
    private readonly now: () => Date = () => new Date(),
    private readonly listener: PreflightListener = () => undefined,
    private readonly namespaceLabels?: NamespaceLabelsRead,
  ) {}

  /** A number that changes whenever what gate makes of a set does (a result, a halt). */
  generation(): number {
    return this.version;
  }

  /** `set` with each candidate whose revision has not passed its preflight stopped, and the probe namespace set. */
  gate(set: TemplateSet): TemplateSet {
    if (!set.rollouts) return set;
    if (this.gated?.from === set && this.gated.version === this.version) return this.gated.set;
    const stopped = new Map<string, string>();
    for (const rollout of set.rollouts.values()) {
      if (!rollout.candidate) continue;
      const key = `${rollout.name}@${rollout.candidate.hash}`;
      const result = this.results.get(key);
      const halt = this.halted.get(key);
      if (halt !== undefined) stopped.set(rollout.name, halt);
      else if (!result) stopped.set(rollout.name, 'preflight pending');
      else if (!result.passed) stopped.set(rollout.name, `preflight failed (${result.failure}): ${result.message}`);
    }
    const gated = stopCandidates(set, stopped, this.namespace);
    this.gated = { from: set, version: this.version, set: gated };
    return gated;
  }

  /**
   * Stops a candidate revision for good (what its pods do, halt.ts): until the templates
   * directory names another candidate revision or none. True when it was not halted before.
   */
  halt(template: string, revision: string, why: string): boolean {
    const key = `${template}@${revision}`;
    if (this.halted.has(key)) return false;
    this.halted.set(key, why);
    this.version++;
    return true;
  }

  /** Runs the preflight of every candidate of `set` (one run at a time; a call during a run waits for it and runs again). */
  async run(set: TemplateSet): Promise<void> {
    while (this.running) await this.running;
    this.running = this.runAll(set);
    try {
      await this.running;
    } finally {
      this.running = undefined;
    }
  }

  private async runAll(set: TemplateSet): Promise<void> {
    const seen = new Set<string>();
    for (const rollout of set.rollouts?.values() ?? []) {
      if (!rollout.candidate) continue;
      const key = `${rollout.name}@${rollout.candidate.hash}`;
      seen.add(key);
      const result = await preflight(rollout.candidate, this.namespace, this.dryRun, this.now, this.namespaceLabels);
      this.results.set(key, result);
      this.version++;
      this.listener(result);
    }
    // Results of revisions no longer candidates are forgotten: the map stays as small as the directory.
    for (const key of this.results.keys()) if (!seen.has(key)) this.results.delete(key);
    for (const key of this.halted.keys()) if (!seen.has(key)) this.halted.delete(key);
  }

  /** What `/status` shows: the probe namespace and each candidate's last result. */
  status(): { namespace: string; results: PreflightResult[]; halted: { candidate: string; why: string }[] } {
    return { namespace: this.namespace, results: [...this.results.values()], halted: [...this.halted].map(([candidate, why]) => ({ candidate, why })) };
  }
}

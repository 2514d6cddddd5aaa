/**
 * `sidecar-injector why`: reads what admission reads for one object (the pod, or the workload's
 * pod template; its namespace's labels; the templates in force, from the cluster's ConfigMap as
 * the injector mounts it or from a folder; the Kubernetes version) and answers per template with
 * the same decision code (manifests/why.ts). Only reads.
 */
import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { ConfigError } from '../errors.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { controllingOwner } from '../k8s/object-reference.js';
import { ownerFactsOf, ownerKey, readOwnersLookup, type OwnerFacts } from '../k8s/owners.js';
import type { Labels } from '../k8s/selector.js';
import { kindNamed, objectPath, podFromTemplate, podTemplateOf, workloadKinds } from '../k8s/workloads.js';
import { loadKubeConfig } from '../kube-api/kubeconfig.js';
import { answersForNewPod, answersForRunningPod, type TemplateAnswer } from '../manifests/why.js';
import { metadataNameLabel, type NamespaceLabelSource } from '../namespaces/source.js';
import { overrideAnnotations } from '../namespaces/source.js';
import { parseOptions } from '../options.js';
import { admitPod, type AdmitDeps } from '../pipeline/admit.js';
import { auditPod, fixFor, reportOwner } from '../pipeline/audit.js';
import type { TemplateSet } from '../templates/set.js';
import { whyOptions } from './usage.js';
import { lastChanged, readObject, stringMap, templatesInForce } from './cluster-reads.js';
import { decideFlags, versionDecision } from './decide-flags.js';

export interface WhyIo {
  readonly stdout: { write(text: string): unknown };
}

/** The answer, as `-o json` prints it. */
export interface WhyReport {
  /** `Pod shop/web-1`, `Deployment shop/web`. */
  readonly subject: string;
  /** Where the templates in force were read. */
  readonly templatesFrom: string;
  readonly templates: readonly TemplateAnswer[];
  readonly notes: readonly string[];
}

const timeoutMs = 15_000;

/** Runs `why`; returns the exit code. */
export async function why(argv: readonly string[], io: WhyIo, env: Readonly<Record<string, string | undefined>> = {}): Promise<number> {
  const { values, positionals } = parseOptions('why', whyOptions, argv, env, ['KIND/NAME']);
  const file = values.filename as string | undefined;
  const target = positionals[0];
  const problems: string[] = [];
  if ((file === undefined) === (target === undefined)) problems.push('give one object: KIND/NAME (why -n shop deployment/web) or -f FILE');
  const output = (values.output as string | undefined) ?? 'text';
  if (output !== 'text' && output !== 'json') problems.push(`-o: expected text or json (got ${JSON.stringify(output).slice(0, 80)})`);
  const { flagVersion, podSecurity } = decideFlags(values, problems);
  let kind: string | undefined;
  let name = '';
  if (target !== undefined) {
    const at = target.indexOf('/');
    const kindText = at > 0 ? target.slice(0, at) : '';
    name = at > 0 ? target.slice(at + 1) : '';
    kind = ['pod', 'pods', 'po'].includes(kindText.toLowerCase()) ? 'Pod' : kindNamed(kindText)?.kind;
    if (!kind || !name)
      problems.push(
        `${JSON.stringify(target.slice(0, 100))}: expected KIND/NAME with KIND pod or a workload kind (${[...workloadKinds.values()].map((k) => `${k.kind.toLowerCase()} or ${k.shortName}`).join(', ')})`,
      );
  }
  if (problems.length > 0) throw new ConfigError(problems);
  const kubeConfig = await loadKubeConfig(values.kubeconfig as string | undefined, { fallback: 'default' });
  const contextNamespace = kubeConfig.getContextObject(kubeConfig.getCurrentContext())?.namespace;

  // The object: from the file, or the cluster.
  let object: JsonObject | undefined;
  if (file !== undefined) {
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (err) {
      throw new ConfigError([`-f ${file}: ${(err as Error).message}`]);
    }
    const [doc] = parseAllDocuments(text, { uniqueKeys: true }) as unknown as { errors: { message: string }[]; toJS(): unknown }[];
    if (!doc || doc.errors.length > 0) throw new ConfigError([`-f ${file}: ${doc?.errors[0]?.message.split('\n')[0] ?? 'no document'}`]);
    const parsed = doc.toJS();
    if (!isJsonObject(parsed)) throw new ConfigError([`-f ${file}: not an object`]);
    object = parsed;
    kind = typeof parsed.kind === 'string' ? parsed.kind : '';
    if (kind !== 'Pod' && !workloadKinds.has(kind))
      throw new ConfigError([`-f ${file}: kind ${JSON.stringify(kind.slice(0, 60))} is neither a Pod nor a workload kind`]);
  }
  const fileMetadata = isJsonObject(object?.metadata) ? object.metadata : {};
  const namespace =
    (values.namespace as string | undefined) ??
    (typeof fileMetadata.namespace === 'string' && fileMetadata.namespace ? fileMetadata.namespace : undefined) ??
    contextNamespace ??
    'default';
  if (object === undefined) {
    const path = kind === 'Pod' ? apiPath(apiResources.pods, { namespace, name }) : objectPath(workloadKinds.get(kind!)!, namespace, name);
    object = await readObject(kubeConfig, path, `${kind} ${namespace}/${name}`);
    if (!object) throw new ConfigError([`${kind} ${namespace}/${name} not found`]);
  }
  const metadata = isJsonObject(object.metadata) ? object.metadata : {};
  name = typeof metadata.name === 'string' ? metadata.name : name;
  const live = file === undefined;

  // What admission reads besides the object.
  const templates = await templatesInForce(
    kubeConfig,
    values.templates as string | undefined,
    (values['injector-namespace'] as string | undefined) ?? 'sidecar-injector',
  );
  const namespaceObject = await readObject(kubeConfig, apiPath(apiResources.namespaces, { name: namespace }), `namespace ${namespace}`);
  const notes: string[] = [];
  if (!namespaceObject) notes.push(`namespace ${namespace} does not exist`);
  const namespaceMetadata = isJsonObject(namespaceObject?.metadata) ? namespaceObject.metadata : {};
  const namespaceLabels: Labels = { ...stringMap(namespaceMetadata.labels), [metadataNameLabel]: namespace };
  const version = await versionDecision(kubeConfig, flagVersion, timeoutMs);
  const namespaces: NamespaceLabelSource = {
    kind: 'why',
    labelsOf: async () => namespaceLabels,
    overridesOf: () => overrideAnnotations(stringMap(namespaceMetadata.annotations)),
    isReady: () => true,
    status: () => ({}),
  };
  const set: TemplateSet = templates.set;
  const deps: AdmitDeps = { templates: () => set, namespaces, kubernetesVersion: () => version, podSecurity };

  let answers: TemplateAnswer[];
  const subject = `${kind} ${namespace}/${name}`;
  if (kind !== 'Pod') {
    // A workload: a new pod of it, as its controller would create it.
    const found = podTemplateOf(kind!, object);
    if (!found) throw new ConfigError([`${subject} has no pod template`]);
    const known = workloadKinds.get(kind!)!;
    const uid = typeof metadata.uid === 'string' ? metadata.uid : undefined;
    const owner = { apiVersion: known.apiVersion, kind: kind!, name, ...(uid ? { uid } : {}), controller: true };
    const pod = podFromTemplate(found.template, { name, namespace, owner });
    const outcome = await admitPod({ pod, namespace, name: '' }, deps);
    answers = answersForNewPod(outcome, set, { kind: kind!, labels: stringMap(metadata.labels), path: found.path });
  } else {
    // A pod: the decision for a new pod of its workload (its owner's pod template), or for the pod itself.
    const owner = controllingOwner(metadata.ownerReferences, namespace);
    const ownerKind = owner && workloadKinds.get(owner.kind);
    const ownerObject =
      live && owner && ownerKind?.createsPods && ownerKind.apiVersion === owner.apiVersion
        ? await readObject(kubeConfig, objectPath(ownerKind, namespace, owner.name), `${owner.kind} ${namespace}/${owner.name}`)
        : undefined;
    const ownerMetadata = isJsonObject(ownerObject?.metadata) ? ownerObject.metadata : {};
    const ownerTemplate = ownerObject && (!owner?.uid || ownerMetadata.uid === owner.uid) ? podTemplateOf(owner!.kind, ownerObject) : undefined;
    const newPod = ownerTemplate
      ? podFromTemplate(ownerTemplate.template, { name: owner!.name, namespace, owner: { ...owner!, controller: true } as unknown as JsonObject })
      : object;
    const outcome = await admitPod({ pod: newPod, namespace, name: ownerTemplate ? '' : name }, deps);
    const forNewPod = answersForNewPod(
      outcome,
      set,
      ownerTemplate ? { kind: owner!.kind, labels: stringMap(ownerMetadata.labels), path: ownerTemplate.path } : undefined,
    );
    if (!live) answers = forNewPod;
    else {
      const podMetadata = {
        namespace,
        name,
        labels: stringMap(metadata.labels),
        annotations: stringMap(metadata.annotations),
        ...(typeof metadata.generateName === 'string' ? { generateName: metadata.generateName } : {}),
        ownerReferences: metadata.ownerReferences,
      };
      const read = new Map<string, OwnerFacts>();
      if (owner && ownerObject) read.set(ownerKey(owner), ownerFactsOf(ownerMetadata, namespace));
      const workload = reportOwner(podMetadata, readOwnersLookup(read, new Set()));
      answers = answersForRunningPod(auditPod(podMetadata, namespaceLabels, set), forNewPod, {
        ...(typeof metadata.creationTimestamp === 'string' ? { podCreated: metadata.creationTimestamp } : {}),
        ...(templates.changed ? { templatesChanged: templates.changed } : {}),
        ...(lastChanged(namespaceMetadata, 'f:labels') ? { namespaceLabelsChanged: lastChanged(namespaceMetadata, 'f:labels')! } : {}),
        fix: fixFor(namespace, workload),
      });
      if (ownerTemplate) notes.push(`decided for a new pod of ${owner!.kind} ${owner!.name} (its pod template), as admission would decide the next one`);
    }
  }
  if (set.templates.length === 0) notes.push(`no template is in force (${templates.from})`);
  const report: WhyReport = { subject, templatesFrom: templates.from, templates: answers, notes };
  io.stdout.write(output === 'json' ? `${JSON.stringify(report)}\n` : formatWhy(report));
  return 0;
}

/** The text report: the subject, then one line per template with its state and reason, and the fix under it. */
export function formatWhy(report: WhyReport): string {
  const lines = [`${report.subject}: ${report.templates.length} template(s) in force, from ${report.templatesFrom}`];
  for (const t of report.templates) {
    lines.push(`  ${t.template}: ${t.state} — ${t.reason}`);
    if (t.fix) lines.push(`    fix: ${t.fix}`);
  }
  for (const note of report.notes) lines.push(`  note: ${note}`);
  return `${lines.join('\n')}\n`;
}

/**
 * `sidecar-injector why`: reads what admission reads for one object (the pod, or the workload's
 * pod template; its namespace's labels; the templates in force, from the cluster's ConfigMap as
 * the injector mounts it or from a folder; the Kubernetes version) and answers per template with
 * the same decision code (manifests/why.ts). Only reads.
 */
import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { ClusterError, ConfigError } from '../errors.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { isDns1123Label } from '../k8s/label-syntax.js';
import { controllingOwner } from '../k8s/object-reference.js';
import { ownerFactsOf, ownerKey, readOwnersLookup, resolveWorkload, type OwnerFacts } from '../k8s/owners.js';
import type { Labels } from '../k8s/selector.js';
import { kindNamed, objectPath, podFromTemplate, podTemplateOf, workloadKinds } from '../k8s/workloads.js';
import { loadKubeConfig } from '../kube-api/kubeconfig.js';
import { answersForNewPod, answersForRunningPod, type TemplateAnswer } from '../manifests/why.js';
import { metadataNameLabel, type NamespaceLabelSource } from '../namespaces/source.js';
import { overrideAnnotations } from '../namespaces/source.js';
import { parseOptions } from '../options.js';
import { printable } from '../quote.js';
import { admitPod, type PodOutcome, type AdmitDeps } from '../pipeline/admit.js';
import { auditPod, fixFor, reportOwner } from '../pipeline/audit.js';
import { inPlaceNotes } from '../rollout/in-place.js';
import { servesPodResize } from '../kube-api/discovery.js';
import type { TemplateSet } from '../templates/set.js';
import { whyOptions } from './usage.js';
import { lastChanged, readObject, stringMap, templatesInForce } from './cluster-reads.js';
import { decideFlags, versionDecision } from './decide-flags.js';
import type { CommandIo } from './io.js';

export type WhyIo = Pick<CommandIo, 'stdout'>;

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

/** An object's name as the API server allows it (a DNS subdomain): `.` and `..` never, nor `/`. */
const objectNameRe = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;

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
    // kubectl's forms: deployment/web, deployments/web, deploy/web, deployment.apps/web.
    const kindText = at > 0 ? target.slice(0, at).replace(/\.(?:apps|batch)$/, '') : '';
    name = at > 0 ? target.slice(at + 1) : '';
    kind = ['pod', 'pods', 'po'].includes(kindText.toLowerCase()) ? 'Pod' : kindNamed(kindText)?.kind;
    if (!kind || !name)
      problems.push(
        `${JSON.stringify(target.slice(0, 100))}: expected KIND/NAME with KIND pod or a workload kind (${[...workloadKinds.values()].map((k) => [...new Set([k.kind.toLowerCase(), k.shortName])].join(' or ')).join(', ')})`,
      );
    else if (!objectNameRe.test(name))
      problems.push(`${JSON.stringify(name.slice(0, 100))}: not the name of a ${kind} (a DNS subdomain: lowercase letters, digits, '-' and '.')`);
  }
  for (const [flag, value] of [['-n', values.namespace]] as const)
    if (typeof value === 'string' && !isDns1123Label(value)) problems.push(`${flag}: ${JSON.stringify(value.slice(0, 100))} is not a namespace name`);
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
    const docs = (parseAllDocuments(text, { uniqueKeys: true }) as unknown as { errors: { message: string }[]; contents: unknown; toJS(): unknown }[]).filter(
      // A document of comments only (helm's `# Source:` headers) is no object.
      (d) => d.errors.length > 0 || (d.contents !== null && d.toJS() !== null),
    );
    const doc = docs[0];
    if (!doc || doc.errors.length > 0) throw new ConfigError([`-f ${file}: ${doc?.errors[0]?.message.split('\n')[0] ?? 'no document'}`]);
    if (docs.length > 1) throw new ConfigError([`-f ${file}: ${docs.length} documents; why answers for one object (split the file, or ask for each)`]);
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
    if (!object) throw new ClusterError(`${kind} ${namespace}/${name} not found`);
    if (object.kind !== kind)
      throw new ConfigError([`${kind} ${namespace}/${name}: the API server answered with a ${JSON.stringify(String(object.kind).slice(0, 60))}`]);
  }
  const metadata = isJsonObject(object.metadata) ? object.metadata : {};
  name = typeof metadata.name === 'string' ? metadata.name : name;
  const live = file === undefined;

  // What admission reads besides the object.
  const templates = await templatesInForce(kubeConfig, values.templates as string | undefined);
  const namespaceObject = await readObject(kubeConfig, apiPath(apiResources.namespaces, { name: namespace }), `namespace ${namespace}`);
  const notes: string[] = [];
  // A refused object is in force nowhere: named, so that a template "missing" from the answer is explained.
  for (const refused of templates.refused.slice(0, 20))
    notes.push(`sidecartemplate/${refused.name} is refused by the injector and not in force: ${refused.problems.slice(0, 3).join('; ')}`);
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
    answers = answersForNewPod(outcome, set, { kind: kind!, labels: stringMap(metadata.labels), path: found.path }, namespaceLabels);
    notes.push(...overrideNotes(outcome));
  } else {
    // A pod: the decision for a new pod of its workload (the pod template its controller, or the
    // controller's owner, creates pods from: what a restart uses), or for the pod itself.
    const read = new Map<string, OwnerFacts>();
    const objects = new Map<string, JsonObject>();
    const readKinds = new Set<string>();
    const readOwner = async (ref: { readonly kind: string; readonly name: string; readonly apiVersion: string }) => {
      const known = workloadKinds.get(ref.kind);
      if (!live || !known || known.apiVersion !== ref.apiVersion) return;
      readKinds.add(ref.kind);
      const found = await readObject(kubeConfig, objectPath(known, namespace, ref.name), `${ref.kind} ${namespace}/${ref.name}`);
      if (!found || found.kind !== ref.kind) return;
      const key = ownerKey({ kind: ref.kind, namespace, name: ref.name });
      read.set(key, ownerFactsOf(isJsonObject(found.metadata) ? found.metadata : {}, namespace));
      objects.set(key, found);
    };
    const owner = controllingOwner(metadata.ownerReferences, namespace);
    if (owner) {
      await readOwner(owner);
      const parent = read.get(ownerKey(owner))?.owner;
      if (parent && workloadKinds.get(owner.kind)?.ownedBy) await readOwner(parent);
    }
    // An owner is believed only when it exists with the uid the pod names (resolveWorkload).
    const lookup = readOwnersLookup(read, readKinds);
    const workloadRef = resolveWorkload(metadata, namespace, lookup);
    const workloadObject = workloadRef && objects.get(ownerKey(workloadRef));
    const found = workloadRef && workloadObject ? podTemplateOf(workloadRef.kind, workloadObject) : undefined;
    const newPod =
      workloadRef && found
        ? podFromTemplate(found.template, {
            name: workloadRef.name,
            namespace,
            owner: {
              apiVersion: workloadRef.apiVersion,
              kind: workloadRef.kind,
              name: workloadRef.name,
              ...(workloadRef.uid ? { uid: workloadRef.uid } : {}),
              controller: true,
            },
          })
        : object;
    const outcome = await admitPod({ pod: newPod, namespace, name: found ? '' : name }, deps);
    const workloadMetadata = isJsonObject(workloadObject?.metadata) ? workloadObject.metadata : {};
    const forNewPod = answersForNewPod(
      outcome,
      set,
      workloadRef && found ? { kind: workloadRef.kind, labels: stringMap(workloadMetadata.labels), path: found.path } : undefined,
      namespaceLabels,
    );
    notes.push(...overrideNotes(outcome));
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
      const namespaceLabelsChanged = lastChanged(namespaceMetadata, 'f:labels');
      answers = answersForRunningPod(auditPod(podMetadata, namespaceLabels, set), forNewPod, set, {
        ...(typeof metadata.creationTimestamp === 'string' ? { podCreated: metadata.creationTimestamp } : {}),
        ...(templates.changed ? { templatesChanged: templates.changed } : {}),
        ...(namespaceLabelsChanged ? { namespaceLabelsChanged } : {}),
        templatesFromCluster: templates.fromCluster,
        fix: fixFor(namespace, reportOwner(podMetadata, lookup)),
      });
      // The in-place rules: a stale template being moved or needing a re-create, a sidecar resized by someone else.
      const inPlace = inPlaceNotes(object, namespaceLabels, set, { resize: await servesPodResize(kubeConfig, timeoutMs) });
      answers = answers.map((a) => (inPlace.has(a.template) ? { ...a, reason: `${a.reason}; ${inPlace.get(a.template)!}` } : a));
      if (found) notes.push(`decided for a new pod of ${workloadRef!.kind} ${workloadRef!.name} (its pod template), as admission would decide the next one`);
      else if (owner)
        notes.push(`its owner ${owner.kind} ${owner.name} could not be confirmed (not there with the uid the pod names): decided for the pod itself`);
    }
  }
  if (set.templates.length === 0) notes.push(`no template is in force (${templates.from})`);
  const report: WhyReport = { subject, templatesFrom: templates.from, templates: answers, notes };
  io.stdout.write(printable(output === 'json' ? `${JSON.stringify(report)}\n` : formatWhy(report)));
  return 0;
}

/**
 * The overrides the decision ignored (an annotation naming no template or no parameter here, a
 * value out of range): at admission they are a warning only the pod's creator sees (a
 * ReplicaSet's controller), so `why` says them.
 */
function overrideNotes(outcome: PodOutcome): string[] {
  return outcome.warnings.filter((w) => w.id === 'override-ignored').map((w) => `override ignored: ${w.text}`);
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

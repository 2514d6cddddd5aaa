/**
 * Every check on a set of template files before it is served: schema, selectors and
 * placeholders (compilation), the kustomization that turns the folder into the ConfigMap, and —
 * for each template — a render into a sample pod checked against the Kubernetes Pod schema,
 * pod validation's uniqueness rules, and (when asked) a Pod Security level. `check` runs it on a
 * folder, and `serve` on every set it loads (at start and on each reload), so a set `check`
 * refuses is never served.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Pod } from 'kubernetes-models/v1/Pod';
import { parse as parseYaml } from 'yaml';
import { TemplateError, type TemplateProblem } from '../errors.js';
import { podProblems } from '../k8s/pod-validation.js';
import { injectPod } from './inject-pod.js';
import { compileTemplateFiles, compileTemplateValue, readTemplateFiles, type CompileOptions, type TemplateFile } from '../templates/load.js';
import { createTemplateSet, type RefusedRequired, type TemplateSet } from '../templates/set.js';
import { parseSelector, type Selector } from '../k8s/selector.js';
import { cut } from '../quote.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import type { Template } from '../templates/template.js';
import { formatVersion, supportsNativeSidecars, type KubernetesVersion } from '../k8s/version.js';
import { checkPodSecurity, describeViolations, type PodSecurityPolicy } from '../k8s/pod-security.js';
import { templateInForm } from '../templates/forms.js';
import { exportProblems } from '../templates/export-rules.js';
import { maxTemplateObjects, objectLabel, sidecarTemplateResource, specProblem } from '../templates/resource.js';
import { createRevisionSet, type RevisionFile, type RolloutStanza } from '../templates/rollout.js';

/** What `check` checks about the cluster, besides the templates themselves. */
export interface ClusterCheck {
  /** Check each template's rendering against this Pod Security level. */
  readonly podSecurity?: PodSecurityPolicy;
  /** Check each template in the form it takes at this version. */
  readonly version?: KubernetesVersion;
}

/**
 * The sample pod hardened to the restricted level (pod-level non-root and seccomp, each
 * container without privilege escalation or capabilities): a template's violations are then its own.
 */
export function restrictedSamplePod(): JsonObject {
  const pod = samplePod();
  const spec = pod.spec as JsonObject;
  spec.securityContext = { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } };
  spec.containers = (spec.containers as JsonObject[]).map((c) => ({
    ...c,
    securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
  }));
  return pod;
}

/** A sample Deployment pod, as the webhook receives it (no name, generateName set). */
export function samplePod(): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'sample-6d4cf56db6-', namespace: 'sample', labels: { app: 'sample', 'app.kubernetes.io/name': 'sample' } },
    spec: {
      serviceAccountName: 'default',
      containers: [
        { name: 'app', image: 'registry.example.com/sample/app:1.0.0', ports: [{ containerPort: 8080 }] },
        { name: 'worker', image: 'registry.example.com/sample/worker:1.0.0' },
      ],
    },
  };
}

/** `data/spec/containers/0/image must be string` → `spec.containers[0].image must be string`. */
function schemaPath(message: string): string {
  return message
    .split(', ')
    .map((m) =>
      m
        .replace(/^data\//, '')
        .replace(/\/(\d+)(?=\/|\s|$)/g, '[$1]')
        .replace(/\//g, '.'),
    )
    .join('; ');
}

/** Renders one template into the sample pod and returns the problems of the result. */
export function checkRendered(template: Template, cluster: ClusterCheck = {}): TemplateProblem[] {
  const namespaceLabels = { 'kubernetes.io/metadata.name': 'sample', 'sidecar-injector.io/injection': 'enabled' };
  // Below 1.29 a template with the container fallback is injected in its container form.
  const below = cluster.version && !supportsNativeSidecars(cluster.version) && template.nativeSidecars.length > 0;
  const form = below && template.nativeSidecarFallback === 'container' ? templateInForm(template, 'container') : template;
  const sample = cluster.podSecurity ? restrictedSamplePod() : samplePod();
  const result = injectPod(sample, [form], createTemplateSet([template]), { namespace: 'sample', namespaceLabels });
  const problems: TemplateProblem[] = [];
  const field = `rendered into a sample pod${below ? ` at Kubernetes ${formatVersion(cluster.version!)} (nativeSidecars fallback ${template.nativeSidecarFallback})` : ''}`;
  const add = (message: string) => problems.push({ file: template.file, field, message });
  if (cluster.podSecurity) {
    const violations = checkPodSecurity(result.pod, cluster.podSecurity);
    const rules = cluster.podSecurity.rules ? ` (rules of Kubernetes ${formatVersion(cluster.podSecurity.rules)})` : '';
    if (violations.length > 0) add(`violates PodSecurity "${cluster.podSecurity.label}"${rules}: ${describeViolations(violations)}`);
  }
  for (const warning of result.warnings) add(warning);
  for (const conflict of result.conflicts) add(conflict.text);
  for (const problem of podProblems(result.pod)) add(problem);
  try {
    new Pod(result.pod as ConstructorParameters<typeof Pod>[0]).validate();
  } catch (err) {
    add(`does not match the Kubernetes Pod schema: ${schemaPath((err as Error).message)}`);
  }
  return problems;
}

/**
 * Checks that `kustomization.yaml` (when present) applies exactly the template files, as
 * SidecarTemplate objects (`resources:`): a file it leaves out never reaches the cluster, and a
 * ConfigMap of the files is read by no one.
 */
async function checkKustomization(dir: string, files: readonly string[]): Promise<TemplateProblem[]> {
  let text: string;
  try {
    text = await readFile(join(dir, 'kustomization.yaml'), 'utf8');
  } catch {
    return [];
  }
  const problem = (field: string, message: string): TemplateProblem => ({ file: 'kustomization.yaml', field, message });
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    return [problem('', `is not valid YAML: ${(err as Error).message.split('\n')[0]}`)];
  }
  if (!isJsonObject(doc)) return [problem('', 'must be a map (a kustomization with resources: listing the template files)')];
  const problems: TemplateProblem[] = [];
  if (doc.configMapGenerator !== undefined)
    problems.push(
      problem(
        'configMapGenerator',
        `the injector reads ${sidecarTemplateResource.kind} objects, not a ConfigMap: list the template files under resources: (each file a ${sidecarTemplateResource.kind} manifest)`,
      ),
    );
  if (typeof doc.namespace === 'string' && doc.namespace !== '')
    problems.push(problem('namespace', `a ${sidecarTemplateResource.kind} is cluster-scoped: remove namespace:`));
  for (const field of ['namePrefix', 'nameSuffix'] as const)
    if (typeof doc[field] === 'string' && doc[field] !== '')
      problems.push(problem(field, 'renames every template (a template is named by its metadata.name): remove it'));
  const resources = doc.resources;
  if (resources !== undefined && (!Array.isArray(resources) || resources.some((f) => typeof f !== 'string')))
    return [...problems, problem('resources', 'must be a list of file names')];
  const listed = new Set(((resources as string[] | undefined) ?? []).map((f) => f.replace(/^\.\//, '')));
  for (const file of files) if (!listed.has(file)) problems.push(problem('resources', `does not list ${file}: it would not reach the cluster`));
  for (const file of listed)
    if (!files.includes(file) && !file.includes('/')) problems.push(problem('resources', `lists ${file}, which is not a template file here`));
  return problems;
}

/** Runs every check on `dir`; resolves with the set, or rejects with TemplateError listing every problem. */
export async function check(dir: string, cluster: ClusterCheck = {}): Promise<TemplateSet> {
  return checkTemplateFiles(await readTemplateFiles(dir), dir, cluster);
}

/**
 * Every check on template files already read: `check` runs it on a directory, and `serve` on
 * every set it loads (at start and on each reload), so a set `check` refuses is never served.
 */
export async function checkTemplateFiles(
  files: readonly TemplateFile[],
  dir: string,
  cluster: ClusterCheck = {},
  options: CompileOptions = {},
): Promise<TemplateSet> {
  const problems: TemplateProblem[] = [];
  let set: TemplateSet | undefined;
  try {
    set = compileTemplateFiles(files, dir, options);
  } catch (err) {
    if (!(err instanceof TemplateError)) throw err;
    problems.push(...err.problems);
  }
  problems.push(
    ...(await checkKustomization(
      dir,
      files.map((f) => f.name),
    )),
  );
  for (const template of set?.templates ?? []) problems.push(...checkRendered(template, cluster));
  // A template the webhooks leave to a MutatingAdmissionPolicy that cannot hold it would be injected by no one.
  for (const template of set?.templates ?? []) {
    if (template.delivery !== 'policy') continue;
    for (const reason of exportProblems(template, set!))
      problems.push({ file: template.file, field: 'delivery', message: `policy: a MutatingAdmissionPolicy cannot inject it as the webhook does: ${reason}` });
  }
  if (problems.length > 0 || !set) throw new TemplateError(problems);
  return set;
}

/** `spec.containers[0].image: must be a string`: one problem of an object, as `check` prints it. */
export function problemLine(problem: TemplateProblem): string {
  return `${problem.field ? `${problem.field}: ` : ''}${problem.message}`;
}

/** SidecarTemplate objects checked one by one: the set of those that pass, and each refused object's problems (by object name). */
export interface CheckedObjects {
  readonly set: TemplateSet;
  readonly refused: ReadonlyMap<string, readonly TemplateProblem[]>;
}

/**
 * One SidecarTemplate's own problems: every check of `check` that concerns it alone (its
 * schema, placeholders, selectors, parameters, its render into the sample pod, whether a
 * `delivery: policy` template can be exported), none that concerns the set.
 */
export function checkTemplateObject(object: JsonObject, cluster: ClusterCheck = {}): TemplateProblem[] {
  const name = isJsonObject(object.metadata) && typeof object.metadata.name === 'string' ? object.metadata.name : '';
  const compiled = compileTemplateValue(object, objectLabel(name));
  return compiled.template ? [...compiled.problems, ...ownProblems(compiled.template, compiled.stanza, cluster)] : compiled.problems;
}

/** The checks of one compiled object that concern it alone: its render, and whether a `delivery: policy` stable revision can be exported. */
function ownProblems(template: Template, stanza: RolloutStanza | undefined, cluster: ClusterCheck): TemplateProblem[] {
  const problems = checkRendered(template, cluster).map(specProblem);
  // As the only revision of its template: a rollout in progress, or a label another template
  // adds, is the set's business (the webhook then decides the template itself: select.ts).
  if (template.delivery === 'policy' && !stanza)
    for (const reason of exportProblems(template, createTemplateSet([template])))
      problems.push({
        file: template.file,
        field: 'spec.delivery',
        message: `policy: a MutatingAdmissionPolicy cannot inject it as the webhook does: ${reason}`,
      });
  return problems;
}

/** Each object's own checks, remembered by uid and generation (a status write changes neither). */
export type ObjectChecks = Map<
  string,
  { readonly key: string; readonly result: ReturnType<typeof compileTemplateValue> & { readonly problems: TemplateProblem[] } }
>;

/**
 * Every check of `check`, on SidecarTemplate objects (as the API server holds them) one by one:
 * an object that fails is left out and named, the rest are served. What concerns several
 * objects (two candidates of one template, a candidate without its stable revision) leaves
 * out the object that makes it so. `serve` runs it on every change it watches, `why`,
 * `simulate` and `audit` on what they read; the admission judges one object alone
 * (checkTemplateObject).
 */
export function checkTemplateObjects(objects: readonly JsonObject[], cluster: ClusterCheck = {}, memo?: ObjectChecks): CheckedObjects {
  const refused = new Map<string, TemplateProblem[]>();
  const byFile = new Map<string, string>();
  const passed: { name: string; revision: RevisionFile }[] = [];
  const named = objects
    .map((object) => ({ object, name: isJsonObject(object.metadata) && typeof object.metadata.name === 'string' ? object.metadata.name : '' }))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const { object, name } of named) {
    const file = objectLabel(name);
    byFile.set(file, name);
    const metadata = isJsonObject(object.metadata) ? object.metadata : {};
    const key =
      typeof metadata.uid === 'string' && typeof metadata.generation === 'number'
        ? `${metadata.uid}/${metadata.generation}/${JSON.stringify(cluster.version ?? null)}`
        : undefined;
    const known = key !== undefined ? memo?.get(name) : undefined;
    let compiled = known?.key === key ? known?.result : undefined;
    if (!compiled) {
      const fresh = compileTemplateValue(object, file);
      compiled = fresh.template ? { ...fresh, problems: [...fresh.problems, ...ownProblems(fresh.template, fresh.stanza, cluster)] } : fresh;
      if (key !== undefined) memo?.set(name, { key, result: compiled });
    }
    const problems = compiled.problems;
    if (problems.length > 0 || !compiled.template) refused.set(name, problems);
    else passed.push({ name, revision: { template: compiled.template, ...(compiled.stanza ? { stanza: compiled.stanza } : {}) } });
  }
  // Each round leaves out at least one object or ends: bounded by the number of objects.
  for (;;) {
    const kept = passed.filter((p) => !refused.has(p.name));
    const { set, problems } = createRevisionSet(kept.map((p) => p.revision));
    const across = problems.map(specProblem);
    const blamed = across.filter((p) => byFile.has(p.file));
    if (blamed.length === 0) return { set, refused };
    for (const problem of blamed) {
      const name = byFile.get(problem.file)!;
      refused.set(name, [...(refused.get(name) ?? []), problem]);
    }
  }
}

/** Reads a selector, or undefined when it cannot be read (the scope is then unknown). */
function readableSelector(raw: unknown): Selector | undefined {
  try {
    return parseSelector(raw);
  } catch {
    return undefined;
  }
}

/**
 * A refused object whose template is required (failurePolicy Fail, the default) and in force
 * as a stable revision would be: what admission needs to refuse the pods it may apply to.
 */
function refusedRequiredOf(object: JsonObject | undefined, name: string, problems: readonly TemplateProblem[]): RefusedRequired[] {
  const spec = object && isJsonObject(object.spec) ? object.spec : undefined;
  if (!spec || spec.failurePolicy === 'Ignore' || spec.rollout !== undefined) return [];
  const namespaceSelector = readableSelector(spec.namespaceSelector);
  const objectSelector = readableSelector(spec.objectSelector);
  return [
    {
      object: name,
      template: typeof spec.name === 'string' ? spec.name : name,
      onRequest: spec.injection === 'on-request',
      ...(namespaceSelector ? { namespaceSelector } : {}),
      ...(objectSelector ? { objectSelector } : {}),
      problem: cut(problems[0] ? problemLine(problems[0]) : 'refused', 300),
      ...(spec.optOut === 'deny' || spec.optOut === 'warn' ? { optOut: spec.optOut } : {}),
    },
  ];
}

/**
 * The objects a replica serves, as every replica and every command that reads the cluster decide
 * it: the oldest `maxTemplateObjects` checked (the newest beyond are named as refused, never
 * silently dropped), and each refused object whose template is required carried in the set
 * (`refusedRequired`), so that admission refuses the pods it may apply to.
 */
export function servedTemplateObjects(objects: readonly JsonObject[], cluster: ClusterCheck = {}, memo?: ObjectChecks): CheckedObjects {
  const nameOf = (o: JsonObject) => (isJsonObject(o.metadata) && typeof o.metadata.name === 'string' ? o.metadata.name : '');
  const created = (o: JsonObject) =>
    `${isJsonObject(o.metadata) && typeof o.metadata.creationTimestamp === 'string' ? o.metadata.creationTimestamp : ''}\0${nameOf(o)}`;
  const all = [...objects].sort((a, b) => (created(a) < created(b) ? -1 : 1));
  const within = all.slice(0, maxTemplateObjects);
  const { set, refused } = checkTemplateObjects(within, cluster, memo);
  const over = new Map(refused);
  for (const object of all.slice(within.length))
    over.set(nameOf(object), [{ file: '', field: '', message: `more than ${maxTemplateObjects} SidecarTemplates: this one is not served` }]);
  const byName = new Map(objects.map((o) => [nameOf(o), o]));
  const refusedRequired = [...over].flatMap(([name, problems]) => refusedRequiredOf(byName.get(name), name, problems));
  return { set: refusedRequired.length > 0 ? Object.freeze({ ...set, refusedRequired }) : set, refused: over };
}

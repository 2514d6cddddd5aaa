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
import { compileTemplateFiles, readTemplateFiles, type CompileOptions, type TemplateFile } from '../templates/load.js';
import { createTemplateSet, type TemplateSet } from '../templates/set.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import type { Template } from '../templates/template.js';
import { formatVersion, supportsNativeSidecars, type KubernetesVersion } from '../k8s/version.js';
import { checkPodSecurity, describeViolations, type PodSecurityPolicy } from '../k8s/pod-security.js';
import { templateInForm } from '../templates/forms.js';
import { exportProblems } from '../templates/export-rules.js';

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

/** Checks that `kustomization.yaml` (when present) lists exactly the template files. */
async function checkKustomization(dir: string, files: readonly string[]): Promise<TemplateProblem[]> {
  let text: string;
  try {
    text = await readFile(join(dir, 'kustomization.yaml'), 'utf8');
  } catch {
    return [];
  }
  const invalid = (message: string): TemplateProblem[] => [{ file: 'kustomization.yaml', field: 'configMapGenerator', message }];
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (err) {
    return invalid(`is not valid YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  const generators = isJsonObject(doc) ? doc.configMapGenerator : undefined;
  if (generators !== undefined && !Array.isArray(generators)) return invalid('must be a list');
  const listed = new Set<string>();
  for (const generator of (generators as unknown[] | undefined) ?? []) {
    const files = isJsonObject(generator) ? generator.files : undefined;
    if (files === undefined) continue;
    if (!Array.isArray(files) || files.some((f) => typeof f !== 'string')) return invalid('files must be a list of file names');
    for (const f of files as string[]) listed.add(f.split('=').pop() ?? f);
  }
  const problems: TemplateProblem[] = [];
  if (isJsonObject(doc)) problems.push(...configMapProblems(doc, (generators as unknown[] | undefined) ?? []));
  for (const file of files) {
    if (!listed.has(file))
      problems.push({ file: 'kustomization.yaml', field: 'configMapGenerator.files', message: `does not list ${file}: it would not reach the cluster` });
  }
  for (const file of listed) {
    if (!files.includes(file))
      problems.push({ file: 'kustomization.yaml', field: 'configMapGenerator.files', message: `lists ${file}, which is not a template file here` });
  }
  return problems;
}

/** The ConfigMap the Deployment mounts: a folder that makes any other is one the injector never reads. */
/** The ConfigMap the injector mounts its templates from. */
export const templatesConfigMap = { name: 'sidecar-injector-templates', namespace: 'sidecar-injector' } as const;

/**
 * Whether the kustomization makes exactly the ConfigMap the injector mounts: its name, its
 * namespace, no hash suffix and no prefix or suffix on the name. Any of them otherwise, and the
 * replicas serve no template (the volume is optional) while the folder looks applied.
 */
function configMapProblems(doc: JsonObject, generators: readonly unknown[]): TemplateProblem[] {
  const problem = (field: string, message: string): TemplateProblem => ({ file: 'kustomization.yaml', field, message });
  const expected = `the injector reads the ConfigMap ${templatesConfigMap.namespace}/${templatesConfigMap.name}`;
  const problems: TemplateProblem[] = [];
  for (const field of ['namePrefix', 'nameSuffix'] as const)
    if (typeof doc[field] === 'string' && doc[field] !== '') problems.push(problem(field, `changes the ConfigMap's name: ${expected}; remove it`));
  const withFiles = generators.filter((g) => isJsonObject(g) && g.files !== undefined) as JsonObject[];
  if (withFiles.length === 0) return problems;
  const generator = withFiles.find((g) => g.name === templatesConfigMap.name);
  if (!generator) return [...problems, problem('configMapGenerator.name', `${expected}: name the generator ${templatesConfigMap.name}`)];
  const namespace = typeof generator.namespace === 'string' ? generator.namespace : doc.namespace;
  if (namespace !== templatesConfigMap.namespace)
    problems.push(
      problem(
        'namespace',
        `${expected}: set namespace: ${templatesConfigMap.namespace} (got ${namespace === undefined ? 'none' : JSON.stringify(namespace).slice(0, 80)})`,
      ),
    );
  const options = isJsonObject(generator.options) ? generator.options : {};
  const global = isJsonObject(doc.generatorOptions) ? doc.generatorOptions : {};
  if ((options.disableNameSuffixHash ?? global.disableNameSuffixHash) !== true)
    problems.push(problem('configMapGenerator.options.disableNameSuffixHash', `${expected}, without a hash suffix: set disableNameSuffixHash: true`));
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

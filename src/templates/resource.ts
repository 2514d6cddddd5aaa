/**
 * The SidecarTemplate resource: a template as a Kubernetes object. Its `spec` is the template
 * document (docs/templates.md) without `name`, which is the object's `metadata.name`; a candidate
 * or a previous revision of a template (a `spec.rollout` stanza) names the template it revises
 * with `spec.name`, as its object needs a name of its own. The same manifests are what a folder
 * holds (`check DIR`, `render`, `simulate --templates DIR`) and what the API server stores, so
 * one function unwraps both. Pure.
 */
import type { TemplateProblem } from '../errors.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { isDns1123Label } from '../k8s/label-syntax.js';
import { cut } from '../quote.js';

/** Group, version, kind and plural of the resource; one place for every reader and writer. */
/**
 * SidecarTemplates are at most this many: each is checked on every change, and a cluster with
 * more is not one a replica serves well. Admission refuses a create beyond it; a replica that
 * lists more serves the oldest and names the others.
 */
export const maxTemplateObjects = 500;

export const sidecarTemplateResource = Object.freeze({
  group: 'sidecar-injector.io',
  version: 'v1alpha1',
  apiVersion: 'sidecar-injector.io/v1alpha1',
  kind: 'SidecarTemplate',
  plural: 'sidecartemplates',
  /** The collection's path (cluster-scoped). */
  path: '/apis/sidecar-injector.io/v1alpha1/sidecartemplates',
});

/** `sidecartemplate/proxy`: how an object is named in problems, logs and Events (kubectl's form). */
export function objectLabel(name: string): string {
  return `sidecartemplate/${cut(name, 80)}`;
}

/** The API path of one object, or of its status subresource. */
export function sidecarTemplatePath(name: string, subresource?: 'status'): string {
  return `${sidecarTemplateResource.path}/${encodeURIComponent(name)}${subresource ? `/${subresource}` : ''}`;
}

/** True for a document that says it is a SidecarTemplate (any version: a wrong one is named by templateDocument). */
export function isSidecarTemplateManifest(value: unknown): value is JsonObject {
  return isJsonObject(value) && value.kind === sidecarTemplateResource.kind;
}

const objectFields = new Set(['apiVersion', 'kind', 'metadata', 'spec', 'status']);

/**
 * The template document a SidecarTemplate holds: its spec, named. Problems name the object's own
 * fields (`metadata.name`, `spec`); the spec's own problems are found by compileTemplate.
 */
export function templateDocument(object: JsonObject, file: string): { doc?: JsonObject; problems: TemplateProblem[] } {
  const problems: TemplateProblem[] = [];
  const problem = (field: string, message: string) => problems.push({ file, field, message });
  if (object.apiVersion !== sidecarTemplateResource.apiVersion)
    problem('apiVersion', `must be ${sidecarTemplateResource.apiVersion} (got ${cut(JSON.stringify(object.apiVersion ?? null), 80)})`);
  for (const key of Object.keys(object))
    if (!objectFields.has(key)) problem(key, `unknown field (a ${sidecarTemplateResource.kind} has apiVersion, kind, metadata and spec)`);
  const metadata = isJsonObject(object.metadata) ? object.metadata : undefined;
  const name = metadata?.name;
  if (typeof name !== 'string' || !isDns1123Label(name))
    problem('metadata.name', 'is required and must be a DNS-1123 label (lowercase letters, digits and "-", at most 63): it names the template');
  if (metadata && metadata.namespace !== undefined)
    problem('metadata.namespace', `a ${sidecarTemplateResource.kind} is cluster-scoped: remove the namespace (and any kustomize namespace: for it)`);
  const spec = object.spec;
  if (!isJsonObject(spec)) {
    problem('spec', 'is required: the template (containers, selectors and the fields of docs/templates.md)');
    return { problems };
  }
  if (problems.length > 0) return { problems };
  const revises = spec.name;
  if (revises !== undefined && revises !== name && !isJsonObject(spec.rollout))
    problem(
      'spec.name',
      `only a candidate or previous revision (spec.rollout) names another template; this object's template is its metadata.name (${cut(String(name), 80)})`,
    );
  // The stable revision is the object named as the template: a revision beside it needs a name of its own.
  if (spec.rollout !== undefined && (revises === undefined || revises === name))
    problem(
      'spec.name',
      `a candidate or previous revision (spec.rollout) is an object of its own beside the stable one: give it another metadata.name (${cut(String(name), 60)}-next) and spec.name: the template it revises`,
    );
  if (problems.length > 0) return { problems };
  return { doc: { ...spec, name: revises ?? name }, problems };
}

/** A template document's problem, as a field of the object that holds it (`containers[0]` → `spec.containers[0]`). */
export function specProblem(problem: TemplateProblem): TemplateProblem {
  return problem.field.startsWith('line ') ? problem : { ...problem, field: problem.field ? `spec.${problem.field}` : 'spec' };
}

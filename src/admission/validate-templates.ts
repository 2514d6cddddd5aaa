/**
 * SidecarTemplate admission: a create or an update of a SidecarTemplate runs every check of
 * `check` (pipeline/template-check.ts) on the object before the API server stores it, so a
 * template the injector would refuse is refused at `kubectl apply` (or `helm upgrade`) with
 * check's message, and never reaches a replica. It never
 * changes the object. Answered in the review's version; a body that is no review gets a 400.
 */
import { canonicalJson, isJsonObject } from '../k8s/json.js';
import { checkTemplateObject, problemLine, type ClusterCheck } from '../pipeline/template-check.js';
import { cut } from '../quote.js';
import { compileTemplateValue } from '../templates/load.js';
import { undeclaredPorts, undeclaredPortText } from '../templates/ports.js';
import { maxTemplateObjects, objectLabel, sidecarTemplateResource } from '../templates/resource.js';
import { allowed, denied, parseReview, type ReviewResponse } from './review.js';

export interface TemplateAdmissionDeps {
  /** What the checks check about the cluster (its version, for a template's form). */
  readonly cluster?: () => ClusterCheck;
  /** How many SidecarTemplates the cluster holds, as this replica last listed them; undefined while unknown. */
  readonly stored?: () => number | undefined;
}

/** What a denial quotes at most: every problem of a realistic template, never a megabyte. */
const maxProblemsQuoted = 30;

/**
 * Why a SidecarTemplate review is refused, or undefined when it is admitted. The object is judged
 * on its own: what concerns several objects (a candidate before its stable revision, a
 * promotion applied object by object) passes through intermediate states an apply of a folder
 * cannot order, so the replicas judge the set (an object it leaves out is named in its status).
 */
export function templateRefusal(object: unknown, name: string, deps: TemplateAdmissionDeps = {}): string | undefined {
  if (!isJsonObject(object)) return `request.object must be the ${sidecarTemplateResource.kind}`;
  // The name the API server will store it under (a generateName alone is no template name: refused).
  const metadata = isJsonObject(object.metadata) ? object.metadata : {};
  const objectName = typeof metadata.name === 'string' && metadata.name !== '' ? metadata.name : name;
  const lines = checkTemplateObject({ ...object, metadata: { ...metadata, name: objectName } }, deps.cluster?.() ?? {}).map(problemLine);
  if (lines.length === 0) return undefined;
  const shown = lines.slice(0, maxProblemsQuoted).map((line) => `  ${cut(line, 500)}`);
  if (lines.length > shown.length) shown.push(`  (and ${lines.length - shown.length} more)`);
  return `${sidecarTemplateResource.kind} ${cut(objectName, 80)} is refused (the checks of sidecar-injector check):\n${shown.join('\n')}`;
}

/** What `check` warns about in an admitted object (ports its containers listen on and do not declare), for `kubectl apply` to print. */
function templateWarnings(object: unknown, name: string): string[] {
  if (!isJsonObject(object)) return [];
  const { template } = compileTemplateValue(object, objectLabel(name));
  return template ? undeclaredPorts(template).map((port) => undeclaredPortText(template.name, port)) : [];
}

/** True when both are objects with the same spec. */
function specAsStored(object: unknown, old: unknown): boolean {
  return isJsonObject(object) && isJsonObject(old) && canonicalJson(object.spec ?? null) === canonicalJson(old.spec ?? null);
}

/** Answers one review of a SidecarTemplate create or update. Throws RequestError (400) for a body that is no review. */
export function answerTemplateReview(body: unknown, deps: TemplateAdmissionDeps = {}): { response: ReviewResponse; refused: boolean } {
  const { version, request } = parseReview(body);
  const ours = request.kind.group === sidecarTemplateResource.group && request.kind.kind === sidecarTemplateResource.kind;
  // Another kind, a subresource (status), a delete: not this webhook's to judge.
  if (!ours || request.subResource !== '' || (request.operation !== 'CREATE' && request.operation !== 'UPDATE'))
    return { response: allowed(version, request.uid), refused: false };
  // An update that leaves the spec as stored (labels, annotations, a finalizer removed while it
  // is deleted) adds nothing a replica could serve: admitted, so that an object stored before a
  // check existed can still be relabelled and deleted with its finalizers.
  if (request.operation === 'UPDATE' && specAsStored(request.object, request.oldObject)) return { response: allowed(version, request.uid), refused: false };
  const stored = request.operation === 'CREATE' ? deps.stored?.() : undefined;
  const refusal =
    stored !== undefined && stored >= maxTemplateObjects
      ? `${sidecarTemplateResource.kind} ${cut(request.name, 80)} is refused: the cluster holds ${stored} SidecarTemplates, the most the injector serves is ${maxTemplateObjects}; delete one first`
      : templateRefusal(request.object, request.name, deps);
  if (refusal === undefined) {
    const warnings = templateWarnings(request.object, request.name);
    return { response: allowed(version, request.uid, warnings.length > 0 ? { warnings } : {}), refused: false };
  }
  return { response: denied(version, request.uid, 422, refusal), refused: true };
}

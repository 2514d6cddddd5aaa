/**
 * SidecarTemplate admission: a create or an update of a SidecarTemplate runs every check of
 * `check` (pipeline/template-check.ts) before the API server stores it, with the objects
 * already stored beside it, so a template the injector would refuse is refused at `kubectl
 * apply` (or `helm upgrade`) with check's message, and never reaches a replica. It never
 * changes the object. Answered in the review's version; a body that is no review gets a 400.
 */
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { checkTemplateObjects, problemLine, type ClusterCheck } from '../pipeline/template-check.js';
import { cut } from '../quote.js';
import { sidecarTemplateResource } from '../templates/resource.js';
import { allowed, denied, parseReview, type ReviewResponse } from './review.js';

export interface TemplateAdmissionDeps {
  /** The SidecarTemplates stored now (by name), as this replica last saw them; undefined before it has listed them. */
  readonly stored: () => ReadonlyMap<string, JsonObject> | undefined;
  readonly cluster?: () => ClusterCheck;
}

/** What a denial quotes at most: every problem of a realistic template, never a megabyte. */
const maxProblemsQuoted = 30;

/** Why a SidecarTemplate review is refused, or undefined when it is admitted. */
export function templateRefusal(object: unknown, name: string, deps: TemplateAdmissionDeps): string | undefined {
  if (!isJsonObject(object)) return `request.object must be the ${sidecarTemplateResource.kind}`;
  // The name the API server will store it under (a generateName gets one later: checked as its prefix's).
  const metadata = isJsonObject(object.metadata) ? object.metadata : {};
  const objectName = typeof metadata.name === 'string' && metadata.name !== '' ? metadata.name : name;
  const named: JsonObject = { ...object, metadata: { ...metadata, name: objectName } };
  const stored = deps.stored() ?? new Map<string, JsonObject>();
  const others = [...stored.entries()].filter(([other]) => other !== objectName).map(([, o]) => o);
  const cluster = deps.cluster?.() ?? {};
  const after = checkTemplateObjects([...others, named], cluster);
  const lines: string[] = [];
  for (const problem of after.refused.get(objectName) ?? []) lines.push(problemLine(problem));
  // A change that makes another object refused (a stable revision now equal to its candidate) is this change's problem.
  const before = others.length > 0 ? checkTemplateObjects([...stored.values()], cluster).refused : new Map();
  for (const [other, problems] of after.refused)
    if (other !== objectName && !before.has(other))
      for (const problem of problems) lines.push(`would make sidecartemplate/${other} refused: ${problemLine(problem)}`);
  if (lines.length === 0) return undefined;
  const shown = lines.slice(0, maxProblemsQuoted).map((line) => `  ${cut(line, 500)}`);
  if (lines.length > shown.length) shown.push(`  (and ${lines.length - shown.length} more)`);
  return `${sidecarTemplateResource.kind} ${cut(objectName, 80)} is refused (the checks of sidecar-injector check):\n${shown.join('\n')}`;
}

/** Answers one review of a SidecarTemplate create or update. Throws RequestError (400) for a body that is no review. */
export function answerTemplateReview(body: unknown, deps: TemplateAdmissionDeps): { response: ReviewResponse; refused: boolean } {
  const { version, request } = parseReview(body);
  const ours = request.kind.group === sidecarTemplateResource.group && request.kind.kind === sidecarTemplateResource.kind;
  // Another kind, a subresource (status), a delete: not this webhook's to judge.
  if (!ours || request.subResource !== '' || (request.operation !== 'CREATE' && request.operation !== 'UPDATE'))
    return { response: allowed(version, request.uid), refused: false };
  const refusal = templateRefusal(request.object, request.name, deps);
  if (refusal === undefined) return { response: allowed(version, request.uid), refused: false };
  return { response: denied(version, request.uid, 422, refusal), refused: true };
}

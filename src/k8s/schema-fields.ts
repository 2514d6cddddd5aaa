/**
 * Field names against the Kubernetes schema, as the API server reads an object under
 * `fieldValidation=Strict` (kubectl's default): a field the schema does not have is refused,
 * where a lax client would drop it without a word. Container resource names are checked as
 * pod validation checks them. Pure; the schema is generated (pod-schema.ts).
 */
import { closest, distance } from 'fastest-levenshtein';
import { isJsonObject } from './json.js';
import { labelKeyProblem } from './label-syntax.js';
import { podSchemaTypes } from './pod-schema.js';
import { cut, quote } from '../quote.js';

/** A field the schema refuses: where (`containers[0].volumMounts`) and why, in words. */
export interface FieldProblem {
  readonly field: string;
  readonly message: string;
}

/** Problems reported per object at most: a file of a thousand typos needs the first few to be fixed. */
export const maxFieldProblems = 20;

/** `Container` for `V1Container`, as people and the API documentation name the type. */
function typeName(type: string): string {
  return type.replace(/^(?:Core)?V\d+(?:(?:alpha|beta)\d+)?/, '');
}

/**
 * The valid name nearest to `name`, when it is near enough to be a typo: two edits (a swapped
 * pair is two), or a third of its letters for a long name, at most three; case ignored.
 */
export function nearestName(name: string, candidates: readonly string[]): string | undefined {
  if (candidates.length === 0 || name.length > 256) return undefined;
  const lower = name.toLowerCase();
  const best = closest(
    lower,
    candidates.map((c) => c.toLowerCase()),
  );
  const limit = Math.min(3, Math.max(2, Math.floor(name.length / 3)));
  if (distance(lower, best) > limit) return undefined;
  return candidates.find((c) => c.toLowerCase() === best);
}

/** `"volumMounts"` and, when one is near, ` (did you mean volumeMounts?)`. */
export function unknownNameMessage(what: string, name: string, candidates: readonly string[]): string {
  const near = nearestName(name, candidates);
  return `unknown ${what} ${quote(name, 80)}${near ? ` (did you mean ${near}?)` : ''}`;
}

const standardContainerResources = new Set(['cpu', 'memory', 'ephemeral-storage']);

/**
 * Why `name` cannot be a container's resource name, as pod validation says it
 * (validateContainerResourceName): a qualified name; without a domain, one of cpu, memory,
 * ephemeral-storage or hugepages-<size>; with a domain outside kubernetes.io, an extended
 * resource name.
 */
export function containerResourceNameProblem(name: string): string | undefined {
  const syntax = labelKeyProblem(name);
  if (syntax) return `is not a valid resource name: ${syntax.replace(/^label key/, 'resource name')}`;
  if (!name.includes('/')) {
    if (standardContainerResources.has(name) || name.startsWith('hugepages-')) return undefined;
    return `must be a standard resource for containers: cpu, memory, ephemeral-storage or hugepages-<size>${nearSuffix(name)}`;
  }
  if (name.includes('kubernetes.io/')) return undefined;
  if (name.startsWith('requests.') || labelKeyProblem(`requests.${name}`)) return "doesn't follow extended resource name standard";
  return undefined;
}

function nearSuffix(name: string): string {
  const near = nearestName(name, [...standardContainerResources]);
  return near ? ` (did you mean ${near}?)` : '';
}

/**
 * Every field of `value` (an object of schema type `type`, such as `V1Container`) the schema
 * does not have, at any depth, each at its path under `field`. Values of the wrong kind (a
 * placeholder where an object goes) are left to the schema's type check of the rendered pod.
 */
export function schemaFieldProblems(value: unknown, type: string, field: string): FieldProblem[] {
  const problems: FieldProblem[] = [];
  walk(value, type, field, problems);
  return problems.slice(0, maxFieldProblems);
}

/** The schema type of field `key` of `type`, as an object (a list's item type). */
function objectTypeOf(type: string, key: string): string | undefined {
  const fields = Object.hasOwn(podSchemaTypes, type) ? podSchemaTypes[type]! : undefined;
  const child = fields && Object.hasOwn(fields, key) ? fields[key]! : undefined;
  return child?.replace(/\[\]$/, '');
}

/**
 * Where a field that `type` does not have would belong, one level away: a field of the
 * enclosing object (indented too far) or of one of this object's own fields (not indented enough).
 */
function indentationHint(key: string, type: string, parent: { readonly type: string; readonly field: string } | undefined): string {
  const has = (t: string | undefined) => t !== undefined && Object.hasOwn(podSchemaTypes, t) && Object.hasOwn(podSchemaTypes[t]!, key);
  if (parent && has(parent.type)) return `; indented too far? ${key} is a field of ${typeName(parent.type)} (${parent.field}), one level up`;
  const fields = Object.hasOwn(podSchemaTypes, type) ? Object.keys(podSchemaTypes[type]!) : [];
  const under = fields.find((f) => has(objectTypeOf(type, f)));
  return under ? `; not indented enough? ${key} is a field of ${under}` : '';
}

function walk(value: unknown, type: string, field: string, problems: FieldProblem[], parent?: { readonly type: string; readonly field: string }): void {
  if (problems.length >= maxFieldProblems) return;
  if (type.endsWith('[]')) {
    if (Array.isArray(value)) value.forEach((item, i) => walk(item, type.slice(0, -2), `${field}[${i}]`, problems, parent));
    return;
  }
  const fields = Object.hasOwn(podSchemaTypes, type) ? podSchemaTypes[type] : undefined;
  if (!fields || !isJsonObject(value)) return;
  const names = Object.keys(fields);
  for (const [key, child] of Object.entries(value)) {
    if (problems.length >= maxFieldProblems) return;
    const path = `${field}.${cut(key, 80)}`;
    if (!Object.hasOwn(fields, key)) {
      const near = nearestName(key, names);
      problems.push({
        field: path,
        message: `${unknownNameMessage('field', key, names)}: not a field of ${typeName(type)}${near ? '' : indentationHint(key, type, parent)}`,
      });
      continue;
    }
    if (type === 'V1ResourceRequirements' && (key === 'limits' || key === 'requests') && isJsonObject(child)) {
      for (const resource of Object.keys(child)) {
        const problem = containerResourceNameProblem(resource);
        if (problem) problems.push({ field: `${path}.${cut(resource, 80)}`, message: problem });
      }
      continue;
    }
    walk(child, fields[key]!, path, problems, { type, field });
  }
}

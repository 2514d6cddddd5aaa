/**
 * The placeholder language of templates: `{{ reference }}` or `{{ reference | default 'text' }}`
 * inside a string value. It has no code, no loops and no conditionals; a reference names one
 * value from the pod, its namespace or the template's parameters. Parsing happens once, when
 * templates load; rendering only looks values up and concatenates strings.
 */
import { PlaceholderError } from '../errors.js';
import { nearestName } from '../k8s/schema-fields.js';

/** A parameter value: a scalar, so that even a parameter cannot add structure. */
export type ParamValue = string | number | boolean;

/** What a reference can name. Label and annotation references carry their key. */
export type Reference =
  | { readonly source: 'pod.name' | 'pod.generateName' | 'pod.namespace' | 'pod.serviceAccountName' | 'namespace.name' }
  | { readonly source: 'pod.labels' | 'pod.annotations' | 'namespace.labels'; readonly key: string }
  | { readonly source: 'params'; readonly key: string }
  | { readonly source: 'literal'; readonly text: string };

/** One piece of a string value: literal text or a placeholder. */
export type Segment =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'placeholder'; readonly ref: Reference; readonly fallback: string | undefined; readonly raw: string };

/** Values a template is rendered with, taken from the pod as received and its namespace. */
export interface RenderContext {
  readonly pod: {
    readonly name: string;
    readonly generateName: string;
    readonly namespace: string;
    readonly serviceAccountName: string;
    readonly labels: Readonly<Record<string, string>>;
    readonly annotations: Readonly<Record<string, string>>;
  };
  readonly namespace: { readonly name: string; readonly labels: Readonly<Record<string, string>> };
}

const scalarSources = new Set(['pod.name', 'pod.generateName', 'pod.namespace', 'pod.serviceAccountName', 'namespace.name']);
const mapSources = new Set(['pod.labels', 'pod.annotations', 'namespace.labels']);

/** The references a template may use, for error messages and the README. */
export const knownReferences =
  "pod.name, pod.generateName, pod.namespace, pod.serviceAccountName, pod.labels['KEY'], pod.annotations['KEY'], namespace.name, namespace.labels['KEY'], params.NAME, 'literal text'";

const quotedRe = /^(?:'([^']*)'|"([^"]*)")/;
const identRe = /^[A-Za-z_][A-Za-z0-9_-]*/;

/** Splits `input` into path parts: `a.b['c/d']` → ['a', 'b', 'c/d']. */
function parsePath(input: string, raw: string): string[] {
  const parts: string[] = [];
  let rest = input;
  let first = true;
  while (rest.length > 0) {
    if (!first && rest.startsWith('[')) {
      const quoted = quotedRe.exec(rest.slice(1));
      if (!quoted || rest[1 + quoted[0].length] !== ']') throw new PlaceholderError(`${raw}: expected ['key'] with a quoted key`);
      parts.push(quoted[1] ?? quoted[2] ?? '');
      rest = rest.slice(quoted[0].length + 2);
    } else {
      if (!first) {
        if (!rest.startsWith('.')) throw new PlaceholderError(`${raw}: unexpected ${JSON.stringify(rest)}`);
        rest = rest.slice(1);
      }
      const ident = identRe.exec(rest);
      if (!ident) throw new PlaceholderError(`${raw}: expected a name at ${JSON.stringify(rest)}`);
      parts.push(ident[0]);
      rest = rest.slice(ident[0].length);
    }
    first = false;
  }
  return parts;
}

function parseReference(expr: string, raw: string, params: ReadonlySet<string>): Reference {
  const quoted = quotedRe.exec(expr);
  if (quoted && quoted[0].length === expr.length) return { source: 'literal', text: quoted[1] ?? quoted[2] ?? '' };
  const unquotedDefault = /\|\s*default\s+([^'"\s].*)$/.exec(expr);
  if (unquotedDefault)
    throw new PlaceholderError(`${raw}: the default is quoted text: | default '${unquotedDefault[1]!.trim().slice(0, 80).replace(/'/g, '')}'`);
  const parts = parsePath(expr, raw);
  const [root, field, key, ...extra] = parts;
  const unknown = () => new PlaceholderError(`unknown placeholder ${raw}${nearReference(root, field, params)}: expected one of ${knownReferences}`);
  if (extra.length > 0 || root === undefined || field === undefined) throw unknown();
  if (root === 'params') {
    if (key !== undefined) throw unknown();
    if (!params.has(field)) {
      const near = nearestName(field, [...params]);
      const declared = params.size > 0 ? `declared: ${[...params].join(', ')}` : 'none is declared';
      throw new PlaceholderError(
        `${raw}: parameter ${JSON.stringify(field)} is not declared under parameters (${near ? `did you mean ${near}? ` : ''}${declared})`,
      );
    }
    return { source: 'params', key: field };
  }
  const source = `${root}.${field}`;
  if (scalarSources.has(source) && key === undefined) return { source } as Reference;
  if (mapSources.has(source) && key !== undefined) return { source, key } as Reference;
  throw unknown();
}

/** ` (did you mean pod.name?)` for a reference one typo away from one a template may use. */
function nearReference(root: string | undefined, field: string | undefined, params: ReadonlySet<string>): string {
  if (root === undefined) return '';
  const roots = ['pod', 'namespace', 'params'];
  const nearRoot = roots.includes(root) ? root : nearestName(root, roots);
  if (!nearRoot || field === undefined) return '';
  const fields =
    nearRoot === 'params'
      ? [...params]
      : [...scalarSources, ...mapSources].filter((s) => s.startsWith(`${nearRoot}.`)).map((s) => s.slice(nearRoot.length + 1));
  const nearField = fields.includes(field) ? field : nearestName(field, fields);
  if (!nearField || (nearRoot === root && nearField === field)) return '';
  return ` (did you mean ${nearRoot}.${nearField}${mapSources.has(`${nearRoot}.${nearField}`) ? "['KEY']" : ''}?)`;
}

const placeholderRe = /\{\{([\s\S]*?)\}\}/g;
const defaultRe = /^([\s\S]*?)\s*\|\s*default\s+('[^']*'|"[^"]*")\s*$/;

/**
 * Parses a template string into segments. Throws PlaceholderError on an unknown reference,
 * an undeclared parameter or an unclosed `{{`.
 */
export function parseSegments(input: string, params: ReadonlySet<string>): Segment[] {
  const segments: Segment[] = [];
  let last = 0;
  for (const match of input.matchAll(placeholderRe)) {
    const before = input.slice(last, match.index);
    if (before.includes('{{')) throw new PlaceholderError(`unclosed {{ in ${JSON.stringify(input)}`);
    if (before) segments.push({ kind: 'text', text: before });
    const raw = match[0];
    let expr = (match[1] ?? '').trim();
    let fallback: string | undefined;
    const withDefault = defaultRe.exec(expr);
    if (withDefault) {
      expr = withDefault[1]!.trim();
      fallback = withDefault[2]!.slice(1, -1);
    }
    if (!expr) throw new PlaceholderError(`empty placeholder ${raw}`);
    segments.push({ kind: 'placeholder', ref: parseReference(expr, raw, params), fallback, raw });
    last = match.index + raw.length;
  }
  const tail = input.slice(last);
  if (tail.includes('{{')) throw new PlaceholderError(`unclosed {{ in ${JSON.stringify(input)}`);
  if (tail) segments.push({ kind: 'text', text: tail });
  return segments;
}

/** True when the segments hold at least one placeholder. */
export function hasPlaceholder(segments: readonly Segment[]): boolean {
  return segments.some((s) => s.kind === 'placeholder');
}

/** The value a reference names, or undefined when the pod or namespace lacks it. */
export function resolve(ref: Reference, context: RenderContext, params: Readonly<Record<string, ParamValue>>): ParamValue | undefined {
  switch (ref.source) {
    case 'literal':
      return ref.text;
    case 'params':
      return params[ref.key];
    case 'pod.labels':
      return own(context.pod.labels, ref.key);
    case 'pod.annotations':
      return own(context.pod.annotations, ref.key);
    case 'namespace.labels':
      return own(context.namespace.labels, ref.key);
    case 'pod.name':
      return context.pod.name;
    case 'pod.generateName':
      return context.pod.generateName;
    case 'pod.namespace':
      return context.pod.namespace;
    case 'pod.serviceAccountName':
      return context.pod.serviceAccountName;
    case 'namespace.name':
      return context.namespace.name;
  }
}

function own(map: Readonly<Record<string, string>>, key: string): string | undefined {
  return Object.hasOwn(map, key) ? map[key] : undefined;
}

/**
 * Renders segments to a string. A missing value (or an empty one) takes the placeholder's
 * default, else the empty string. The result is always one string: no value can add structure.
 */
export function renderSegments(segments: readonly Segment[], context: RenderContext, params: Readonly<Record<string, ParamValue>>): string {
  let out = '';
  for (const segment of segments) {
    if (segment.kind === 'text') out += segment.text;
    else {
      const value = resolve(segment.ref, context, params);
      out += value === undefined || value === '' ? (segment.fallback ?? '') : String(value);
    }
  }
  return out;
}

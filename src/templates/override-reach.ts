/**
 * Where a value chosen by a namespace or a pod (an override, or a pod annotation) may reach in
 * a template: the allow-list of harmless fields as data, how an env var's value reaches what
 * runs, and the problems of a template whose unconstrained values reach anything else. Pure.
 */
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import type { ParamDeclaration, ParamType } from './parameters.js';

/** Where a value chosen by a namespace or a pod (an override, or a pod annotation) appears in a template. */
export interface Use {
  readonly source: 'params' | 'pod.annotations';
  readonly key: string;
  readonly field: string;
}

/**
 * The only fields an unconstrained value from a namespace or a pod may reach, each with why it
 * is harmless: a container's resource requests and limits, an env var's value (unless what runs
 * expands it), and the pod's labels and annotations. Everything else — image, command, args,
 * securityContext, ports, probes and lifecycle hooks, mounts, volumes, valueFrom, workingDir, …
 * — decides what runs or with which rights (a per-pod image override injects any container):
 * there an override must be constrained by an enum or a pattern, and a pod annotation may not
 * appear at all. An allow-list, so that a field nobody thought of is locked. In a path, `[]` is
 * any list index, `*` one key without a dot, `**` any key.
 */
export const harmlessFields: readonly { readonly path: string; readonly why: string }[] = [
  { path: 'containers[].resources.requests.*', why: 'how much the sidecar asks for, not what it runs' },
  { path: 'containers[].resources.limits.*', why: 'how much the sidecar may use, not what it runs' },
  { path: 'initContainers[].resources.requests.*', why: 'how much the sidecar asks for, not what it runs' },
  { path: 'initContainers[].resources.limits.*', why: 'how much the sidecar may use, not what it runs' },
  { path: 'containers[].env[].value', why: "data the program reads, unless its command, args or a mount's subPathExpr expand it with $(NAME)" },
  { path: 'initContainers[].env[].value', why: "data the program reads, unless its command, args or a mount's subPathExpr expand it with $(NAME)" },
  { path: 'appContainers.env[].value', why: "data the pod's own containers read" },
  { path: 'labels.**', why: "the pod's labels: metadata" },
  { path: 'annotations.**', why: "the pod's annotations: metadata" },
];

/** A path of `harmlessFields` as a regular expression's text. */
function pathPattern(path: string): string {
  return path
    .split(/(\[\]|\*\*|\*)/)
    .map((part) => (part === '[]' ? '\\[\\d+\\]' : part === '**' ? '.+' : part === '*' ? '[^.[]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
}

const harmlessFieldRe = new RegExp(`^(?:${harmlessFields.map(({ path }) => pathPattern(path)).join('|')})$`);

/**
 * Parameter types whose values are one token by construction (digits, `true`, `64Mi`, `30s`):
 * such a value may become an argument of what runs, where a free string could add a word, a
 * flag or a shell command.
 */
const oneTokenTypes: ReadonlySet<ParamType> = new Set(['integer', 'number', 'boolean', 'quantity', 'duration']);

/** Where a placeholder's value ends up: harmless data, an argument of what runs, or anything else. */
type Reach = { readonly kind: 'harmless' } | { readonly kind: 'argument'; readonly via: string } | { readonly kind: 'sensitive' };

/**
 * The names a Kubernetes string expands with `$(NAME)` (`$$` is a literal `$`, as the kubelet
 * reads it). Any name counts, declared or not, before or after: over-counting only refuses more.
 */
export function expandedNames(text: string): string[] {
  const names: string[] = [];
  for (const match of text.matchAll(/\$\$|\$\(([^)]*)\)/g)) if (match[1] !== undefined) names.push(match[1]);
  return names;
}

/**
 * The env vars of `container` whose values reach what runs, each with how: a `$(NAME)` in its
 * command, args or a mount's subPathExpr, followed transitively through env values that expand
 * other env vars (`B: --x=$(A)`, `args: [$(B)]` makes A reach args).
 */
function envReachingWhatRuns(container: JsonObject, containerField: string): Map<string, string> {
  const env = Array.isArray(container.env) ? container.env.filter(isJsonObject) : [];
  const valueOf = new Map<string, string>();
  for (const item of env) if (typeof item.name === 'string' && typeof item.value === 'string') valueOf.set(item.name, item.value);
  const reached = new Map<string, string>();
  const queue: string[] = [];
  const reach = (text: unknown, where: string) => {
    if (typeof text !== 'string') return;
    for (const name of expandedNames(text)) {
      if (reached.has(name)) continue;
      reached.set(name, `$(${name}) in ${where}`);
      queue.push(name);
    }
  };
  for (const key of ['command', 'args'] as const) {
    const words = container[key];
    if (Array.isArray(words)) words.forEach((word, i) => reach(word, `${containerField}.${key}[${i}]`));
  }
  const mounts = Array.isArray(container.volumeMounts) ? container.volumeMounts : [];
  mounts.forEach((mount, i) => reach(isJsonObject(mount) ? mount.subPathExpr : undefined, `${containerField}.volumeMounts[${i}].subPathExpr`));
  for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
    const before = reached.get(name)!;
    const value = valueOf.get(name);
    if (value === undefined) continue;
    for (const next of expandedNames(value)) {
      if (reached.has(next)) continue;
      reached.set(next, `$(${next}) in env ${name}, ${before}`);
      queue.push(next);
    }
  }
  return reached;
}

/** Where the value at `field` (a path into the template document) ends up. */
function reachOf(field: string, doc: JsonObject): Reach {
  const match = /^((?:init)?[cC]ontainers)\[(\d+)\]\.(.*)$/.exec(field);
  if (match) {
    const list = doc[match[1]!];
    const container = Array.isArray(list) ? list[Number(match[2])] : undefined;
    const containerField = `${match[1]}[${match[2]}]`;
    const rest = match[3]!;
    if (/^args\[\d+\]$/.test(rest)) return { kind: 'argument', via: '' };
    const envMatch = /^env\[(\d+)\]\.value$/.exec(rest);
    if (envMatch && isJsonObject(container) && Array.isArray(container.env)) {
      const item = container.env[Number(envMatch[1])];
      const name = isJsonObject(item) ? item.name : undefined;
      const via = typeof name === 'string' ? envReachingWhatRuns(container, containerField).get(name) : undefined;
      if (via !== undefined) return { kind: 'argument', via };
    }
  }
  return harmlessFieldRe.test(field) ? { kind: 'harmless' } : { kind: 'sensitive' };
}

/**
 * The problems of a template whose values chosen by a namespace or a pod reach beyond the
 * harmless fields: a pod annotation anywhere else, an overridable parameter there without an
 * enum or a pattern (a one-token type may reach an argument).
 */
export function overrideReachProblems(
  uses: readonly Use[],
  declarations: ReadonlyMap<string, ParamDeclaration>,
  doc: JsonObject,
): { readonly field: string; readonly message: string }[] {
  const problems: { field: string; message: string }[] = [];
  for (const { source, key, field } of uses) {
    const reach = reachOf(field, doc);
    if (reach.kind === 'harmless') continue;
    const where = reach.kind === 'argument' && reach.via ? `${field} (expanded by ${reach.via})` : field;
    if (source === 'pod.annotations') {
      problems.push({
        field,
        message: `uses pod annotation ${JSON.stringify(key)}, which any pod can set to anything: ${where === field ? 'here' : `it reaches ${where}, where`} it could change what runs or with which rights; declare an overridable parameter constrained by an enum or a pattern instead`,
      });
      continue;
    }
    const declaration = declarations.get(key);
    if (!declaration || declaration.override === 'none' || declaration.type === 'enum' || declaration.pattern) continue;
    if (reach.kind === 'argument' && oneTokenTypes.has(declaration.type)) continue;
    problems.push({
      field: `parameters.${key}`,
      message: `is overridable (override: ${declaration.override}) and reaches ${where}, where an override could change what runs or with which rights: constrain it with type: enum or a pattern${reach.kind === 'argument' ? ` (or give it a one-token type: ${[...oneTokenTypes].join(', ')})` : ''}`,
    });
  }
  return problems;
}

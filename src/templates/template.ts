/**
 * A sidecar template: its schema, validation and compilation. Pure: takes a parsed YAML
 * document, returns a compiled template or the list of problems, each naming the field.
 */
import type { GuaranteedMode } from '../k8s/qos.js';
import { createHash } from 'node:crypto';
import { deepFreeze, isJsonObject, type JsonObject } from '../k8s/json.js';
import type { TemplateProblem } from '../errors.js';
import { PlaceholderError, SelectorError } from '../errors.js';
import { parseSelector, type Selector } from '../k8s/selector.js';
import { isDns1123Label, labelKeyProblem, labelValueProblem } from '../k8s/label-syntax.js';
import { hasPlaceholder, parseSegments, type ParamValue, type Reference, type Segment } from './placeholders.js';
import { AnnotationKeys } from '../k8s/keys.js';
import { schemaFieldProblems } from '../k8s/schema-fields.js';
import { compileDeclaration, type ParamDeclaration, type ParamType } from './parameters.js';

/** `automatic`: injected wherever the selectors match; `on-request`: only when the pod names it too. */
export type InjectionMode = 'automatic' | 'on-request';

/** Where a template's containers go in `containers` / `initContainers`. */
export type Placement = 'first' | 'last';

/**
 * What a template's native sidecars (init containers with `restartPolicy: Always`) become
 * where the cluster does not support them (below 1.29): ordinary containers, nothing (the
 * template is skipped), or a denied pod.
 */
export type NativeSidecarFallback = 'container' | 'skip' | 'deny';
export const nativeSidecarFallbacks: readonly NativeSidecarFallback[] = ['container', 'skip', 'deny'];

/**
 * Whether a pod may be created without the template's sidecars while the injector cannot be
 * reached: `Fail` (required: the pod is refused and retried) or `Ignore` (optional). Each class
 * has its own webhook with that failurePolicy (manifests), calling its own path.
 */
export type TemplateFailurePolicy = 'Fail' | 'Ignore';
export const templateFailurePolicies: readonly TemplateFailurePolicy[] = ['Fail', 'Ignore'];

/**
 * The form a template is injected in: as written (`native`), with its native sidecars as
 * ordinary containers (`container`, clusters below 1.29), or with its ordinary containers as
 * native sidecars (`sidecar`, pods that run to completion: a container that never exits would
 * keep such a pod running for ever).
 */
export type TemplateForm = 'native' | 'container' | 'sidecar';

/** A pod's operating system, as `spec.os.name` names it. */
export type PodOs = 'linux' | 'windows';

/**
 * securityContext fields pod validation forbids in the containers of a Windows pod
 * (validateWindows, CONTRACT R-68): a template that supports windows may not set them.
 */
export const linuxOnlySecurityFields = [
  'seLinuxOptions',
  'seccompProfile',
  'appArmorProfile',
  'capabilities',
  'readOnlyRootFilesystem',
  'privileged',
  'allowPrivilegeEscalation',
  'procMount',
  'runAsUser',
  'runAsGroup',
] as const;

/** A compiled value tree: static subtrees are kept as JSON, strings with placeholders as segments. */
export type Compiled =
  | { readonly kind: 'static'; readonly value: unknown }
  | { readonly kind: 'string'; readonly segments: readonly Segment[] }
  | { readonly kind: 'param'; readonly key: string }
  | { readonly kind: 'object'; readonly entries: readonly (readonly [string, Compiled])[] }
  | { readonly kind: 'array'; readonly items: readonly Compiled[] };

/** The parts of a template that are rendered per pod. */
export interface TemplateBody {
  readonly containers: readonly Compiled[];
  readonly initContainers: readonly Compiled[];
  readonly volumes: readonly Compiled[];
  readonly appEnv: readonly Compiled[];
  readonly appEnvFrom: readonly Compiled[];
  readonly appVolumeMounts: readonly Compiled[];
  readonly labels: readonly (readonly [string, Compiled])[];
  readonly annotations: readonly (readonly [string, Compiled])[];
  readonly imagePullSecrets: readonly Compiled[];
}

/** A validated, compiled template, ready to render. */
export interface Template {
  readonly name: string;
  readonly description: string;
  readonly file: string;
  /** First 12 hex digits of the SHA-256 of the template's canonical JSON; recorded in the ledger. */
  readonly hash: string;
  readonly injection: InjectionMode;
  readonly placement: Placement;
  readonly namespaceSelector: Selector;
  readonly objectSelector: Selector;
  /** Every parameter's value: the fixed ones, and the defaults of declared ones. */
  readonly params: Readonly<Record<string, ParamValue>>;
  /** Declared parameters (a type, rules, who may override), by name; fixed scalars are not here. */
  readonly declarations: ReadonlyMap<string, ParamDeclaration>;
  /** Names of parameters a namespace or pod may override: their rendered values vary per pod. */
  readonly overridable: ReadonlySet<string>;
  readonly body: TemplateBody;
  /** The pod operating systems (`spec.os.name`) the template's containers run on; other pods skip it. */
  readonly os: readonly PodOs[];
  /** Names of its init containers with `restartPolicy: Always` (native sidecars), in order. */
  readonly nativeSidecars: readonly string[];
  /** What they become on clusters without native sidecars. @default 'container' */
  readonly nativeSidecarFallback: NativeSidecarFallback;
  /** `native` as compiled; `container` for the variant templates/forms.ts derives. */
  readonly form: TemplateForm;
  /** Required (`Fail`, the default) or optional (`Ignore`): which webhook injects it. */
  readonly failurePolicy: TemplateFailurePolicy;
  /**
   * How its containers keep a Guaranteed pod Guaranteed: their cpu and memory requests taken
   * from their limits (the default), or their limits from their requests (k8s/qos.ts).
   */
  readonly guaranteedPods: GuaranteedMode;
  /**
   * True when its ordinary containers end on their own (a one-shot uploader): only then may they
   * be ordinary containers of a pod that runs to completion. @default false
   */
  readonly endsOnItsOwn: boolean;
  /** Every value of the pod or namespace the template reads; a rendering depends on these only. */
  readonly references: readonly Reference[];
  /** Placeholders in the template (each may repeat a value in the output): sizes the render cache's accounting. */
  readonly placeholderCount: number;
  /** Size of the template's JSON text: the rendered output is about this size plus the substituted values. */
  readonly staticBytes: number;
}

const topLevelFields = new Set([
  'name',
  'description',
  'injection',
  'placement',
  'namespaceSelector',
  'objectSelector',
  'parameters',
  'containers',
  'initContainers',
  'volumes',
  'appContainers',
  'labels',
  'annotations',
  'imagePullSecrets',
  'os',
  'nativeSidecars',
  'failurePolicy',
  'endsOnItsOwn',
  'guaranteedPods',
]);
const appContainerFields = new Set(['env', 'envFrom', 'volumeMounts']);

/** JSON with object keys sorted, so that the hash does not depend on key order in the file. */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (isJsonObject(value)) {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(value[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** The references that depend on the pod or namespace (not literals, not parameters), each once. */
function uniqueReferences(references: readonly Reference[]): Reference[] {
  const seen = new Map<string, Reference>();
  for (const ref of references) {
    if (ref.source === 'literal' || ref.source === 'params') continue;
    seen.set(JSON.stringify(ref), ref);
  }
  return [...seen.values()];
}

/** Collects problems for one file while compiling it. */
class Problems {
  readonly list: TemplateProblem[] = [];
  constructor(private readonly file: string) {}
  add(field: string, message: string): void {
    this.list.push({ file: this.file, field, message });
  }
}

/**
 * Compiles a value: map keys are always literal; a string with placeholders becomes segments;
 * a string that is exactly one `{{ params.X }}` keeps the parameter's type.
 * `literalFields` lists property names whose values must not hold placeholders (they name things).
 */
function compileValue(
  value: unknown,
  field: string,
  params: ReadonlySet<string>,
  problems: Problems,
  literalFields: ReadonlySet<string>,
  references: Reference[],
  uses: Use[] = [],
): Compiled {
  if (typeof value === 'string') {
    let segments: Segment[];
    try {
      segments = parseSegments(value, params);
    } catch (err) {
      problems.add(field, err instanceof PlaceholderError ? err.message : String(err));
      return { kind: 'static', value };
    }
    if (!hasPlaceholder(segments)) return { kind: 'static', value };
    for (const segment of segments) {
      if (segment.kind !== 'placeholder') continue;
      references.push(segment.ref);
      if (segment.ref.source === 'params' || segment.ref.source === 'pod.annotations') uses.push({ source: segment.ref.source, key: segment.ref.key, field });
    }
    const lastKey = field.slice(field.lastIndexOf('.') + 1);
    if (literalFields.has(lastKey)) {
      problems.add(field, 'names a thing and must be literal text: placeholders are not allowed here');
      return { kind: 'static', value };
    }
    const only = segments[0];
    if (segments.length === 1 && only?.kind === 'placeholder' && only.ref.source === 'params' && only.fallback === undefined) {
      return { kind: 'param', key: only.ref.key };
    }
    return { kind: 'string', segments };
  }
  if (Array.isArray(value)) {
    const items = value.map((item, i) => compileValue(item, `${field}[${i}]`, params, problems, literalFields, references, uses));
    return items.every((c) => c.kind === 'static') ? { kind: 'static', value: deepFreeze(value) } : { kind: 'array', items };
  }
  if (isJsonObject(value)) {
    const entries = Object.entries(value).map(([k, v]) => {
      if (k.includes('{{')) problems.add(`${field}.${k}`, 'map keys must be literal: placeholders are not allowed in keys');
      return [k, compileValue(v, `${field}.${k}`, params, problems, literalFields, references, uses)] as const;
    });
    return entries.every(([, c]) => c.kind === 'static') ? { kind: 'static', value: deepFreeze(value) } : { kind: 'object', entries };
  }
  if (value === null || typeof value === 'number' || typeof value === 'boolean') return { kind: 'static', value };
  problems.add(field, `unsupported value of type ${typeof value}`);
  return { kind: 'static', value: null };
}

const namingFields = new Set(['name', 'mountPath']);

/** Where a value chosen by a namespace or a pod (an override, or a pod annotation) appears in a template. */
interface Use {
  readonly source: 'params' | 'pod.annotations';
  readonly key: string;
  readonly field: string;
}

/**
 * The only fields an unconstrained value from a namespace or a pod may reach: a container's
 * resource requests and limits, an env var's value (unless what runs expands it), and the
 * pod's labels and annotations. Everything else — image, command, args, securityContext,
 * ports, probes and lifecycle hooks, mounts, volumes, valueFrom, workingDir, … — decides what
 * runs or with which rights (a per-pod image override injects any container): there an
 * override must be constrained by an enum or a pattern, and a pod annotation may not appear
 * at all. An allow-list, so that a field nobody thought of is locked.
 */
const harmlessFieldRe =
  /^(?:(?:init)?[cC]ontainers\[\d+\]\.(?:resources\.(?:requests|limits)\.[^.[]+|env\[\d+\]\.value)|appContainers\.env\[\d+\]\.value|(?:labels|annotations)\..+)$/;

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

/** Checks a list of named objects: each an object with a literal DNS-1123 `name`, names unique. */
function checkNamedList(list: unknown, field: string, problems: Problems, seen: Set<string>, what: string): JsonObject[] {
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) {
    problems.add(field, `must be a list of ${what}s`);
    return [];
  }
  const items: JsonObject[] = [];
  list.forEach((item: unknown, i) => {
    const itemField = `${field}[${i}]`;
    if (!isJsonObject(item)) return problems.add(itemField, `must be a ${what} object`);
    const { name } = item;
    if (typeof name !== 'string' || !isDns1123Label(name)) {
      problems.add(`${itemField}.name`, `a ${what} needs a name that is a DNS-1123 label (lowercase letters, digits and '-', at most 63)`);
    } else if (seen.has(name)) {
      problems.add(`${itemField}.name`, `${what} name ${JSON.stringify(name)} is used twice in this template`);
    } else seen.add(name);
    items.push(item);
  });
  return items;
}

function checkContainers(list: JsonObject[], field: string, volumes: ReadonlySet<string>, problems: Problems): void {
  list.forEach((container, i) => {
    if (typeof container.image !== 'string' || container.image.trim() === '') {
      problems.add(`${field}[${i}].image`, 'a container needs an image');
    }
    checkEnv(container.env, `${field}[${i}].env`, problems);
    const mounts = container.volumeMounts;
    if (mounts === undefined) return;
    if (!Array.isArray(mounts)) return problems.add(`${field}[${i}].volumeMounts`, 'must be a list');
    checkMounts(mounts, `${field}[${i}].volumeMounts`, volumes, problems);
  });
}

function checkMounts(mounts: unknown[], field: string, volumes: ReadonlySet<string>, problems: Problems): void {
  const paths = new Set<string>();
  mounts.forEach((mount, j) => {
    if (!isJsonObject(mount)) return problems.add(`${field}[${j}]`, 'must be a volumeMount object');
    if (typeof mount.name !== 'string' || !volumes.has(mount.name)) {
      problems.add(`${field}[${j}].name`, `must name a volume declared in this template's volumes (got ${JSON.stringify(mount.name)})`);
    }
    if (typeof mount.mountPath !== 'string' || !mount.mountPath.startsWith('/')) {
      problems.add(`${field}[${j}].mountPath`, 'must be an absolute path');
    } else if (paths.has(mount.mountPath)) {
      problems.add(`${field}[${j}].mountPath`, `mountPath ${JSON.stringify(mount.mountPath)} is used twice`);
    } else paths.add(mount.mountPath);
  });
}

function checkEnv(list: unknown, field: string, problems: Problems): unknown[] {
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) {
    problems.add(field, 'must be a list of env vars');
    return [];
  }
  const names = new Set<string>();
  list.forEach((item: unknown, i) => {
    if (!isJsonObject(item) || typeof item.name !== 'string' || item.name === '' || item.name.includes('=')) {
      problems.add(`${field}[${i}].name`, 'an env var needs a name without "="');
    } else if (names.has(item.name)) {
      problems.add(`${field}[${i}].name`, `env var ${JSON.stringify(item.name)} is set twice`);
    } else names.add(item.name);
  });
  return list;
}

function checkEnvFrom(list: unknown, field: string, problems: Problems): unknown[] {
  if (list === undefined || list === null) return [];
  if (!Array.isArray(list)) {
    problems.add(field, 'must be a list of envFrom sources');
    return [];
  }
  list.forEach((item: unknown, i) => {
    const ref = isJsonObject(item) ? (item.configMapRef ?? item.secretRef) : undefined;
    if (!isJsonObject(ref) || typeof ref.name !== 'string' || ref.name === '') {
      problems.add(`${field}[${i}]`, 'needs a configMapRef or secretRef with a name');
    }
  });
  return list;
}

function checkStringMap(map: unknown, field: string, problems: Problems, isLabels: boolean): [string, unknown][] {
  if (map === undefined || map === null) return [];
  if (!isJsonObject(map)) {
    problems.add(field, 'must be a map of keys to string values');
    return [];
  }
  for (const [key, value] of Object.entries(map)) {
    const keyProblem = labelKeyProblem(key);
    if (keyProblem) problems.add(`${field}.${key}`, keyProblem);
    if (key === AnnotationKeys.status) problems.add(`${field}.${key}`, "is the injector's own ledger and cannot be set by a template");
    if (typeof value !== 'string') problems.add(`${field}.${key}`, 'value must be a string (quote it in YAML)');
    else if (isLabels && !value.includes('{{')) {
      const valueProblem = labelValueProblem(value);
      if (valueProblem) problems.add(`${field}.${key}`, valueProblem);
    }
  }
  return Object.entries(map);
}

/** `nativeSidecars: { fallback: container | skip | deny }`, and the names of the init containers it concerns. */
function checkNativeSidecars(raw: unknown, initContainers: readonly JsonObject[], problems: Problems): { names: string[]; fallback: NativeSidecarFallback } {
  const names: string[] = [];
  initContainers.forEach((container, i) => {
    const policy = container.restartPolicy;
    if (policy === undefined) return;
    if (policy !== 'Always') problems.add(`initContainers[${i}].restartPolicy`, 'may only be Always (a native sidecar), as literal text');
    else if (typeof container.name === 'string') names.push(container.name);
  });
  let fallback: NativeSidecarFallback = 'container';
  if (raw !== undefined && raw !== null) {
    if (!isJsonObject(raw)) problems.add('nativeSidecars', 'must be a map with a fallback');
    else {
      for (const key of Object.keys(raw)) if (key !== 'fallback') problems.add(`nativeSidecars.${key}`, 'unknown field (expected fallback)');
      if (raw.fallback !== undefined) {
        if (!nativeSidecarFallbacks.includes(raw.fallback as NativeSidecarFallback)) {
          problems.add('nativeSidecars.fallback', `must be one of ${nativeSidecarFallbacks.join(', ')}`);
        } else fallback = raw.fallback as NativeSidecarFallback;
      }
    }
  }
  return { names, fallback };
}

/** `os: [linux]` (the default) or a list of linux and windows; windows forbids Linux-only security fields. */
function checkOs(raw: unknown, containers: readonly unknown[], problems: Problems): PodOs[] {
  if (raw === undefined || raw === null) return ['linux'];
  if (!Array.isArray(raw) || raw.length === 0 || raw.some((v) => v !== 'linux' && v !== 'windows')) {
    problems.add('os', 'must be a non-empty list of linux and/or windows');
    return ['linux'];
  }
  const os = [...new Set(raw as PodOs[])];
  if (os.includes('windows')) {
    containers.forEach((container, i) => {
      const context = isJsonObject(container) && isJsonObject(container.securityContext) ? container.securityContext : {};
      for (const field of linuxOnlySecurityFields) {
        if (Object.hasOwn(context, field))
          problems.add(`os`, `lists windows, but container ${i} sets securityContext.${field}, which Windows pods may not set`);
      }
    });
  }
  return os;
}

function checkSelector(raw: unknown, field: string, problems: Problems): Selector {
  try {
    return parseSelector(raw);
  } catch (err) {
    if (err instanceof SelectorError) problems.add(err.field ? `${field}.${err.field}` : field, err.message);
    else throw err;
    return parseSelector(undefined);
  }
}

/**
 * Validates and compiles one template document from `file`. Returns the template, or every
 * problem found (each naming the field) so that a person can fix the file in one pass.
 */
export function compileTemplate(doc: unknown, file: string): { template?: Template; problems: TemplateProblem[] } {
  const problems = new Problems(file);
  if (!isJsonObject(doc)) {
    problems.add('', 'a template must be a YAML map');
    return { problems: problems.list };
  }
  for (const key of Object.keys(doc)) {
    if (!topLevelFields.has(key)) problems.add(key, `unknown field (expected one of ${[...topLevelFields].join(', ')})`);
  }
  const name = doc.name;
  if (typeof name !== 'string' || !isDns1123Label(name)) {
    problems.add('name', 'is required and must be a DNS-1123 label (lowercase letters, digits and "-", at most 63)');
  }
  const description = doc.description ?? '';
  if (typeof description !== 'string') problems.add('description', 'must be a string');
  const injection = doc.injection ?? 'automatic';
  if (injection !== 'automatic' && injection !== 'on-request') problems.add('injection', 'must be "automatic" or "on-request"');
  const placement = doc.placement ?? 'last';
  if (placement !== 'first' && placement !== 'last') problems.add('placement', 'must be "first" or "last"');
  if (doc.endsOnItsOwn !== undefined && typeof doc.endsOnItsOwn !== 'boolean') problems.add('endsOnItsOwn', 'must be true or false');
  const failurePolicy = doc.failurePolicy ?? 'Fail';
  if (!templateFailurePolicies.includes(failurePolicy as TemplateFailurePolicy)) {
    problems.add('failurePolicy', 'must be "Fail" (required: pods wait for the injector) or "Ignore" (optional)');
  }
  const guaranteedPods = doc.guaranteedPods ?? 'requests-from-limits';
  if (guaranteedPods !== 'requests-from-limits' && guaranteedPods !== 'limits-from-requests') {
    problems.add(
      'guaranteedPods',
      'must be "requests-from-limits" (in a Guaranteed pod its containers request what they limit) or "limits-from-requests" (they limit what they request)',
    );
  }

  const params: Record<string, ParamValue> = {};
  const declarations = new Map<string, ParamDeclaration>();
  if (doc.parameters !== undefined && doc.parameters !== null) {
    if (!isJsonObject(doc.parameters)) problems.add('parameters', 'must be a map of names to values');
    else {
      for (const [key, value] of Object.entries(doc.parameters)) {
        if (!/^[A-Za-z_][A-Za-z0-9_-]*$/.test(key)) problems.add(`parameters.${key}`, 'parameter names are letters, digits, "_" and "-"');
        if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') {
          if (typeof value === 'string' && value.includes('{{')) problems.add(`parameters.${key}`, 'parameter values cannot hold placeholders');
          params[key] = value;
        } else if (isJsonObject(value)) {
          const declaration = compileDeclaration(key, value, (field, message) => problems.add(field, message));
          if (declaration) {
            if (typeof declaration.default === 'string' && declaration.default.includes('{{'))
              problems.add(`parameters.${key}.default`, 'cannot hold placeholders');
            params[key] = declaration.default;
            declarations.set(key, declaration);
          } else params[key] = '';
        } else problems.add(`parameters.${key}`, 'must be a string, number or boolean, or a declaration (default, type, override, …)');
      }
    }
  }
  const paramNames = new Set(Object.keys(params));
  const namespaceSelector = checkSelector(doc.namespaceSelector, 'namespaceSelector', problems);
  const objectSelector = checkSelector(doc.objectSelector, 'objectSelector', problems);

  const containerNames = new Set<string>();
  const containers = checkNamedList(doc.containers, 'containers', problems, containerNames, 'container');
  const initContainers = checkNamedList(doc.initContainers, 'initContainers', problems, containerNames, 'container');
  const volumeNames = new Set<string>();
  const volumes = checkNamedList(doc.volumes, 'volumes', problems, volumeNames, 'volume');
  checkContainers(containers, 'containers', volumeNames, problems);
  checkContainers(initContainers, 'initContainers', volumeNames, problems);

  let appEnv: unknown[] = [];
  let appEnvFrom: unknown[] = [];
  let appMounts: unknown[] = [];
  const app = doc.appContainers;
  if (app !== undefined && app !== null) {
    if (!isJsonObject(app)) problems.add('appContainers', 'must be a map with env, envFrom and/or volumeMounts');
    else {
      for (const key of Object.keys(app)) {
        if (!appContainerFields.has(key)) problems.add(`appContainers.${key}`, 'unknown field (expected env, envFrom or volumeMounts)');
      }
      appEnv = checkEnv(app.env, 'appContainers.env', problems);
      appEnvFrom = checkEnvFrom(app.envFrom, 'appContainers.envFrom', problems);
      if (app.volumeMounts !== undefined && app.volumeMounts !== null) {
        if (!Array.isArray(app.volumeMounts)) problems.add('appContainers.volumeMounts', 'must be a list');
        else {
          appMounts = app.volumeMounts;
          checkMounts(appMounts, 'appContainers.volumeMounts', volumeNames, problems);
        }
      }
    }
  }
  const labels = checkStringMap(doc.labels, 'labels', problems, true);
  const annotations = checkStringMap(doc.annotations, 'annotations', problems, false);
  const pullSecrets = checkNamedList(doc.imagePullSecrets, 'imagePullSecrets', problems, new Set(), 'imagePullSecret');
  // Every field the Kubernetes schema does not have: the API server would refuse it (or drop it).
  const schemaCheck = (items: readonly unknown[], type: string, field: string) =>
    items.forEach((item, i) => {
      for (const problem of schemaFieldProblems(item, type, `${field}[${i}]`)) problems.add(problem.field, problem.message);
    });
  schemaCheck(containers, 'V1Container', 'containers');
  schemaCheck(initContainers, 'V1Container', 'initContainers');
  schemaCheck(volumes, 'V1Volume', 'volumes');
  schemaCheck(appEnv, 'V1EnvVar', 'appContainers.env');
  schemaCheck(appEnvFrom, 'V1EnvFromSource', 'appContainers.envFrom');
  schemaCheck(appMounts, 'V1VolumeMount', 'appContainers.volumeMounts');
  schemaCheck(pullSecrets, 'V1LocalObjectReference', 'imagePullSecrets');
  const os = checkOs(doc.os, [...containers, ...initContainers], problems);
  const native = checkNativeSidecars(doc.nativeSidecars, initContainers, problems);

  const allReferences: Reference[] = [];
  const uses: Use[] = [];
  const compileList = (list: readonly unknown[], field: string) =>
    list.map((item, i) => compileValue(item, `${field}[${i}]`, paramNames, problems, namingFields, allReferences, uses));
  const compileMap = (entries: [string, unknown][], field: string) =>
    entries.map(([k, v]) => [k, compileValue(v, `${field}.${k}`, paramNames, problems, namingFields, allReferences, uses)] as const);
  const body: TemplateBody = {
    containers: compileList(containers, 'containers'),
    initContainers: compileList(initContainers, 'initContainers'),
    volumes: compileList(volumes, 'volumes'),
    appEnv: compileList(appEnv, 'appContainers.env'),
    appEnvFrom: compileList(appEnvFrom, 'appContainers.envFrom'),
    appVolumeMounts: compileList(appMounts, 'appContainers.volumeMounts'),
    labels: compileMap(labels, 'labels'),
    annotations: compileMap(annotations, 'annotations'),
    imagePullSecrets: compileList(pullSecrets, 'imagePullSecrets'),
  };
  const overridable = new Set([...declarations.values()].filter((d) => d.override !== 'none').map((d) => d.name));
  for (const { source, key, field } of uses) {
    const reach = reachOf(field, doc);
    if (reach.kind === 'harmless') continue;
    const where = reach.kind === 'argument' && reach.via ? `${field} (expanded by ${reach.via})` : field;
    if (source === 'pod.annotations') {
      problems.add(
        field,
        `uses pod annotation ${JSON.stringify(key)}, which any pod can set to anything: ${where === field ? 'here' : `it reaches ${where}, where`} it could change what runs or with which rights; declare an overridable parameter constrained by an enum or a pattern instead`,
      );
      continue;
    }
    const declaration = declarations.get(key);
    if (!declaration || declaration.override === 'none' || declaration.type === 'enum' || declaration.pattern) continue;
    if (reach.kind === 'argument' && oneTokenTypes.has(declaration.type)) continue;
    problems.add(
      `parameters.${key}`,
      `is overridable (override: ${declaration.override}) and reaches ${where}, where an override could change what runs or with which rights: constrain it with type: enum or a pattern${reach.kind === 'argument' ? ` (or give it a one-token type: ${[...oneTokenTypes].join(', ')})` : ''}`,
    );
  }
  if (problems.list.length > 0) return { problems: problems.list };
  const canonical = canonicalJson(doc);
  const hash = createHash('sha256').update(canonical).digest('hex').slice(0, 12);
  const template: Template = {
    name: name as string,
    description: description as string,
    file,
    hash,
    injection: injection as InjectionMode,
    placement: placement as Placement,
    namespaceSelector,
    objectSelector,
    params: Object.freeze(params),
    declarations,
    overridable,
    body,
    os,
    nativeSidecars: native.names,
    nativeSidecarFallback: native.fallback,
    form: 'native',
    failurePolicy: failurePolicy as TemplateFailurePolicy,
    guaranteedPods: guaranteedPods as GuaranteedMode,
    endsOnItsOwn: doc.endsOnItsOwn === true,
    references: uniqueReferences(allReferences),
    placeholderCount: allReferences.length,
    staticBytes: canonical.length,
  };
  return { template, problems: [] };
}

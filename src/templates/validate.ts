/**
 * Validating a template document's parts, each problem naming its field so that a person can
 * fix the file in one pass. Pure.
 */
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import type { TemplateProblem } from '../errors.js';
import { SelectorError } from '../errors.js';
import { parseSelector, type Selector } from '../k8s/selector.js';
import { isDns1123Label, labelKeyProblem, labelValueProblem } from '../k8s/label-syntax.js';
import { AnnotationKeys } from '../k8s/keys.js';
import { linuxOnlySecurityFields, nativeSidecarFallbacks, type NativeSidecarFallback, type PodOs } from './template.js';

/** Collects problems for one file while compiling it. */
export class Problems {
  readonly list: TemplateProblem[] = [];
  constructor(private readonly file: string) {}
  add(field: string, message: string): void {
    this.list.push({ file: this.file, field, message });
  }
}

/** Checks a list of named objects: each an object with a literal DNS-1123 `name`, names unique. */
export function checkNamedList(list: unknown, field: string, problems: Problems, seen: Set<string>, what: string): JsonObject[] {
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

export function checkContainers(list: JsonObject[], field: string, volumes: ReadonlySet<string>, problems: Problems): void {
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

export function checkMounts(mounts: unknown[], field: string, volumes: ReadonlySet<string>, problems: Problems): void {
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

export function checkEnv(list: unknown, field: string, problems: Problems): unknown[] {
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

export function checkEnvFrom(list: unknown, field: string, problems: Problems): unknown[] {
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

export function checkStringMap(map: unknown, field: string, problems: Problems, isLabels: boolean): [string, unknown][] {
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
export function checkNativeSidecars(
  raw: unknown,
  initContainers: readonly JsonObject[],
  problems: Problems,
): { names: string[]; fallback: NativeSidecarFallback } {
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
export function checkOs(raw: unknown, containers: readonly unknown[], problems: Problems): PodOs[] {
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

export function checkSelector(raw: unknown, field: string, problems: Problems): Selector {
  // `objectSelector:` with nothing after it: YAML reads null, which would select everything —
  // almost always lines that lost their indentation. Absent, or `{}`, says "every pod" on purpose.
  if (raw === null) {
    problems.add(
      field,
      'the key has no value, which would select every pod (did its lines lose their indentation?); give matchLabels or matchExpressions, or write {} (or remove the key) to select every pod',
    );
    return parseSelector(undefined);
  }
  try {
    return parseSelector(raw);
  } catch (err) {
    if (err instanceof SelectorError) problems.add(err.field ? `${field}.${err.field}` : field, err.message);
    else throw err;
    return parseSelector(undefined);
  }
}

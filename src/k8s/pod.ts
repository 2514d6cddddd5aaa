/**
 * Reading the raw pod object. The pod stays the JSON we were sent (unknown fields survive);
 * this module only checks the few shapes injection relies on and reads values from them.
 */
import { AdmissionError } from '../errors.js';
import { quote } from '../quote.js';
import { isJsonObject, type JsonObject } from './json.js';

/** The fields injection reads, checked once. The objects are the pod's own (never copies). */
export interface PodParts {
  readonly metadata: JsonObject;
  readonly spec: JsonObject;
  readonly labels: Readonly<Record<string, string>>;
  readonly annotations: Readonly<Record<string, string>>;
  readonly containers: readonly JsonObject[];
  readonly initContainers: readonly JsonObject[];
  readonly volumes: readonly JsonObject[];
  readonly imagePullSecrets: readonly JsonObject[];
}

function invalid(field: string, problem: string): AdmissionError {
  return new AdmissionError('ERR_INVALID_POD', `the pod cannot be read: ${field} ${problem}`);
}

/**
 * Most entries read from a pod's label or annotation map. The API server sets no count limit
 * (200,000 labels are deliverable), and each pass over a map that large costs ~50 ms; a pod
 * over this is refused after this one pass, before anything else reads the map.
 */
export const maxMetadataEntries = 2_000;

function stringMap(value: unknown, field: string): Readonly<Record<string, string>> {
  if (value === undefined || value === null) return {};
  if (!isJsonObject(value)) throw invalid(field, 'must be a map of strings');
  let count = 0;
  for (const key in value) {
    if (typeof value[key] !== 'string') throw invalid(`${field}[${quote(key)}]`, 'must be a string');
    count++;
  }
  if (count > maxMetadataEntries) {
    throw new AdmissionError(
      'ERR_POD_TOO_LARGE',
      `the pod has ${count} entries in ${field}; the sidecar injector serves pods with at most ${maxMetadataEntries}`,
    );
  }
  return value as Record<string, string>;
}

function namedList(value: unknown, field: string, required: boolean, nameOptional = false): readonly JsonObject[] {
  if (value === undefined || value === null) {
    if (required) throw invalid(field, 'is required');
    return [];
  }
  if (!Array.isArray(value)) throw invalid(field, 'must be a list');
  // An empty required list is what the API server's validation calls missing too ("Required value").
  if (required && value.length === 0) throw invalid(field, 'is required');
  for (let i = 0; i < value.length; i++) {
    const item: unknown = value[i];
    if (!isJsonObject(item)) throw invalid(`${field}[${i}]`, 'must be an object');
    if (typeof item.name !== 'string' && !(nameOptional && (item.name === undefined || item.name === null)))
      throw invalid(`${field}[${i}].name`, 'must be a string');
  }
  return value as JsonObject[];
}

/** True for a value present but not a string. */
function notString(value: unknown): boolean {
  return value !== undefined && value !== null && typeof value !== 'string';
}

/**
 * The per-container lists injection extends must be lists of objects when present, and the
 * fields it keys them by must be strings (the API server's decoder guarantees both; a direct
 * caller may send anything).
 */
function checkContainerLists(containers: readonly JsonObject[], field: string): void {
  for (let i = 0; i < containers.length; i++) {
    const container = containers[i]!;
    for (const key of ['env', 'envFrom', 'volumeMounts'] as const) {
      const list = container[key];
      if (list === undefined || list === null) continue;
      if (!Array.isArray(list)) throw invalid(`${field}[${i}].${key}`, 'must be a list');
      // Plain loops: this runs over every env entry of every review.
      for (let j = 0; j < list.length; j++) {
        const item: unknown = list[j];
        if (!isJsonObject(item)) throw invalid(`${field}[${i}].${key}`, 'must hold only objects');
        const badField =
          key === 'env'
            ? notString(item.name) && 'name'
            : key === 'volumeMounts'
              ? (notString(item.name) && 'name') || (notString(item.mountPath) && 'mountPath')
              : notString(item.prefix) && 'prefix';
        if (badField) throw invalid(`${field}[${i}].${key}[${j}].${badField}`, 'must be a string');
        if (key === 'envFrom') {
          for (const ref of ['configMapRef', 'secretRef']) {
            const source = item[ref];
            if (source !== undefined && source !== null && !(isJsonObject(source) && (source.name === undefined || typeof source.name === 'string'))) {
              throw invalid(`${field}[${i}].envFrom[${j}].${ref}`, 'must be an object with a string name');
            }
          }
        }
      }
    }
  }
}

/**
 * Checks the shapes injection needs and returns them. Throws AdmissionError (ERR_INVALID_POD)
 * naming the field when the object is not a pod we can inject into safely.
 */
export function parsePod(pod: unknown): PodParts {
  if (!isJsonObject(pod)) throw invalid('request.object', 'must be a Pod object');
  const metadata = pod.metadata ?? {};
  if (!isJsonObject(metadata)) throw invalid('metadata', 'must be an object');
  const spec = pod.spec;
  if (!isJsonObject(spec)) throw invalid('spec', 'must be an object');
  const parts: PodParts = {
    metadata,
    spec,
    labels: stringMap(metadata.labels, 'metadata.labels'),
    annotations: stringMap(metadata.annotations, 'metadata.annotations'),
    containers: namedList(spec.containers, 'spec.containers', true),
    initContainers: namedList(spec.initContainers, 'spec.initContainers', false),
    volumes: namedList(spec.volumes, 'spec.volumes', false),
    // `{}` is what the API server sends for `name: ""` (omitted when empty): it only warns about it.
    imagePullSecrets: namedList(spec.imagePullSecrets, 'spec.imagePullSecrets', false, true),
  };
  checkContainerLists(parts.initContainers, 'spec.initContainers');
  checkContainerLists(parts.containers, 'spec.containers');
  return parts;
}

/** The name a person recognises the pod by: `metadata.name`, else `generateName`. */
export function podDisplayName(metadata: JsonObject): string {
  if (typeof metadata.name === 'string' && metadata.name) return metadata.name;
  if (typeof metadata.generateName === 'string' && metadata.generateName) return metadata.generateName;
  return '';
}

/** The node labels that name a node's operating system: the current one, and the one before it (still set by the kubelet). */
export const osNodeLabels = ['kubernetes.io/os', 'beta.kubernetes.io/os'] as const;

/** Whether a node selector term admits only Windows nodes: an `In` on an OS label whose values are all `windows`. */
function termRequiresWindows(term: unknown): boolean {
  const expressions = isJsonObject(term) && Array.isArray(term.matchExpressions) ? term.matchExpressions : [];
  return expressions.some(
    (e) =>
      isJsonObject(e) &&
      osNodeLabels.includes(e.key as (typeof osNodeLabels)[number]) &&
      e.operator === 'In' &&
      Array.isArray(e.values) &&
      e.values.length > 0 &&
      e.values.every((v) => v === 'windows'),
  );
}

/**
 * The operating system the pod runs on, as the scheduler places it: `spec.os.name`; else a node
 * selector on `kubernetes.io/os` or `beta.kubernetes.io/os`; else required node affinity whose
 * every term (they are alternatives) requires Windows through an `In` on either label; else
 * linux (what a pod with none of these lands on in nearly every cluster). The generated
 * required-sidecar policies compute the same in CEL (manifests/required-policies.ts).
 */
export function podOs(parts: PodParts): 'linux' | 'windows' {
  const { spec } = parts;
  const os = isJsonObject(spec.os) ? spec.os.name : undefined;
  if (os === 'windows' || os === 'linux') return os;
  const selector = isJsonObject(spec.nodeSelector) ? spec.nodeSelector : {};
  for (const label of osNodeLabels) {
    const value = Object.hasOwn(selector, label) ? selector[label] : undefined;
    if (value === 'windows' || value === 'linux') return value;
  }
  const affinity = isJsonObject(spec.affinity) && isJsonObject(spec.affinity.nodeAffinity) ? spec.affinity.nodeAffinity : {};
  const required = isJsonObject(affinity.requiredDuringSchedulingIgnoredDuringExecution) ? affinity.requiredDuringSchedulingIgnoredDuringExecution : {};
  const terms = Array.isArray(required.nodeSelectorTerms) ? required.nodeSelectorTerms : [];
  return terms.length > 0 && terms.every(termRequiresWindows) ? 'windows' : 'linux';
}

/**
 * Why the pod runs to completion, or undefined when it runs until deleted: owned by a Job
 * (its Job completes only when the pod's containers all exit), or `restartPolicy` Never or
 * OnFailure. Such a pod must never get a long-running ordinary container.
 */
export function runsToCompletion(parts: PodParts): string | undefined {
  const owners = parts.metadata.ownerReferences;
  if (Array.isArray(owners)) {
    for (const owner of owners) {
      if (isJsonObject(owner) && owner.kind === 'Job' && typeof owner.apiVersion === 'string' && owner.apiVersion.startsWith('batch/')) {
        return `Job ${quote(typeof owner.name === 'string' ? owner.name : '', 40)}`;
      }
    }
  }
  const policy = parts.spec.restartPolicy;
  if (policy === 'Never' || policy === 'OnFailure') return `restartPolicy ${policy}`;
  return undefined;
}

/**
 * Pod validation, the parts that matter to injection. Pure.
 *
 * Mutating webhooks run before the API server validates the pod (CONTRACT R-64), so we are
 * sent pods that can never be stored: a container named `__proto__`, a label value of a
 * megabyte, 300 KiB of annotations. `admissionProblems` finds those and our own
 * cost limits *before any work is done*, so that such a pod is never rendered, cached or
 * injected. `podProblems` is the check of pod validation that injection itself could break
 * run on the result in tests and by `check`.
 */
import { quote } from '../quote.js';
import { isDns1123Label, isDns1123Subdomain, labelKeyProblem, labelValueProblem } from './label-syntax.js';
import { isJsonObject, type JsonObject } from './json.js';
import type { PodParts } from './pod.js';

/** The API server's limit on the total size of a pod's annotation keys and values. */
export const maxAnnotationBytes = 262_144;

/**
 * What one review may cost, beyond what the API server validates. A pod over these is
 * refused: it could only be served by work and memory out of proportion to any real pod,
 * and a dry-run request lets anyone send such pods as often as they like.
 */
export const reviewLimits = {
  /** containers + initContainers + ephemeralContainers. Real pods hold a handful. */
  maxContainers: 250,
  /** Volumes on the pod. */
  maxVolumes: 1_000,
} as const;

/** Why a pod is refused before any work: `invalid` (the API server would reject it) or `too-large` (our cost limits). */
export interface AdmissionProblem {
  readonly kind: 'invalid' | 'too-large';
  readonly message: string;
}

/** Bytes of a string as Go's len() counts them (UTF-8). */
function utf8Length(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/** Total size of annotation keys and values, as the API server counts it. */
export function annotationBytes(annotations: Readonly<Record<string, string>>): number {
  let total = 0;
  for (const key in annotations) total += utf8Length(key) + utf8Length(annotations[key]!);
  return total;
}

/**
 * The first problem that makes this pod unservable, or undefined. Checks, in order of cost:
 * the number of containers and volumes (labels and annotations were counted when the pod was
 * read); the namespace and names; label keys and
 * values; annotation keys and their total size; container and volume names (DNS-1123
 * labels, unique). Each check is linear in what it reads and stops at the first problem.
 */
export function admissionProblem(parts: PodParts, namespace: string, requestName = ''): AdmissionProblem | undefined {
  const invalid = (message: string): AdmissionProblem => ({
    kind: 'invalid',
    message: `the pod cannot pass the API server's validation: ${message}; it is refused before any sidecar is injected`,
  });
  const tooLarge = (what: string, n: number, max: number): AdmissionProblem => ({
    kind: 'too-large',
    message: `the pod has ${n} ${what}; the sidecar injector serves pods with at most ${max}`,
  });
  const ephemeral = Array.isArray(parts.spec.ephemeralContainers) ? (parts.spec.ephemeralContainers as unknown[]) : [];
  // Labels and annotations were counted (at most maxMetadataEntries) when the pod was read.
  const containerCount = parts.containers.length + parts.initContainers.length + ephemeral.length;
  if (containerCount > reviewLimits.maxContainers)
    return tooLarge('containers (containers, initContainers and ephemeralContainers)', containerCount, reviewLimits.maxContainers);
  if (parts.volumes.length > reviewLimits.maxVolumes) return tooLarge('volumes', parts.volumes.length, reviewLimits.maxVolumes);

  if (!isDns1123Label(namespace)) return invalid(`namespace ${quote(namespace)} is not a DNS-1123 label`);
  const os = isJsonObject(parts.spec.os) ? parts.spec.os.name : undefined;
  if (os !== undefined && os !== 'linux' && os !== 'windows') return invalid(`spec.os.name ${quote(os)} is not linux or windows`);
  if (requestName !== '' && !isDns1123Subdomain(requestName)) return invalid(`request.name ${quote(requestName)} is not a DNS-1123 subdomain`);
  const { name, generateName } = parts.metadata;
  if (typeof name === 'string' && name !== '' && !isDns1123Subdomain(name)) return invalid(`metadata.name ${quote(name)} is not a DNS-1123 subdomain`);
  // The API server appends five characters to generateName: its trailing "-" is masked, as upstream does.
  if (typeof generateName === 'string' && generateName !== '' && !isDns1123Subdomain(generateName.replace(/-$/, 'a'))) {
    return invalid(`metadata.generateName ${quote(generateName)} is not the prefix of a DNS-1123 subdomain`);
  }
  for (const key in parts.labels) {
    const problem = labelKeyProblem(key) ?? labelValueProblem(parts.labels[key]!);
    if (problem) return invalid(`metadata.labels: ${problem}`);
  }
  let bytes = 0;
  for (const key in parts.annotations) {
    // Annotation keys are qualified names, checked in lower case (ValidateAnnotations).
    const problem = labelKeyProblem(key.toLowerCase());
    if (problem) return invalid(`metadata.annotations: ${problem.replace(/^label key/, 'annotation key')}`);
    bytes += utf8Length(key) + utf8Length(parts.annotations[key]!);
  }
  if (bytes > maxAnnotationBytes) return invalid(`metadata.annotations take ${bytes} bytes, over the limit of ${maxAnnotationBytes}`);

  const containerNames = new Set<string>();
  const lists: [string, readonly unknown[]][] = [
    ['spec.initContainers', parts.initContainers],
    ['spec.containers', parts.containers],
    ['spec.ephemeralContainers', ephemeral],
  ];
  for (const [field, list] of lists) {
    for (let i = 0; i < list.length; i++) {
      const item: unknown = list[i];
      const containerName = isJsonObject(item) ? item.name : undefined;
      if (typeof containerName !== 'string' || !isDns1123Label(containerName))
        return invalid(`${field}[${i}].name ${quote(containerName)} is not a DNS-1123 label`);
      if (containerNames.has(containerName)) return invalid(`${field}[${i}].name ${quote(containerName)} is used by another container`);
      containerNames.add(containerName);
    }
  }
  const volumeNames = new Set<string>();
  for (let i = 0; i < parts.volumes.length; i++) {
    const volumeName = parts.volumes[i]!.name as string;
    if (!isDns1123Label(volumeName)) return invalid(`spec.volumes[${i}].name ${quote(volumeName)} is not a DNS-1123 label`);
    if (volumeNames.has(volumeName)) return invalid(`spec.volumes[${i}].name ${quote(volumeName)} is used by another volume`);
    volumeNames.add(volumeName);
  }
  return undefined;
}

function list(value: unknown): JsonObject[] {
  return Array.isArray(value) ? (value as JsonObject[]) : [];
}

/** The problems pod validation would report for `pod`, as sentences; empty when none. */
export function podProblems(pod: JsonObject): string[] {
  const problems: string[] = [];
  const spec = (pod.spec ?? {}) as JsonObject;
  const unique = (what: string, values: unknown[]) => {
    const seen = new Set<unknown>();
    for (const value of values) {
      if (seen.has(value)) problems.push(`${what} ${String(value)} is used twice`);
      seen.add(value);
    }
  };
  const containers = [...list(spec.initContainers), ...list(spec.containers)];
  unique(
    'container name',
    containers.map((c) => c.name),
  );
  const volumes = list(spec.volumes);
  unique(
    'volume name',
    volumes.map((v) => v.name),
  );
  const volumeNames = new Set(volumes.map((v) => v.name));
  for (const c of containers) {
    unique(
      `mountPath in container ${String(c.name)}:`,
      list(c.volumeMounts).map((m) => m.mountPath),
    );
    unique(
      `env in container ${String(c.name)}:`,
      list(c.env).map((e) => e.name),
    );
    for (const m of list(c.volumeMounts)) {
      if (!volumeNames.has(m.name)) problems.push(`container ${String(c.name)} mounts volume ${String(m.name)}, which the pod does not have`);
    }
  }
  const metadata = (pod.metadata ?? {}) as JsonObject;
  const annotations = (metadata.annotations ?? {}) as Record<string, string>;
  const bytes = annotationBytes(annotations);
  if (bytes > maxAnnotationBytes) problems.push(`annotations take ${bytes} bytes, over the limit of ${maxAnnotationBytes}`);
  return problems;
}

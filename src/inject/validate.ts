/**
 * The checks of pod validation (CONTRACT R-59) that injection could break: unique container
 * names across initContainers and containers, unique volume names, every mount naming an
 * existing volume, unique mountPaths and env names within a container. Pure.
 */
import type { JsonObject } from '../templates/template.js';

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
  unique('container name', containers.map((c) => c.name));
  const volumes = list(spec.volumes);
  unique('volume name', volumes.map((v) => v.name));
  const volumeNames = new Set(volumes.map((v) => v.name));
  for (const c of containers) {
    unique(`mountPath in container ${String(c.name)}:`, list(c.volumeMounts).map((m) => m.mountPath));
    unique(`env in container ${String(c.name)}:`, list(c.env).map((e) => e.name));
    for (const m of list(c.volumeMounts)) {
      if (!volumeNames.has(m.name)) problems.push(`container ${String(c.name)} mounts volume ${String(m.name)}, which the pod does not have`);
    }
  }
  return problems;
}

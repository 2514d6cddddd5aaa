/**
 * The JSON text of a patch. Rendered sidecars are deeply frozen and shared between reviews
 * (k8s/json.ts deepFreeze, templates/render.ts), so the text of each frozen value is computed
 * once and reused: the patch of the thousandth pod of a ReplicaSet costs string joins.
 */
import type { Operation } from 'fast-json-patch';

/** JSON text of frozen values: rendered sidecars are frozen and shared, so each is serialised once. */
const frozenJson = new WeakMap<object, string>();

function toJson(value: unknown): string {
  if (typeof value !== 'object' || value === null) return JSON.stringify(value);
  if (Object.isFrozen(value)) {
    let text = frozenJson.get(value);
    if (text === undefined) frozenJson.set(value, (text = JSON.stringify(value)));
    return text;
  }
  if (Array.isArray(value)) return `[${value.map(toJson).join(',')}]`;
  return JSON.stringify(value);
}

/** The JSON text of a patch; the same text JSON.stringify gives, assembled from cached parts. */
export function encodePatch(patch: readonly Operation[]): string {
  const parts: string[] = [];
  for (const op of patch) {
    const value = 'value' in op ? `,"value":${toJson(op.value)}` : '';
    const from = 'from' in op ? `,"from":${JSON.stringify(op.from)}` : '';
    parts.push(`{"op":${JSON.stringify(op.op)},"path":${JSON.stringify(op.path)}${value}${from}}`);
  }
  return `[${parts.join(',')}]`;
}

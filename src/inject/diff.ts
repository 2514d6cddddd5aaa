/**
 * The minimal JSON Patch (RFC 6902) from the pod as received to the pod with its sidecars.
 *
 * fast-json-patch's `compare` diffs arrays by index, so a sidecar inserted at the front of
 * `containers` would come out as a `replace` of every user container plus an `add` at the
 * end: correct, but it rewrites objects we do not own, and it is quadratic-prone on big
 * lists. This diff aligns arrays by identity instead: the same object reference, or the same
 * key (`name`, else `mountPath`). Identical references are skipped without descending, so
 * the cost is proportional to what changed (inject shares every untouched object). Where
 * an array cannot be aligned as "old items in order plus insertions", it falls back to
 * fast-json-patch's `compare` for that array, which is always correct.
 */
import jsonpatch, { type Operation } from 'fast-json-patch';
import { isJsonObject } from '../k8s/json.js';

/** Path segment escaping per RFC 6901 (`~` → `~0`, `/` → `~1`), R-55. */
const escapePathComponent: (segment: string) => string = jsonpatch.escapePathComponent;

function identity(item: unknown): string | undefined {
  if (!isJsonObject(item)) return undefined;
  if (typeof item.name === 'string') return `name:${item.name}`;
  if (typeof item.mountPath === 'string') return `mountPath:${item.mountPath}`;
  return undefined;
}

function walk(before: unknown, after: unknown, path: string, ops: Operation[]): void {
  if (before === after) return;
  if (isJsonObject(before) && isJsonObject(after)) {
    for (const key in before) {
      if (!Object.hasOwn(after, key)) ops.push({ op: 'remove', path: `${path}/${escapePathComponent(key)}` });
    }
    for (const key in after) {
      const next = after[key];
      if (!Object.hasOwn(before, key)) ops.push({ op: 'add', path: `${path}/${escapePathComponent(key)}`, value: next });
      // The path is only built where something changed: most keys hold the very same object.
      else if (before[key] !== next) walk(before[key], next, `${path}/${escapePathComponent(key)}`, ops);
    }
    return;
  }
  if (Array.isArray(before) && Array.isArray(after)) {
    walkArray(before, after, path, ops);
    return;
  }
  if (typeof before !== 'object' && typeof after !== 'object' && before === after) return;
  if (JSON.stringify(before) === JSON.stringify(after)) return;
  ops.push({ op: 'replace', path, value: after });
}

function walkArray(before: unknown[], after: unknown[], path: string, ops: Operation[]): void {
  const local: Operation[] = [];
  let lastIndexOfKey: Map<string, number> | undefined;
  const stillAhead = (key: string, from: number) => {
    // Built once per array, only when an insertion carries a key: keeps the walk linear.
    if (!lastIndexOfKey) {
      lastIndexOfKey = new Map();
      before.forEach((entry, k) => {
        const id = identity(entry);
        if (id !== undefined) lastIndexOfKey!.set(id, k);
      });
    }
    return (lastIndexOfKey.get(key) ?? -1) >= from;
  };
  let i = 0;
  for (let j = 0; j < after.length; j++) {
    const item = after[j];
    const old = before[i];
    if (i < before.length && old === item) {
      i++;
      continue;
    }
    const key = identity(item);
    if (i < before.length && key !== undefined && key === identity(old)) {
      walk(old, item, `${path}/${j}`, local);
      i++;
      continue;
    }
    // An insertion is only possible while `after` still has more items left than `before`.
    if (after.length - j > before.length - i && (key === undefined || i >= before.length || !stillAhead(key, i))) {
      local.push({ op: 'add', path: `${path}/${j}`, value: item });
      continue;
    }
    return fallback(before, after, path, ops);
  }
  if (i !== before.length) return fallback(before, after, path, ops);
  // A loop, not push(...local): a spread of 100,000 operations overflows the stack.
  for (const op of local) ops.push(op);
}

function fallback(before: unknown[], after: unknown[], path: string, ops: Operation[]): void {
  for (const op of jsonpatch.compare(before, after)) ops.push({ ...op, path: `${path}${op.path}` } as Operation);
}

/** The JSON Patch that turns `before` into `after`; empty when they are equal. Never mutates either. */
export function diff(before: unknown, after: unknown): Operation[] {
  const ops: Operation[] = [];
  walk(before, after, '', ops);
  return ops;
}

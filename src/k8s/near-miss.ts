/**
 * Near misses: a label that is almost the one a selector requirement asks for — the right key
 * with a value one typo away (`injection=enable`), or a key one typo, a missing domain or a
 * shortened name away with a fitting value (`sidecar-injector/injection=enabled`,
 * `sidecar-injector.io/inject=enabled`, `injection=enabled`). Said beside "it does not match",
 * so that a person sees the label they meant to write. Pure; bounded (at most `maxKeysLooked`
 * keys of a label map are compared).
 */
import { distance } from 'fastest-levenshtein';
import { cut } from '../quote.js';
import type { Labels, Requirement } from './selector.js';

const maxKeysLooked = 200;

/** The name part of a label key (after its `prefix/`). */
const namePart = (key: string) => key.slice(key.lastIndexOf('/') + 1);

/** Whether `value` is a typo of `wanted`: a different case, or at most two edits on a value of four or more. */
function valueNear(value: string, wanted: string): boolean {
  if (value === wanted) return false;
  if (value.toLowerCase() === wanted.toLowerCase()) return true;
  return wanted.length >= 4 && value.length <= 2 * wanted.length && distance(value, wanted) <= 2;
}

/** Whether `key` is a near miss of `wanted`: at most three edits, its name part alone, or the same name part under a near prefix. */
function keyNear(key: string, wanted: string): boolean {
  if (key === wanted || key.length > 2 * wanted.length + 10) return false;
  if (key === namePart(wanted) || key.toLowerCase() === wanted.toLowerCase()) return true;
  return distance(key, wanted) <= Math.max(2, Math.min(4, Math.floor(wanted.length / 6)));
}

/** The label `wanted` would be met by (the first value of an `In`, or a value for `Exists`). */
const wantedLabel = (requirement: Requirement, value?: string) =>
  requirement.operator === 'In' ? `${requirement.key}=${[...requirement.values].sort()[0]!}` : `${requirement.key}${value === undefined ? '' : `=${value}`}`;

/** A near miss of the requirement among `labels`, as a sentence; undefined when there is none (or the requirement is not one a label meets). */
export function nearMiss(requirement: Requirement, labels: Labels): string | undefined {
  if (requirement.operator !== 'In' && requirement.operator !== 'Exists') return undefined;
  const values = [...requirement.values];
  if (requirement.operator === 'In' && Object.hasOwn(labels, requirement.key)) {
    const value = labels[requirement.key]!;
    const near = values.find((v) => valueNear(value, v));
    return near === undefined ? undefined : `its value ${JSON.stringify(cut(value, 63))} is a near miss of ${JSON.stringify(near)}`;
  }
  for (const key of Object.keys(labels).slice(0, maxKeysLooked)) {
    if (!keyNear(key, requirement.key)) continue;
    const value = labels[key]!;
    const fits = requirement.operator === 'Exists' || values.includes(value) || values.some((v) => valueNear(value, v));
    if (fits) return `it has ${cut(`${key}=${value}`, 140)}, a near miss: did you mean ${wantedLabel(requirement, value)}?`;
  }
  return undefined;
}

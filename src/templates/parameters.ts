/**
 * Declared template parameters: a type, rules and who may override the default. A parameter
 * is either a plain scalar (fixed: nobody overrides it) or a declaration:
 *
 *   memoryLimit: { default: 64Mi, type: quantity, max: 512Mi, override: pod }
 *
 * Overrides arrive as annotation text (`<template>.sidecar-injector.io/<parameter>` on the
 * namespace or the pod); `checkValue` reads such text against the declaration and returns the
 * typed value or the rule it breaks. A value that fails its declaration is never used. Pure.
 */
import { RE2 } from 're2-wasm';
import { parseQuantity, quantityAtMost } from '../k8s/quantity.js';
import { isJsonObject } from '../k8s/json.js';
import type { ParamValue } from './placeholders.js';

export type ParamType = 'string' | 'integer' | 'number' | 'boolean' | 'quantity' | 'duration' | 'enum';
export const paramTypes: readonly ParamType[] = ['string', 'integer', 'number', 'boolean', 'quantity', 'duration', 'enum'];

/** Who may override a parameter: nobody, a namespace annotation, or also a pod annotation. */
export type OverrideLevel = 'none' | 'namespace' | 'pod';
export const overrideLevels: readonly OverrideLevel[] = ['none', 'namespace', 'pod'];

/** A parameter's declaration, compiled. */
export interface ParamDeclaration {
  readonly name: string;
  readonly type: ParamType;
  readonly default: ParamValue;
  readonly override: OverrideLevel;
  readonly description: string;
  /**
   * Anchored: the whole value must match. Run by RE2 (linear time, whatever the pattern): a
   * pod's value must never make a backtracking engine spin on a template author's pattern.
   */
  readonly pattern?: { test(text: string): boolean };
  /** The pattern as written, for messages. */
  readonly patternText?: string;
  readonly min?: string | number;
  readonly max?: string | number;
  readonly maxLength?: number;
  readonly values?: readonly string[];
}

/** Longest override value read at all: annotation values can be 256 KiB. */
export const maxOverrideLength = 1024;

const declarationFields = new Set(['default', 'type', 'pattern', 'min', 'max', 'maxLength', 'description', 'override', 'values']);
const durationRe = /^[-+]?(?:0|(?:\d*\.?\d+(?:ns|us|µs|ms|s|m|h))+)$/;
const durationUnits: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
/** A parameter name that is also an annotation key's name part (≤ 63, alphanumeric at both ends). */
const overridableNameRe = /^[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;

/** A Go duration (`1m30s`, `500ms`) in milliseconds; undefined when it is not one. */
export function durationMs(text: string): number | undefined {
  // Go's time.ParseDuration: an optional sign, then number-unit pairs (or a bare 0); at most 32 characters.
  if (text.length > 32 || !durationRe.test(text)) return undefined;
  let total = 0;
  for (const [, amount, unit] of text.matchAll(/(\d*\.?\d+)(ns|us|µs|ms|s|m|h)/g)) total += Number(amount) * durationUnits[unit!]!;
  return text.startsWith('-') ? -total : total;
}

/** The value as the type orders it (numbers for integer, number and duration; quantities by value), for min and max. */
function outOfRange(type: ParamType, value: ParamValue, bound: string | number, below: boolean): boolean {
  if (type === 'quantity') {
    const v = parseQuantity(value);
    const b = parseQuantity(bound);
    if (!v || !b) return false;
    return below ? !quantityAtMost(b, v) : !quantityAtMost(v, b);
  }
  const toNumber = (x: string | number | boolean) => (type === 'duration' ? durationMs(String(x)) : Number(x));
  const v = toNumber(value);
  const b = toNumber(bound);
  if (v === undefined || b === undefined || Number.isNaN(v) || Number.isNaN(b)) return false;
  return below ? v < b : v > b;
}

/**
 * Reads `text` (an annotation value, or a default) against `declaration`: the typed value, or
 * the rule it breaks, in words for the person who wrote the annotation.
 */
export function checkValue(declaration: ParamDeclaration, text: string): { value: ParamValue } | { problem: string } {
  if (text.length > maxOverrideLength) return { problem: `is longer than ${maxOverrideLength} characters` };
  const { type } = declaration;
  let value: ParamValue = text;
  switch (type) {
    case 'integer':
      if (!/^-?\d{1,16}$/.test(text) || !Number.isSafeInteger(Number(text))) return { problem: 'must be an integer' };
      value = Number(text);
      break;
    case 'number':
      if (!/^-?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d{1,3})?$/.test(text) || !Number.isFinite(Number(text))) return { problem: 'must be a number' };
      value = Number(text);
      break;
    case 'boolean':
      if (text !== 'true' && text !== 'false') return { problem: 'must be true or false' };
      value = text === 'true';
      break;
    case 'quantity': {
      const quantity = parseQuantity(text);
      if (!quantity) return { problem: 'must be a Kubernetes quantity (such as 100m, 64Mi, 1.5)' };
      // Resources are never negative: the API server refuses a negative request or limit.
      if (quantity.num < 0n) return { problem: 'must not be negative' };
      break;
    }
    case 'duration':
      if (durationMs(text) === undefined) return { problem: 'must be a duration (such as 30s, 1m30s, 500ms)' };
      break;
    case 'enum':
      if (!declaration.values!.includes(text)) return { problem: `must be one of ${declaration.values!.join(', ')}` };
      break;
    case 'string':
      break;
  }
  if (declaration.maxLength !== undefined && text.length > declaration.maxLength) return { problem: `must be at most ${declaration.maxLength} characters` };
  if (declaration.pattern && !declaration.pattern.test(text)) return { problem: `must match ${declaration.patternText}` };
  if (declaration.min !== undefined && outOfRange(type, value, declaration.min, true)) return { problem: `must be at least ${declaration.min}` };
  if (declaration.max !== undefined && outOfRange(type, value, declaration.max, false)) return { problem: `must be at most ${declaration.max}` };
  return { value };
}

/** The default's text, as an annotation would write it. */
function asText(value: unknown): string | undefined {
  return typeof value === 'string' ? value : typeof value === 'number' || typeof value === 'boolean' ? String(value) : undefined;
}

/**
 * Compiles one `parameters.<name>` map into a declaration; every problem goes to `problem`
 * with the field it concerns. Returns undefined when it cannot be used.
 */
export function compileDeclaration(name: string, raw: unknown, problem: (field: string, message: string) => void): ParamDeclaration | undefined {
  if (!isJsonObject(raw)) return undefined;
  const field = `parameters.${name}`;
  const before = { count: 0 };
  const add = (f: string, m: string) => {
    before.count++;
    problem(f, m);
  };
  for (const key of Object.keys(raw))
    if (!declarationFields.has(key)) add(`${field}.${key}`, `unknown field (expected one of ${[...declarationFields].join(', ')})`);
  const type = (raw.type ?? 'string') as ParamType;
  if (!paramTypes.includes(type)) add(`${field}.type`, `must be one of ${paramTypes.join(', ')}`);
  const override = (raw.override ?? 'none') as OverrideLevel;
  if (!overrideLevels.includes(override)) add(`${field}.override`, `must be one of ${overrideLevels.join(', ')}`);
  if (override !== 'none' && !overridableNameRe.test(name)) {
    add(field, 'an overridable parameter is named as an annotation key: letters, digits, "-", "_" and ".", at most 63, alphanumeric at both ends');
  }
  let values: string[] | undefined;
  if (type === 'enum') {
    if (!Array.isArray(raw.values) || raw.values.length === 0) add(`${field}.values`, 'an enum needs a list of values');
    // Strings only: YAML reads 1.10 as the number 1.1, and some dialects read off as false.
    else if (raw.values.some((v) => typeof v !== 'string')) add(`${field}.values`, 'enum values must be strings (quote them in YAML: "1.10", "off")');
    else values = raw.values as string[];
  } else if (raw.values !== undefined) add(`${field}.values`, 'only an enum has values');
  let pattern: { test(text: string): boolean } | undefined;
  if (raw.pattern !== undefined) {
    if (typeof raw.pattern !== 'string') add(`${field}.pattern`, 'must be a regular expression as a string');
    else {
      try {
        // Compiled alone first: only a pattern that is whole by itself stays whole inside the
        // anchoring group (`a)|(b` would otherwise turn `^(?:a)|(b)$` into two unanchored halves).
        new RE2(raw.pattern, 'u');
        // Anchored: the whole value must match, never a part of it. RE2 syntax (no backreferences, no lookaround).
        pattern = new RE2(`^(?:${raw.pattern})$`, 'u');
      } catch (err) {
        add(`${field}.pattern`, `is not a valid RE2 regular expression: ${(err as Error).message}`);
      }
    }
  }
  const bound = (key: 'min' | 'max'): string | number | undefined => {
    const v = raw[key];
    if (v === undefined) return undefined;
    if (!['integer', 'number', 'quantity', 'duration'].includes(type)) {
      add(`${field}.${key}`, `only integer, number, quantity and duration parameters have ${key}`);
      return undefined;
    }
    if (typeof v !== 'string' && typeof v !== 'number') {
      add(`${field}.${key}`, 'must be a value of the parameter type');
      return undefined;
    }
    return v;
  };
  const min = bound('min');
  const max = bound('max');
  let maxLength: number | undefined;
  if (raw.maxLength !== undefined) {
    if (typeof raw.maxLength !== 'number' || !Number.isInteger(raw.maxLength) || raw.maxLength < 1) add(`${field}.maxLength`, 'must be a positive integer');
    else maxLength = raw.maxLength;
  }
  const description = raw.description ?? '';
  if (typeof description !== 'string') add(`${field}.description`, 'must be a string');
  const defaultText = asText(raw.default);
  if (defaultText === undefined) add(`${field}.default`, 'is required: a string, number or boolean');
  if (before.count > 0) return undefined;
  const declaration: ParamDeclaration = {
    name,
    type,
    default: '',
    override,
    description: description as string,
    ...(pattern ? { pattern, patternText: raw.pattern as string } : {}),
    ...(min !== undefined ? { min } : {}),
    ...(max !== undefined ? { max } : {}),
    ...(maxLength !== undefined ? { maxLength } : {}),
    ...(values ? { values } : {}),
  };
  // Bounds of their type, and a default that keeps the declaration's own rules.
  for (const key of ['min', 'max'] as const) {
    const b = declaration[key];
    if (b !== undefined) {
      const checked = checkValue({ ...declaration, min: undefined, max: undefined } as ParamDeclaration, String(b));
      if ('problem' in checked) add(`${field}.${key}`, `${checked.problem}`);
    }
  }
  const checked = checkValue(declaration, defaultText!);
  if ('problem' in checked) add(`${field}.default`, checked.problem);
  if (before.count > 0) return undefined;
  return { ...declaration, default: (checked as { value: ParamValue }).value };
}

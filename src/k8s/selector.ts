/**
 * Kubernetes label selectors with the API server's exact semantics
 * (CONTRACT.md R-12..R-14, apimachinery labels.Requirement.Matches).
 */
import { SelectorError } from '../errors.js';
import { quote } from '../quote.js';
import { isJsonObject } from './json.js';
import { labelKeyProblem, labelValueProblem } from './label-syntax.js';

/** A label map as found in `metadata.labels`. */
export type Labels = Readonly<Record<string, string>>;

export type SelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

/** One requirement; `matchLabels` entries become `In` with one value. */
export interface Requirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  readonly values: ReadonlySet<string>;
}

/** A validated selector. All requirements are ANDed; no requirement matches everything. */
export interface Selector {
  readonly requirements: readonly Requirement[];
}

/** The selector that matches every label set (`{}`). */
const everything: Selector = Object.freeze({ requirements: Object.freeze([]) });

const operators: ReadonlySet<string> = new Set(['In', 'NotIn', 'Exists', 'DoesNotExist']);

/**
 * Parses a `LabelSelector` object (`matchLabels`, `matchExpressions`). An absent or null
 * selector is `{}` and matches everything, as the API server defaults webhook selectors
 * . Throws SelectorError naming the field on an invalid operator, key or value list.
 */
export function parseSelector(raw: unknown): Selector {
  if (raw === undefined || raw === null) return everything;
  if (!isJsonObject(raw)) throw new SelectorError('', 'a selector must be an object with matchLabels and/or matchExpressions');
  for (const key of Object.keys(raw)) {
    if (key !== 'matchLabels' && key !== 'matchExpressions') {
      throw new SelectorError(key, `unknown field ${quote(key)} (expected matchLabels or matchExpressions)`);
    }
  }
  const requirements: Requirement[] = [];
  const { matchLabels, matchExpressions } = raw;
  if (matchLabels !== undefined && matchLabels !== null) {
    if (!isJsonObject(matchLabels)) throw new SelectorError('matchLabels', 'must be a map of label keys to values');
    for (const [key, value] of Object.entries(matchLabels)) {
      const field = `matchLabels[${quote(key)}]`;
      const keyProblem = labelKeyProblem(key);
      if (keyProblem) throw new SelectorError(field, keyProblem);
      if (typeof value !== 'string') throw new SelectorError(field, 'value must be a string (quote it in YAML)');
      const valueProblem = labelValueProblem(value);
      if (valueProblem) throw new SelectorError(field, valueProblem);
      requirements.push({ key, operator: 'In', values: new Set([value]) });
    }
  }
  if (matchExpressions !== undefined && matchExpressions !== null) {
    if (!Array.isArray(matchExpressions)) throw new SelectorError('matchExpressions', 'must be a list');
    matchExpressions.forEach((expr: unknown, i) => requirements.push(parseExpression(expr, `matchExpressions[${i}]`)));
  }
  return Object.freeze({ requirements: Object.freeze(requirements) });
}

function parseExpression(expr: unknown, field: string): Requirement {
  if (!isJsonObject(expr)) throw new SelectorError(field, 'must be an object with key, operator and values');
  const { key, operator, values } = expr;
  if (typeof key !== 'string') throw new SelectorError(`${field}.key`, 'is required and must be a string');
  const keyProblem = labelKeyProblem(key);
  if (keyProblem) throw new SelectorError(`${field}.key`, keyProblem);
  if (typeof operator !== 'string' || !operators.has(operator)) {
    throw new SelectorError(`${field}.operator`, `${quote(operator)} is not a valid label selector operator (In, NotIn, Exists, DoesNotExist)`);
  }
  const list = values === undefined || values === null ? [] : values;
  if (!Array.isArray(list)) throw new SelectorError(`${field}.values`, 'must be a list of strings');
  list.forEach((v: unknown, j) => {
    if (typeof v !== 'string') throw new SelectorError(`${field}.values[${j}]`, 'must be a string (quote it in YAML)');
    const problem = labelValueProblem(v);
    if (problem) throw new SelectorError(`${field}.values[${j}]`, problem);
  });
  if ((operator === 'In' || operator === 'NotIn') && list.length === 0) {
    throw new SelectorError(`${field}.values`, `must be non-empty for operator ${operator}`);
  }
  if ((operator === 'Exists' || operator === 'DoesNotExist') && list.length > 0) {
    throw new SelectorError(`${field}.values`, `must be empty for operator ${operator}`);
  }
  return { key, operator: operator as SelectorOperator, values: new Set(list as string[]) };
}

/** True when `labels` satisfies every requirement of `selector`. */
export function matches(selector: Selector, labels: Labels): boolean {
  return unmetRequirement(selector, labels) === undefined;
}

/** The first requirement of `selector` that `labels` do not meet, or undefined when they match. */
export function unmetRequirement(selector: Selector, labels: Labels): Requirement | undefined {
  for (const requirement of selector.requirements) {
    const { key, operator, values } = requirement;
    const present = Object.hasOwn(labels, key);
    switch (operator) {
      case 'In':
        if (!present || !values.has(labels[key]!)) return requirement;
        break;
      case 'NotIn':
        // An absent key satisfies NotIn.
        if (present && values.has(labels[key]!)) return requirement;
        break;
      case 'Exists':
        if (!present) return requirement;
        break;
      case 'DoesNotExist':
        if (present) return requirement;
        break;
    }
  }
  return undefined;
}

/** A requirement as kubectl writes one (`app in (api,web)`, `app notin (x)`, `app`, `!app`). */
export function requirementText({ key, operator, values }: Requirement): string {
  const list = () => [...values].sort().join(',');
  switch (operator) {
    case 'In':
      return values.size === 1 ? `${key}=${list()}` : `${key} in (${list()})`;
    case 'NotIn':
      return `${key} notin (${list()})`;
    case 'Exists':
      return key;
    case 'DoesNotExist':
      return `!${key}`;
  }
}

/**
 * A requirement as a sentence says what it needs: `team=shop`, `team in (a,b)`, `team notin (a)`,
 * `a label team (any value)`, `no label team` (requirementText is the selector syntax a command takes).
 */
export function requirementPhrase(requirement: Requirement): string {
  if (requirement.operator === 'Exists') return `a label ${requirement.key} (any value)`;
  if (requirement.operator === 'DoesNotExist') return `no label ${requirement.key}`;
  return requirementText(requirement);
}

/** What `labels` (of `whose`: "the pod", "namespace shop") hold for an unmet requirement, quoted and bounded. */
export function unmetBecause(requirement: Requirement, labels: Labels, whose: string): string {
  const { key } = requirement;
  return Object.hasOwn(labels, key) ? `${whose} has ${key}=${quote(labels[key], 80)}` : `${whose} has no label ${key}`;
}

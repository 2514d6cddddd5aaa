/**
 * CEL text built from Kubernetes values, for the expressions the API server evaluates for us (the
 * exported policies, the webhooks' matchConditions): string literals and label selectors.
 */
import type { Selector } from './selector.js';

/**
 * A CEL string literal: printable ASCII as is, everything else escaped by code point (`\\u00a0`,
 * and `\\U0001f680` beyond the basic plane: cel-go refuses a `\\u` escape of a surrogate, so the
 * policy would not compile), so the YAML shows no invisible character. A lone surrogate, which no
 * CEL string can hold, is written as U+FFFD, as Go's JSON decoder reads it.
 */
export const celString = (text: string): string =>
  `'${text.replace(/[\\']/g, '\\$&').replace(/[^\x20-\x7e]/gu, (c) => {
    const code = c.codePointAt(0)!;
    if (code > 0xffff) return `\\U${code.toString(16).padStart(8, '0')}`;
    return `\\u${(code >= 0xd800 && code <= 0xdfff ? 0xfffd : code).toString(16).padStart(4, '0')}`;
  })}'`;

/** `key` is in the map at `map` (which may be absent). */
export const inMap = (map: string, key: string): string => `(has(${map}) && ${celString(key)} in ${map})`;

/** A label selector over a label map, requirement by requirement (selection/select.ts reads them alike); all must hold. */
export function selectorCel(selector: Selector, map: string): string[] {
  return selector.requirements.map((r) => {
    const present = inMap(map, r.key);
    const among = `${map}[${celString(r.key)}] in [${[...r.values].map(celString).join(', ')}]`;
    switch (r.operator) {
      case 'In':
        return `(${present} && ${among})`;
      case 'NotIn':
        return `!(${present} && ${among})`;
      case 'Exists':
        return present;
      case 'DoesNotExist':
        return `!${present}`;
    }
  });
}

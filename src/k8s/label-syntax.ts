/**
 * Label key and value syntax, as kube-apiserver validates it
 * (CONTRACT.md R-14: IsQualifiedName / IsLabelKey, IsLabelValue, IsDNS1123Subdomain).
 */

import { quote } from '../quote.js';

const nameRe = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const dns1123SubdomainRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const dns1123LabelRe = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Why `key` is not a valid label key (qualified name), or undefined when it is. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  const prefix = slash === -1 ? undefined : key.slice(0, slash);
  const name = slash === -1 ? key : key.slice(slash + 1);
  if (prefix !== undefined) {
    if (prefix.length === 0) return `label key ${quote(key)} has an empty prefix`;
    if (prefix.length > 253 || !dns1123SubdomainRe.test(prefix)) {
      return `label key ${quote(key)}: prefix must be a lowercase DNS-1123 subdomain of at most 253 characters`;
    }
  }
  if (name.length === 0) return `label key ${quote(key)} has an empty name`;
  if (name.length > 63) return `label key ${quote(key)}: name part must be at most 63 characters`;
  if (!nameRe.test(name)) {
    return `label key ${quote(key)}: name part must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric`;
  }
  return undefined;
}

/** Why `value` is not a valid label value, or undefined when it is (the empty string is valid). */
export function labelValueProblem(value: string): string | undefined {
  if (value.length === 0) return undefined;
  if (value.length > 63) return `label value must be at most 63 characters (got ${value.length})`;
  if (!nameRe.test(value)) {
    return `label value ${quote(value)} must consist of alphanumerics, '-', '_' or '.', and start and end with an alphanumeric`;
  }
  return undefined;
}

/** True when `name` is a DNS-1123 label (container, volume and port names). */
export function isDns1123Label(name: string): boolean {
  return name.length <= 63 && dns1123LabelRe.test(name);
}

const dns1123SubdomainMax = 253;

/** True when `name` is a DNS-1123 subdomain (pod names, label key prefixes). */
export function isDns1123Subdomain(name: string): boolean {
  return name.length <= dns1123SubdomainMax && dns1123SubdomainRe.test(name);
}

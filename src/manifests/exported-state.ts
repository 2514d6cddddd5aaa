/**
 * Whether the MutatingAdmissionPolicy that `policies --mutating` exports holds the templates
 * marked `delivery: policy`, at the revisions in force: the policy records each template it
 * holds and its revision in annotations (mutating-policies.ts). Absent or stale, the webhooks
 * inject the marked templates themselves (with the warning policy-delivery-missing) or the
 * policy injects an old revision: never silent, but an operator must regenerate it. Pure.
 */
import { isJsonObject } from '../k8s/json.js';
import { cut } from '../quote.js';
import type { TemplateSet } from '../templates/set.js';
import { exportedPolicyName } from './mutating-policies.js';

/** What the cluster holds of the exported policy, as the leader read it. */
export interface ExportedObjects {
  /** The MutatingAdmissionPolicy, or undefined when it does not exist. */
  readonly policy: unknown;
  /** Its binding, or undefined when it does not exist. */
  readonly binding: unknown;
}

/** The exported policy's state: `not-used` (no template is marked), `current`, `absent`, `stale`. */
export interface ExportedPolicyState {
  readonly state: 'not-used' | 'current' | 'absent' | 'stale';
  /** What is wrong and the command that fixes it; absent when nothing is. */
  readonly problem?: string;
}

/** The command that makes the policy current again. */
export const regenerate = 'sidecar-injector policies --mutating | kubectl apply -f -';

const hashAnnotation = (template: string) => `sidecar-injector.io/template-hash.${template}`;
const listAnnotation = 'sidecar-injector.io/templates';

/** The state of the exported objects `held` for the templates of `set`. */
export function exportedPolicyState(set: TemplateSet, held: ExportedObjects): ExportedPolicyState {
  // The stable revisions: a candidate's share is the webhooks' business (a policy has no shares).
  const marked = set.templates.filter((t) => t.delivery === 'policy');
  const markedNames = marked.map((t) => t.name).join(', ');
  if (marked.length === 0) {
    if (held.policy === undefined) return { state: 'not-used' };
    return {
      state: 'stale',
      problem: `the MutatingAdmissionPolicy ${exportedPolicyName} exists but no template is marked delivery: policy: it injects what it last held; delete it (kubectl delete mutatingadmissionpolicy,mutatingadmissionpolicybinding ${exportedPolicyName})`,
    };
  }
  if (held.policy === undefined || held.binding === undefined) {
    const missing =
      held.policy === undefined ? `the MutatingAdmissionPolicy ${exportedPolicyName}` : `the MutatingAdmissionPolicyBinding ${exportedPolicyName}`;
    return {
      state: 'absent',
      problem: `${missing} does not exist: the webhooks inject ${markedNames} (delivery: policy) instead; ${regenerate}`,
    };
  }
  const annotations =
    isJsonObject(held.policy) && isJsonObject(held.policy.metadata) && isJsonObject(held.policy.metadata.annotations) ? held.policy.metadata.annotations : {};
  const text = (key: string) => (Object.hasOwn(annotations, key) && typeof annotations[key] === 'string' ? annotations[key] : undefined);
  const differences: string[] = [];
  for (const template of marked) {
    const have = text(hashAnnotation(template.name));
    if (have === undefined) differences.push(`${template.name} is not in it`);
    else if (have !== template.hash) differences.push(`${template.name} is at revision ${have.slice(0, 12)}, the revision in force is ${template.hash}`);
  }
  const markedSet = new Set(marked.map((t) => t.name));
  const extra = (text(listAnnotation) ?? '')
    .split(',')
    .filter((name) => name !== '' && !markedSet.has(name))
    .slice(0, 10)
    .map((name) => cut(name, 63));
  if (extra.length > 0) differences.push(`it still holds ${extra.join(', ')}, no longer marked delivery: policy`);
  if (differences.length === 0) return { state: 'current' };
  return { state: 'stale', problem: `the MutatingAdmissionPolicy ${exportedPolicyName} is stale: ${differences.slice(0, 10).join('; ')}; ${regenerate}` };
}

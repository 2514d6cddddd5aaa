/**
 * Which Events an admission outcome deserves, and on which object: the pod's controlling owner
 * (its ReplicaSet, Job, StatefulSet, …: where `kubectl describe` shows why its pods have or
 * lack sidecars), or its namespace for a bare pod. Pure; written by the server after the answer.
 */
import { isJsonObject } from '../k8s/json.js';
import type { PodOutcome } from './admit.js';
import { isWorkloadKind } from '../k8s/workloads.js';
import type { WarningId } from './warnings.js';
import { leftOutRules, remedyFor, type LeftOutRule } from './decision.js';
import { controllingOwner, namespaceReference, type ObjectReference } from '../k8s/object-reference.js';

/** The object an event is about. */
export type EventSubject = ObjectReference;

/** One event to record. */
export interface AdmissionEvent {
  readonly regarding: EventSubject;
  readonly type: 'Normal' | 'Warning';
  readonly reason: 'SidecarsInjected' | 'SidecarInjectionSkipped' | 'SidecarOverrideIgnored' | 'SidecarInjectionDenied' | 'SidecarsMissing';
  readonly note: string;
  /** The subject is the review's claim (the pod's owner): checked against the cluster before it is written (events.ts). */
  readonly claimed?: boolean;
}

/** Kinds whose pods an event about injection helps: the workload controllers. Other owners get it on the namespace. */

/**
 * The pod's controlling owner (a workload controller, well-formed, with the uid every owner
 * reference the API server stores has), or its namespace.
 */
export function eventSubject(pod: unknown, namespace: string): EventSubject {
  const metadata = isJsonObject(pod) && isJsonObject(pod.metadata) ? pod.metadata : {};
  const owner = controllingOwner(metadata.ownerReferences, namespace);
  return owner?.uid && isWorkloadKind(owner.kind) ? owner : namespaceReference(namespace);
}

/**
 * Denials whose message quotes what the pod holds (a field's value, an annotation): its author
 * reads them in the API server's answer, and a workload's controller quotes that answer in its
 * own `FailedCreate` Event. Ours says the reason only, so that no review can put its words in
 * an Event.
 */
const quotingDenials: ReadonlySet<string> = new Set(['invalid-pod', 'pod-too-large', 'unknown-template', 'invalid-override', 'pod-security']);

/**
 * A template left out by a rule, or a required one that cannot be injected, in the words of the
 * rule (decision.ts) rather than the warning's: a warning may quote what the pod holds (a Pod
 * Security violation names the pod's own capabilities).
 */
const ruleNote = (template: string, rule: LeftOutRule) => `${template} not injected (${rule}): ${leftOutRules[rule].means}`;

/** A name an object could have (what `(pod …)` may quote). */
const objectName = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9.-])?$/;

/** Warnings that say a template was left out (by a rule, or by an opt-out its optOut warns about), or requested and not selected: each deserves an Event. */
const skippedIds: ReadonlySet<WarningId> = new Set(['template-left-out', 'template-not-selected', 'requested-namespace-not-enabled', 'opt-out-of-required']);

/** The events an outcome deserves: injected, skipped (with why), denied; none when nothing happened worth telling. */
export function admissionEvents(outcome: PodOutcome, pod: unknown): AdmissionEvent[] {
  if (!outcome.namespace) return [];
  const regarding = eventSubject(pod, outcome.namespace);
  const claimed = regarding.kind !== 'Namespace' ? { claimed: true } : {};
  const on = outcome.podName && objectName.test(outcome.podName) ? ` (pod ${outcome.podName})` : '';
  const events: AdmissionEvent[] = [];
  if (outcome.decision === 'denied') {
    const cannot = outcome.reason === 'required-sidecar-unavailable' ? outcome.decisions.find((d) => d.kind === 'cannot') : undefined;
    const note =
      cannot?.kind === 'cannot'
        ? `required sidecar ${ruleNote(cannot.template, cannot.rule)}; ${remedyFor(cannot.rule, outcome.templates.find((t) => t.name === cannot.template)?.optOut)}${on}`
        : quotingDenials.has(outcome.reason)
          ? `the pod was denied (${outcome.reason}): the API server's answer to its creator says why${on}`
          : `${outcome.message}${on}`;
    events.push({ regarding, type: 'Warning', reason: 'SidecarInjectionDenied', note, ...claimed });
    return events;
  }
  if (outcome.decision === 'patched') {
    const hashes = new Map(outcome.templates.map((t) => [t.name, t.hash]));
    const injected = outcome.injection.injected.map((name) => `${name}@${hashes.get(name) ?? ''}`).join(', ');
    events.push({ regarding, type: 'Normal', reason: 'SidecarsInjected', note: `injected ${injected}${on}`, ...claimed });
  }
  const why = outcome.warnings.find((w) => skippedIds.has(w.id));
  if (why) {
    const note = why.id === 'template-left-out' && why.template && why.rule ? ruleNote(why.template, why.rule) : why.text;
    events.push({ regarding, type: 'Warning', reason: 'SidecarInjectionSkipped', note: `${note}${on}`, ...claimed });
  }
  // An override that takes no effect (a misspelled template or parameter in an annotation): the
  // API server's warning reaches only the pod's creator (a controller), so the workload hears it
  // too. The annotations are the pod's words: only their count and our suggestion are said.
  const ignored = outcome.warnings.filter((w) => w.id === 'override-ignored');
  if (ignored.length > 0) {
    const near = ignored.map((w) => /\(did you mean ([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\?\)/.exec(w.text)?.[1]).find((n) => n !== undefined);
    const note = `${ignored.length} override annotation(s) ignored${near ? ` (did you mean ${near}?)` : ''}: sidecar-injector why names them`;
    events.push({ regarding, type: 'Warning', reason: 'SidecarOverrideIgnored', note: `${note}${on}`, ...claimed });
  }
  return events;
}

/**
 * Stage 4, place: each template in the form the pod and the cluster can run (native sidecar or
 * container, or left out by a rule), injected, fitted to the namespace's Pod Security level;
 * every template's decision recorded. Required means required: a required template that applies
 * and cannot be injected refuses the pod.
 */
import { runsToCompletion } from '../../k8s/pod.js';
import type { Injection } from '../../inject/inject.js';
import type { Template } from '../../templates/template.js';
import { cannotInject, type LeftOutRule } from '../decision.js';
import { injectTemplates } from '../inject-pod.js';
import { planForms } from '../native-sidecars.js';
import { fitPodSecurity } from '../pod-security-fit.js';
import { say } from '../reasons.js';
import { denied, done, ordered, type AdmitDeps, type PodInput, type Progress, type Step } from './outcome.js';
import type { Parameterised } from './parameters.js';

/** A template left out, by which rule, in a sentence. */
export interface LeftOut {
  readonly template: Template;
  readonly rule: LeftOutRule;
  readonly text: string;
}

export interface Placed {
  readonly parameterised: Parameterised;
  readonly injection: Injection;
  readonly leftOut: readonly LeftOut[];
  /** Pod Security audit-level violations the injection introduces (for the audit event). */
  readonly podSecurityAudit?: string;
}

export function placeTemplates(p: Parameterised, input: PodInput, deps: AdmitDeps, at: Progress): Step<Placed> {
  const { overrides } = p;
  const { ours, prepared, warnings, namespaceLabels, byName, set } = p.selected;
  const { parts } = p.selected.read;
  const names = { containers: new Set(parts.containers.map((c) => c.name)), initContainers: new Set(parts.initContainers.map((c) => c.name)) };
  const plan = planForms(ours, deps.kubernetesVersion?.(), prepared.ledger.believed, runsToCompletion(parts), (list, name) => names[list].has(name));
  warnings.push(...plan.warnings);
  if (plan.denial) return done(denied(at, 'native-sidecars-unsupported', say('native-sidecars-unsupported', plan.denial.message), ours));
  const place = { namespace: at.namespace, namespaceLabels, requestName: input.name };
  const injectOnly = (templates: readonly Template[]) => injectTemplates(prepared, templates, place, overrides);
  const inForce = deps.kubernetesVersion?.()?.version;
  const fit = fitPodSecurity(input.pod, injectOnly(plan.templates), plan.templates, namespaceLabels, deps.podSecurity ?? 'skip', injectOnly, inForce);
  warnings.push(...fit.warnings);
  if (fit.denial) return done(denied(at, 'pod-security', say('pod-security', fit.denial), plan.templates));
  const injection = fit.injection;
  const byTemplate = new Map(ours.map((t) => [t.name, t]));
  const leftOut: LeftOut[] = [
    ...plan.leftOut,
    ...fit.leftOut,
    ...injection.conflicts.map((c) => ({ template: byTemplate.get(c.template)!, rule: c.rule, text: c.text })),
  ];
  const cannot = leftOut.filter((l) => l.template.failurePolicy === 'Fail');
  for (const l of leftOut) {
    const kind = l.template.failurePolicy === 'Fail' ? 'cannot' : 'left-out';
    byName.set(l.template.name, { template: l.template.name, kind, rule: l.rule, text: l.text });
    if (kind === 'left-out') warnings.push({ id: 'template-left-out', text: l.text, template: l.template.name, rule: l.rule });
  }
  for (const name of injection.injected) byName.set(name, { template: name, kind: 'inject' });
  for (const name of injection.present) byName.set(name, { template: name, kind: 'present' });
  at.decisions = ordered(set, byName);
  if (cannot.length > 0) {
    const first = cannot[0]!;
    return done(
      denied(
        at,
        'required-sidecar-unavailable',
        say('required-sidecar-unavailable', cannotInject(first.template, first.rule, first.text), cannot.length - 1),
        ours,
      ),
    );
  }
  return { next: { parameterised: p, injection, leftOut, ...(fit.audit ? { podSecurityAudit: fit.audit } : {}) } };
}

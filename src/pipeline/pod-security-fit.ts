/**
 * Sidecars that keep the pod within its namespace's Pod Security level. Pod Security
 * Admission judges the pod as we leave it (CONTRACT R-71); a sidecar that breaks the enforced
 * level turns a pod that would have run into a ReplicaSet's FailedCreate, far from its cause.
 * So when the injected pod has violations of the enforced level that the pod as received does
 * not have, the templates that add them are found (each injected alone) and, per
 * `--pod-security-action`: left out with a warning (`skip`, the default), or the pod is denied
 * (`deny`), or injected anyway with a warning (`inject`: the API server decides). What the pod
 * already fails is the API server's to judge; only what the injection adds counts. Warn and
 * audit levels add a warning and an audit annotation for what the injection adds. Pure.
 */
import { checkPodSecurity, describeViolations, podSecurityPolicies, type PodSecurityPolicy, type PodSecurityViolation } from '../k8s/pod-security.js';
import type { Injection } from '../inject/inject.js';
import type { Template } from '../templates/template.js';
import type { KubernetesVersion } from '../k8s/version.js';
import { cut } from '../quote.js';
import { clusterWarning } from './cluster-warnings.js';
import type { LeftOut } from './native-sidecars.js';
import { warning, type Warning } from './warnings.js';

/** What `--pod-security` does with a template that would break the enforced level. */
export type PodSecurityAction = 'skip' | 'deny' | 'inject';
export const podSecurityActions: readonly PodSecurityAction[] = ['skip', 'deny', 'inject'];

/** The problem with a `--pod-security-action` that is not an action; undefined for one that is. */
export function podSecurityActionProblem(text: string): string | undefined {
  return podSecurityActions.includes(text as PodSecurityAction)
    ? undefined
    : `--pod-security-action: expected ${podSecurityActions.join(', ')} (got ${JSON.stringify(text).slice(0, 80)})`;
}

export interface PodSecurityFit {
  /** The injection to answer with (the one given when nothing was left out). */
  readonly injection: Injection;
  /** The templates injected after the fit. */
  readonly templates: readonly Template[];
  /** Templates left out because they break the enforced level (under `skip`). */
  readonly leftOut: readonly LeftOut[];
  readonly warnings: readonly Warning[];
  /** The violations of the audit level the injection introduces: for the audit event (auditAnnotations). */
  readonly audit?: string;
  /** Under `deny`: why the pod is refused. */
  readonly denial?: string;
}

/** Messages quote violations, which quote pod values: bounded. */
const maxViolationText = 400;

/**
 * The violations of `policy` in `pod` that the pod as received does not have. A violation is
 * a check and its detail (which names the containers): a sidecar that fails a check the pod
 * already fails changes the detail, and counts. Where our rules are stricter than the API
 * server's, the pod as received may fail them: comparing violations, not verdicts, keeps
 * judging what the injection adds.
 */
function introduced(policy: PodSecurityPolicy, before: ReadonlySet<string>, pod: unknown): PodSecurityViolation[] {
  return checkPodSecurity(pod, policy).filter((v) => !before.has(violationKey(v)));
}

const violationKey = (v: PodSecurityViolation) => `${v.check}\0${v.detail}`;
const baseline = (policy: PodSecurityPolicy, original: unknown) => new Set(checkPodSecurity(original, policy).map(violationKey));
const described = (violations: readonly PodSecurityViolation[]) => cut(describeViolations(violations), maxViolationText);

/**
 * Fits `injection` (of `templates` into `original`) to the namespace's Pod Security labels.
 * `injectOnly` injects a subset of the templates into the same pod (for attribution).
 */
export function fitPodSecurity(
  original: unknown,
  injection: Injection,
  templates: readonly Template[],
  namespaceLabels: Readonly<Record<string, string>>,
  action: PodSecurityAction,
  injectOnly: (templates: readonly Template[]) => Injection,
  inForce?: KubernetesVersion,
): PodSecurityFit {
  const policies = podSecurityPolicies(namespaceLabels, inForce);
  const warnings: Warning[] = [];
  const leftOut: LeftOut[] = [];
  let result = injection;
  let kept = templates;
  const enforce = policies.enforce;
  if (enforce && injection.changed) {
    const before = baseline(enforce, original);
    const broken = introduced(enforce, before, injection.pod);
    if (broken.length > 0) {
      const culprits: { template: Template; violations: PodSecurityViolation[] }[] = [];
      for (const template of templates) {
        const alone = injectOnly([template]);
        const violations = alone.changed ? introduced(enforce, before, alone.pod) : [];
        if (violations.length > 0) culprits.push({ template, violations });
      }
      const names = (culprits.length > 0 ? culprits.map((c) => c.template) : templates).map((t) => t.name).join(', ');
      if (action === 'deny') {
        return {
          injection,
          templates,
          leftOut,
          warnings,
          denial: `injecting ${names} would make the pod violate PodSecurity "${enforce.label}" enforced on the namespace: ${described(broken)}; fix the template or the namespace's level`,
        };
      }
      if (action === 'inject')
        warnings.push(warning('pod-security-injected', clusterWarning('pod-security-injected', names, enforce.label, described(broken))));
      else {
        for (const c of culprits)
          leftOut.push({
            template: c.template,
            rule: 'pod-security',
            text: clusterWarning('pod-security-skipped', c.template.name, enforce.label, described(c.violations)),
          });
        kept = templates.filter((t) => !culprits.some((c) => c.template === t));
        result = injectOnly(kept);
        // Together they may still break it (each alone did not): then none is injected.
        if (result.changed && introduced(enforce, before, result.pod).length > 0) {
          for (const t of kept)
            leftOut.push({
              template: t,
              rule: 'pod-security',
              text: clusterWarning('pod-security-skipped', t.name, enforce.label, 'together with the other templates'),
            });
          kept = [];
          result = injectOnly([]);
        }
      }
    }
  }
  if (result.changed) {
    const warn = policies.warn;
    const warned = warn ? introduced(warn, baseline(warn, original), result.pod) : [];
    if (warned.length > 0)
      warnings.push(warning('pod-security-warn', clusterWarning('pod-security-warn', result.injected.join(', '), warn!.label, described(warned))));
    const audit = policies.audit;
    const audited = audit ? introduced(audit, baseline(audit, original), result.pod) : [];
    if (audited.length > 0) return { injection: result, templates: kept, leftOut, warnings, audit: `${audit!.label}: ${described(audited)}` };
  }
  return { injection: result, templates: kept, leftOut, warnings };
}

/**
 * Sidecars that keep the pod within its namespace's Pod Security level. Pod Security
 * Admission judges the pod as we leave it (CONTRACT R-71); a sidecar that breaks the enforced
 * level turns a pod that would have run into a ReplicaSet's FailedCreate, far from its cause.
 * So when the pod as received satisfies the enforced level and the injected one does not, the
 * templates that break it are found (each injected alone) and, per `--pod-security`: left out
 * with a warning (`skip`, the default), or the pod is denied (`deny`), or injected anyway with
 * a warning (`inject`: the API server decides). A pod that already fails the level is the API
 * server's to refuse; injection changes nothing about that. Warn and audit levels add a
 * warning and an audit annotation when the injection (not the pod) makes the pod violate them. Pure.
 */
import { checkPodSecurity, describeViolations, podSecurityPolicies, type PodSecurityPolicy } from '../k8s/pod-security.js';
import type { Injection } from '../inject/inject.js';
import type { Template } from '../templates/template.js';
import { cut } from '../quote.js';
import { clusterWarning } from './cluster-warnings.js';

/** What `--pod-security` does with a template that would break the enforced level. */
export type PodSecurityAction = 'skip' | 'deny' | 'inject';
export const podSecurityActions: readonly PodSecurityAction[] = ['skip', 'deny', 'inject'];

export interface PodSecurityFit {
  /** The injection to answer with (the one given when nothing was left out). */
  readonly injection: Injection;
  /** The templates injected after the fit. */
  readonly templates: readonly Template[];
  readonly warnings: readonly string[];
  /** The violations of the audit level the injection introduces: for the audit event (auditAnnotations). */
  readonly audit?: string;
  /** Under `deny`: why the pod is refused. */
  readonly denial?: string;
}

/** Messages quote violations, which quote pod values: bounded. */
const maxViolationText = 400;

function introduced(policy: PodSecurityPolicy, original: unknown, injected: unknown): string | undefined {
  if (checkPodSecurity(original, policy).length > 0) return undefined;
  const after = checkPodSecurity(injected, policy);
  return after.length > 0 ? cut(describeViolations(after), maxViolationText) : undefined;
}

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
): PodSecurityFit {
  const policies = podSecurityPolicies(namespaceLabels);
  const warnings: string[] = [];
  let result = injection;
  let kept = templates;
  const enforce = policies.enforce;
  if (enforce && injection.changed) {
    const broken = introduced(enforce, original, injection.pod);
    if (broken !== undefined) {
      const culprits = templates.filter((t) => {
        const alone = injectOnly([t]);
        return alone.changed && checkPodSecurity(alone.pod, enforce).length > 0;
      });
      const names = (culprits.length > 0 ? culprits : templates).map((t) => t.name).join(', ');
      if (action === 'deny') {
        return {
          injection,
          templates,
          warnings,
          denial: `injecting ${names} would make the pod violate PodSecurity "${enforce.label}" enforced on the namespace: ${broken}; fix the template or the namespace's level`,
        };
      }
      if (action === 'inject') warnings.push(clusterWarning('pod-security-injected', names, enforce.label, broken));
      else {
        for (const t of culprits) {
          const alone = injectOnly([t]);
          warnings.push(
            clusterWarning('pod-security-skipped', t.name, enforce.label, cut(describeViolations(checkPodSecurity(alone.pod, enforce)), maxViolationText)),
          );
        }
        kept = templates.filter((t) => !culprits.includes(t));
        result = injectOnly(kept);
        // Together they may still break it (each alone did not): then none is injected.
        if (result.changed && checkPodSecurity(result.pod, enforce).length > 0) {
          for (const t of kept) warnings.push(clusterWarning('pod-security-skipped', t.name, enforce.label, 'together with the other templates'));
          kept = [];
          result = injectOnly([]);
        }
      }
    }
  }
  if (result.changed) {
    const warn = policies.warn;
    const warned = warn ? introduced(warn, original, result.pod) : undefined;
    if (warned !== undefined) warnings.push(clusterWarning('pod-security-warn', result.injected.join(', '), warn!.label, warned));
    const audit = policies.audit;
    const audited = audit ? introduced(audit, original, result.pod) : undefined;
    if (audited !== undefined) return { injection: result, templates: kept, warnings, audit: `${audit!.label}: ${audited}` };
  }
  return { injection: result, templates: kept, warnings };
}

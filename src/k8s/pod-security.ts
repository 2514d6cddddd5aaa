/**
 * The Pod Security Standards (baseline, restricted) as Pod Security Admission evaluates them
 * after every mutating webhook (CONTRACT R-71): the namespace's labels name a level and a
 * version per mode (enforce, warn, audit), and each check reads the pod's spec. Pure.
 *
 * Written from `kubernetes/pod-security-admission` v0.37.2 (policy/check_*.go, helpers.go,
 * registry.go): the check ids, the reasons and the details are upstream's, word for word (its
 * pluralization, its `joinQuote`, its sorted sets), so that what we say matches what the API
 * server says. One check per file under `pod-security/`, each with the policy versions it
 * changed at and the checks it overrides, as upstream's registry holds them: the rules of
 * every policy version from v1.0 to the newest a check names.
 */
import { PodSecurityLabels } from './keys.js';
import { compareVersions, type KubernetesVersion } from './version.js';
import { podView, type PodSecurityCheck, type VersionedCheck } from './pod-security/check.js';
import { podSecurityChecks } from './pod-security/checks.js';

export type PodSecurityLevel = 'privileged' | 'baseline' | 'restricted';
export const podSecurityLevels: readonly PodSecurityLevel[] = ['privileged', 'baseline', 'restricted'];

/** One mode's policy: a level at a policy version (`latest`: the rules of the Kubernetes version in force). */
export interface PodSecurityPolicy {
  readonly level: PodSecurityLevel;
  readonly version: KubernetesVersion | 'latest';
  /** `restricted:latest`, `baseline:v1.25`: as the API server names the policy in its messages. */
  readonly label: string;
  /**
   * The version whose rules judge: the policy's version, capped at the Kubernetes version in
   * force, which is also what `latest` means there (an API server knows no newer rules than its
   * own). Absent when no version is known: the newest rules this build knows.
   */
  readonly rules?: KubernetesVersion;
}

/** The rules a policy version is judged by where `inForce` runs (upstream's evaluator caps the version at its newest checks). */
export function rulesAt(version: KubernetesVersion | 'latest', inForce: KubernetesVersion | undefined): KubernetesVersion | undefined {
  if (version === 'latest') return inForce;
  return inForce && compareVersions(inForce, version) < 0 ? inForce : version;
}

export type PodSecurityMode = keyof typeof PodSecurityLabels;

/** A failed check: its id, upstream's reason and detail. */
export interface PodSecurityViolation {
  readonly check: string;
  readonly reason: string;
  readonly detail: string;
}

/**
 * The namespace's policy per mode. A mode without a level label is privileged (absent here).
 * As the API server reads them: an invalid enforce level is restricted (fails closed), an
 * invalid warn or audit level privileged; an invalid version is `latest`.
 */
export function podSecurityPolicies(
  namespaceLabels: Readonly<Record<string, string>>,
  inForce?: KubernetesVersion,
): Partial<Record<PodSecurityMode, PodSecurityPolicy>> {
  const out: Partial<Record<PodSecurityMode, PodSecurityPolicy>> = {};
  for (const mode of ['enforce', 'warn', 'audit'] as const) {
    const keys = PodSecurityLabels[mode];
    if (!Object.hasOwn(namespaceLabels, keys.level)) continue;
    const raw = namespaceLabels[keys.level]!;
    const level: PodSecurityLevel = podSecurityLevels.includes(raw as PodSecurityLevel)
      ? (raw as PodSecurityLevel)
      : mode === 'enforce'
        ? 'restricted'
        : 'privileged';
    if (level === 'privileged') continue;
    const versionText = Object.hasOwn(namespaceLabels, keys.version) ? namespaceLabels[keys.version]! : 'latest';
    const match = /^v1\.(0|[1-9][0-9]{0,2})$/.exec(versionText);
    const version = match ? { major: 1, minor: Number(match[1]) } : 'latest';
    const rules = rulesAt(version, inForce);
    out[mode] = { level, version, label: `${level}:${version === 'latest' ? 'latest' : versionText}`, ...(rules ? { rules } : {}) };
  }
  return out;
}

/** The newest policy version whose rules are written here: newer versions (and `latest`) judge by these. */
export const newestPolicyRules: KubernetesVersion = { major: 1, minor: Math.max(...podSecurityChecks.flatMap((c) => c.versions.map((v) => v.since))) };

/** A policy version's minor as the checks' `since` reads it: `latest` and any v2 are past every check. */
function minorOf(rules: KubernetesVersion | 'latest'): number {
  if (rules === 'latest' || rules.major > 1) return Number.POSITIVE_INFINITY;
  return rules.major < 1 ? 0 : rules.minor;
}

/** Each check of `level` and below as it stands at `minor` (its newest version from then), without those another overrides. */
function checksAt(level: 'baseline' | 'restricted', minor: number): { readonly id: string; readonly version: VersionedCheck }[] {
  const selected: { id: string; version: VersionedCheck }[] = [];
  const overridden = new Set<string>();
  for (const check of podSecurityChecks) {
    if (level === 'baseline' && check.level === 'restricted') continue;
    const version = versionAt(check, minor);
    if (!version) continue;
    selected.push({ id: check.id, version });
    for (const id of version.overrides ?? []) overridden.add(id);
  }
  return selected.filter((c) => !overridden.has(c.id));
}

function versionAt(check: PodSecurityCheck, minor: number): VersionedCheck | undefined {
  let found: VersionedCheck | undefined;
  for (const version of check.versions) if (version.since <= minor) found = version;
  return found;
}

/**
 * Every check of `policy` the pod fails, in upstream's order (baseline ids sorted, then
 * restricted ids sorted), each with upstream's reason and detail word for word. `pod` is the
 * raw pod object; nothing in it is trusted to be well-formed.
 */
export function checkPodSecurity(pod: unknown, policy: PodSecurityPolicy): PodSecurityViolation[] {
  if (policy.level === 'privileged') return [];
  const view = podView(pod);
  const out: PodSecurityViolation[] = [];
  for (const { id, version } of checksAt(policy.level, minorOf(policy.rules ?? policy.version))) {
    const failure = version.check(view);
    if (failure) out.push({ check: id, ...failure });
  }
  return out;
}

/**
 * `reason (detail), reason (detail)`: as the API server lists violations (upstream's
 * `ForbiddenDetail`: a violation without detail is its reason alone).
 */
export function describeViolations(violations: readonly PodSecurityViolation[]): string {
  return violations
    .map((v) => (v.detail === '' ? v.reason || 'unknown forbidden reason' : `${v.reason || 'unknown forbidden reason'} (${v.detail})`))
    .join(', ');
}

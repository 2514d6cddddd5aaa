/**
 * The warnings about the cluster a pod lands in: native sidecars where the cluster has none,
 * Pod Security, pod-level resources, the default container, a misplaced opt-in. One table, so
 * that the README's list (checked by a test) and the words a person reads in `kubectl` agree.
 */
export const clusterWarnings = {
  // kubectl shows warnings cut at 120 characters: what matters comes first.
  'native-sidecars-as-containers': (template: string, at: string, names: string) =>
    `${template}: no native sidecars on ${at}; ${names} run as ordinary containers (start order not guaranteed)`,
  'native-sidecars-skipped': (template: string, at: string) => `${template} not injected: no native sidecars on ${at} (its fallback is skip)`,
  'native-sidecars-run-to-completion': (template: string, at: string, why: string) =>
    `${template} not injected: no native sidecars on ${at}, and the pod runs to completion (${why})`,
  'pod-security-skipped': (template: string, level: string, violations: string) =>
    `${template} not injected: it would violate PodSecurity "${level}": ${violations}`,
  'pod-security-injected': (templates: string, level: string, violations: string) =>
    `${templates} injected though they violate PodSecurity "${level}": ${violations}`,
  'pod-security-warn': (templates: string, level: string, violations: string) => `${templates} make the pod violate PodSecurity "${level}": ${violations}`,
  'pod-resources-grown': (templates: string, grown: string) => `${templates}: pod-level resources grown by the sidecars' share: ${grown}`,
  'pod-name-previewed': (templates: string, kind: string, named: string, shown: string) =>
    `${templates} read pod.name, and a ${kind}'s pods are named ${named}: this preview shows ${shown} in its place`,
  'misplaced-opt-in': (kind: string, what: string, templatePath: string) =>
    `${kind} carries ${what} in its own metadata, which its pods do not inherit; put it under ${templatePath}.metadata for it to apply`,
} as const;

export type ClusterWarning = keyof typeof clusterWarnings;

/** The sentence of `warning` with its arguments. */
export function clusterWarning<W extends ClusterWarning>(warning: W, ...args: Parameters<(typeof clusterWarnings)[W]>): string {
  return (clusterWarnings[warning] as (...a: unknown[]) => string)(...args);
}

/**
 * The warnings about the cluster a pod lands in: native sidecars where the cluster has none,
 * Pod Security, pod-level resources, the default container, a misplaced opt-in. One table, so
 * that the README's list (checked by a test) and the words a person reads in `kubectl` agree.
 */
export const clusterWarnings = {
  'native-sidecars-as-containers': (template: string, at: string, names: string) =>
    `${template}: ${at} has no native sidecars; ${names} injected as ordinary containers, so they are not guaranteed to start before the app containers or to stop after them`,
  'native-sidecars-skipped': (template: string, at: string) =>
    `${template} not injected: ${at} has no native sidecars and the template's fallback is skip`,
  'native-sidecars-run-to-completion': (template: string, at: string, names: string, why: string) =>
    `${template} not injected: ${at} has no native sidecars, and ${names} as ordinary containers would keep this pod from completing (${why})`,
  'pod-security-skipped': (template: string, level: string, violations: string) =>
    `${template} not injected: it would make the pod violate PodSecurity "${level}" enforced on the namespace: ${violations}`,
  'pod-security-injected': (templates: string, level: string, violations: string) =>
    `${templates}: the pod would violate PodSecurity "${level}" enforced on the namespace: ${violations}; injected anyway (--pod-security inject), the API server decides`,
  'pod-security-warn': (templates: string, level: string, violations: string) => `${templates}: the pod would violate PodSecurity "${level}": ${violations}`,
  'pod-resources-grown': (templates: string, grown: string) => `${templates}: the pod-level resources grew by the sidecars' share (${grown})`,
  'misplaced-opt-in': (kind: string, what: string, templatePath: string) =>
    `${kind} carries ${what} in its own metadata, which its pods do not inherit; put it under ${templatePath}.metadata for it to apply`,
} as const;

export type ClusterWarning = keyof typeof clusterWarnings;

/** The sentence of `warning` with its arguments. */
export function clusterWarning<W extends ClusterWarning>(warning: W, ...args: Parameters<(typeof clusterWarnings)[W]>): string {
  return (clusterWarnings[warning] as (...a: unknown[]) => string)(...args);
}

/** The labels and annotations that make up the injector's contract with users. */

/** Label keys. */
export const LabelKeys = {
  /** On a namespace: `enabled` opts every pod in it in. */
  namespaceOptIn: 'sidecar-injector.io/injection',
  /** On a pod: `disabled` opts it out. */
  podOptOut: 'sidecar-injector.io/inject',
  /** On a namespace: `enabled` lets the injector update its running pods' sidecar images in place (templates with `updateStrategy: inPlace`). */
  namespaceInPlace: 'sidecar-injector.io/in-place-updates',
} as const;

/** Label values. */
export const LabelValues = {
  enabled: 'enabled',
  disabled: 'disabled',
} as const;

/** Annotation keys. */
export const AnnotationKeys = {
  /** On a pod: comma-separated names of on-request templates to inject. */
  request: 'sidecar-injector.io/templates',
  /** On a pod, written by us: the ledger of everything we injected. */
  status: 'sidecar-injector.io/status',
  /**
   * On a mirror pod (a static pod the kubelet mirrors into the API): such pods may not
   * reference service accounts, secrets or config maps (CONTRACT R-69); they are never injected.
   */
  mirror: 'kubernetes.io/config.mirror',
  /** The container `kubectl logs` and `kubectl exec` use when none is named (else the first in `containers`). */
  defaultContainer: 'kubectl.kubernetes.io/default-container',
  /**
   * On a dry-run pod of `simulate`: it already carries the sidecars of the templates simulated,
   * so the injector stands aside (honoured on dry runs only, which store nothing).
   */
  simulation: 'sidecar-injector.io/simulation',
} as const;

/** The Pod Security Admission labels of a namespace (CONTRACT R-71), per mode: level and version. */
export const PodSecurityLabels = {
  enforce: { level: 'pod-security.kubernetes.io/enforce', version: 'pod-security.kubernetes.io/enforce-version' },
  warn: { level: 'pod-security.kubernetes.io/warn', version: 'pod-security.kubernetes.io/warn-version' },
  audit: { level: 'pod-security.kubernetes.io/audit', version: 'pod-security.kubernetes.io/audit-version' },
} as const;

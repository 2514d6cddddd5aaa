/**
 * Typed errors with stable codes. Each kind maps to exactly one way of answering:
 * RequestError → an HTTP 4xx before a review uid is known; AdmissionError → an
 * AdmissionReview denial; ConfigError and TemplateError → refusal to start (exit 1).
 */

/** Codes of errors answered as HTTP 4xx (the API server then applies failurePolicy). */
export type RequestErrorCode =
  | 'ERR_BODY_TOO_LARGE'
  | 'ERR_UNSUPPORTED_MEDIA_TYPE'
  | 'ERR_MALFORMED_JSON'
  | 'ERR_MALFORMED_REVIEW'
  | 'ERR_BODY_ABORTED'
  | 'ERR_NOT_FOUND'
  | 'ERR_METHOD_NOT_ALLOWED'
  | 'ERR_OVERLOADED'
  | 'ERR_CLIENT_CERTIFICATE'
  | 'ERR_PROFILE_SECONDS'
  | 'ERR_PROFILE_RUNNING';

/** A request we refuse before we know its uid: answered as HTTP `status` with `{ code, message }`. */
export class RequestError extends Error {
  override readonly name = 'RequestError';
  constructor(
    readonly status: number,
    readonly code: RequestErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** Codes of AdmissionReview denials. */
export type AdmissionErrorCode = 'ERR_INVALID_POD' | 'ERR_POD_TOO_LARGE';

/** A review we answer with `allowed: false`; `message` is what `kubectl` shows after "denied the request:". */
export class AdmissionError extends Error {
  override readonly name = 'AdmissionError';
  constructor(
    readonly code: AdmissionErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** Invalid configuration (flags, environment, files): the process refuses to start. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
  readonly code = 'ERR_CONFIG';
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n  - ${problems.join('\n  - ')}`);
  }
}

/** One problem in one template file, naming the field. */
export interface TemplateProblem {
  file: string;
  field: string;
  message: string;
}

/** A template directory that cannot be loaded; lists every problem found, not only the first. */
export class TemplateError extends Error {
  override readonly name = 'TemplateError';
  readonly code = 'ERR_TEMPLATE';
  constructor(readonly problems: readonly TemplateProblem[]) {
    super(`invalid templates:\n${problems.map((p) => `  - ${p.file}: ${p.field ? `${p.field}: ` : ''}${p.message}`).join('\n')}`);
  }
}

/** An invalid label selector; `field` is relative to the selector (e.g. `matchExpressions[0].operator`). */
export class SelectorError extends Error {
  override readonly name = 'SelectorError';
  readonly code = 'ERR_SELECTOR';
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * What a review gets when its namespace's labels cannot be known (API unreachable, nothing
 * cached): `deny` refuses the pod with a message (its controller retries later), `allow`
 * admits it without injection and with a warning.
 */
export type NamespaceFailurePolicy = 'deny' | 'allow';

/** Thrown by a namespace label source that cannot tell a namespace's labels; carries the policy to apply. */
export class NamespaceLabelsUnavailableError extends Error {
  override readonly name = 'NamespaceLabelsUnavailableError';
  readonly code = 'ERR_NAMESPACE_UNKNOWN';
  constructor(
    readonly namespace: string,
    readonly reason: string,
    readonly policy: NamespaceFailurePolicy,
  ) {
    super(`labels of namespace ${namespace} cannot be known: ${reason}`);
  }
}

/** An answer of the Kubernetes API other than 2xx, with its status code. */
export class KubernetesApiError extends Error {
  override readonly name = 'KubernetesApiError';
  readonly code = 'ERR_KUBERNETES_API';
  constructor(
    readonly statusCode: number,
    message: string,
    /** The API server's own words (its Status `message`, cut), when it sent one: what an admission webhook or policy said. */
    readonly detail?: string,
  ) {
    super(message);
  }
}

/**
 * What a command could not get from the cluster: an object that is not there, or a read the API
 * server refused or did not answer. Not the command line's fault: printed as it is, with what to
 * check for a refused read (the exit status is 1).
 */
export class ClusterError extends Error {
  override readonly name = 'ClusterError';
  readonly code = 'ERR_CLUSTER';
}

/** The sentence for a read of `what` that failed: the API server's own words, and what a 401 or 403 means. */
export function clusterReadFailure(what: string, err: unknown): ClusterError {
  if (!(err instanceof KubernetesApiError)) return new ClusterError(`cannot read ${what}: ${(err as Error).message}`, { cause: err });
  const said = err.detail ? `: ${err.detail.slice(0, 300)}` : '';
  const hint =
    err.statusCode === 403
      ? ' (the kubeconfig’s user lacks the permission the API server names: grant it with RBAC, or run as a user who has it)'
      : err.statusCode === 401
        ? ' (the API server does not accept the kubeconfig’s credentials: log in again, or check the kubeconfig)'
        : '';
  return new ClusterError(`cannot read ${what}: ${err.message}${said}${hint}`, { cause: err });
}

/**
 * An answer of the Kubernetes API larger than the read may hold (a list page of tenants' objects
 * each up to etcd's object limit): the request is cut off before the body is read whole.
 */
export class ResponseTooLargeError extends Error {
  override readonly name = 'ResponseTooLargeError';
  readonly code = 'ERR_RESPONSE_TOO_LARGE';
  constructor(
    readonly path: string,
    readonly maxBytes: number,
  ) {
    super(`${path}: the answer is larger than ${maxBytes} bytes`);
  }
}

/** A placeholder a template cannot use; the message names it. */
export class PlaceholderError extends Error {
  override readonly name = 'PlaceholderError';
  readonly code = 'ERR_PLACEHOLDER';
}

/** What is wrong with a status annotation (the ledger), as the end of a sentence; turned into a warning, never thrown out of parseLedger. */
export class LedgerError extends Error {
  override readonly name = 'LedgerError';
  readonly code = 'ERR_LEDGER';
}

/** A command line that cannot be read (an unknown flag, a stray argument): the process exits 2 with the message. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
  readonly code = 'ERR_USAGE';
}

/** Templates whose guarding ValidatingAdmissionPolicies cannot be generated faithfully; lists every problem. */
export class PolicyError extends Error {
  override readonly name = 'PolicyError';
  readonly code = 'ERR_POLICY';
  constructor(readonly problems: readonly string[]) {
    super(`cannot generate the required-sidecar policies:\n  - ${problems.join('\n  - ')}`);
  }
}

/** Self-managed certificates: a read or write of the Secret or the webhook configuration failed (the next round tries again). */
export class CertificateControllerError extends Error {
  override readonly name = 'CertificateControllerError';
  readonly code = 'ERR_SELF_MANAGED_CERTIFICATES';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

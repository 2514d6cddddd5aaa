/**
 * Configuration: the only reader of the environment and the command line. Parses, validates
 * (collecting every problem), applies defaults and freezes.
 */
import { ConfigError } from './errors.js';
import { parseOptions, usageText, type OptionSpec, type OptionTable } from './options.js';
import { defaultMaxBodyBytes } from './http/body.js';
import { defaultTimeouts, type ServerTimeouts } from './server.js';
import type { NamespaceFailurePolicy } from './errors.js';
import { parseNamespaceLabelFlag } from './namespaces/source.js';
import { parseKubernetesVersion, type KubernetesVersion } from './k8s/version.js';
import { isDns1123Label, isDns1123Subdomain } from './k8s/label-syntax.js';
import { podSecurityActionProblem, type PodSecurityAction } from './pipeline/pod-security-fit.js';

/** Everything `serve` needs to know. */
export interface Config {
  /** @default '0.0.0.0' */
  readonly host: string;
  /** @default 8443 */
  readonly port: number;
  /**
   * HTTPS port of `/metrics` and `/status` when they are not to share the webhook's port (the
   * shipped Deployment: a port a NetworkPolicy can open to the monitoring namespace alone).
   * Unset: served on `port`.
   */
  readonly metricsPort?: number;
  /**
   * HTTPS port of `/healthz` and `/readyz` for the kubelet's probes, a listener of its own that
   * a flood of the webhook's port cannot starve. Unset: served on `port`.
   */
  readonly probePort?: number;
  /** Directory of template files (`templateSource` folder). @default 'templates' */
  readonly templatesDir: string;
  /** Where the templates come from: the cluster's SidecarTemplate objects, or `templatesDir`. */
  readonly templateSource: 'cluster' | 'folder';
  /** PEM files of the serving certificate; both or neither. Neither → a throw-away development CA. */
  readonly tlsCertFile?: string;
  readonly tlsKeyFile?: string;
  /** CA certificates (PEM file): only callers with a client certificate one of them signed get reviews answered. */
  readonly clientCaFile?: string;
  /** Self-managed certificates: the Secret kept, the webhook configuration given its CA, the Service named in the certificate. */
  readonly selfManaged?: { readonly secretName: string; readonly webhookConfigurationName: string; readonly serviceName: string };
  /** The injector's own namespace (Secret, Service, lease). @default $POD_NAMESPACE, else 'sidecar-injector' */
  readonly namespace: string;
  /** The injector's Service, in `namespace`: named in a self-managed certificate, read on shutdown (the handover). @default 'sidecar-injector' */
  readonly serviceName: string;
  /**
   * This replica's name: its lease identity and the `reportingInstance` of its Events.
   * @default $POD_NAME (the Deployment passes it), else $HOSTNAME, else `sidecar-injector-<pid>`
   */
  readonly replica: string;
  /** Whether this process runs in a pod (KUBERNETES_SERVICE_HOST and _PORT set): the in-cluster client configuration is there. */
  readonly inPod: boolean;
  /** Where a local run writes its throw-away development CA. @default '.dev-certs' */
  readonly devCertDir: string;
  /** A YAML/JSON file mapping namespace names to labels (the local namespace label source). */
  readonly namespaceLabelsFile?: string;
  /** Labels given as `--namespace-label NS:KEY=VALUE`; they override the file. */
  readonly namespaceLabels: Readonly<Record<string, Readonly<Record<string, string>>>>;
  /**
   * Where namespace labels come from: `local` (file and flags) or `cluster` (list and watch of
   * Namespaces). `auto` picks `cluster` inside a cluster or with --kubeconfig. @default 'auto'
   */
  readonly namespaceSource: 'local' | 'cluster';
  /** A kubeconfig file for the cluster source outside a cluster. */
  readonly kubeconfig?: string;
  /** What a review gets when namespace labels cannot be known. @default 'deny' */
  readonly namespaceFailurePolicy: NamespaceFailurePolicy;
  /** Timeout of a live namespace look-up on a cache miss. @default 2000 */
  readonly namespaceLookupTimeoutMs: number;
  /** @default 7 MiB */
  readonly maxBodyBytes: number;
  /**
   * On SIGTERM: how long requests are still served while endpoints and kube-proxy catch up
   * (between the handover's two looks, or before the close). @default 5000
   */
  readonly shutdownDelayMs: number;
  /** On SIGTERM: the longest wait for in-flight reviews after the listener closes. @default 20000 */
  readonly shutdownTimeoutMs: number;
  /**
   * On SIGTERM, for a replica behind the Service: the longest wait, serving, for another ready
   * replica to take over, counted from the signal. @default 25000
   */
  readonly shutdownHandoverMs: number;
  /** How often the templates directory is checked for changes (besides file events). @default 5000 */
  readonly templateCheckIntervalMs: number;
  /** pino level. @default 'info' */
  readonly logLevel: string;
  /** The Kubernetes version to serve for; decides over what the cluster reports. */
  readonly kubernetesVersion?: KubernetesVersion;
  /** What a template that would break the namespace's enforced Pod Security level gets. @default 'skip' */
  readonly podSecurityAction: PodSecurityAction;
  /** Write Events for reviews (cluster mode only). @default true */
  readonly events: boolean;
  /** Audit every pod continuously on the leading replica (cluster mode only). @default true */
  readonly audit: boolean;
  /** The leading replica keeps each pod webhook's matchConditions to the pods a template may apply to (cluster mode only). @default true */
  readonly matchConditions: boolean;
  /** GET /debug/cpu-profile on the operations listener answers a CPU profile. @default false */
  readonly profiling: boolean;
  /** The leading replica sets a template's new sidecar images in running pods (templates with `updateStrategy: inPlace`; cluster mode only). @default false */
  readonly inPlaceUpdates: boolean;
  /** Pods updated in place whose sidecars have not yet restarted and become ready, at most, across the cluster. @default 5 */
  readonly inPlaceMaxUnsettled: number;
  /** The MutatingWebhookConfiguration holding the webhooks (its caBundle, its conditions). @default 'sidecar-injector' */
  readonly webhookConfigurationName: string;
  /** Where each candidate's preflight creates its probe pod with dryRun=All (cluster mode); unset: no preflight. */
  readonly rolloutProbeNamespace?: string;
  /** Unhealthy pods of a candidate that halt it (with the preflight). @default 3 */
  readonly rolloutHaltUnhealthyPods: number;
  /** `--rollout-halt-not-ready-ms`: how long a candidate's sidecar may stay not ready before its pod counts as unhealthy. */
  readonly rolloutHaltNotReadyMs: number;
  readonly timeouts: ServerTimeouts;
}

/** The options of `serve`: flags, environment variables, defaults and help (see options.ts). */
export const serveOptions = {
  port: {
    kind: 'string',
    value: 'N',
    env: 'SIDECAR_INJECTOR_PORT',
    default: '8443',
    help: 'HTTPS port of the webhooks (and of everything not given a port below)',
  },
  'metrics-port': {
    kind: 'string',
    value: 'N',
    env: 'SIDECAR_INJECTOR_METRICS_PORT',
    help: 'HTTPS port of /metrics and /status, off the webhook port (the bundled Deployment: 8443)',
  },
  'probe-port': {
    kind: 'string',
    value: 'N',
    env: 'SIDECAR_INJECTOR_PROBE_PORT',
    help: "HTTPS port of /healthz and /readyz for the kubelet's probes, off the webhook port (the bundled Deployment: 8081)",
  },
  host: {
    kind: 'string',
    value: 'ADDR',
    env: 'SIDECAR_INJECTOR_HOST',
    default: '0.0.0.0',
    help: 'listen address (127.0.0.1 with a throw-away development certificate)',
  },
  templates: {
    kind: 'string',
    value: 'DIR',
    env: 'SIDECAR_INJECTOR_TEMPLATES',
    default: 'templates',
    help: 'a folder of SidecarTemplate manifests to serve (a local run); not with --template-source cluster',
  },
  'template-source': {
    kind: 'string',
    value: 'SOURCE',
    env: 'SIDECAR_INJECTOR_TEMPLATE_SOURCE',
    default: 'auto',
    help: "cluster | folder | auto: the cluster's SidecarTemplate objects (watched), or the --templates folder; auto: the cluster in a pod reading the cluster's namespaces without --templates, else the folder",
  },
  'tls-cert': {
    kind: 'string',
    value: 'FILE',
    env: 'SIDECAR_INJECTOR_TLS_CERT',
    help: 'serving certificate (PEM); with neither it nor --tls-key, a throw-away development CA',
  },
  'tls-key': { kind: 'string', value: 'FILE', env: 'SIDECAR_INJECTOR_TLS_KEY', help: 'its private key (PEM)' },
  'client-ca': {
    kind: 'string',
    value: 'FILE',
    env: 'SIDECAR_INJECTOR_CLIENT_CA',
    help: "CA certificates (PEM): reviews are answered only for callers presenting a client certificate one of them signed (the API server's, given in its WebhookAdmission kubeConfigFile); others get 401 before their body is read",
  },
  'tls-secret': {
    kind: 'string',
    value: 'NAME',
    env: 'SIDECAR_INJECTOR_TLS_SECRET',
    help: "self-managed certificates: a CA and the serving certificate kept in this Secret, the CA in the webhooks' caBundle (needs the cluster)",
  },
  'webhook-configuration': {
    kind: 'string',
    value: 'NAME',
    env: 'SIDECAR_INJECTOR_WEBHOOK_CONFIGURATION',
    default: 'sidecar-injector',
    help: 'the MutatingWebhookConfiguration whose caBundle --tls-secret keeps and whose matchConditions --match-conditions keeps',
  },
  service: {
    kind: 'string',
    value: 'NAME',
    env: 'SIDECAR_INJECTOR_SERVICE',
    default: 'sidecar-injector',
    help: "the injector's Service: named in the --tls-secret certificate, and whose endpoints a stopping replica waits on",
  },
  namespace: {
    kind: 'string',
    value: 'NS',
    env: 'SIDECAR_INJECTOR_NAMESPACE',
    help: "the injector's namespace (Secret, Service, lease); else $POD_NAMESPACE, else sidecar-injector",
  },
  'dev-cert-dir': { kind: 'string', value: 'DIR', env: 'SIDECAR_INJECTOR_DEV_CERT_DIR', default: '.dev-certs', help: 'where the development CA is written' },
  'namespace-labels': { kind: 'string', value: 'FILE', env: 'SIDECAR_INJECTOR_NAMESPACE_LABELS', help: 'YAML map: namespace -> labels (local source)' },
  'namespace-label': { kind: 'list', value: 'NS:KEY=VALUE', help: 'one namespace label (repeatable; local source)' },
  'namespace-source': { kind: 'string', value: 'SRC', env: 'SIDECAR_INJECTOR_NAMESPACE_SOURCE', default: 'auto', help: 'auto | local | cluster' },
  kubeconfig: { kind: 'string', value: 'FILE', env: 'SIDECAR_INJECTOR_KUBECONFIG', help: 'cluster source outside a cluster' },
  'namespace-failure-policy': {
    kind: 'string',
    value: 'POLICY',
    env: 'SIDECAR_INJECTOR_NAMESPACE_FAILURE_POLICY',
    default: 'deny',
    help: 'deny | allow, when namespace labels cannot be known',
  },
  'namespace-lookup-timeout-ms': {
    kind: 'string',
    value: 'N',
    env: 'SIDECAR_INJECTOR_NAMESPACE_LOOKUP_TIMEOUT_MS',
    default: '2000',
    help: 'live namespace look-up timeout',
  },
  'kubernetes-version': {
    kind: 'string',
    value: 'X.Y',
    env: 'SIDECAR_INJECTOR_KUBERNETES_VERSION',
    help: 'serve for this Kubernetes version (else learned from the cluster: oldest kubelet, or the API server)',
  },
  'pod-security-action': {
    kind: 'string',
    value: 'ACTION',
    env: 'SIDECAR_INJECTOR_POD_SECURITY_ACTION',
    default: 'skip',
    help: 'skip | deny | inject, for a template that would break the enforced Pod Security level',
  },
  audit: {
    kind: 'string',
    value: 'MODE',
    env: 'SIDECAR_INJECTOR_AUDIT',
    default: 'on',
    help: 'on | off: the leading replica audits every pod (sidecar_injector_pods, SidecarsMissing events; cluster mode)',
  },
  'rollout-probe-namespace': {
    kind: 'string',
    value: 'NS',
    env: 'SIDECAR_INJECTOR_ROLLOUT_PROBE_NAMESPACE',
    help: "preflight each candidate revision here: a dry-run pod create through the cluster's admission chain; a candidate takes no pod before it passes (cluster mode)",
  },
  'rollout-halt-unhealthy-pods': {
    kind: 'string',
    value: 'N',
    env: 'SIDECAR_INJECTOR_ROLLOUT_HALT_UNHEALTHY_PODS',
    default: '3',
    help: 'with --rollout-probe-namespace: a candidate stops taking pods once its unhealthy pods (sidecar crash-looping, restarting, unable to start, or not ready for --rollout-halt-not-ready-ms) and its workloads that cannot create pods reach this many',
  },
  'rollout-halt-not-ready-ms': {
    kind: 'string',
    value: 'MS',
    env: 'SIDECAR_INJECTOR_ROLLOUT_HALT_NOT_READY_MS',
    default: '300000',
    help: "with --rollout-probe-namespace: a pod with the candidate counts as unhealthy once a candidate's sidecar has not been ready this long (10000 to 3600000)",
  },
  'in-place-updates': {
    kind: 'string',
    value: 'MODE',
    env: 'SIDECAR_INJECTOR_IN_PLACE_UPDATES',
    default: 'off',
    help: 'on | off: the leading replica sets the new sidecar images of templates with updateStrategy: inPlace in running pods (needs the in-place-updates component: its RBAC and the policy that bounds it; cluster mode)',
  },
  'in-place-max-unsettled': {
    kind: 'string',
    value: 'N',
    env: 'SIDECAR_INJECTOR_IN_PLACE_MAX_UNSETTLED',
    default: '5',
    help: "with --in-place-updates on: pods updated in place whose sidecars have not yet taken the update up and become ready, at most, across the cluster (1 to 1000; a template's inPlaceMaxUnavailable bounds each workload)",
  },
  profiling: {
    kind: 'string',
    value: 'MODE',
    env: 'SIDECAR_INJECTOR_PROFILING',
    default: 'off',
    help: 'on | off: GET /debug/cpu-profile?seconds=N (1 to 120, default 10) on the metrics port answers a CPU profile of the replica (.cpuprofile); one at a time',
  },
  'match-conditions': {
    kind: 'string',
    value: 'MODE',
    env: 'SIDECAR_INJECTOR_MATCH_CONDITIONS',
    default: 'on',
    help: "on | off: the leading replica keeps each pod webhook's matchConditions to the pods a template may apply to, so that the API server calls no webhook that would do nothing (cluster mode)",
  },
  events: {
    kind: 'string',
    value: 'MODE',
    env: 'SIDECAR_INJECTOR_EVENTS',
    default: 'on',
    help: 'on | off: Events on the workload for injected, skipped and denied pods (cluster mode)',
  },
  'max-body-bytes': { kind: 'string', value: 'N', env: 'SIDECAR_INJECTOR_MAX_BODY_BYTES', default: String(defaultMaxBodyBytes), help: 'request body limit' },
  'log-level': { kind: 'string', value: 'LEVEL', env: 'SIDECAR_INJECTOR_LOG_LEVEL', default: 'info', help: 'pino level' },
  'shutdown-delay-ms': {
    kind: 'string',
    value: 'N',
    env: 'SIDECAR_INJECTOR_SHUTDOWN_DELAY_MS',
    default: '5000',
    help: 'serving while endpoints catch up, before closing',
  },
  'shutdown-timeout-ms': { kind: 'string', value: 'N', env: 'SIDECAR_INJECTOR_SHUTDOWN_TIMEOUT_MS', default: '20000', help: 'wait for in-flight reviews' },
  'shutdown-handover-ms': {
    kind: 'string',
    value: 'N',
    env: 'SIDECAR_INJECTOR_SHUTDOWN_HANDOVER_MS',
    default: '25000',
    help: 'serving, wait for another replica to be ready behind the Service',
  },
  'template-check-interval-ms': {
    kind: 'string',
    value: 'N',
    env: 'SIDECAR_INJECTOR_TEMPLATE_CHECK_INTERVAL_MS',
    default: '5000',
    help: 'templates re-read besides file events',
  },
  'headers-timeout-ms': {
    kind: 'string',
    value: 'N',
    env: 'SIDECAR_INJECTOR_HEADERS_TIMEOUT_MS',
    default: String(defaultTimeouts.headersTimeoutMs),
    help: 'time to receive headers',
  },
  'request-timeout-ms': {
    kind: 'string',
    value: 'N',
    env: 'SIDECAR_INJECTOR_REQUEST_TIMEOUT_MS',
    default: String(defaultTimeouts.requestTimeoutMs),
    help: 'time to receive a request',
  },
  'keep-alive-timeout-ms': {
    kind: 'string',
    value: 'N',
    env: 'SIDECAR_INJECTOR_KEEP_ALIVE_TIMEOUT_MS',
    default: String(defaultTimeouts.keepAliveTimeoutMs),
    help: 'idle kept-alive connections',
  },
} as const satisfies OptionTable;

const logLevels = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/** The usage text of `serve`. */
export const serveUsage = usageText('serve [options]', serveOptions, 'Flags win over environment variables.\n');

/**
 * Builds the configuration from the environment and `serve`'s arguments. Throws ConfigError
 * listing every problem.
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>, argv: readonly string[]): Config {
  const problems: string[] = [];
  const { values } = parseOptions('serve', serveOptions, argv, env);
  type Name = keyof typeof serveOptions;
  const option = (name: Name): string | undefined => values[name] as string | undefined;
  const integer = (name: Name, fallback: number, min: number, max: number): number => {
    const raw = option(name);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!/^\d+$/.test(raw.trim()) || n < min || n > max) {
      const spec: OptionSpec = serveOptions[name];
      problems.push(`--${name}${spec.env ? ` / ${spec.env}` : ''}: expected a whole number from ${min} to ${max} (got ${JSON.stringify(raw).slice(0, 80)})`);
      return fallback;
    }
    return n;
  };
  const port = integer('port', 8443, 0, 65535);
  // Each its own listener: a port given twice would make the second listen fail at start.
  const separatePort = (name: 'metrics-port' | 'probe-port'): number | undefined => {
    if (option(name) === undefined) return undefined;
    const n = integer(name, 0, 0, 65535);
    if (n !== 0 && n === port)
      problems.push(`--${name}: ${n} is the webhook port (--port); give it a port of its own, or leave it unset to serve on the webhook port`);
    return n;
  };
  const metricsPort = separatePort('metrics-port');
  const probePort = separatePort('probe-port');
  if (metricsPort !== undefined && metricsPort !== 0 && metricsPort === probePort)
    problems.push(`--probe-port: ${probePort} is the metrics port (--metrics-port); give each its own`);
  const maxBodyBytes = integer('max-body-bytes', defaultMaxBodyBytes, 1024, 64 * 1024 * 1024);
  const timeouts: ServerTimeouts = {
    headersTimeoutMs: integer('headers-timeout-ms', defaultTimeouts.headersTimeoutMs, 100, 600_000),
    requestTimeoutMs: integer('request-timeout-ms', defaultTimeouts.requestTimeoutMs, 100, 600_000),
    keepAliveTimeoutMs: integer('keep-alive-timeout-ms', defaultTimeouts.keepAliveTimeoutMs, 100, 3_600_000),
  };
  if (timeouts.requestTimeoutMs < timeouts.headersTimeoutMs) problems.push('--request-timeout-ms must be at least --headers-timeout-ms');
  const kubeconfig = option('kubeconfig');
  const sourceOption = option('namespace-source') ?? 'auto';
  if (!['auto', 'local', 'cluster'].includes(sourceOption))
    problems.push(`--namespace-source: expected auto, local or cluster (got ${JSON.stringify(sourceOption)})`);
  const inCluster = Boolean(env.KUBERNETES_SERVICE_HOST);
  const namespaceSource = sourceOption === 'auto' ? (inCluster || kubeconfig ? 'cluster' : 'local') : (sourceOption as 'local' | 'cluster');
  const namespaceFailurePolicy = option('namespace-failure-policy') ?? 'deny';
  if (namespaceFailurePolicy !== 'deny' && namespaceFailurePolicy !== 'allow') {
    problems.push(`--namespace-failure-policy: expected deny or allow (got ${JSON.stringify(namespaceFailurePolicy)})`);
  }
  const namespaceLookupTimeoutMs = integer('namespace-lookup-timeout-ms', 2000, 50, 30_000);
  const shutdownDelayMs = integer('shutdown-delay-ms', 5000, 0, 600_000);
  const shutdownTimeoutMs = integer('shutdown-timeout-ms', 20_000, 100, 600_000);
  const shutdownHandoverMs = integer('shutdown-handover-ms', 25_000, 0, 600_000);
  const templateCheckIntervalMs = integer('template-check-interval-ms', 5000, 100, 3_600_000);
  const logLevel = option('log-level') ?? 'info';
  if (!logLevels.has(logLevel)) problems.push(`--log-level: expected one of ${[...logLevels].join(', ')} (got ${JSON.stringify(logLevel)})`);
  const tlsCertFile = option('tls-cert');
  const tlsKeyFile = option('tls-key');
  if ((tlsCertFile === undefined) !== (tlsKeyFile === undefined)) problems.push('--tls-cert and --tls-key go together: give both or neither');
  const clientCaFile = option('client-ca');
  if (clientCaFile === '') problems.push('--client-ca: expected a file of CA certificates (PEM)');
  const serviceName = option('service') ?? 'sidecar-injector';
  const selfManaged = selfManagedOptions(option, serviceName, { inCluster, kubeconfig, tlsFiles: tlsCertFile !== undefined }, problems);
  if (!selfManaged && !isDns1123Label(serviceName)) problems.push(serviceProblem(serviceName));
  const namespace = option('namespace') ?? (env.POD_NAMESPACE || 'sidecar-injector');
  if (!isDns1123Label(namespace)) problems.push(`--namespace / POD_NAMESPACE: expected a DNS-1123 label (got ${JSON.stringify(namespace).slice(0, 80)})`);
  // Null-prototype maps: names come from the command line.
  const namespaceLabels: Record<string, Record<string, string>> = Object.create(null);
  for (const flag of (values['namespace-label'] as string[] | undefined) ?? []) {
    const parsed = parseNamespaceLabelFlag(flag);
    if (typeof parsed === 'string') problems.push(parsed);
    else (namespaceLabels[parsed.namespace] ??= Object.create(null) as Record<string, string>)[parsed.key] = parsed.value;
  }
  const versionText = option('kubernetes-version');
  const kubernetesVersion = versionText === undefined ? undefined : parseKubernetesVersion(versionText);
  if (versionText !== undefined && !kubernetesVersion) problems.push(kubernetesVersionProblem(versionText));
  const podSecurityAction = option('pod-security-action') ?? 'skip';
  const actionProblem = podSecurityActionProblem(podSecurityAction);
  if (actionProblem) problems.push(actionProblem);
  const audit = onOff('audit', option('audit'), problems);
  const events = onOff('events', option('events'), problems);
  const matchConditions = onOff('match-conditions', option('match-conditions'), problems);
  const profiling = option('profiling') === undefined ? false : onOff('profiling', option('profiling'), problems);
  const inPlaceUpdates = option('in-place-updates') === undefined ? false : onOff('in-place-updates', option('in-place-updates'), problems);
  if (inPlaceUpdates && namespaceSource !== 'cluster')
    problems.push('--in-place-updates needs the cluster: the leading replica updates running pods through the API server (--namespace-source cluster)');
  const unsettledText = option('in-place-max-unsettled') ?? '5';
  const inPlaceMaxUnsettled = Number(unsettledText);
  if (!/^[0-9]+$/.test(unsettledText) || inPlaceMaxUnsettled < 1 || inPlaceMaxUnsettled > 1000)
    problems.push(`--in-place-max-unsettled: expected a whole number from 1 to 1000 (got ${JSON.stringify(unsettledText).slice(0, 40)})`);
  const webhookConfigurationName = option('webhook-configuration') ?? 'sidecar-injector';
  if (!selfManaged && !isDns1123Subdomain(webhookConfigurationName))
    problems.push(`--webhook-configuration: expected a DNS-1123 subdomain (got ${JSON.stringify(webhookConfigurationName).slice(0, 80)})`);
  const rolloutProbeNamespace = option('rollout-probe-namespace');
  if (rolloutProbeNamespace !== undefined && !isDns1123Label(rolloutProbeNamespace))
    problems.push(`--rollout-probe-namespace: expected a namespace name (got ${JSON.stringify(rolloutProbeNamespace).slice(0, 80)})`);
  else if (rolloutProbeNamespace !== undefined && namespaceSource !== 'cluster')
    problems.push('--rollout-probe-namespace needs the cluster: the preflight creates its probe pod through the API server (--namespace-source cluster)');
  const haltText = option('rollout-halt-unhealthy-pods') ?? '3';
  const rolloutHaltUnhealthyPods = Number(haltText);
  if (!/^[0-9]+$/.test(haltText) || rolloutHaltUnhealthyPods < 1 || rolloutHaltUnhealthyPods > 100_000)
    problems.push(`--rollout-halt-unhealthy-pods: expected a whole number from 1 to 100000 (got ${JSON.stringify(haltText).slice(0, 40)})`);
  const notReadyText = option('rollout-halt-not-ready-ms') ?? '300000';
  const rolloutHaltNotReadyMs = Number(notReadyText);
  if (!/^[0-9]+$/.test(notReadyText) || rolloutHaltNotReadyMs < 10_000 || rolloutHaltNotReadyMs > 3_600_000)
    problems.push(`--rollout-halt-not-ready-ms: expected milliseconds from 10000 to 3600000 (got ${JSON.stringify(notReadyText).slice(0, 40)})`);
  const templateSourceOption = option('template-source') ?? 'auto';
  if (!['auto', 'cluster', 'folder'].includes(templateSourceOption))
    problems.push(`--template-source: expected cluster, folder or auto (got ${JSON.stringify(templateSourceOption).slice(0, 80)})`);
  const templateSource =
    templateSourceOption === 'auto'
      ? inCluster && namespaceSource === 'cluster' && option('templates') === undefined
        ? 'cluster'
        : 'folder'
      : (templateSourceOption as 'cluster' | 'folder');
  if (templateSource === 'cluster' && option('templates') !== undefined)
    problems.push('--templates DIR and --template-source cluster: the templates come from one place; drop one');
  if (templateSource === 'cluster' && namespaceSource !== 'cluster')
    problems.push('--template-source cluster needs the cluster: SidecarTemplates are read from the API server (--namespace-source cluster, or --kubeconfig)');
  if (problems.length > 0) throw new ConfigError(problems);
  const namespaceLabelsFile = option('namespace-labels');
  return Object.freeze({
    // A throw-away development certificate (no --tls-cert, no --tls-secret) is for this machine only.
    host: option('host') ?? (tlsCertFile === undefined && !selfManaged ? '127.0.0.1' : '0.0.0.0'),
    port,
    ...(metricsPort !== undefined ? { metricsPort } : {}),
    ...(probePort !== undefined ? { probePort } : {}),
    templatesDir: option('templates') ?? 'templates',
    templateSource,
    devCertDir: option('dev-cert-dir') ?? '.dev-certs',
    ...(tlsCertFile !== undefined && tlsKeyFile !== undefined ? { tlsCertFile, tlsKeyFile } : {}),
    ...(clientCaFile !== undefined ? { clientCaFile } : {}),
    ...(selfManaged ? { selfManaged: Object.freeze(selfManaged) } : {}),
    namespace,
    serviceName,
    replica: env.POD_NAME || env.HOSTNAME || `sidecar-injector-${process.pid}`,
    inPod: Boolean(env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT),
    ...(namespaceLabelsFile !== undefined ? { namespaceLabelsFile } : {}),
    namespaceLabels,
    namespaceSource,
    ...(kubeconfig !== undefined ? { kubeconfig } : {}),
    namespaceFailurePolicy: namespaceFailurePolicy as NamespaceFailurePolicy,
    namespaceLookupTimeoutMs,
    maxBodyBytes,
    shutdownDelayMs,
    shutdownTimeoutMs,
    shutdownHandoverMs,
    templateCheckIntervalMs,
    logLevel,
    ...(kubernetesVersion ? { kubernetesVersion } : {}),
    podSecurityAction: podSecurityAction as PodSecurityAction,
    events,
    audit,
    matchConditions,
    profiling,
    inPlaceUpdates,
    inPlaceMaxUnsettled,
    webhookConfigurationName,
    ...(rolloutProbeNamespace !== undefined ? { rolloutProbeNamespace } : {}),
    rolloutHaltUnhealthyPods,
    rolloutHaltNotReadyMs,
    timeouts: Object.freeze(timeouts),
  });
}

/** The problem with a `--kubernetes-version` that is not a version. */
export function kubernetesVersionProblem(text: string): string {
  return `--kubernetes-version: expected a version such as 1.28 or v1.29.3 (got ${JSON.stringify(text).slice(0, 80)})`;
}

const serviceProblem = (name: string) => `--service: expected a Service name, a DNS-1123 label (got ${JSON.stringify(name).slice(0, 80)})`;

/** The self-managed certificate options, checked; undefined without --tls-secret. */
function selfManagedOptions(
  option: (name: 'tls-secret' | 'webhook-configuration') => string | undefined,
  serviceName: string,
  context: { inCluster: boolean; kubeconfig: string | undefined; tlsFiles: boolean },
  problems: string[],
): { secretName: string; webhookConfigurationName: string; serviceName: string } | undefined {
  const secretName = option('tls-secret');
  if (secretName === undefined) return undefined;
  const webhookConfigurationName = option('webhook-configuration') ?? 'sidecar-injector';
  const shown = (value: string) => JSON.stringify(value).slice(0, 80);
  if (!isDns1123Subdomain(secretName)) problems.push(`--tls-secret: expected a Secret name, a DNS-1123 subdomain (got ${shown(secretName)})`);
  if (!isDns1123Subdomain(webhookConfigurationName))
    problems.push(`--webhook-configuration: expected a DNS-1123 subdomain (got ${shown(webhookConfigurationName)})`);
  // It becomes the certificate's DNS names, so it must be a Service name: a DNS-1123 label.
  if (!isDns1123Label(serviceName)) problems.push(serviceProblem(serviceName));
  if (context.tlsFiles) problems.push('--tls-secret and --tls-cert/--tls-key are two sources of the serving certificate: give one');
  if (!context.inCluster && !context.kubeconfig) problems.push('--tls-secret needs the cluster: run in a pod, or give --kubeconfig');
  return { secretName, webhookConfigurationName, serviceName };
}

/** `on`/`off` (or `true`/`false`) → a boolean; default on; anything else is a problem. */
function onOff(flag: string, value: string | undefined, problems: string[]): boolean {
  if (value === undefined || value === 'on' || value === 'true') return true;
  if (value === 'off' || value === 'false') return false;
  problems.push(`--${flag}: expected on or off (got ${JSON.stringify(value).slice(0, 40)})`);
  return true;
}

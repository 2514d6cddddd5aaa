/**
 * Configuration: the only reader of the environment and the command line. Parses, validates
 * (collecting every problem), applies defaults and freezes.
 */
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ConfigError } from './errors.js';
import { defaultMaxBodyBytes } from './http/body.js';
import { defaultTimeouts, type ServerTimeouts } from './server.js';
import type { NamespaceFailurePolicy } from './errors.js';
import { parseNamespaceLabelFlag } from './namespaces/source.js';

/** Everything `serve` needs to know. */
export interface Config {
  /** @default '0.0.0.0' */
  readonly host: string;
  /** @default 8443 */
  readonly port: number;
  /** Directory of template files. @default 'templates' */
  readonly templatesDir: string;
  /** PEM files of the serving certificate; both or neither. Neither → a throw-away development CA. */
  readonly tlsCertFile?: string;
  readonly tlsKeyFile?: string;
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
   * On SIGTERM: how long readiness is false while requests are still served, so that endpoints
   * stop sending traffic before the listener closes. @default 5000
   */
  readonly shutdownDelayMs: number;
  /** On SIGTERM: the longest wait for in-flight reviews after the listener closes. @default 20000 */
  readonly shutdownTimeoutMs: number;
  /** How often the templates directory is checked for changes (besides file events). @default 5000 */
  readonly templateCheckIntervalMs: number;
  /** pino level. @default 'info' */
  readonly logLevel: string;
  readonly timeouts: ServerTimeouts;
}

/** Environment variable for each option (flags win over the environment). */
export const envNames = {
  host: 'SIDECAR_INJECTOR_HOST',
  port: 'SIDECAR_INJECTOR_PORT',
  templates: 'SIDECAR_INJECTOR_TEMPLATES',
  'tls-cert': 'SIDECAR_INJECTOR_TLS_CERT',
  'tls-key': 'SIDECAR_INJECTOR_TLS_KEY',
  'dev-cert-dir': 'SIDECAR_INJECTOR_DEV_CERT_DIR',
  'namespace-labels': 'SIDECAR_INJECTOR_NAMESPACE_LABELS',
  'namespace-source': 'SIDECAR_INJECTOR_NAMESPACE_SOURCE',
  kubeconfig: 'SIDECAR_INJECTOR_KUBECONFIG',
  'namespace-failure-policy': 'SIDECAR_INJECTOR_NAMESPACE_FAILURE_POLICY',
  'namespace-lookup-timeout-ms': 'SIDECAR_INJECTOR_NAMESPACE_LOOKUP_TIMEOUT_MS',
  'max-body-bytes': 'SIDECAR_INJECTOR_MAX_BODY_BYTES',
  'log-level': 'SIDECAR_INJECTOR_LOG_LEVEL',
  'shutdown-delay-ms': 'SIDECAR_INJECTOR_SHUTDOWN_DELAY_MS',
  'shutdown-timeout-ms': 'SIDECAR_INJECTOR_SHUTDOWN_TIMEOUT_MS',
  'template-check-interval-ms': 'SIDECAR_INJECTOR_TEMPLATE_CHECK_INTERVAL_MS',
  'headers-timeout-ms': 'SIDECAR_INJECTOR_HEADERS_TIMEOUT_MS',
  'request-timeout-ms': 'SIDECAR_INJECTOR_REQUEST_TIMEOUT_MS',
  'keep-alive-timeout-ms': 'SIDECAR_INJECTOR_KEEP_ALIVE_TIMEOUT_MS',
} as const;

const logLevels = new Set(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']);

/** The usage text of `serve`. */
export const serveUsage = `Usage: sidecar-injector serve [options]

  --port N                     HTTPS port (default 8443)            ${envNames.port}
  --host ADDR                  listen address (default 0.0.0.0)     ${envNames.host}
  --templates DIR              template directory (default templates) ${envNames.templates}
  --tls-cert FILE              serving certificate (PEM)            ${envNames['tls-cert']}
  --tls-key FILE               its private key (PEM)                ${envNames['tls-key']}
                               neither: a throw-away development CA and certificate
  --dev-cert-dir DIR           where that CA is written (default .dev-certs) ${envNames['dev-cert-dir']}
  --namespace-labels FILE      YAML map: namespace -> labels        ${envNames['namespace-labels']}
  --namespace-label NS:K=V     one namespace label (repeatable)
  --namespace-source SRC       auto | local | cluster (default auto)  ${envNames['namespace-source']}
  --kubeconfig FILE            cluster source outside a cluster     ${envNames.kubeconfig}
  --namespace-failure-policy P deny | allow (default deny)          ${envNames['namespace-failure-policy']}
  --namespace-lookup-timeout-ms N  live look-up timeout (default 2000) ${envNames['namespace-lookup-timeout-ms']}
  --max-body-bytes N           body limit (default 7340032)         ${envNames['max-body-bytes']}
  --log-level LEVEL            pino level (default info)            ${envNames['log-level']}
  --shutdown-delay-ms N        unready before closing (default 5000) ${envNames['shutdown-delay-ms']}
  --shutdown-timeout-ms N      wait for in-flight (default 20000)   ${envNames['shutdown-timeout-ms']}
  --template-check-interval-ms N  (default 5000)                    ${envNames['template-check-interval-ms']}
  --headers-timeout-ms N       (default 10000)                      ${envNames['headers-timeout-ms']}
  --request-timeout-ms N       (default 10000)                      ${envNames['request-timeout-ms']}
  --keep-alive-timeout-ms N    (default 120000)                     ${envNames['keep-alive-timeout-ms']}
`;

/** Parsed flags: strings, repeated strings, booleans. */
export type Flags = Record<string, string | string[] | boolean | undefined>;

/** Parses a command's flags strictly (no positionals); an unknown or malformed flag is a ConfigError. */
export function parseFlags(argv: readonly string[], options: NonNullable<ParseArgsConfig['options']>): Flags {
  try {
    return parseArgs({ args: [...argv], options, strict: true, allowPositionals: false }).values as Flags;
  } catch (err) {
    throw new ConfigError([(err as Error).message]);
  }
}

/**
 * Builds the configuration from the environment and `serve`'s arguments. Throws ConfigError
 * listing every problem.
 */
export function loadConfig(env: Readonly<Record<string, string | undefined>>, argv: readonly string[]): Config {
  const problems: string[] = [];
  const values = parseFlags(argv, {
    host: { type: 'string' },
    port: { type: 'string' },
    templates: { type: 'string' },
    'tls-cert': { type: 'string' },
    'tls-key': { type: 'string' },
    'dev-cert-dir': { type: 'string' },
    'namespace-labels': { type: 'string' },
    'namespace-label': { type: 'string', multiple: true },
    'namespace-source': { type: 'string' },
    kubeconfig: { type: 'string' },
    'namespace-failure-policy': { type: 'string' },
    'namespace-lookup-timeout-ms': { type: 'string' },
    'max-body-bytes': { type: 'string' },
    'log-level': { type: 'string' },
    'shutdown-delay-ms': { type: 'string' },
    'shutdown-timeout-ms': { type: 'string' },
    'template-check-interval-ms': { type: 'string' },
    'headers-timeout-ms': { type: 'string' },
    'request-timeout-ms': { type: 'string' },
    'keep-alive-timeout-ms': { type: 'string' },
  });
  const option = (name: keyof typeof envNames): string | undefined => {
    const flag = values[name];
    if (typeof flag === 'string') return flag;
    const fromEnv = env[envNames[name]];
    return fromEnv === undefined || fromEnv === '' ? undefined : fromEnv;
  };
  const integer = (name: keyof typeof envNames, fallback: number, min: number, max: number): number => {
    const raw = option(name);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!/^\d+$/.test(raw.trim()) || n < min || n > max) {
      problems.push(`--${name} / ${envNames[name]}: expected a whole number from ${min} to ${max} (got ${JSON.stringify(raw)})`);
      return fallback;
    }
    return n;
  };
  const port = integer('port', 8443, 0, 65535);
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
  const templateCheckIntervalMs = integer('template-check-interval-ms', 5000, 100, 3_600_000);
  const logLevel = option('log-level') ?? 'info';
  if (!logLevels.has(logLevel)) problems.push(`--log-level: expected one of ${[...logLevels].join(', ')} (got ${JSON.stringify(logLevel)})`);
  const tlsCertFile = option('tls-cert');
  const tlsKeyFile = option('tls-key');
  if ((tlsCertFile === undefined) !== (tlsKeyFile === undefined)) problems.push('--tls-cert and --tls-key go together: give both or neither');
  const namespaceLabels: Record<string, Record<string, string>> = {};
  for (const flag of (values['namespace-label'] as string[] | undefined) ?? []) {
    const parsed = parseNamespaceLabelFlag(flag);
    if (typeof parsed === 'string') problems.push(parsed);
    else (namespaceLabels[parsed.namespace] ??= {})[parsed.key] = parsed.value;
  }
  if (problems.length > 0) throw new ConfigError(problems);
  const namespaceLabelsFile = option('namespace-labels');
  return Object.freeze({
    host: option('host') ?? '0.0.0.0',
    port,
    templatesDir: option('templates') ?? 'templates',
    devCertDir: option('dev-cert-dir') ?? '.dev-certs',
    ...(tlsCertFile !== undefined && tlsKeyFile !== undefined ? { tlsCertFile, tlsKeyFile } : {}),
    ...(namespaceLabelsFile !== undefined ? { namespaceLabelsFile } : {}),
    namespaceLabels,
    namespaceSource,
    ...(kubeconfig !== undefined ? { kubeconfig } : {}),
    namespaceFailurePolicy: namespaceFailurePolicy as NamespaceFailurePolicy,
    namespaceLookupTimeoutMs,
    maxBodyBytes,
    shutdownDelayMs,
    shutdownTimeoutMs,
    templateCheckIntervalMs,
    logLevel,
    timeouts: Object.freeze(timeouts),
  });
}

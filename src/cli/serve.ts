/**
 * `sidecar-injector serve`: composes config → logger → templates → namespace source → app →
 * server, and stops cleanly on SIGTERM/SIGINT.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { parse as parseYaml } from 'yaml';
import { createApp } from '../app.js';
import { loadConfig, type Config } from '../config.js';
import { ConfigError } from '../errors.js';
import { KubeConfig } from '@kubernetes/client-node';
import { ClusterNamespaceSource } from '../selection/cluster-namespaces.js';
import { createLocalNamespaceSource, parseNamespaceLabelMap, type NamespaceLabelSource } from '../selection/namespace-labels.js';
import { startServer, type RunningServer } from '../server.js';
import { loadTemplateDir } from '../templates/load.js';
import { createCertificates } from '../tls/certificates.js';
import { CertificateReloader, checkKeyPair, readKeyPair, type KeyPair } from '../tls/reloader.js';

/** Builds the local namespace source from the labels file and the flags (flags win). */
export async function loadLocalNamespaceSource(config: Config): Promise<NamespaceLabelSource> {
  const merged: Record<string, Record<string, string>> = {};
  if (config.namespaceLabelsFile) {
    let text: string;
    try {
      text = await readFile(config.namespaceLabelsFile, 'utf8');
    } catch (err) {
      throw new ConfigError([`--namespace-labels: cannot read ${config.namespaceLabelsFile}: ${(err as Error).message}`]);
    }
    let doc: unknown;
    try {
      doc = parseYaml(text);
    } catch (err) {
      throw new ConfigError([`--namespace-labels: ${config.namespaceLabelsFile} is not valid YAML: ${(err as Error).message.split('\n')[0]}`]);
    }
    const { map, problems } = parseNamespaceLabelMap(doc, config.namespaceLabelsFile);
    if (problems.length > 0) throw new ConfigError(problems);
    Object.assign(merged, map);
  }
  for (const [namespace, labels] of Object.entries(config.namespaceLabels)) merged[namespace] = { ...(merged[namespace] ?? {}), ...labels };
  return createLocalNamespaceSource(merged);
}

/** The namespace label source the configuration asks for; a cluster source is started. */
async function createNamespaceSource(config: Config, log: Logger): Promise<NamespaceLabelSource & { stop?: () => void }> {
  if (config.namespaceSource === 'local') return loadLocalNamespaceSource(config);
  const kubeConfig = new KubeConfig();
  try {
    if (config.kubeconfig) kubeConfig.loadFromFile(config.kubeconfig);
    else kubeConfig.loadFromCluster();
  } catch (err) {
    throw new ConfigError([`cannot load the Kubernetes client configuration: ${(err as Error).message}`]);
  }
  if (!kubeConfig.getCurrentCluster()?.server) throw new ConfigError(['the Kubernetes client configuration names no API server']);
  const source = new ClusterNamespaceSource({
    kubeConfig,
    log: log.child({ component: 'namespaces' }),
    failurePolicy: config.namespaceFailurePolicy,
    lookupTimeoutMs: config.namespaceLookupTimeoutMs,
  });
  source.start();
  return source;
}

/** The serving key pair: from files (checked to match), or a throw-away development CA. */
async function loadTls(config: Config, log: Logger): Promise<KeyPair> {
  if (config.tlsCertFile && config.tlsKeyFile) {
    try {
      return await readKeyPair(config.tlsCertFile, config.tlsKeyFile);
    } catch (err) {
      throw new ConfigError([`cannot use the TLS certificate and key: ${(err as Error).message}`]);
    }
  }
  const bundle = await createCertificates(['localhost'], ['127.0.0.1', '::1'], 7);
  await mkdir(config.devCertDir, { recursive: true });
  const caFile = join(config.devCertDir, 'ca.crt');
  await writeFile(caFile, bundle.caCert);
  log.warn({ caFile }, 'no --tls-cert/--tls-key given: serving a throw-away development certificate for localhost and 127.0.0.1; trust it with curl --cacert');
  return checkKeyPair(bundle.cert, bundle.key);
}

/** Runs the server until a signal stops it. Resolves with the running server (for tests). */
export async function serve(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): Promise<RunningServer> {
  const config = loadConfig(env, argv);
  const log = pino({ level: config.logLevel, base: { service: 'sidecar-injector' } });
  const templates = await loadTemplateDir(config.templatesDir);
  const namespaces = await createNamespaceSource(config, log);
  const tls = await loadTls(config, log);
  const app = createApp({
    log,
    maxBodyBytes: config.maxBodyBytes,
    templates: () => templates,
    namespaces,
    isReady: () => namespaces.isReady(),
  });
  const running = await startServer(app.callback(), { host: config.host, port: config.port, key: tls.key, cert: tls.cert, timeouts: config.timeouts });
  log.info({ notAfter: tls.notAfter.toISOString(), fingerprint256: tls.fingerprint256 }, 'serving certificate');
  let reloader: CertificateReloader | undefined;
  if (config.tlsCertFile && config.tlsKeyFile) {
    // A Secret update swaps the mounted files: new handshakes get the new pair, open connections keep theirs.
    reloader = new CertificateReloader(config.tlsCertFile, config.tlsKeyFile, tls, (pair) => running.server.setSecureContext({ key: pair.key, cert: pair.cert }));
    reloader.on('reload', (pair: KeyPair) => log.info({ notAfter: pair.notAfter.toISOString(), fingerprint256: pair.fingerprint256 }, 'serving certificate reloaded'));
    reloader.on('error', (err: Error) => log.warn({ err: err.message }, 'serving certificate files hold no valid pair; keeping the current one'));
    reloader.start();
  }
  log.info(
    {
      port: running.port,
      host: config.host,
      templates: templates.templates.map((t) => `${t.name}@${t.hash}`),
      namespaceSource: namespaces.kind,
      ...(namespaces.kind === 'cluster' ? { namespaceFailurePolicy: config.namespaceFailurePolicy } : {}),
    },
    'listening',
  );
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    namespaces.stop?.();
    reloader?.stop();
    void running.close().then(() => process.exit(0));
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  return running;
}

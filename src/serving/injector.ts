/**
 * The running injector, composed: the template store, the cluster's view (namespace labels, the
 * version, Events), the rollout controller, the serving certificate and the HTTPS server, and on
 * the elected replica the continuous audit — each a runnable the one manager starts in order
 * and stops in reverse (runtime/manager.ts). `/readyz` and `/status` are gathered from them.
 */
import type { Logger } from 'pino';
import { createApp } from '../app.js';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import { LabelKeys, LabelValues } from '../k8s/keys.js';
import { Liveness } from '../liveness.js';
import { createMetrics, type Metrics } from '../metrics.js';
import { createLocalNamespaceSource } from '../namespaces/source.js';
import { admitPod } from '../pipeline/admit.js';
import { checkTemplateFiles, samplePod } from '../pipeline/template-check.js';
import { servingReviewer } from '../reviewer.js';
import { Manager } from '../runtime/manager.js';
import type { Runnable } from '../runtime/runnable.js';
import type { LeaderElector } from '../kube-api/lease.js';
import { startServer, type RunningServer } from '../server.js';
import type { TemplateSet } from '../templates/set.js';
import { TemplateStore } from '../templates/store.js';
import { ConfigError } from '../errors.js';
import { readCaCertificates } from '../tls/certificates.js';
import { ServingCertificate } from './certificate.js';
import { createClusterView } from './cluster.js';

/** The injector: made, then started; stopped by `shutdown` at any time (during the start too). */
export interface Injector {
  /** Starts every runnable in order; resolves with the listening server, or undefined when a shutdown came first. Rejects, with what started stopped, when a part cannot start. */
  start(): Promise<RunningServer | undefined>;
  /** Readiness false, wait the shutdown delay, close, wait for in-flight reviews (bounded); then every other part. */
  shutdown(reason: string): Promise<void>;
}

/** The template store as a source: measured, logged, and checked as `check` checks. */
async function templateSource(config: Config, log: Logger, metrics: Metrics): Promise<{ store: TemplateStore; runnable: Runnable }> {
  // The very checks `sidecar-injector check` runs, at start and on every reload: a set that
  // check refuses (a containerPort rendered as a string, say) would fail every pod creation.
  // An empty directory is an empty set: a fresh install serves no sidecar until templates arrive.
  const store = await TemplateStore.load(
    config.templatesDir,
    (files, dir) => checkTemplateFiles(files, dir, {}, { allowEmpty: true }),
    config.templateCheckIntervalMs,
  );
  const measure = () => {
    metrics.templates.set(store.current().templates.length);
    if (store.current().templates.length === 0) log.warn({ dir: config.templatesDir }, 'no templates: no pod gets a sidecar until templates are added');
  };
  metrics.templateGeneration.set(store.generation);
  metrics.templateSetCurrent.set(1);
  measure();
  store.on('reload', () => {
    metrics.templateGeneration.set(store.generation);
    metrics.templateSetCurrent.set(1);
    log.info(store.status(), 'templates reloaded');
    measure();
  });
  store.on('rejected', (err: Error) => {
    metrics.templateReloadFailures.inc();
    metrics.templateSetCurrent.set(0);
    log.error({ err: err.message, keptGeneration: store.generation }, 'templates on disk refused; the last good set stays in use');
  });
  return { store, runnable: { name: 'templates', start: () => store.start(), stop: () => store.stop(), status: () => store.status() } };
}

/** The Lease of the one leader election, in the injector's namespace. */
const leaseName = 'sidecar-injector-leader';

/** Makes the injector's runnables (reading the templates and the cluster's configuration); nothing runs until `start()`. */
/** The CA certificates of --client-ca, or a ConfigError saying what is wrong with the file. */
async function readClientCa(file: string): Promise<string> {
  try {
    return await readCaCertificates(file);
  } catch (err) {
    throw new ConfigError([`--client-ca: ${(err as Error).message}`]);
  }
}

export async function createInjector(config: Config, log: Logger, clock: Clock): Promise<Injector> {
  const clientCa = config.clientCaFile === undefined ? undefined : await readClientCa(config.clientCaFile);
  const metrics = createMetrics();
  const templates = await templateSource(config, log, metrics);
  const view = await createClusterView(config, log, metrics, clock);
  const { namespaces } = view;

  // Safe rollout: candidates take pods only after their preflight through the cluster's admission chain.
  const rollout =
    config.rolloutProbeNamespace && view.cluster
      ? new (await import('../rollout/controller.js')).RolloutController({
          namespace: config.rolloutProbeNamespace,
          haltAfter: config.rolloutHaltUnhealthyPods,
          kubeConfig: view.cluster.kubeConfig,
          templates: templates.store,
          log,
          metrics,
          clock,
          ...(config.templatesConfigMap ? { configMap: config.templatesConfigMap } : {}),
          instance: config.replica,
        })
      : undefined;
  // The set in force: the templates on disk, with candidates that have not passed their preflight stopped.
  const inForce = (): TemplateSet => (rollout ? rollout.gate(templates.store.current()) : templates.store.current());

  // The one leader election: the elected replica writes the certificates (self-managed) and runs
  // the continuous audit; every replica serves.
  const kubeConfig =
    view.cluster?.kubeConfig ??
    (config.selfManaged ? await (await import('../kube-api/kubeconfig.js')).loadKubeConfig(config.kubeconfig, { inPod: config.inPod }) : undefined);
  const auditing = config.audit && view.cluster !== undefined;
  // Loaded only when there is an election: a local run needs no part of the Kubernetes client.
  let election: LeaderElector | undefined;
  if (kubeConfig && (auditing || config.selfManaged)) {
    const { LeaderElector } = await import('../kube-api/lease.js');
    election = new LeaderElector({
      kubeConfig,
      log: log.child({ component: 'leader' }),
      namespace: config.namespace,
      name: leaseName,
      identity: config.replica,
      clock,
    });
  }
  const leaderOnly: Runnable[] = [];
  if (auditing && view.cluster && election) {
    const { ContinuousAudit } = await import('../audit/continuous.js');
    const cluster = view.cluster;
    const events = view.events;
    const audit = new ContinuousAudit({
      kubeConfig: cluster.kubeConfig,
      log: log.child({ component: 'audit' }),
      templates: inForce,
      namespaceLabels: (namespace) => cluster.namespaces.current().get(namespace),
      namespaces: cluster.namespaces,
      gauge: metrics.pods,
      ...(events ? { onMissing: (event) => events.record(event) } : {}),
      // The auditor decides as admission does: the same namespace source, version and Pod Security action.
      decide: { namespaces: cluster.namespaces, kubernetesVersion: view.versions.version, podSecurity: config.podSecurityAction },
      clock,
    });
    templates.store.on('reload', () => audit.templatesReloaded());
    leaderOnly.push({
      name: 'audit',
      start: () => audit.start(),
      stop: () => audit.stop(),
      // Always shown: the election's state, and the audit's counts while this replica leads.
      status: () => ({ ...election.status(), ...(election.isLeader() ? audit.status() : {}) }),
    });
  }

  const certificate = new ServingCertificate(config, log, metrics, election && kubeConfig ? { election, kubeConfig } : undefined);
  // Liveness runs a sample pod through the real pipeline (namespace labels from a fixed map, so
  // that a slow API server never fails the probe): a replica that cannot inject is restarted.
  const canaryNamespace = 'sidecar-injector-canary';
  const canaryNamespaces = createLocalNamespaceSource({ [canaryNamespace]: { [LabelKeys.namespaceOptIn]: LabelValues.enabled } });
  const liveness = new Liveness(async () => {
    const outcome = await admitPod(
      { pod: samplePod(), namespace: canaryNamespace, name: '' },
      { templates: () => templates.store.current(), namespaces: canaryNamespaces },
    );
    if (outcome.decision === 'denied') throw new Error(outcome.message);
  });
  let draining = false;
  const manager = new Manager({
    log,
    stopTimeoutMs: config.shutdownTimeoutMs + config.shutdownDelayMs,
    clock,
    ...(election ? { election, onLeading: (leading: boolean) => metrics.leader.set({ lease: leaseName }, leading ? 1 : 0) } : {}),
  });
  // The Pod Security action is fixed for the process: the generation names the templates in force and the version.
  const reviewer = servingReviewer({
    templates: inForce,
    namespaces,
    kubernetesVersion: view.versions.version,
    podSecurity: config.podSecurityAction,
    generation: () => `${templates.store.generation}.${rollout?.generation() ?? 0}/${view.versions.generation()}`,
  });
  const app = createApp({
    liveness,
    log,
    metrics,
    maxBodyBytes: config.maxBodyBytes,
    reviewer,
    ...(view.events ? { events: view.events } : {}),
    isReady: () => !draining && manager.ready(),
    isDraining: () => draining,
    ...(clientCa ? { requireClientCertificate: true } : {}),
    status: () => ({ draining, ...manager.status(), podSecurityAction: config.podSecurityAction }),
  });
  let running: RunningServer | undefined;
  // The server drains as one part: not ready (set at the signal), the shutdown delay while
  // endpoints catch up, then a close that waits for in-flight reviews (bounded).
  const server: Runnable = {
    name: 'server',
    start: async () => {
      const pair = certificate.current();
      try {
        running = await startServer(app.callback(), {
          host: config.host,
          port: config.port,
          key: pair.key,
          cert: pair.cert,
          ...(clientCa ? { clientCa } : {}),
          timeouts: config.timeouts,
        });
      } catch (err) {
        // A port in use, an address this machine does not have: the configuration, not a bug.
        throw new ConfigError([`cannot listen on ${config.host}:${config.port}: ${(err as Error).message}`]);
      }
      const listening = running;
      try {
        // The context is replaced whole: the client CA goes with every new serving pair.
        await certificate.listening((next) => listening.server.setSecureContext({ key: next.key, cert: next.cert, ...(clientCa ? { ca: clientCa } : {}) }));
      } catch (err) {
        // Not started: nothing stops it later, so it closes here.
        running = undefined;
        await listening.close();
        throw err;
      }
    },
    stop: async () => {
      if (!running) return;
      const listening = running;
      await new Promise((resolve) => clock.after(config.shutdownDelayMs, () => resolve(undefined)));
      const closed = listening.close();
      const deadline = new Promise<'timeout'>((resolve) => clock.after(config.shutdownTimeoutMs, () => resolve('timeout')));
      const result = await Promise.race([closed.then(() => 'closed' as const), deadline]);
      if (result === 'timeout') {
        log.warn({ timeoutMs: config.shutdownTimeoutMs }, 'in-flight requests did not finish in time; closing their connections');
        listening.server.closeAllConnections();
      }
    },
  };

  manager.add(templates.runnable, 'source');
  for (const source of view.sources) manager.add(source, 'source');
  for (const other of view.others) manager.add(other);
  if (rollout) manager.add(rollout);
  manager.add(certificate);
  manager.add(server, 'server');
  for (const runnable of leaderOnly) manager.add(runnable, 'leader');
  let stopping: Promise<void> | undefined;
  const shutdown = (reason: string): Promise<void> =>
    (stopping ??= (async () => {
      draining = true;
      log.info({ reason, delayMs: config.shutdownDelayMs, order: manager.stopOrder() }, 'shutting down: not ready, still serving');
      await manager.stop();
      log.info({ reason }, 'stopped');
    })());
  const start = async (): Promise<RunningServer | undefined> => {
    await manager.start();
    // A shutdown during the start: the manager stopped what had started.
    if (stopping || !running) return undefined;
    log.info(
      {
        port: running.port,
        host: config.host,
        templates: templates.store.status().templates,
        namespaceSource: namespaces.kind,
        ...(namespaces.kind === 'cluster' ? { namespaceFailurePolicy: config.namespaceFailurePolicy } : {}),
      },
      'listening',
    );
    // The first preflight once this replica answers: its own probe can then reach it.
    rollout?.begin();
    return running;
  };
  return { start, shutdown };
}

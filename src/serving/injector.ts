/**
 * The running injector, composed: the template store, the cluster's view (namespace labels, the
 * version, Events), the rollout controller, the serving certificate and the HTTPS server, and on
 * the elected replica the continuous audit — each a runnable the one manager starts in order
 * and stops in reverse (runtime/manager.ts). `/readyz` and `/status` are gathered from them.
 */
import type { Logger } from 'pino';
import { isJsonObject } from '../k8s/json.js';
import { createApp, type AppDeps, type RouteGroup } from '../app.js';
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
import { createTemplateSet, type TemplateSet } from '../templates/set.js';
import { cut } from '../quote.js';
import { TemplateStore, type TemplateSource } from '../templates/store.js';
import { TemplateObjects, type RefusedObject } from './template-objects.js';
import type { KubeConfig } from '@kubernetes/client-node';
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

/** The templates in use, as a source: measured, logged, and checked as `check` checks. */
interface Templates {
  readonly store: TemplateSource;
  readonly runnable: Runnable;
  /** The cluster's objects, when the templates come from them. */
  readonly objects?: TemplateObjects;
}

/** A folder's templates (a local run): read at start (a set `check` refuses is no start), reloaded on change. */
async function folderTemplates(config: Config, log: Logger, metrics: Metrics): Promise<Templates> {
  // The very checks `sidecar-injector check` runs, at start and on every reload: a set that
  // check refuses (a containerPort rendered as a string, say) would fail every pod creation.
  // An empty directory is an empty set: a fresh install serves no sidecar until templates arrive.
  const store = await TemplateStore.load(
    config.templatesDir,
    (files, dir) => checkTemplateFiles(files, dir, {}, { allowEmpty: true }),
    config.templateCheckIntervalMs,
  );
  measureTemplates(store, log, metrics);
  store.on('rejected', (err: Error) => {
    metrics.templateReloadFailures.inc();
    metrics.templateSetCurrent.set(0);
    log.error({ err: err.message, keptGeneration: store.generation }, 'templates on disk refused; the last good set stays in use');
  });
  return { store, runnable: { name: 'templates', start: () => store.start(), stop: () => store.stop(), status: () => store.status() } };
}

/**
 * The cluster's SidecarTemplates (watched): each object checked on its own, a refused one left
 * out and named; not ready until listed (serving nothing rather than guessing).
 */
function clusterTemplates(kubeConfig: KubeConfig, log: Logger, metrics: Metrics): Templates {
  const objects = new TemplateObjects({ kubeConfig, log: log.child({ component: 'templates' }) });
  measureTemplates(objects, log, metrics);
  objects.on('refused', (refused: RefusedObject) => {
    metrics.templateReloadFailures.inc();
    log.error(refused, 'SidecarTemplate refused: it is not served (the others are)');
  });
  objects.on('reload', () => {
    metrics.templateSetCurrent.set(objects.refusals().size === 0 ? 1 : 0);
    metrics.templatesRefused.set(objects.refusals().size);
  });
  objects.on('rejected', (err: Error) => {
    if (!objects.ready()) log.warn({ err: err.message }, 'SidecarTemplates not listed yet: serving nothing, not ready');
  });
  return {
    store: objects,
    objects,
    runnable: { name: 'templates', start: () => objects.start(), stop: () => objects.stop(), ready: () => objects.ready(), status: () => objects.status() },
  };
}

function measureTemplates(store: TemplateSource, log: Logger, metrics: Metrics): void {
  const measure = () => {
    metrics.templateGeneration.set(store.generation);
    metrics.templates.set(store.current().templates.length);
    if (store.current().templates.length === 0 && store.current().unavailable === undefined)
      log.warn('no templates: no pod gets a sidecar until templates are added');
  };
  metrics.templateSetCurrent.set(1);
  measure();
  store.on('reload', () => {
    metrics.templateSetCurrent.set(1);
    log.info({ generation: store.generation, templates: store.current().templates.map((t) => `${t.name}@${t.hash}`) }, 'templates reloaded');
    measure();
  });
}

/** The set the liveness sample is decided with: the templates served, nothing about objects refused or not yet read. */
export function livenessSet(set: TemplateSet): TemplateSet {
  if (set.unavailable !== undefined) return createTemplateSet([]);
  if (!set.refusedRequired) return set;
  const { refusedRequired: _refused, ...served } = set;
  return served;
}

/**
 * Liveness runs a sample pod through the real pipeline (namespace labels from a fixed map, so
 * that a slow API server never fails the probe): a replica that cannot decide a review is
 * restarted. What the templates in force decide is no such failure: before they are known the
 * sample runs with none (unready, not dead); a refused required object is the object's business
 * (its pods are refused); and a denial of the sample (two required templates that want one
 * container name) is logged once, not thrown — restarting every replica would change nothing
 * and leave the required webhook with no one to answer.
 */
export function livenessCanary(current: () => TemplateSet, log: Pick<Logger, 'warn'>): () => Promise<void> {
  const canaryNamespace = 'sidecar-injector-canary';
  const canaryNamespaces = createLocalNamespaceSource({ [canaryNamespace]: { [LabelKeys.namespaceOptIn]: LabelValues.enabled } });
  let denied: string | undefined;
  return async () => {
    const outcome = await admitPod(
      { pod: samplePod(), namespace: canaryNamespace, name: '' },
      { templates: () => livenessSet(current()), namespaces: canaryNamespaces },
    );
    const message = outcome.decision === 'denied' ? outcome.message : undefined;
    if (message !== undefined && message !== denied)
      log.warn(
        { reason: outcome.reason, message: cut(message, 500) },
        'the templates in force deny the liveness sample pod (pods like it are denied too); not a reason to restart this replica',
      );
    denied = message;
  };
}

/** How often a stopping replica looks whether another one has taken over. */
const handoverLookMs = 1000;

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
  const view = await createClusterView(config, log, metrics, clock);
  let templates: Templates;
  if (config.templateSource === 'cluster') {
    if (!view.cluster) throw new ConfigError(['--template-source cluster needs the cluster (--namespace-source cluster)']);
    templates = clusterTemplates(view.cluster.kubeConfig, log, metrics);
  } else templates = await folderTemplates(config, log, metrics);
  const { namespaces } = view;

  // Safe rollout: candidates take pods only after their preflight through the cluster's admission chain.
  const rollout =
    config.rolloutProbeNamespace && view.cluster
      ? new (await import('../rollout/controller.js')).RolloutController({
          namespace: config.rolloutProbeNamespace,
          haltAfter: config.rolloutHaltUnhealthyPods,
          notReadyGraceMs: config.rolloutHaltNotReadyMs,
          kubeConfig: view.cluster.kubeConfig,
          templates: templates.store,
          log,
          metrics,
          clock,
          instance: config.replica,
          uidOf: (name: string) => {
            const metadata = templates.objects?.stored().get(name)?.metadata;
            const uid = isJsonObject(metadata) ? metadata.uid : undefined;
            return typeof uid === 'string' ? uid : undefined;
          },
        })
      : undefined;
  // The set in force: the stored templates, with candidates that have not passed their preflight stopped.
  // Without the preflight no candidate takes pods, whatever the objects say (an upgrade that
  // dropped the preflight's overlay stops canaries rather than making them live).
  const { withoutPreflight } = await import('../rollout/preflight.js');
  const inForce = (): TemplateSet => (rollout ? rollout.gate(templates.store.current()) : withoutPreflight(templates.store.current()));

  // The one leader election: the elected replica writes the certificates (self-managed) and runs
  // the continuous audit; every replica serves.
  const kubeConfig =
    view.cluster?.kubeConfig ??
    (config.selfManaged ? await (await import('../kube-api/kubeconfig.js')).loadKubeConfig(config.kubeconfig, { inPod: config.inPod }) : undefined);
  const auditing = config.audit && view.cluster !== undefined;
  // Loaded only when there is an election: a local run needs no part of the Kubernetes client.
  let election: LeaderElector | undefined;
  // On even when turned off: the leader then removes the entries it wrote.
  const conditioning = view.cluster !== undefined;
  if (kubeConfig && (auditing || config.selfManaged || templates.objects || conditioning)) {
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
  let auditCounts: (() => ReturnType<import('../audit/continuous.js').ContinuousAudit['templateCounts']>) | undefined;
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
      // Pods created while no replica audited (every replica down) get their Event too.
      unseenSince: () => election.lastRenewalBeforeMe(),
      // The auditor decides as admission does: the same namespace source, version and Pod Security action.
      decide: { namespaces: cluster.namespaces, kubernetesVersion: view.versions.version, podSecurity: config.podSecurityAction },
      clock,
    });
    templates.store.on('reload', () => audit.templatesReloaded());
    auditCounts = () => audit.templateCounts();
    leaderOnly.push({
      name: 'audit',
      start: () => audit.start(),
      stop: () => audit.stop(),
      // Always shown: the election's state, and the audit's counts while this replica leads.
      status: () => ({ ...election.status(), ...(election.isLeader() ? audit.status() : {}) }),
    });
  }

  // Running pods get a template's new sidecar images in place (templates with updateStrategy: inPlace).
  let inPlaceProgress: (() => ReturnType<import('../rollout/in-place-updater.js').InPlaceUpdater['progress']>) | undefined;
  if (config.inPlaceUpdates && view.cluster && election) {
    const { InPlaceUpdater } = await import('../rollout/in-place-updater.js');
    const cluster = view.cluster;
    const updater = new InPlaceUpdater({
      kubeConfig: cluster.kubeConfig,
      log: log.child({ component: 'in-place-updates' }),
      clock,
      templates: inForce,
      namespaces: () => cluster.namespaces.current(),
      metrics,
      maxUnsettled: config.inPlaceMaxUnsettled,
    });
    templates.store.on('reload', () => updater.round());
    inPlaceProgress = () => updater.progress();
    leaderOnly.push({ name: updater.name, start: () => updater.start(), stop: () => updater.stop(), status: () => updater.status() });
  }

  // Each SidecarTemplate's status (revision, role, state, pod counts, conditions), written by the leader.
  if (templates.objects && election && kubeConfig) {
    const { TemplateStatusWriter } = await import('./template-status.js');
    const writer = new TemplateStatusWriter({
      kubeConfig,
      log: log.child({ component: 'template-status' }),
      clock,
      objects: templates.objects,
      inForce,
      counts: () => auditCounts?.(),
      ...(rollout ? { progress: () => rollout.progress() } : {}),
      ...(inPlaceProgress ? { inPlace: inPlaceProgress } : {}),
    });
    leaderOnly.push({ name: 'template-status', start: () => writer.start(), stop: () => writer.stop(), status: () => writer.status() });
  }

  // Each pod webhook's matchConditions: the API server calls it only for pods a template may apply to.
  if (conditioning && election && kubeConfig) {
    const { WebhookConditions } = await import('./webhook-conditions.js');
    const conditions = new WebhookConditions({
      kubeConfig,
      log: log.child({ component: 'webhook-conditions' }),
      clock,
      templates: templates.store,
      configurationName: config.webhookConfigurationName,
      enabled: config.matchConditions,
    });
    // Before the audit: it stops after it.
    leaderOnly.unshift({ name: 'webhook-conditions', start: () => conditions.start(), stop: () => conditions.stop(), status: () => conditions.status() });
  }

  // Whether the exported MutatingAdmissionPolicy holds the templates marked delivery: policy, at their revisions.
  if (election && kubeConfig) {
    const { ExportedPolicyWatch } = await import('./exported-policy.js');
    const watch = new ExportedPolicyWatch({
      kubeConfig,
      log: log.child({ component: 'exported-policy' }),
      clock,
      templates: () => templates.store.current(),
      stale: metrics.exportedPolicyStale,
    });
    templates.store.on('reload', () => watch.templatesReloaded());
    // First in, last out: it reads and says, and the audit stops before it.
    leaderOnly.unshift({ name: 'exportedPolicy', start: () => watch.start(), stop: () => watch.stop(), status: () => watch.status() });
  }

  const certificate = new ServingCertificate(config, log, metrics, election && kubeConfig ? { election, kubeConfig } : undefined);
  const liveness = new Liveness(livenessCanary(() => templates.store.current(), log));
  let draining = false;
  let readyAtSignal = false;
  const manager = new Manager({
    log,
    stopTimeoutMs: config.shutdownHandoverMs + config.shutdownDelayMs + config.shutdownTimeoutMs,
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
  const appDeps: AppDeps = {
    liveness,
    log,
    metrics,
    maxBodyBytes: config.maxBodyBytes,
    reviewer,
    ...(view.events ? { events: view.events } : {}),
    // Draining, the readiness at the signal stays: the EndpointSlice controller marks a
    // terminating pod not ready whatever it says, and `serving` (this answer) is what lets
    // kube-proxy fall back to it while no other replica is ready.
    isReady: () => (draining ? readyAtSignal : manager.ready()),
    isDraining: () => draining,
    ...(clientCa ? { requireClientCertificate: true } : {}),
    templateAdmission: templates.objects ? { stored: () => (templates.objects!.ready() ? templates.objects!.stored().size : undefined) } : {},
    status: () => ({ draining, ...manager.status(), podSecurityAction: config.podSecurityAction }),
    ...(config.profiling ? { profiler: new (await import('../http/cpu-profile.js')).CpuProfiler(clock) } : {}),
  };
  // The listeners: the webhook port serves the reviews, and whatever is given no port of its
  // own. The probes on a port of their own are never starved by a flood of the webhook port;
  // /metrics and /status on theirs can be opened to the monitoring namespace alone.
  interface Listener {
    readonly port: number;
    readonly groups: Set<RouteGroup>;
    /** Its flag, named in a failure to listen; none for the webhook port's own (`--port`). */
    readonly flag?: '--metrics-port' | '--probe-port';
    /** Its field of the `listening` log line. */
    readonly logField: 'port' | 'metricsPort' | 'probePort';
  }
  const webhookListener: Listener = { port: config.port, groups: new Set<RouteGroup>(['reviews']), logField: 'port' };
  const listeners: Listener[] = [webhookListener];
  if (config.metricsPort !== undefined)
    listeners.push({ port: config.metricsPort, groups: new Set(['operations']), flag: '--metrics-port', logField: 'metricsPort' });
  else webhookListener.groups.add('operations');
  if (config.probePort !== undefined) listeners.push({ port: config.probePort, groups: new Set(['probes']), flag: '--probe-port', logField: 'probePort' });
  else webhookListener.groups.add('probes');
  /** Every listener while they listen, the webhook's first. */
  let serving: { readonly listener: Listener; readonly server: RunningServer }[] = [];
  const sleep = (ms: number) => new Promise<void>((resolve) => clock.after(ms, () => resolve()));
  // A replica behind the Service keeps serving until another one has taken over (bounded):
  // kube-proxy sends a Service's connections to a terminating endpoint that still serves only
  // while no other endpoint is ready, so when every replica is deleted at once the old ones
  // answer until the new ones are ready. Taken over means seen so twice, a shutdown delay apart:
  // the first look proves kube-proxy was told, the second that the successor is still there.
  // Counted from the signal: every step of the stop before the server's (the leader's work,
  // the lease) eats into the handover, never into the end of the grace period.
  let handoverDeadline = 0;
  const handOver = async (): Promise<'taken-over' | 'alone' | 'nothing-to-hand-over'> => {
    // Unready at the signal, kube-proxy sends it nothing (it does not serve): nothing to hand over.
    if (!kubeConfig || config.shutdownHandoverMs === 0 || !readyAtSignal) return 'nothing-to-hand-over';
    const { handoverState } = await import('../kube-api/endpoints.js');
    let warned = false;
    const look = () =>
      handoverState(kubeConfig, config.namespace, config.serviceName, config.replica).catch((err: unknown) => {
        if (!warned) log.warn({ err: (err as Error).message }, "handover: cannot read the Service's endpoints; serving on");
        warned = true;
        return 'alone' as const;
      });
    const deadline = handoverDeadline;
    let state = await look();
    if (state === 'alone')
      log.info({ service: config.serviceName, maxMs: config.shutdownHandoverMs }, 'handover: no other replica is ready yet; serving until one is');
    let confirmed = false;
    while (state !== 'not-behind' && !confirmed && clock.now() < deadline) {
      if (state === 'taken-over') {
        await sleep(config.shutdownDelayMs);
        confirmed = (state = await look()) === 'taken-over';
      } else {
        await sleep(Math.min(handoverLookMs, Math.max(0, deadline - clock.now())));
        state = await look();
      }
    }
    if (confirmed) {
      log.info({ service: config.serviceName }, 'handover: another replica is ready behind the Service');
      return 'taken-over';
    }
    if (state === 'not-behind') return 'nothing-to-hand-over';
    log.warn({ service: config.serviceName, maxMs: config.shutdownHandoverMs }, 'handover: no other replica became ready in time; closing');
    return 'alone';
  };
  // The server drains as one part: the handover (serving, ready as it was at the signal), the
  // shutdown delay while endpoints catch up, then a close that waits for in-flight reviews (bounded).
  const server: Runnable = {
    name: 'server',
    start: async () => {
      const pair = certificate.current();
      const started: { listener: Listener; server: RunningServer }[] = [];
      const closeStarted = () => Promise.all(started.map(({ server }) => server.close()));
      // Only reviews are for the API server alone: the client CA goes to the webhook port.
      const clientCaOf = (listener: Listener) => (clientCa && listener === webhookListener ? clientCa : undefined);
      for (const listener of listeners) {
        try {
          const ca = clientCaOf(listener);
          const server = await startServer(createApp(appDeps, listener.groups).callback(), {
            host: config.host,
            port: listener.port,
            key: pair.key,
            cert: pair.cert,
            ...(ca ? { clientCa: ca } : {}),
            timeouts: config.timeouts,
          });
          started.push({ listener, server });
        } catch (err) {
          await closeStarted();
          // A port in use, an address this machine does not have: the configuration, not a bug.
          throw new ConfigError([`cannot listen on ${config.host}:${listener.port}${listener.flag ? ` (${listener.flag})` : ''}: ${(err as Error).message}`]);
        }
      }
      try {
        // The context is replaced whole: the client CA goes with every new serving pair.
        await certificate.listening((next) => {
          for (const { listener, server } of started) {
            const ca = clientCaOf(listener);
            server.server.setSecureContext({ key: next.key, cert: next.cert, ...(ca ? { ca } : {}) });
          }
        });
      } catch (err) {
        // Not started: nothing stops it later, so it closes here.
        await closeStarted();
        throw err;
      }
      serving = started;
    },
    stop: async () => {
      if (serving.length === 0) return;
      const servers = serving.map(({ server }) => server);
      // Taken over, the handover waited the delay already (between its two looks); alone at the
      // deadline, no other endpoint will take the connections: close now. Otherwise the delay
      // lets endpoints catch up.
      if ((await handOver()) === 'nothing-to-hand-over') await sleep(config.shutdownDelayMs);
      const closed = Promise.all(servers.map((s) => s.close()));
      const deadline = new Promise<'timeout'>((resolve) => clock.after(config.shutdownTimeoutMs, () => resolve('timeout')));
      const result = await Promise.race([closed.then(() => 'closed' as const), deadline]);
      if (result === 'timeout') {
        log.warn({ timeoutMs: config.shutdownTimeoutMs }, 'in-flight requests did not finish in time; closing their connections');
        for (const s of servers) s.server.closeAllConnections();
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
      readyAtSignal = manager.ready();
      handoverDeadline = clock.now() + config.shutdownHandoverMs;
      draining = true;
      log.info({ reason, delayMs: config.shutdownDelayMs, order: manager.stopOrder() }, 'shutting down: still serving until another replica takes over');
      await manager.stop();
      log.info({ reason }, 'stopped');
    })());
  const start = async (): Promise<RunningServer | undefined> => {
    await manager.start();
    // A shutdown during the start: the manager stopped what had started.
    const webhookServer = serving[0]?.server;
    if (stopping || !webhookServer) return undefined;
    log.info(
      {
        ...Object.fromEntries(serving.map(({ listener, server }) => [listener.logField, server.port])),
        host: config.host,
        templates: templates.store.current().templates.map((t) => `${t.name}@${t.hash}`),
        namespaceSource: namespaces.kind,
        ...(namespaces.kind === 'cluster' ? { namespaceFailurePolicy: config.namespaceFailurePolicy } : {}),
      },
      'listening',
    );
    // The first preflight once this replica answers: its own probe can then reach it.
    rollout?.begin();
    return webhookServer;
  };
  return { start, shutdown };
}

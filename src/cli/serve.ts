/**
 * `sidecar-injector serve`: composes config → logger → metrics → templates → namespace source
 * → TLS → app → server → auditor; reloads templates and certificates as they change; on
 * SIGTERM/SIGINT stops every part through one runtime, in the reverse order they started, each
 * stop awaited (the auditor first: its Lease is released at once, so another replica, reading it
 * every second, leads within about a second; then the server drains; the sources it read from go last).
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { pino, type Logger } from 'pino';
import { createApp } from '../app.js';
import { systemClock, type Clock, type Timer } from '../clock.js';
import { Runtime } from '../runtime/runtime.js';
import { servingReviewer } from '../reviewer.js';
import { admitPod } from '../pipeline/admit.js';
import { LabelKeys, LabelValues } from '../k8s/keys.js';
import { Liveness } from '../liveness.js';
import { createLocalNamespaceSource } from '../namespaces/source.js';
import { decideVersion, formatVersion, type VersionDecision } from '../k8s/version.js';
import type { AdmissionEvent } from '../pipeline/admission-events.js';
import { loadConfig, type Config } from '../config.js';
import { ConfigError } from '../errors.js';
import { createMetrics, type Metrics } from '../metrics.js';
import type { NamespaceLabelSource } from '../namespaces/source.js';
import { loadLocalNamespaceSource } from '../namespaces/file.js';
import { startServer, type RunningServer } from '../server.js';
import { TemplateStore } from '../templates/store.js';
import { createCertificates } from '../tls/certificates.js';
import { CertificateReloader, checkKeyPair, readKeyPair, type KeyPair } from '../tls/reloader.js';
import { startSelfManagedCertificates } from './certs.js';
import type { KubeConfig } from '@kubernetes/client-node';
import type { TemplateSet } from '../templates/set.js';
import type { ClusterNamespaceSource } from '../namespaces/cluster.js';
import type { PodAuditorOptions } from '../audit/pod-auditor.js';

/** This replica's name: its pod's (the Deployment passes POD_NAME), its host's, or `fallback`. */
const replicaName = (env: Readonly<Record<string, string | undefined>>, fallback: string): string => env.POD_NAME || env.HOSTNAME || fallback;

/** What the cluster says about itself: namespace labels, and the version to serve for. */
interface ClusterView {
  readonly namespaces: NamespaceLabelSource;
  readonly version: () => VersionDecision;
  /** Moves whenever the version decision does (in anything a pod's decision reads of it). */
  readonly versionGeneration: () => number;
  readonly versionStatus: () => unknown;
  /** True once the version to serve for is decided on what the cluster said (or the flag). */
  readonly versionSettled: () => boolean;
  /** Where review Events go (cluster mode with --events on). */
  readonly events?: { record(event: AdmissionEvent): void };
  /** Starts leader election and the auditor (cluster mode with --audit on); the caller adds it to the runtime. */
  readonly startAudit?: () => Promise<Audit>;
  /** The cluster's client configuration (cluster mode). */
  readonly kubeConfig?: KubeConfig;
}

/**
 * The namespace label source and version source the configuration asks for; cluster sources
 * are started, measured, and added to `runtime`.
 */
async function createClusterView(
  config: Config,
  log: Logger,
  metrics: Metrics,
  env: Readonly<Record<string, string | undefined>>,
  templates: () => TemplateSet,
  runtime: Runtime,
  clock: Clock,
): Promise<ClusterView> {
  if (config.namespaceSource === 'local') {
    const namespaces = await loadLocalNamespaceSource(config);
    const decision = decideVersion(config.kubernetesVersion ? { flag: config.kubernetesVersion } : {});
    return {
      namespaces,
      version: () => decision,
      versionGeneration: () => 0,
      versionStatus: () => ({
        kubernetesVersion: decision.version ? formatVersion(decision.version) : null,
        source: decision.source,
        reason: decision.reason,
        apiServer: null,
        nodes: null,
        settled: true,
      }),
      versionSettled: () => true,
    };
  }
  // Loaded only for the cluster source: the Kubernetes client is large.
  const { loadKubeConfig } = await import('../kube-api/kubeconfig.js');
  const { ClusterNamespaceSource } = await import('../namespaces/cluster.js');
  const { ClusterVersionSource } = await import('../kube-api/cluster-version.js');
  const kubeConfig = await loadKubeConfig(config.kubeconfig);
  const source = new ClusterNamespaceSource({
    kubeConfig,
    log: log.child({ component: 'namespaces' }),
    failurePolicy: config.namespaceFailurePolicy,
    lookupTimeoutMs: config.namespaceLookupTimeoutMs,
    clock,
  });
  runtime.add('namespace source', () => source.stop());
  const measure = () => {
    metrics.namespaceCacheSize.set(source.size());
    metrics.namespaceCacheSynced.set(source.isReady() ? 1 : 0);
  };
  measure();
  source.on('reload', measure);
  source.on('change', measure);
  source.on('lookup-failed', () => metrics.namespaceLookupFailures.inc());
  source.start();
  const versions = new ClusterVersionSource({
    kubeConfig,
    log: log.child({ component: 'versions' }),
    clock,
    ...(config.kubernetesVersion ? { flag: config.kubernetesVersion } : {}),
  });
  versions.start();
  runtime.add('version source', () => versions.stop());
  const { EventRecorder, clusterClaimCheck } = await import('../kube-api/events.js');
  const events = config.events
    ? new EventRecorder({
        kubeConfig,
        log: log.child({ component: 'events' }),
        instance: replicaName(env, 'sidecar-injector'),
        onFailure: () => metrics.eventWriteFailures.inc(),
        onDrop: () => metrics.eventsDropped.inc(),
        namespaceExists: (namespace) => source.exists(namespace),
        verifyClaim: clusterClaimCheck(kubeConfig),
        clock,
      })
    : undefined;
  if (events) runtime.add('event recorder', () => events.stop());
  // The auditor decides as admission does: the same namespace source, version and Pod Security action.
  const decide = { namespaces: source, kubernetesVersion: () => versions.current(), podSecurity: config.podSecurityAction };
  return {
    kubeConfig,
    ...(events ? { events } : {}),
    // The continuous audit: one replica at a time (a Lease), over a metadata-only watch of pods.
    ...(config.audit ? { startAudit: () => startAudit(kubeConfig, log, metrics, env, templates, source, events, decide, clock) } : {}),
    namespaces: source,
    version: () => versions.current(),
    versionGeneration: () => versions.generation(),
    versionStatus: () => versions.status(),
    versionSettled: () => versions.isSettled(),
  };
}

/** The running audit: its status for /status, a recount after a template change, and its stop (which releases the Lease). */
interface Audit {
  status(): unknown;
  recountSoon(): void;
  stop(): Promise<void>;
}

/** Leader election and, while leading, the pod auditor; recounts when templates or namespace labels change. */
async function startAudit(
  kubeConfig: KubeConfig,
  log: Logger,
  metrics: Metrics,
  env: Readonly<Record<string, string | undefined>>,
  templates: () => TemplateSet,
  namespaces: ClusterNamespaceSource,
  events: { record(event: AdmissionEvent): void } | undefined,
  decide: PodAuditorOptions['decide'],
  clock: Clock,
): Promise<Audit> {
  const { LeaderElector } = await import('../kube-api/lease.js');
  const { PodAuditor } = await import('../audit/pod-auditor.js');
  const identity = replicaName(env, `sidecar-injector-${process.pid}`);
  const elector = new LeaderElector({
    kubeConfig,
    log: log.child({ component: 'leader' }),
    namespace: env.POD_NAMESPACE || 'sidecar-injector',
    name: 'sidecar-injector-audit',
    identity,
    clock,
  });
  const auditor = new PodAuditor({
    kubeConfig,
    log: log.child({ component: 'audit' }),
    templates,
    namespaceLabels: (namespace) => namespaces.current().get(namespace),
    gauge: metrics.pods,
    ...(events ? { onMissing: (event: AdmissionEvent) => events.record(event) } : {}),
    decide,
  });
  metrics.leader.set({ lease: 'sidecar-injector-audit' }, 0);
  elector.on('leading', () => {
    metrics.leader.set({ lease: 'sidecar-injector-audit' }, 1);
    auditor.start();
  });
  elector.on('following', () => {
    metrics.leader.set({ lease: 'sidecar-injector-audit' }, 0);
    auditor.stop();
  });
  // A namespace's labels or the templates changed: judge every pod again, at most once a second
  // (a full judgement of 100,000 pods takes about 0.3 s of the event loop).
  let recount: Timer | undefined;
  let templatesChanged = false;
  const later = (templates = false) => {
    templatesChanged ||= templates;
    if (!elector.isLeader() || recount) return;
    recount = clock.after(1000, () => {
      recount = undefined;
      if (!elector.isLeader()) return;
      if (templatesChanged) auditor.templatesChanged();
      else auditor.recount();
      templatesChanged = false;
    });
  };
  namespaces.on('labels-changed', () => later());
  // A relist (after 410 Gone) replaces every namespace at once: labels may have changed unseen.
  namespaces.on('reload', () => later());
  elector.start();
  return {
    recountSoon: () => later(true),
    status: () => ({ ...elector.status(), ...(elector.isLeader() ? auditor.status() : {}) }),
    stop: async () => {
      recount?.cancel();
      auditor.stop();
      await elector.stop();
    },
  };
}

/** How often a candidate in rollout is preflighted again (and at once on every reload). */
const preflightIntervalMs = 5 * 60_000;
/** After the first preflight, how long a probe our webhook did not inject is tried again soon, and how soon. */
const startupWindowMs = 60_000;
const startupRetryMs = 5_000;
/** How often the pods and workloads of the candidates are looked at for the automatic halt. */
const healthIntervalMs = 60_000;

/** What the rollout's preflights and halt need from serve. */
export interface RolloutOptions {
  /** Where probe pods are created with dryRun=All. */
  readonly namespace: string;
  /** Unhealthy pods and refused workloads that halt a candidate. */
  readonly haltAfter: number;
  readonly kubeConfig: KubeConfig;
  readonly templates: TemplateStore;
  readonly log: Logger;
  readonly metrics: Metrics;
  /** Runs the periodic preflight and health look, and stamps results and Events. */
  readonly clock: Clock;
  /** The templates ConfigMap: failed preflights and halts are written as Events on it; unset: none. */
  readonly configMap?: { readonly namespace: string; readonly name: string };
  /** `reportingInstance` of those Events (the replica's pod name). */
  readonly instance: string;
}

/** The candidate's health at the last look, as /status shows it. */
interface HealthStatus {
  readonly template: string;
  readonly revision: string;
  readonly pods: number;
  readonly restarting: number;
  readonly notReady: number;
  readonly refusedWorkloads: number;
  readonly checkedAt: string;
}

/**
 * Runs each candidate's preflight at start, on every reload and every five minutes, and halts a
 * candidate whose pods fail or whose workloads cannot create pods (a look every minute while a
 * candidate exists); measures and logs each result, and writes an Event on the templates
 * ConfigMap when a candidate's preflight starts failing and when it is halted.
 */
export async function startPreflights(options: RolloutOptions) {
  const { namespace, haltAfter, kubeConfig, templates, log, metrics, clock } = options;
  const { Preflights, apiServerDryRun } = await import('../rollout/preflight.js');
  const { EventRecorder } = await import('../kube-api/events.js');
  const events = options.configMap
    ? new EventRecorder({
        kubeConfig,
        log: log.child({ component: 'rollout-events' }),
        instance: options.instance,
        clock,
        onFailure: () => metrics.eventWriteFailures.inc(),
      })
    : undefined;
  const configMap = options.configMap;
  // Each candidate revision a series of its own: two templates failing in one minute are two Events.
  const tell = (candidate: string, reason: string, action: string, note: string) =>
    configMap &&
    events?.record({
      regarding: { apiVersion: 'v1', kind: 'ConfigMap', namespace: configMap.namespace, name: configMap.name },
      type: 'Warning',
      reason,
      action,
      note,
      series: candidate,
    });
  // The candidate revisions whose last preflight failed, with why: an Event when one starts
  // failing or fails for another reason, not on every run; each such Event a series of its own.
  const failing = new Map<string, string>();
  let eventCount = 0;
  // Until the first run (begin(), once the server answers) and for a while after it, a probe our
  // webhook did not inject, or a webhook the chain could not call, may only mean that the
  // Service's endpoints are changing (a lone replica at start, the replica it replaces leaving
  // between the two dry runs): tried again within seconds, with no Event.
  let begunAt: number | undefined;
  let retry: Timer | undefined;
  const preflights = new Preflights(
    namespace,
    apiServerDryRun(kubeConfig),
    () => new Date(clock.now()),
    (result) => {
      metrics.rolloutPreflights.inc({ template: result.template, result: result.passed ? 'passed' : result.failure! });
      const key = `${result.template}@${result.revision}`;
      if (result.passed) {
        failing.delete(key);
        log.info(result, 'candidate preflight passed');
        return;
      }
      if ((result.failure === 'not-injected' || result.failure === 'unreachable') && begunAt !== undefined && clock.now() - begunAt < startupWindowMs) {
        log.info(
          result,
          `candidate preflight: the probe was not injected, or a webhook could not be called, yet; trying again in ${startupRetryMs / 1000} s (the Service's endpoints may still be changing)`,
        );
        retry ??= clock.after(startupRetryMs, () => {
          retry = undefined;
          run();
        });
        return;
      }
      log.warn(result, 'candidate preflight failed: the candidate takes no pod');
      if (failing.get(key) === result.failure) return;
      failing.set(key, result.failure!);
      tell(
        `${key}#${++eventCount}`,
        'RolloutPreflightFailed',
        'Preflight',
        `Candidate revision ${result.revision} of template ${result.template} failed its preflight (${result.failure}): ${result.message}. ` +
          `It takes no pod; new pods get the stable revision. Fix the candidate file, or delete it to abort; the preflight runs again on every change of the templates and every five minutes.`,
      );
    },
  );
  const measure = () => {
    const set = preflights.gate(templates.current());
    metrics.rolloutCandidateActive.reset();
    for (const r of set.rollouts?.values() ?? []) if (r.candidate) metrics.rolloutCandidateActive.set({ template: r.name }, r.stopped === undefined ? 1 : 0);
  };
  const run = () =>
    void preflights
      .run(templates.current())
      .then(() => {
        // Revisions no longer candidates are forgotten with their results.
        const current = new Set(preflights.status().results.map((r) => `${r.template}@${r.revision}`));
        for (const key of failing.keys()) if (!current.has(key)) failing.delete(key);
      })
      .catch((err: unknown) => log.error({ err: (err as Error).message }, 'candidate preflight'))
      .finally(measure);
  // From begin() on: at every reload, and every five minutes.
  let timer: Timer | undefined;
  const begin = () => {
    if (begunAt !== undefined) return;
    begunAt = clock.now();
    templates.on('reload', run);
    timer = clock.every(preflightIntervalMs, run);
    run();
  };
  // The automatic halt: every minute, what the pods with a candidate do and whether its workloads can create pods (rollout/halt.ts).
  const { lookAtCandidates } = await import('../rollout/look.js');
  let health: HealthStatus[] = [];
  const watchHealth = async () => {
    // The set in force: a candidate stopped (preflight pending or failed) takes no workload, so no refusal is its.
    const set = preflights.gate(templates.current());
    if (![...(set.rollouts?.values() ?? [])].some((r) => r.candidate)) {
      health = [];
      return;
    }
    const now = clock.now();
    const count = await lookAtCandidates({
      kubeConfig,
      set,
      thresholds: { unhealthyPods: haltAfter, restarts: 3, notReadyGraceMs: 5 * 60_000 },
      now,
      onRefusalsUnknown: (err) => log.warn({ err: err.message }, 'candidate health: workloads that cannot create pods not counted'),
    });
    const checkedAt = new Date(now).toISOString();
    health = [...count.health.values()].map((h) => ({
      template: h.template,
      revision: h.revision,
      pods: h.pods,
      restarting: h.restarting,
      notReady: h.notReady,
      refusedWorkloads: h.refused,
      checkedAt,
    }));
    for (const [template, { revision, why }] of count.halts())
      if (preflights.halt(template, revision, why)) {
        metrics.rolloutHalts.inc({ template });
        log.warn({ template, revision, why }, 'candidate halted: it takes no pod');
        tell(
          `${template}@${revision}`,
          'RolloutHalted',
          'Halt',
          `Candidate revision ${revision} of template ${template} is ${why}. It takes no new pod; new pods get the stable revision. ` +
            `Abort (delete the candidate file, or set share: 0) or write a fixed candidate, then move the pods that got it with sidecar-injector audit --restart stale.`,
        );
      }
    measure();
  };
  // One look at a time: a look that takes longer than the period is not started again over it.
  let watching = false;
  const healthTimer = clock.every(healthIntervalMs, () => {
    if (watching) return;
    watching = true;
    void watchHealth()
      .catch((err: unknown) => log.error({ err: (err as Error).message }, 'candidate health'))
      .finally(() => (watching = false));
  });
  return {
    /** Runs the first preflight and starts the periodic ones: once the server answers, so that a lone replica can inject its own probe. */
    begin,
    gate: (set: TemplateSet) => preflights.gate(set),
    generation: () => preflights.generation(),
    status: () => ({
      replica: options.instance,
      ...preflights.status(),
      ...(configMap ? { configMap: `${configMap.namespace}/${configMap.name}` } : {}),
      candidates: [...(preflights.gate(templates.current()).rollouts?.values() ?? [])]
        .filter((r) => r.candidate)
        .map((r) => ({
          template: r.name,
          revision: r.candidate!.hash,
          share: r.stanza!.share,
          takesPods: r.stopped === undefined,
          ...(r.stopped ? { stopped: r.stopped } : {}),
        })),
      health,
    }),
    /** Resolves when the Events started so far are written (tests). */
    settled: () => events?.settled() ?? Promise.resolve(),
    stop: () => {
      timer?.cancel();
      retry?.cancel();
      healthTimer.cancel();
      templates.off('reload', run);
      events?.stop();
    },
  };
}

/**
 * The serving key pair: from files (checked to match), or a throw-away development CA. The
 * development CA's file is written only once the server listens (`writeDevCa`), so that a second
 * start that cannot listen never replaces the CA of the one that is running.
 */
async function loadTls(config: Config, log: Logger): Promise<KeyPair & { writeDevCa?: () => Promise<void> }> {
  if (config.tlsCertFile && config.tlsKeyFile) {
    try {
      return await readKeyPair(config.tlsCertFile, config.tlsKeyFile);
    } catch (err) {
      throw new ConfigError([`cannot use the TLS certificate and key: ${(err as Error).message}`]);
    }
  }
  const bundle = await createCertificates(['localhost'], ['127.0.0.1', '::1'], 7);
  const caFile = join(config.devCertDir, 'ca.crt');
  const writeDevCa = async () => {
    try {
      await mkdir(config.devCertDir, { recursive: true });
      await writeFile(caFile, bundle.caCert);
    } catch (err) {
      throw new ConfigError([`--dev-cert-dir: cannot write ${caFile}: ${(err as Error).message}`]);
    }
    log.warn(
      { caFile },
      'no --tls-cert/--tls-key given: serving a throw-away development certificate for localhost and 127.0.0.1; trust it with curl --cacert',
    );
  };
  return { ...checkKeyPair(bundle.cert, bundle.key), writeDevCa };
}

/** A running injector. */
export interface Injector {
  readonly server: RunningServer;
  /** Readiness false, wait the shutdown delay, close, wait for in-flight reviews (bounded). */
  shutdown(reason: string): Promise<void>;
}

/** Starts the injector; installs SIGTERM/SIGINT handlers that shut it down and exit 0. */
export async function serve(argv: readonly string[], env: Readonly<Record<string, string | undefined>>): Promise<Injector> {
  const config = loadConfig(env, argv);
  const log = pino({ level: config.logLevel, base: { service: 'sidecar-injector' } });
  const metrics = createMetrics();
  // The very checks `sidecar-injector check` runs, at start and on every reload: a set that
  // check refuses (a containerPort rendered as a string, say) would fail every pod creation.
  const { checkTemplateFiles, samplePod } = await import('./check.js');
  // An empty directory is an empty set: a fresh install serves no sidecar until templates arrive.
  const templates = await TemplateStore.load(
    config.templatesDir,
    (files, dir) => checkTemplateFiles(files, dir, {}, { allowEmpty: true }),
    config.templateCheckIntervalMs,
  );
  const warnIfEmpty = () => {
    if (templates.current().templates.length === 0) log.warn({ dir: config.templatesDir }, 'no templates: no pod gets a sidecar until templates are added');
  };
  metrics.templateGeneration.set(templates.generation);
  metrics.templateSetCurrent.set(1);
  warnIfEmpty();
  templates.on('reload', () => {
    metrics.templateGeneration.set(templates.generation);
    metrics.templateSetCurrent.set(1);
    log.info(templates.status(), 'templates reloaded');
    warnIfEmpty();
  });
  templates.on('rejected', (err: Error) => {
    metrics.templateReloadFailures.inc();
    metrics.templateSetCurrent.set(0);
    log.error({ err: err.message, keptGeneration: templates.generation }, 'templates on disk refused; the last good set stays in use');
  });
  templates.start();
  const clock = systemClock;
  const runtime = new Runtime({ log, stopTimeoutMs: config.shutdownTimeoutMs + config.shutdownDelayMs, clock });
  runtime.add('template store', () => templates.stop());

  // The set in force: the templates on disk, with candidates that have not passed their preflight stopped (set below).
  const rolloutGate: { apply?: (set: TemplateSet) => TemplateSet } = {};
  const inForce = (): TemplateSet => rolloutGate.apply?.(templates.current()) ?? templates.current();
  let cluster: ClusterView;
  try {
    cluster = await createClusterView(config, log, metrics, env, inForce, runtime, clock);
  } catch (err) {
    await runtime.stop();
    throw err;
  }
  let audit: Audit | undefined;
  templates.on('reload', () => audit?.recountSoon());
  const { namespaces } = cluster;
  // Safe rollout: candidates take pods only after their preflight through the cluster's admission chain.
  const rollout =
    config.rolloutProbeNamespace && cluster.kubeConfig
      ? await startPreflights({
          namespace: config.rolloutProbeNamespace,
          haltAfter: config.rolloutHaltUnhealthyPods,
          kubeConfig: cluster.kubeConfig,
          templates,
          log,
          metrics,
          clock,
          ...(config.templatesConfigMap ? { configMap: config.templatesConfigMap } : {}),
          instance: replicaName(env, 'sidecar-injector'),
        })
      : undefined;
  if (rollout) {
    rolloutGate.apply = rollout.gate;
    runtime.add('rollout preflights', () => rollout.stop());
  }
  // Self-managed certificates (--tls-secret): served from the Secret, renewals followed below.
  const selfManaged = config.selfManaged ? await startSelfManagedCertificates(config, log, env) : undefined;
  if (selfManaged) runtime.add('self-managed certificates', () => selfManaged.certificates.stop());
  const loaded = selfManaged ? undefined : await loadTls(config, log);
  const tls: KeyPair = selfManaged ? selfManaged.pair : loaded!;
  metrics.certificateExpiry.set(tls.notAfter.getTime() / 1000);
  let draining = false;
  let reloader: CertificateReloader | undefined;
  // Liveness runs a sample pod through the real pipeline (namespace labels from a fixed map, so
  // that a slow API server never fails the probe): a replica that cannot inject is restarted.
  const canaryNamespace = 'sidecar-injector-canary';
  const canaryNamespaces = createLocalNamespaceSource({ [canaryNamespace]: { [LabelKeys.namespaceOptIn]: LabelValues.enabled } });
  const liveness = new Liveness(async () => {
    const outcome = await admitPod(
      { pod: samplePod(), namespace: canaryNamespace, name: '' },
      { templates: () => templates.current(), namespaces: canaryNamespaces },
    );
    if (outcome.decision === 'denied') throw new Error(outcome.message);
  });
  // The Pod Security action is fixed for the process: the generation names the templates in force and the version.
  const reviewer = servingReviewer({
    templates: inForce,
    namespaces,
    kubernetesVersion: cluster.version,
    podSecurity: config.podSecurityAction,
    generation: () => `${templates.generation}.${rollout?.generation() ?? 0}/${cluster.versionGeneration()}`,
  });
  const app = createApp({
    liveness,
    log,
    metrics,
    maxBodyBytes: config.maxBodyBytes,
    reviewer,
    ...(cluster.events ? { events: cluster.events } : {}),
    isReady: () => !draining && namespaces.isReady() && cluster.versionSettled(),
    isDraining: () => draining,
    status: () => ({
      draining,
      templates: templates.status(),
      namespaces: namespaces.status(),
      kubernetes: cluster.versionStatus(),
      ...(audit ? { audit: audit.status() } : {}),
      ...(rollout ? { rollout: rollout.status() } : {}),
      podSecurityAction: config.podSecurityAction,
      certificate: reloader?.status() ?? selfManaged?.certificates.status() ?? { notAfter: tls.notAfter.toISOString(), fingerprint256: tls.fingerprint256 },
    }),
  });
  let running: RunningServer;
  try {
    running = await startServer(app.callback(), { host: config.host, port: config.port, key: tls.key, cert: tls.cert, timeouts: config.timeouts });
  } catch (err) {
    // A port in use, an address this machine does not have: the configuration, not a bug.
    await runtime.stop();
    throw new ConfigError([`cannot listen on ${config.host}:${config.port}: ${(err as Error).message}`]);
  }
  if (loaded?.writeDevCa) {
    try {
      await loaded.writeDevCa();
    } catch (err) {
      await running.close();
      await runtime.stop();
      throw err;
    }
  }
  log.info({ notAfter: tls.notAfter.toISOString(), fingerprint256: tls.fingerprint256 }, 'serving certificate');
  if (config.tlsCertFile && config.tlsKeyFile) {
    // A Secret update swaps the mounted files: new handshakes get the new pair, open connections keep theirs.
    reloader = new CertificateReloader(config.tlsCertFile, config.tlsKeyFile, tls, (pair) =>
      running.server.setSecureContext({ key: pair.key, cert: pair.cert }),
    );
    reloader.on('reload', (pair: KeyPair) => {
      metrics.certificateExpiry.set(pair.notAfter.getTime() / 1000);
      log.info({ notAfter: pair.notAfter.toISOString(), fingerprint256: pair.fingerprint256 }, 'serving certificate reloaded');
    });
    reloader.on('rejected', (err: Error) => log.warn({ err: err.message }, 'serving certificate files hold no valid pair; keeping the current one'));
    reloader.start();
  }
  selfManaged?.certificates.follow(tls, (pair) => {
    running.server.setSecureContext({ key: pair.key, cert: pair.cert });
    metrics.certificateExpiry.set(pair.notAfter.getTime() / 1000);
    log.info({ notAfter: pair.notAfter.toISOString(), fingerprint256: pair.fingerprint256 }, 'serving certificate renewed from the Secret');
  });
  log.info(
    {
      port: running.port,
      host: config.host,
      templates: templates.status().templates,
      namespaceSource: namespaces.kind,
      ...(namespaces.kind === 'cluster' ? { namespaceFailurePolicy: config.namespaceFailurePolicy } : {}),
    },
    'listening',
  );
  // The first preflight once this replica answers: its own probe can then reach it.
  rollout?.begin();

  // The server drains as one part: not ready (set at the signal), the shutdown delay while
  // endpoints catch up, then a close that waits for in-flight reviews (bounded).
  runtime.add('server', async () => {
    await new Promise((resolve) => clock.after(config.shutdownDelayMs, () => resolve(undefined)));
    const closed = running.close();
    const deadline = new Promise<'timeout'>((resolve) => clock.after(config.shutdownTimeoutMs, () => resolve('timeout')));
    const result = await Promise.race([closed.then(() => 'closed' as const), deadline]);
    if (result === 'timeout') {
      log.warn({ timeoutMs: config.shutdownTimeoutMs }, 'in-flight requests did not finish in time; closing their connections');
      running.server.closeAllConnections();
    }
  });
  if (reloader) runtime.add('certificate reloader', () => reloader!.stop());
  // Started last, stopped first: on SIGTERM the Lease is released before the server drains.
  if (cluster.startAudit) {
    audit = await cluster.startAudit();
    runtime.add('auditor', () => audit!.stop());
  }

  let stopping: Promise<void> | undefined;
  const shutdown = (reason: string): Promise<void> =>
    (stopping ??= (async () => {
      draining = true;
      log.info({ reason, delayMs: config.shutdownDelayMs, order: runtime.stopOrder() }, 'shutting down: not ready, still serving');
      await runtime.stop();
      log.info({ reason }, 'stopped');
    })());
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    process.once(signal, () => void shutdown(signal).then(() => process.exit(0)));
  }
  return { server: running, shutdown };
}

/**
 * What the cluster says about itself, as runnables: the namespace label source, the version to
 * serve for, and where review Events go. Locally (`--namespace-source local`) the labels come
 * from a file and the version from the flag, and nothing runs.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { Clock } from '../clock.js';
import type { Config } from '../config.js';
import { decideVersion, formatVersion, type VersionDecision } from '../k8s/version.js';
import type { Metrics } from '../metrics.js';
import type { ClusterNamespaceSource } from '../namespaces/cluster.js';
import { loadLocalNamespaceSource } from '../namespaces/file.js';
import type { NamespaceLabelSource } from '../namespaces/source.js';
import type { AdmissionEvent } from '../pipeline/admission-events.js';
import type { Runnable } from '../runtime/runnable.js';

/** The version to serve for, and how it moves. */
export interface VersionView {
  readonly version: () => VersionDecision;
  /** Moves whenever the version decision does (in anything a pod's decision reads of it). */
  readonly generation: () => number;
}

export interface ClusterView {
  readonly namespaces: NamespaceLabelSource;
  readonly versions: VersionView;
  /** The runnables that keep the view current: the sources (`source` group), the Event recorder (`other`). */
  readonly sources: readonly Runnable[];
  readonly others: readonly Runnable[];
  /** Where review Events go (cluster mode with --events on). */
  readonly events?: { record(event: AdmissionEvent): void };
  /** The cluster (cluster mode): its client configuration and the namespace source with its change events. */
  readonly cluster?: { readonly kubeConfig: KubeConfig; readonly namespaces: ClusterNamespaceSource };
}

/** The view the configuration asks for; nothing starts until the manager starts its runnables. */
export async function createClusterView(config: Config, log: Logger, metrics: Metrics, clock: Clock): Promise<ClusterView> {
  if (config.namespaceSource === 'local') {
    const namespaces = await loadLocalNamespaceSource(config);
    const decision = decideVersion(config.kubernetesVersion ? { flag: config.kubernetesVersion } : {});
    const kubernetes: Runnable = {
      name: 'kubernetes',
      start: () => undefined,
      stop: () => undefined,
      status: () => ({
        kubernetesVersion: decision.version ? formatVersion(decision.version) : null,
        source: decision.source,
        reason: decision.reason,
        apiServer: null,
        nodes: null,
        settled: true,
      }),
    };
    const labels: Runnable = { name: 'namespaces', start: () => undefined, stop: () => undefined, status: () => namespaces.status() };
    return { namespaces, versions: { version: () => decision, generation: () => 0 }, sources: [labels, kubernetes], others: [] };
  }
  // Loaded only for the cluster source: the Kubernetes client is large.
  const { loadKubeConfig } = await import('../kube-api/kubeconfig.js');
  const { ClusterNamespaceSource } = await import('../namespaces/cluster.js');
  const { ClusterVersionSource } = await import('../kube-api/cluster-version.js');
  const { EventRecorder, clusterClaimCheck } = await import('../kube-api/events.js');
  const kubeConfig = await loadKubeConfig(config.kubeconfig, { inPod: config.inPod });
  const source = new ClusterNamespaceSource({
    kubeConfig,
    log: log.child({ component: 'namespaces' }),
    failurePolicy: config.namespaceFailurePolicy,
    lookupTimeoutMs: config.namespaceLookupTimeoutMs,
    clock,
  });
  const measure = () => {
    metrics.namespaceCacheSize.set(source.size());
    metrics.namespaceCacheSynced.set(source.isReady() ? 1 : 0);
  };
  source.on('reload', measure);
  source.on('change', measure);
  source.on('lookup-failed', () => metrics.namespaceLookupFailures.inc());
  const versions = new ClusterVersionSource({
    kubeConfig,
    log: log.child({ component: 'versions' }),
    clock,
    ...(config.kubernetesVersion ? { flag: config.kubernetesVersion } : {}),
  });
  const events = config.events
    ? new EventRecorder({
        kubeConfig,
        log: log.child({ component: 'events' }),
        instance: config.replica,
        onFailure: () => metrics.eventWriteFailures.inc(),
        onDrop: () => metrics.eventsDropped.inc(),
        namespaceExists: (namespace) => source.exists(namespace),
        verifyClaim: clusterClaimCheck(kubeConfig),
        clock,
      })
    : undefined;
  return {
    namespaces: source,
    versions: { version: () => versions.current(), generation: () => versions.generation() },
    sources: [
      {
        name: 'namespaces',
        start: () => {
          measure();
          source.start();
        },
        stop: () => source.stop(),
        ready: () => source.isReady(),
        status: () => source.status(),
      },
      { name: 'kubernetes', start: () => versions.start(), stop: () => versions.stop(), ready: () => versions.isSettled(), status: () => versions.status() },
    ],
    others: events ? [{ name: 'events', start: () => undefined, stop: () => events.stop() }] : [],
    ...(events ? { events } : {}),
    cluster: { kubeConfig, namespaces: source },
  };
}

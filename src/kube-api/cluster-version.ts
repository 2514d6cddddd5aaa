/**
 * The cluster's Kubernetes version, learned: the API server's `/version` (read at start and
 * every `versionRefreshMs`) and every node's kubelet (`status.nodeInfo.kubeletVersion`, kept by
 * a reflector over Nodes). k8s/version.ts decides from these; this module only gathers them.
 * A cluster whose nodes cannot be read (RBAC) still gives the API server's version.
 */
import { EventEmitter } from 'node:events';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { systemClock, type Clock, type Timer } from '../clock.js';
import { decideVersion, type KubernetesVersion, type NodeVersion, type VersionDecision } from '../k8s/version.js';
import { Reflector, type ReflectorTuning } from './reflector.js';
import { getJson } from './request.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';

export interface ClusterVersionOptions extends ReflectorTuning {
  readonly kubeConfig: KubeConfig;
  readonly log: Logger;
  /** `--kubernetes-version`: when given, it decides (the cluster is still read, for /status). */
  readonly flag?: KubernetesVersion;
  /** How often `/version` is read again (API servers are upgraded in place). @default 600000 */
  readonly versionRefreshMs?: number;
  /** Timeout of the `/version` GET. @default 5000 */
  readonly requestTimeoutMs?: number;
}

interface NodeObject {
  metadata?: { name?: string; resourceVersion?: string };
  status?: { nodeInfo?: { kubeletVersion?: unknown } };
}

/** What /status shows about the cluster's version. */
export interface ClusterVersionStatus {
  readonly kubernetesVersion: string | null;
  readonly source: VersionDecision['source'];
  readonly reason: string;
  readonly apiServer: string | null;
  readonly nodes: number | null;
  /** False until the cluster has been asked (readiness waits for it). */
  readonly settled: boolean;
}

/** Whether two decisions name the same version from the same source. */
function sameVersion(a: VersionDecision, b: VersionDecision): boolean {
  return a.source === b.source && a.version?.major === b.version?.major && a.version?.minor === b.version?.minor;
}

/**
 * Emits `change` (decision) whenever the decided version or its source changes. `generation()`
 * counts every change of the decision, its reason included, so that what is derived from a
 * decision can be keyed on it.
 */
export class ClusterVersionSource extends EventEmitter {
  private readonly kubelets = new Map<string, string>();
  private readonly reflector: Reflector<NodeObject>;
  private apiServer: string | undefined;
  private nodesProblem: string | undefined;
  private decision: VersionDecision;
  private decisions = 0;
  private timer: Timer | undefined;
  private readonly clock: Clock;
  private stopped = true;
  /** Whether `/version` was asked once (answered or failed), and nodes listed or refused once. */
  private versionAsked = false;
  private nodesAsked = false;

  constructor(private readonly options: ClusterVersionOptions) {
    super();
    this.clock = options.clock ?? systemClock;
    this.reflector = new Reflector<NodeObject>({
      ...options,
      path: apiPath(apiResources.nodes),
      what: 'node',
      // Decided on `reload`, once the reflector counts as synced (a list of zero nodes is an answer too).
      replace: (items) => {
        this.kubelets.clear();
        for (const item of items) this.store(item);
        this.nodesProblem = undefined;
      },
      apply: (type, object) => {
        // Nodes change often (conditions, images); the decision depends only on kubelet versions.
        const name = object.metadata?.name ?? '';
        const before = this.kubelets.get(name);
        if (type === 'DELETED') this.kubelets.delete(name);
        else this.store(object);
        if (this.kubelets.get(name) !== before) this.decide();
      },
    });
    this.reflector.on('reload', () => {
      this.nodesAsked = true;
      this.decide();
    });
    this.reflector.on('rejected', (err: Error) => {
      if (this.reflector.isSynced()) return;
      this.nodesAsked = true;
      this.nodesProblem = err.message.slice(0, 200);
      this.decide();
    });
    this.decision = this.facts();
  }

  /**
   * True once the cluster was asked: `/version` answered or failed, and nodes listed or
   * refused. Readiness waits for it, so that no pod is served on a guess while the answer is
   * on its way.
   */
  isSettled(): boolean {
    return this.options.flag !== undefined || (this.versionAsked && this.nodesAsked);
  }

  /** The version decided now; `version` undefined when nothing is known. */
  current(): VersionDecision {
    return this.decision;
  }

  /**
   * A number that changes whenever the decision does (its source, version or reason) and only
   * then: node events that leave every kubelet version as it was, or a `/version` read that
   * answers the same, leave it as it is.
   */
  generation(): number {
    return this.decisions;
  }

  status(): ClusterVersionStatus {
    const { version, source, reason } = this.decision;
    return {
      kubernetesVersion: version ? `${version.major}.${version.minor}` : null,
      source,
      reason,
      apiServer: this.apiServer ?? null,
      nodes: this.reflector.isSynced() ? this.kubelets.size : null,
      settled: this.isSettled(),
    };
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.reflector.start();
    void this.readApiServerVersion();
  }

  stop(): void {
    this.stopped = true;
    this.timer?.cancel();
    this.reflector.stop();
  }

  private store(node: NodeObject): void {
    const name = node.metadata?.name;
    if (typeof name !== 'string') return;
    const version = node.status?.nodeInfo?.kubeletVersion;
    this.kubelets.set(name, typeof version === 'string' ? version.slice(0, 100) : '');
  }

  private async readApiServerVersion(): Promise<void> {
    if (this.stopped) return;
    let retryMs = this.options.versionRefreshMs ?? 600_000;
    try {
      const answer = (await getJson(this.options.kubeConfig, '/version', this.options.requestTimeoutMs ?? 5000)) as { gitVersion?: unknown };
      this.apiServer = typeof answer?.gitVersion === 'string' ? answer.gitVersion.slice(0, 100) : '';
      this.versionAsked = true;
      this.decide();
    } catch (err) {
      this.options.log.warn({ err: (err as Error).message }, 'cannot read the API server version; retrying');
      retryMs = Math.min(retryMs, 10_000);
      this.versionAsked = true;
    }
    if (this.stopped) return;
    this.timer = this.clock.after(retryMs, () => void this.readApiServerVersion());
  }

  private facts(): VersionDecision {
    const nodes: NodeVersion[] | undefined = this.reflector.isSynced()
      ? [...this.kubelets].map(([node, kubeletVersion]) => ({ node, kubeletVersion }))
      : undefined;
    return decideVersion({
      ...(this.options.flag ? { flag: this.options.flag } : {}),
      ...(this.apiServer !== undefined ? { apiServer: this.apiServer } : {}),
      ...(nodes ? { nodes } : {}),
      ...(this.nodesProblem ? { nodesProblem: this.nodesProblem } : {}),
    });
  }

  private decide(): void {
    const next = this.facts();
    const before = this.decision;
    // The decision in force stays the same object while nothing a reader reads changes.
    if (sameVersion(before, next) && before.reason === next.reason) return;
    this.decision = next;
    this.decisions++;
    if (!sameVersion(before, next)) {
      this.options.log.info({ kubernetesVersion: this.status().kubernetesVersion, source: next.source, reason: next.reason }, 'kubernetes version decided');
      this.emit('change', next);
    }
  }
}

/**
 * Kubernetes versions: parsing what the API server and kubelets report, and deciding which
 * version the injector serves for. Pure.
 *
 * What runs a pod is its kubelet, and the version-skew policy lets kubelets lag the API server
 * by up to three minor versions (CONTRACT R-70): a feature is usable only when the API server
 * keeps the field and every kubelet that may run the pod understands it. So the oldest of the
 * API server and the kubelets decides; a version given by the operator overrides both.
 */

/** A Kubernetes minor version, e.g. 1.29. */
export interface KubernetesVersion {
  readonly major: number;
  readonly minor: number;
}

/**
 * Parses `1.29`, `v1.29`, `v1.29.3`, `v1.29.3-eks-1234`, `v1.29.3+k3s1`; undefined for
 * anything else. Only major and minor matter for features.
 */
export function parseKubernetesVersion(text: unknown): KubernetesVersion | undefined {
  if (typeof text !== 'string' || text.length > 100) return undefined;
  const match = /^v?(\d{1,3})\.(\d{1,3})(?:\.\d{1,6})?(?:[-+][0-9A-Za-z.+-]*)?$/.exec(text.trim());
  if (!match) return undefined;
  return { major: Number(match[1]), minor: Number(match[2]) };
}

/**
 * A version as a kubelet or an API server reports it, read leniently: any text that starts with
 * `v1.28` or `1.28` followed by anything but a digit (`v1.28.4_custom`, `v1.28.9-eks-…`).
 */
export function parseReportedVersion(text: unknown): KubernetesVersion | undefined {
  if (typeof text !== 'string') return undefined;
  const match = /^v?(\d{1,3})\.(\d{1,3})(?!\d)/.exec(text.trim());
  return match ? { major: Number(match[1]), minor: Number(match[2]) } : undefined;
}

/** `1.29`. */
export function formatVersion(version: KubernetesVersion): string {
  return `${version.major}.${version.minor}`;
}

/** Negative when `a` is older than `b`. */
export function compareVersions(a: KubernetesVersion, b: KubernetesVersion): number {
  return a.major - b.major || a.minor - b.minor;
}

/** True when `version` is `major.minor` or newer. */
export function atLeast(version: KubernetesVersion, major: number, minor: number): boolean {
  return compareVersions(version, { major, minor }) >= 0;
}

/**
 * Native sidecars (`initContainers[].restartPolicy: Always`): beta and on by default from 1.29
 * (alpha and off in 1.28), GA in 1.33 (R-70).
 */
export const nativeSidecarsSince: KubernetesVersion = { major: 1, minor: 29 };

/** True when native sidecars work at `version`; an unknown version is taken to support them (today's clusters do). */
export function supportsNativeSidecars(version: KubernetesVersion | undefined): boolean {
  return version === undefined || compareVersions(version, nativeSidecarsSince) >= 0;
}

/** A kubelet as a node reports it. */
export interface NodeVersion {
  readonly node: string;
  /** `status.nodeInfo.kubeletVersion`, as reported. */
  readonly kubeletVersion: string;
}

/** Where the decided version came from. */
export type VersionSource = 'flag' | 'nodes' | 'api-server' | 'unknown';

/** The version the injector serves for, where it came from, and why, in a sentence. */
export interface VersionDecision {
  readonly version?: KubernetesVersion;
  readonly source: VersionSource;
  readonly reason: string;
}

/** What is known about the cluster's versions. */
export interface VersionFacts {
  /** `--kubernetes-version`, already parsed. */
  readonly flag?: KubernetesVersion;
  /** The API server's `/version` gitVersion, when read. */
  readonly apiServer?: string;
  /** Every node's kubelet, when nodes could be listed; undefined when they could not. */
  readonly nodes?: readonly NodeVersion[];
  /** Why nodes could not be read, when they could not. */
  readonly nodesProblem?: string;
}

/** Kubelets may be this many minor versions older than the API server (the version-skew policy). */
export const kubeletSkew = 3;

/**
 * Decides the version: the flag; else the oldest of the kubelets and the API server; else
 * unknown. A node whose kubelet version cannot be read counts as old as the skew policy allows
 * (the API server's minus three): an unknown kubelet is never taken for a new one.
 */
export function decideVersion(facts: VersionFacts): VersionDecision {
  if (facts.flag) return { version: facts.flag, source: 'flag', reason: `--kubernetes-version ${formatVersion(facts.flag)} was given` };
  const apiServer = parseReportedVersion(facts.apiServer);
  let oldest: { version: KubernetesVersion; node: NodeVersion } | undefined;
  let unreadable: NodeVersion | undefined;
  let unreadableCount = 0;
  for (const node of facts.nodes ?? []) {
    const version = parseReportedVersion(node.kubeletVersion);
    if (!version) {
      unreadableCount++;
      unreadable ??= node;
    } else if (!oldest || compareVersions(version, oldest.version) < 0) oldest = { version, node };
  }
  if (unreadable && apiServer) {
    const assumed = { major: apiServer.major, minor: Math.max(0, apiServer.minor - kubeletSkew) };
    if (!oldest || compareVersions(assumed, oldest.version) < 0)
      oldest = { version: assumed, node: { node: unreadable.node, kubeletVersion: `${formatVersion(assumed)} (assumed)` } };
  }
  const skipped =
    unreadableCount > 0
      ? `; ${unreadableCount} node(s) report no readable kubelet version${apiServer ? `, taken as ${kubeletSkew} minor versions behind the API server` : ''}`
      : '';
  if (oldest && (!apiServer || compareVersions(oldest.version, apiServer) <= 0)) {
    const server = facts.apiServer ? `; API server ${facts.apiServer}` : '';
    return {
      version: oldest.version,
      source: 'nodes',
      reason: `oldest kubelet is ${oldest.node.kubeletVersion} (node ${oldest.node.node}) of ${facts.nodes!.length} node(s)${server}${skipped}`,
    };
  }
  if (apiServer) {
    const why = oldest
      ? `the API server (${facts.apiServer}) is older than every kubelet`
      : facts.nodes === undefined
        ? `nodes could not be read (${facts.nodesProblem ?? 'not yet listed'})`
        : 'no node reports a kubelet version';
    return { version: apiServer, source: 'api-server', reason: `API server ${facts.apiServer}; ${why}${skipped}` };
  }
  return {
    source: 'unknown',
    reason:
      facts.apiServer !== undefined
        ? `the API server's version ${JSON.stringify(facts.apiServer.slice(0, 40))} cannot be read and no kubelet version is known`
        : 'no --kubernetes-version given and no cluster to ask; features are used as on current Kubernetes',
  };
}

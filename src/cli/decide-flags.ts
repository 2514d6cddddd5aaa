/**
 * The flags that make a command decide as admission does (`--kubernetes-version`,
 * `--pod-security-action`) and the version decision from them and the cluster: one reading for
 * `audit` and `why`.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { kubernetesVersionProblem } from '../config.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';
import { decideVersion, parseKubernetesVersion, type KubernetesVersion, type NodeVersion, type VersionDecision } from '../k8s/version.js';
import { getJson, listPages } from '../kube-api/request.js';
import { podSecurityActionProblem, type PodSecurityAction } from '../pipeline/pod-security-fit.js';

/** The two flags, as an option table's entries. */
export const decideAsAdmissionOptions = {
  'kubernetes-version': {
    kind: 'string',
    value: 'X.Y',
    env: 'SIDECAR_INJECTOR_KUBERNETES_VERSION',
    help: "decide as admission does for this Kubernetes version (default: the API server's)",
  },
  'pod-security-action': {
    kind: 'string',
    value: 'ACTION',
    env: 'SIDECAR_INJECTOR_POD_SECURITY_ACTION',
    default: 'skip',
    help: "skip | deny | inject: the injector's --pod-security-action, to decide as admission does",
  },
} as const;

/** The flags' values, each problem added to `problems`. */
export function decideFlags(
  values: Readonly<Record<string, unknown>>,
  problems: string[],
): { flagVersion?: KubernetesVersion; podSecurity: PodSecurityAction } {
  const versionText = values['kubernetes-version'] as string | undefined;
  const flagVersion = versionText === undefined ? undefined : parseKubernetesVersion(versionText);
  if (versionText !== undefined && !flagVersion) problems.push(kubernetesVersionProblem(versionText));
  const podSecurity = (values['pod-security-action'] as string | undefined) ?? 'skip';
  const actionProblem = podSecurityActionProblem(podSecurity);
  if (actionProblem) problems.push(actionProblem);
  return { ...(flagVersion ? { flagVersion } : {}), podSecurity: podSecurity as PodSecurityAction };
}

/**
 * The version admission decides by, as the injector decides it: the flag, else the oldest
 * kubelet's (listing nodes) and the API server's; what cannot be read is said in the decision's reason.
 */
export async function versionDecision(kubeConfig: KubeConfig, flagVersion: KubernetesVersion | undefined, timeoutMs: number): Promise<VersionDecision> {
  if (flagVersion) return decideVersion({ flag: flagVersion });
  const apiServer = (await getJson(kubeConfig, '/version', timeoutMs).catch(() => undefined)) as { gitVersion?: unknown } | undefined;
  const nodes: NodeVersion[] = [];
  let nodesProblem: string | undefined;
  try {
    await listPages<{ metadata?: { name?: unknown }; status?: { nodeInfo?: { kubeletVersion?: unknown } } }>(
      kubeConfig,
      apiPath(apiResources.nodes),
      { pageSize: 500, timeoutMs, accept: 'object', onRestart: () => nodes.splice(0) },
      (page) => {
        for (const node of page)
          nodes.push({
            node: typeof node.metadata?.name === 'string' ? node.metadata.name.slice(0, 253) : '',
            kubeletVersion: typeof node.status?.nodeInfo?.kubeletVersion === 'string' ? node.status.nodeInfo.kubeletVersion.slice(0, 100) : '',
          });
      },
    );
  } catch (err) {
    nodesProblem = `nodes could not be listed (${(err as Error).message.slice(0, 200)})`;
  }
  return decideVersion({
    ...(typeof apiServer?.gitVersion === 'string' ? { apiServer: apiServer.gitVersion } : {}),
    ...(nodesProblem ? { nodesProblem } : { nodes }),
  });
}

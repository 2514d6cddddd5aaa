/**
 * `sidecar-injector check [DIR]`: its options about the cluster. The checks themselves are
 * pipeline/template-check.ts's (serve runs the same on every set it loads).
 */
import { ConfigError } from '../errors.js';
import { kubernetesVersionProblem } from '../config.js';
import { parseKubernetesVersion } from '../k8s/version.js';
import type { PodSecurityPolicy } from '../k8s/pod-security.js';
import type { ClusterCheck } from '../pipeline/template-check.js';

/** Reads `--pod-security` and `--kubernetes-version`; throws ConfigError on a bad value. */
export function clusterCheckOptions(values: Readonly<Record<string, unknown>>): ClusterCheck {
  const problems: string[] = [];
  const versionText = values['kubernetes-version'] as string | undefined;
  const version = versionText === undefined ? undefined : parseKubernetesVersion(versionText);
  if (versionText !== undefined && !version) problems.push(kubernetesVersionProblem(versionText));
  const level = values['pod-security'] as string | undefined;
  if (level !== undefined && level !== 'baseline' && level !== 'restricted')
    problems.push(`--pod-security: expected baseline or restricted (got ${JSON.stringify(level).slice(0, 80)})`);
  if (problems.length > 0) throw new ConfigError(problems);
  // A namespace's `latest`, judged by the rules of the version given (as its API server would).
  const podSecurity: PodSecurityPolicy | undefined =
    level === undefined
      ? undefined
      : { level: level as 'baseline' | 'restricted', version: 'latest', label: `${level}:latest`, ...(version ? { rules: version } : {}) };
  return { ...(podSecurity ? { podSecurity } : {}), ...(version ? { version } : {}) };
}

/**
 * The Kubernetes client configuration, one loader for every command: a kubeconfig file when one
 * is named; else, for the server (`serve`, `certs`), the pod's service account; else, for the
 * commands a person runs (`audit`, `rollout status`), what kubectl would use — `KUBECONFIG`,
 * `~/.kube/config`, or the pod's service account. What cannot be loaded, or names no HTTPS API
 * server, is a ConfigError that says what to give.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { ConfigError } from '../errors.js';

export interface KubeConfigOptions {
  /** Without a file: the pod's service account only (`in-cluster`), or kubectl's order (`default`). @default 'in-cluster' */
  readonly fallback?: 'in-cluster' | 'default';
  /** Appended to each problem (what the command can do without a cluster). */
  readonly hint?: string;
  /** Whether this process runs in a pod (config.ts reads it from the environment): the in-cluster fallback needs one. @default false */
  readonly inPod?: boolean;
}

/** Loads the kubeconfig `file`, or the fallback without one; throws ConfigError when that does not give an HTTPS API server. */
export async function loadKubeConfig(file: string | undefined, options: KubeConfigOptions = {}): Promise<KubeConfig> {
  // Loaded on demand: the Kubernetes client is large, and a local run never needs it.
  const { KubeConfig } = await import('@kubernetes/client-node');
  const hint = options.hint ?? '';
  const kubeConfig = new KubeConfig();
  const inPod = options.inPod ?? false;
  const give =
    options.fallback === 'default'
      ? 'give --kubeconfig FILE, set KUBECONFIG, or write ~/.kube/config'
      : 'give --kubeconfig FILE, or run it in a pod (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are set there)';
  try {
    if (file) kubeConfig.loadFromFile(file);
    else if (options.fallback === 'default') kubeConfig.loadFromDefault();
    else if (inPod) kubeConfig.loadFromCluster();
    else throw new ConfigError([`no Kubernetes client configuration: this is not a pod; ${give}${hint}`]);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    throw new ConfigError([`cannot load the Kubernetes client configuration: ${(err as Error).message}${hint}`]);
  }
  const server = kubeConfig.getCurrentCluster()?.server;
  if (!server) throw new ConfigError([`the Kubernetes client configuration names no API server; ${give}${hint}`]);
  // With nothing to read, the client library assumes http://localhost:8080, which it then refuses to call.
  if (!server.startsWith('https://'))
    throw new ConfigError([
      `the Kubernetes client configuration names the API server ${server.slice(0, 200)}, not an https:// one${file ? '' : ' (none was found, so the client library assumed one)'}; ${give}${hint}`,
    ]);
  return kubeConfig;
}

/**
 * The Kubernetes client configuration: from a kubeconfig file outside a cluster, or the pod's
 * service account inside one.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { ConfigError } from '../errors.js';

/** Loads the kubeconfig `file`, or the in-cluster configuration without one; throws ConfigError when neither works. */
export async function loadKubeConfig(file: string | undefined): Promise<KubeConfig> {
  // Loaded on demand: the Kubernetes client is large, and a local run never needs it.
  const { KubeConfig } = await import('@kubernetes/client-node');
  const kubeConfig = new KubeConfig();
  try {
    if (file) kubeConfig.loadFromFile(file);
    else kubeConfig.loadFromCluster();
  } catch (err) {
    throw new ConfigError([`cannot load the Kubernetes client configuration: ${(err as Error).message}`]);
  }
  if (!kubeConfig.getCurrentCluster()?.server) throw new ConfigError(['the Kubernetes client configuration names no API server']);
  return kubeConfig;
}

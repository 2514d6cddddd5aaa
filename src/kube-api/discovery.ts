/**
 * What the API server serves, from its discovery documents: read where a behaviour depends on a
 * subresource the cluster may not have (pods/resize before Kubernetes 1.33, or turned off).
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { isJsonObject } from '../k8s/json.js';
import { requestJson } from './request.js';

/** Whether the API server serves `pods/resize`: its discovery of v1 lists it (false while that cannot be read). */
export async function servesPodResize(kubeConfig: KubeConfig, timeoutMs = 10_000): Promise<boolean> {
  try {
    const list = (await requestJson(kubeConfig, 'GET', '/api/v1', timeoutMs)) as { resources?: unknown };
    return Array.isArray(list.resources) && list.resources.some((r) => isJsonObject(r) && r.name === 'pods/resize');
  } catch {
    return false;
  }
}

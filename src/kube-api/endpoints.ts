/**
 * What the injector's own Service has behind it, read from its EndpointSlices as kube-proxy
 * reads them: whether a replica is ready to answer (the fail-closed webhooks are armed only
 * then), and, for a replica that is stopping, whether another one has taken over.
 *
 * The EndpointSlice controller marks a terminating pod's endpoint `ready: false` (and
 * `serving` as its readiness says, `terminating: true`); kube-proxy sends a Service's
 * connections to its ready endpoints, and only when there is none to the serving terminating
 * ones. So a replica that stops keeps answering exactly while no other replica is ready, and a
 * replica that is ready in a slice is not being deleted — unless the slice has not caught up
 * with a deletion yet, which is why a successor is also looked up as a pod.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { KubernetesApiError } from '../errors.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';
import { requestJson } from './request.js';

/** How long one request to the API server may take. */
const requestTimeoutMs = 5000;
/** How long one read of a handover look may take: a look is one list and at most two gets, inside the grace period. */
const handoverTimeoutMs = 2000;
/** Ready endpoints looked up as pods, at most, in one look (a handover needs one; each read may take the request timeout). */
const maxSuccessorsLooked = 2;

interface SliceEndpoint {
  readonly addresses?: readonly string[];
  readonly conditions?: { readonly ready?: boolean; readonly serving?: boolean; readonly terminating?: boolean };
  readonly targetRef?: { readonly kind?: string; readonly name?: string; readonly namespace?: string };
}

async function serviceEndpoints(kubeConfig: KubeConfig, namespace: string, service: string, timeoutMs = requestTimeoutMs): Promise<SliceEndpoint[]> {
  const query = new URLSearchParams({ labelSelector: `kubernetes.io/service-name=${service}` });
  const list = (await requestJson(kubeConfig, 'GET', `${apiPath(apiResources.endpointSlices, { namespace })}?${query}`, timeoutMs)) as
    { items?: { endpoints?: SliceEndpoint[] }[] } | undefined;
  return (list?.items ?? []).flatMap((slice) => (Array.isArray(slice.endpoints) ? slice.endpoints : []));
}

/** `conditions.ready` true, or unset, which the API says to read as ready. */
const isReady = (endpoint: SliceEndpoint): boolean => endpoint.conditions?.ready !== false;

/** Whether the EndpointSlices of `service` hold an endpoint ready to answer. */
export async function readyEndpointBehind(kubeConfig: KubeConfig, namespace: string, service: string): Promise<boolean> {
  return (await serviceEndpoints(kubeConfig, namespace, service)).some(isReady);
}

/**
 * Where a stopping replica stands behind its Service:
 * - `not-behind`: the Service has no endpoint for this pod (a run outside the cluster, another
 *   Service, no EndpointSlices to read): nothing is sent to it through the Service;
 * - `taken-over`: another replica is ready behind the Service and its pod is not being deleted;
 * - `alone`: this replica is behind the Service and no other is ready yet.
 */
export type HandoverState = 'not-behind' | 'taken-over' | 'alone';

/**
 * The handover state of the replica (pod) `self`. 404 (no such resource) and 403 (no right to
 * list it) read as `not-behind`: without slices there is nothing to wait for. Other failures
 * (the API server unreachable or throttling, 5xx) reject: the caller serves on.
 */
export async function handoverState(kubeConfig: KubeConfig, namespace: string, service: string, self: string): Promise<HandoverState> {
  let endpoints: SliceEndpoint[];
  try {
    endpoints = await serviceEndpoints(kubeConfig, namespace, service, handoverTimeoutMs);
  } catch (err) {
    if (err instanceof KubernetesApiError && (err.statusCode === 404 || err.statusCode === 403)) return 'not-behind';
    throw err;
  }
  const isPod = (e: SliceEndpoint) => e.targetRef?.kind === 'Pod' && typeof e.targetRef.name === 'string';
  if (!endpoints.some((e) => isPod(e) && e.targetRef!.name === self)) return 'not-behind';
  const others = endpoints.filter((e) => isPod(e) && e.targetRef!.name !== self && isReady(e)).slice(0, maxSuccessorsLooked);
  for (const endpoint of others) {
    const name = endpoint.targetRef!.name!;
    // The slice may not have caught up with a deletion (two replicas deleted at once): the pod says.
    const pod = (await requestJson(kubeConfig, 'GET', apiPath(apiResources.pods, { namespace, name }), handoverTimeoutMs).catch(() => undefined)) as
      { metadata?: { deletionTimestamp?: string }; status?: { conditions?: { type?: string; status?: string }[] } } | undefined;
    if (!pod || pod.metadata?.deletionTimestamp) continue;
    if ((pod.status?.conditions ?? []).some((c) => c.type === 'Ready' && c.status === 'True')) return 'taken-over';
  }
  return 'alone';
}

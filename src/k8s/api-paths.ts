/**
 * Where things live in the Kubernetes API: the collections the injector reads and writes, and
 * the one way their paths are built (the workload kinds' own entries are in workloads.ts).
 */

/** A collection in the API: its group/version (`v1` for the core group) and its plural name. */
export interface ApiResource {
  readonly apiVersion: string;
  readonly resource: string;
}

/** The collections the injector uses beyond the workload kinds. */
export const apiResources = {
  namespaces: { apiVersion: 'v1', resource: 'namespaces' },
  nodes: { apiVersion: 'v1', resource: 'nodes' },
  pods: { apiVersion: 'v1', resource: 'pods' },
  secrets: { apiVersion: 'v1', resource: 'secrets' },
  configMaps: { apiVersion: 'v1', resource: 'configmaps' },
  /** core/v1 Events: what controllers record (a `FailedCreate`). */
  coreEvents: { apiVersion: 'v1', resource: 'events' },
  /** events.k8s.io/v1 Events: what the injector records. */
  events: { apiVersion: 'events.k8s.io/v1', resource: 'events' },
  leases: { apiVersion: 'coordination.k8s.io/v1', resource: 'leases' },
  endpointSlices: { apiVersion: 'discovery.k8s.io/v1', resource: 'endpointslices' },
  mutatingWebhookConfigurations: { apiVersion: 'admissionregistration.k8s.io/v1', resource: 'mutatingwebhookconfigurations' },
} as const satisfies Record<string, ApiResource>;

/**
 * A path segment: escaped, but for `:` and `@`, which a path segment may hold as they are (a
 * service proxy's `https:NAME:PORT`, as kubectl writes it).
 */
const segment = (text: string) => encodeURIComponent(text).replace(/%3A/g, ':').replace(/%40/g, '@');

/**
 * The API path of `resource`'s collection (across the cluster, or in `namespace`), of one
 * object in it (`name`), or of that object's `subresource` (`status`, `proxy/…`, written as given).
 */
export function apiPath(resource: ApiResource, at: { readonly namespace?: string; readonly name?: string; readonly subresource?: string } = {}): string {
  const group = resource.apiVersion === 'v1' ? '/api/v1' : `/apis/${resource.apiVersion}`;
  const namespace = at.namespace === undefined ? '' : `/namespaces/${segment(at.namespace)}`;
  const name = at.name === undefined ? '' : `/${segment(at.name)}`;
  const subresource = at.subresource === undefined ? '' : `/${at.subresource}`;
  return `${group}${namespace}/${resource.resource}${name}${subresource}`;
}

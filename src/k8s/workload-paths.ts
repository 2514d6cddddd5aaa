/**
 * Where the workloads that create pods from a template live in the API: one table for every
 * reader (the audit's pod templates, the halt's refused workloads, the Events' owners).
 */

/** The workload kinds whose controllers create pods from a pod template, and their collection. */
export const workloadCollections: Readonly<Record<string, { readonly group: string; readonly resource: string }>> = {
  ReplicaSet: { group: '/apis/apps/v1', resource: 'replicasets' },
  StatefulSet: { group: '/apis/apps/v1', resource: 'statefulsets' },
  DaemonSet: { group: '/apis/apps/v1', resource: 'daemonsets' },
  Job: { group: '/apis/batch/v1', resource: 'jobs' },
  ReplicationController: { group: '/api/v1', resource: 'replicationcontrollers' },
};

/** Whether `kind` is one of workloadCollections' (an own key: `__proto__` is not). */
export function isWorkloadKind(kind: string): boolean {
  return Object.hasOwn(workloadCollections, kind);
}

/** The API path of one workload, or undefined for a kind that is not one. */
export function workloadPath(kind: string, namespace: string, name: string): string | undefined {
  if (!isWorkloadKind(kind)) return undefined;
  const { group, resource } = workloadCollections[kind]!;
  return `${group}/namespaces/${encodeURIComponent(namespace)}/${resource}/${encodeURIComponent(name)}`;
}

/** The apiVersion objects of a workload kind are named by (`apps/v1`, `batch/v1`, `v1`), or undefined for a kind that is not one. */
export function workloadApiVersion(kind: string): string | undefined {
  if (!isWorkloadKind(kind)) return undefined;
  const group = workloadCollections[kind]!.group;
  return group === '/api/v1' ? 'v1' : group.replace(/^\/apis\//, '');
}

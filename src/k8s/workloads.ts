/**
 * The workload kinds, in one table for every reader: where each lives in the API, where its pod
 * template sits, and what the injector does with it (the audit's lists and restarts, the halt's
 * refused workloads, the Events' owners, `render`, a pod template decided as admission would).
 * Also the pod such a template makes.
 */
import { apiPath } from './api-paths.js';
import { isJsonObject, type JsonObject } from './json.js';

/** What the injector knows of a workload kind. */
export interface WorkloadKind {
  readonly kind: string;
  /** The apiVersion its objects are named by. */
  readonly apiVersion: 'apps/v1' | 'batch/v1' | 'v1';
  /** Its collection's name in the API (plural). */
  readonly resource: string;
  /** Where its pod template sits in the object. */
  readonly podTemplatePath: readonly string[];
  /**
   * Its controller creates pods from the template: the pods' controlling owner, whose pod
   * template admission decides again, and on which a refused create is recorded (a
   * `FailedCreate` Event).
   */
  readonly createsPods: boolean;
  /** `kubectl rollout restart` gives its pods their sidecars again. */
  readonly restartable: boolean;
  /** The audit lists it (metadata only), so that an ownerReference to it is believed only when its uid matches. */
  readonly listedByAudit: boolean;
  /** The kind whose controller owns objects of this kind (a Deployment its ReplicaSets, a CronJob its Jobs). */
  readonly ownedBy?: string;
  /** kubectl's short name for it (`deploy/web`). */
  readonly shortName: string;
}

const template = ['spec', 'template'] as const;
const kinds: WorkloadKind[] = [
  {
    kind: 'Deployment',
    shortName: 'deploy',
    apiVersion: 'apps/v1',
    resource: 'deployments',
    podTemplatePath: template,
    createsPods: false,
    restartable: true,
    listedByAudit: true,
  },
  {
    kind: 'StatefulSet',
    shortName: 'sts',
    apiVersion: 'apps/v1',
    resource: 'statefulsets',
    podTemplatePath: template,
    createsPods: true,
    restartable: true,
    listedByAudit: true,
  },
  {
    kind: 'DaemonSet',
    shortName: 'ds',
    apiVersion: 'apps/v1',
    resource: 'daemonsets',
    podTemplatePath: template,
    createsPods: true,
    restartable: true,
    listedByAudit: true,
  },
  {
    kind: 'ReplicaSet',
    shortName: 'rs',
    apiVersion: 'apps/v1',
    resource: 'replicasets',
    podTemplatePath: template,
    createsPods: true,
    restartable: false,
    listedByAudit: true,
    ownedBy: 'Deployment',
  },
  {
    kind: 'ReplicationController',
    shortName: 'rc',
    apiVersion: 'v1',
    resource: 'replicationcontrollers',
    podTemplatePath: template,
    createsPods: true,
    restartable: false,
    listedByAudit: false,
  },
  {
    kind: 'Job',
    shortName: 'job',
    apiVersion: 'batch/v1',
    resource: 'jobs',
    podTemplatePath: template,
    createsPods: true,
    restartable: false,
    listedByAudit: true,
    ownedBy: 'CronJob',
  },
  {
    kind: 'CronJob',
    shortName: 'cj',
    apiVersion: 'batch/v1',
    resource: 'cronjobs',
    podTemplatePath: ['spec', 'jobTemplate', 'spec', 'template'],
    createsPods: false,
    restartable: false,
    listedByAudit: false,
  },
];

/** Every workload kind the injector knows, by kind (a Map: a kind from request data never reaches a prototype). */
export const workloadKinds: ReadonlyMap<string, WorkloadKind> = new Map(kinds.map((k) => [k.kind, k]));

/** The kinds that fit `pick`, in the table's order. */
export const kindsWhere = (pick: (kind: WorkloadKind) => boolean): WorkloadKind[] => kinds.filter(pick);

/** Whether `kind`'s controller creates pods from a pod template (the pods' owner that admission's decision is about). */
export function isWorkloadKind(kind: string): boolean {
  return workloadKinds.get(kind)?.createsPods === true;
}

/** The API path of `kind`'s collection (in `namespace`, or across the cluster). */
export function collectionPath(kind: WorkloadKind, namespace?: string): string {
  return apiPath(kind, namespace === undefined ? {} : { namespace });
}

/** The API path of one object of `kind`. */
export function objectPath(kind: WorkloadKind, namespace: string, name: string): string {
  return apiPath(kind, { namespace, name });
}

/** The API path of one workload whose controller creates pods, or undefined for any other kind. */
export function workloadPath(kind: string, namespace: string, name: string): string | undefined {
  const known = workloadKinds.get(kind);
  return known?.createsPods ? objectPath(known, namespace, name) : undefined;
}

/** The apiVersion objects of a pod-creating workload kind are named by, or undefined for any other kind. */
export function workloadApiVersion(kind: string): string | undefined {
  const known = workloadKinds.get(kind);
  return known?.createsPods ? known.apiVersion : undefined;
}

/** The object at `path`, when every step is an object. */
export function objectAt(object: JsonObject, path: readonly string[]): JsonObject | undefined {
  let node: unknown = object;
  for (const key of path) node = isJsonObject(node) ? node[key] : undefined;
  return isJsonObject(node) ? node : undefined;
}

/** The pod template of a workload of `kind` (a kind of `__proto__` is no workload), if it has one. */
export function podTemplateOf(kind: string, object: JsonObject): { readonly path: readonly string[]; readonly template: JsonObject } | undefined {
  const path = workloadKinds.get(kind)?.podTemplatePath;
  const template = path && objectAt(object, path);
  return path && template ? { path, template } : undefined;
}

/**
 * The pod a workload's controller would create from `template`: generateName from the workload,
 * the namespace filled (controller-created pods carry it from Kubernetes 1.24), and the
 * workload as controlling owner when it is given (a Job's pods run to completion by their owner too).
 */
export function podFromTemplate(
  template: JsonObject,
  workload: { readonly name: string; readonly namespace: string; readonly owner?: JsonObject },
): JsonObject {
  const metadata = isJsonObject(template.metadata) ? template.metadata : {};
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      ...metadata,
      generateName: `${workload.name}-`,
      namespace: workload.namespace,
      ...(workload.owner ? { ownerReferences: [workload.owner] } : {}),
    },
    spec: template.spec as JsonObject,
  };
}

/** The kind kubectl means by `name` (`deployment`, `deployments`, `deploy`, any case), if it is a workload kind. */
export function kindNamed(name: string): WorkloadKind | undefined {
  const lower = name.toLowerCase();
  return kinds.find((k) => lower === k.kind.toLowerCase() || lower === k.resource || lower === k.shortName);
}

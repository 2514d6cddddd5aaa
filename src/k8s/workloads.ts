/**
 * Where the workload kinds keep the pod template their controller creates pods from, and the
 * pod such a template makes: what `render` injects offline and what the auditors decide on.
 */
import { isJsonObject, type JsonObject } from './json.js';

/** The path of the pod template in each workload kind that has one. */
export const podTemplatePaths: Readonly<Record<string, readonly string[]>> = {
  Deployment: ['spec', 'template'],
  StatefulSet: ['spec', 'template'],
  DaemonSet: ['spec', 'template'],
  ReplicaSet: ['spec', 'template'],
  ReplicationController: ['spec', 'template'],
  Job: ['spec', 'template'],
  CronJob: ['spec', 'jobTemplate', 'spec', 'template'],
};

/** The object at `path`, when every step is an object. */
export function objectAt(object: JsonObject, path: readonly string[]): JsonObject | undefined {
  let node: unknown = object;
  for (const key of path) node = isJsonObject(node) ? node[key] : undefined;
  return isJsonObject(node) ? node : undefined;
}

/** The pod template of a workload of `kind` (own keys only: a kind of `__proto__` is no workload), if it has one. */
export function podTemplateOf(kind: string, object: JsonObject): { readonly path: readonly string[]; readonly template: JsonObject } | undefined {
  const path = Object.hasOwn(podTemplatePaths, kind) ? podTemplatePaths[kind] : undefined;
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

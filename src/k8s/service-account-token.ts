/**
 * The ServiceAccount admission plugin's token mount (k8s.io/kubernetes
 * plugin/pkg/admission/serviceaccount, mountServiceAccountToken): unless the pod or its
 * ServiceAccount opts out, every init container and container without a volumeMount at
 * /var/run/secrets/kubernetes.io/serviceaccount gets `{name, readOnly: true, mountPath}` of the
 * first volume whose name starts with `kube-api-access-`, appended to its volumeMounts.
 *
 * The API server runs the plugin again after a webhook changed the pod; when that second run
 * changes the pod too (it mounts the token into the sidecars just added), it calls the
 * webhooks again. A sidecar that carries the mount the plugin would add leaves that run
 * nothing to do: the same stored pod, and no second round of webhook calls for it.
 */
import { isJsonObject, type JsonObject } from './json.js';
import type { PodParts } from './pod.js';

export const serviceAccountTokenPath = '/var/run/secrets/kubernetes.io/serviceaccount';
const tokenVolumePrefix = 'kube-api-access-';

const mountsTokenPath = (container: JsonObject) =>
  Array.isArray(container.volumeMounts) && container.volumeMounts.some((m) => isJsonObject(m) && m.mountPath === serviceAccountTokenPath);

/**
 * The mount the plugin's next run would give a new container of this pod, when the pod shows
 * that its first run mounted the token: the pod does not say `automountServiceAccountToken:
 * false`, it has a `kube-api-access-` volume (the first such is the plugin's), and every
 * container and init container mounts that path. Whether the ServiceAccount itself opts out
 * only the plugin knows; a pod whose containers all mount the path shows that it did not (or
 * that the pod's author mounted it everywhere). Otherwise undefined: the plugin decides alone.
 */
export function serviceAccountTokenMount(parts: PodParts): JsonObject | undefined {
  if (parts.spec.automountServiceAccountToken === false) return undefined;
  const volume = parts.volumes.find((v) => typeof v.name === 'string' && v.name.startsWith(tokenVolumePrefix));
  if (!volume) return undefined;
  const containers = [...parts.initContainers, ...parts.containers];
  if (containers.length === 0 || !containers.every(mountsTokenPath)) return undefined;
  return { name: volume.name as string, readOnly: true, mountPath: serviceAccountTokenPath };
}

/** `container` as the plugin leaves it: with `mount` appended unless it mounts the path already. */
export function withTokenMount(container: JsonObject, mount: JsonObject): JsonObject {
  if (mountsTokenPath(container)) return container;
  const mounts = Array.isArray(container.volumeMounts) ? container.volumeMounts : [];
  return { ...container, volumeMounts: [...mounts, mount] };
}

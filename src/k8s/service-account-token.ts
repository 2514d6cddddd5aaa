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

/** An object with no keys but `keys`. */
const only = (value: unknown, keys: readonly string[]): value is JsonObject => isJsonObject(value) && Object.keys(value).every((k) => keys.includes(k));

/** Exactly `{name, readOnly: true, mountPath}` of `volume` at the token path: the plugin's mount, nothing else there. */
const pluginMount = (container: JsonObject, volume: string) =>
  Array.isArray(container.volumeMounts) &&
  container.volumeMounts.some(
    (m) => only(m, ['name', 'mountPath', 'readOnly']) && m.mountPath === serviceAccountTokenPath && m.name === volume && m.readOnly === true,
  );

/**
 * The volume as the plugin makes it (TokenVolumeSource): projected, a bound token at `token`,
 * the cluster's CA from the ConfigMap kube-root-ca.crt, the namespace from the downward API;
 * nothing else. A volume of that name that is anything else (a Secret, a hostPath, a token for
 * another audience) is the pod author's, and no sidecar is given it here.
 */
function isPluginVolume(volume: JsonObject): boolean {
  if (!only(volume, ['name', 'projected']) || !only(volume.projected, ['sources', 'defaultMode'])) return false;
  const sources = volume.projected.sources;
  if (!Array.isArray(sources) || sources.length !== 3) return false;
  const [token, ca, namespace] = sources;
  return (
    only(token, ['serviceAccountToken']) &&
    only(token.serviceAccountToken, ['path', 'expirationSeconds']) &&
    token.serviceAccountToken.path === 'token' &&
    only(ca, ['configMap']) &&
    only(ca.configMap, ['name', 'items']) &&
    ca.configMap.name === 'kube-root-ca.crt' &&
    JSON.stringify(ca.configMap.items) === '[{"key":"ca.crt","path":"ca.crt"}]' &&
    only(namespace, ['downwardAPI']) &&
    only(namespace.downwardAPI, ['items']) &&
    Array.isArray(namespace.downwardAPI.items) &&
    namespace.downwardAPI.items.length === 1 &&
    only(namespace.downwardAPI.items[0], ['path', 'fieldRef']) &&
    namespace.downwardAPI.items[0].path === 'namespace' &&
    only(namespace.downwardAPI.items[0].fieldRef, ['apiVersion', 'fieldPath']) &&
    namespace.downwardAPI.items[0].fieldRef.fieldPath === 'metadata.namespace'
  );
}

/**
 * The mount the plugin's next run would give a new container of this pod, when the pod shows
 * that its first run mounted the token: the pod does not say `automountServiceAccountToken:
 * false`, its first `kube-api-access-` volume (the one the plugin mounts) is the plugin's
 * projected token volume, and every container and init container has exactly the plugin's
 * mount of it. Whether the ServiceAccount itself opts out only the plugin knows: a pod shaped
 * so that was created again from its stored form after its ServiceAccount turned automounting
 * off gives the sidecars the token its own containers mount. Otherwise undefined: the plugin
 * decides alone.
 */
export function serviceAccountTokenMount(parts: PodParts): JsonObject | undefined {
  if (parts.spec.automountServiceAccountToken === false) return undefined;
  const volume = parts.volumes.find((v) => typeof v.name === 'string' && v.name.startsWith(tokenVolumePrefix));
  if (!volume || !isPluginVolume(volume)) return undefined;
  const name = volume.name as string;
  const containers = [...parts.initContainers, ...parts.containers];
  if (containers.length === 0 || !containers.every((c) => pluginMount(c, name))) return undefined;
  return { name, readOnly: true, mountPath: serviceAccountTokenPath };
}

/** `container` as the plugin leaves it: with `mount` appended unless it mounts the path already. */
export function withTokenMount(container: JsonObject, mount: JsonObject): JsonObject {
  if (mountsTokenPath(container)) return container;
  const mounts = Array.isArray(container.volumeMounts) ? container.volumeMounts : [];
  return { ...container, volumeMounts: [...mounts, mount] };
}

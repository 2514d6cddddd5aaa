/**
 * What the commands that ask the cluster (`why`, `simulate`) read the same way: one object (a
 * 404 is absent, any other failure an error that says what could not be read), the templates in
 * force as the injector mounts them, and when an object last changed.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { clusterReadFailure, ConfigError, KubernetesApiError, TemplateError } from '../errors.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { getJson } from '../kube-api/request.js';
import { checkTemplateFiles, templatesConfigMap } from '../pipeline/template-check.js';
import { compileTemplateFiles, isTemplateFileName, loadTemplateDir } from '../templates/load.js';
import type { TemplateSet } from '../templates/set.js';

const timeoutMs = 15_000;

/** The newest time in an object's managedFields (optionally only of entries that touch `field`), else its creationTimestamp. */
export function lastChanged(metadata: JsonObject, field?: string): string | undefined {
  let newest: string | undefined;
  for (const entry of Array.isArray(metadata.managedFields) ? metadata.managedFields : []) {
    if (!isJsonObject(entry) || typeof entry.time !== 'string') continue;
    if (field && !JSON.stringify(entry.fieldsV1 ?? {}).includes(field)) continue;
    if (newest === undefined || entry.time > newest) newest = entry.time;
  }
  return newest ?? (typeof metadata.creationTimestamp === 'string' ? metadata.creationTimestamp : undefined);
}

export const stringMap = (value: unknown): Record<string, string> => {
  const out: Record<string, string> = Object.create(null);
  if (isJsonObject(value)) for (const [k, v] of Object.entries(value)) if (typeof v === 'string') out[k] = v;
  return out;
};

/** GET, with a 404 as undefined and any other failure a ClusterError that says what could not be read. */
export async function readObject(kubeConfig: KubeConfig, path: string, what: string): Promise<JsonObject | undefined> {
  try {
    const object = await getJson(kubeConfig, path, timeoutMs);
    return isJsonObject(object) ? object : undefined;
  } catch (err) {
    if (err instanceof KubernetesApiError && err.statusCode === 404) return undefined;
    throw clusterReadFailure(what, err);
  }
}

/** Where the templates in force were read, and when they last changed (a ConfigMap's data; unknown for a folder). */
export interface TemplatesInForce {
  readonly set: TemplateSet;
  readonly from: string;
  readonly fromCluster: boolean;
  readonly changed?: string;
}

/**
 * The templates in force: a folder, or the injector's ConfigMap read as the injector reads its
 * mounted files (the same file names, the same checks: a set it would refuse is refused here).
 */
export async function templatesInForce(kubeConfig: KubeConfig, dir: string | undefined, injectorNamespace: string): Promise<TemplatesInForce> {
  if (dir !== undefined) return { set: await loadTemplateDir(dir, { allowEmpty: true }), from: dir, fromCluster: false };
  const where = `ConfigMap ${injectorNamespace}/${templatesConfigMap.name}`;
  const configMap = await readObject(kubeConfig, apiPath(apiResources.configMaps, { namespace: injectorNamespace, name: templatesConfigMap.name }), where);
  if (!configMap)
    return { set: compileTemplateFiles([], where, { allowEmpty: true }), from: `${where} (not there: no template is in force)`, fromCluster: true };
  const files = Object.entries(stringMap(configMap.data))
    .filter(([name]) => isTemplateFileName(name))
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, text]) => ({ name, text }));
  const metadata = isJsonObject(configMap.metadata) ? configMap.metadata : {};
  const changed = lastChanged(metadata, 'f:data');
  try {
    const set = await checkTemplateFiles(files, where, {}, { allowEmpty: true });
    return { set, from: where, fromCluster: true, ...(changed ? { changed } : {}) };
  } catch (err) {
    if (err instanceof TemplateError)
      throw new ConfigError([
        `${where} holds templates the injector refuses (it keeps serving its last good set; --templates DIR decides with a folder):`,
        ...err.problems.map((p) => `${p.file}: ${p.field ? `${p.field}: ` : ''}${p.message}`),
      ]);
    throw err;
  }
}

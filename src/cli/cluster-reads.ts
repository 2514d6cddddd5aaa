/**
 * What the commands that ask the cluster (`why`, `simulate`) read the same way: one object (a
 * 404 is absent, any other failure an error that says what could not be read), the templates in
 * force as the injector mounts them, and when an object last changed.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import { ConfigError, KubernetesApiError, TemplateError } from '../errors.js';
import { apiPath, apiResources } from '../k8s/api-paths.js';
import { isJsonObject, type JsonObject } from '../k8s/json.js';
import { getJson } from '../kube-api/request.js';
import { templatesConfigMap } from '../pipeline/template-check.js';
import { compileTemplateFiles, loadTemplateDir } from '../templates/load.js';

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

/** GET, with a 404 as undefined and any other failure a ConfigError that says what could not be read. */
export async function readObject(kubeConfig: KubeConfig, path: string, what: string): Promise<JsonObject | undefined> {
  try {
    const object = await getJson(kubeConfig, path, timeoutMs);
    return isJsonObject(object) ? object : undefined;
  } catch (err) {
    if (err instanceof KubernetesApiError && err.statusCode === 404) return undefined;
    throw new ConfigError([`cannot read ${what}: ${(err as Error).message}`]);
  }
}

/** The templates in force: a folder, or the injector's ConfigMap (one key per file, as the injector mounts it). */
export async function templatesInForce(kubeConfig: KubeConfig, dir: string | undefined, injectorNamespace: string) {
  if (dir !== undefined) return { set: await loadTemplateDir(dir, { allowEmpty: true }), from: dir, changed: undefined };
  const where = `ConfigMap ${injectorNamespace}/${templatesConfigMap.name}`;
  const configMap = await readObject(kubeConfig, apiPath(apiResources.configMaps, { namespace: injectorNamespace, name: templatesConfigMap.name }), where);
  if (!configMap)
    return { set: compileTemplateFiles([], where, { allowEmpty: true }), from: `${where} (not there: no template is in force)`, changed: undefined };
  const files = Object.entries(stringMap(configMap.data)).map(([name, text]) => ({ name, text }));
  try {
    const metadata = isJsonObject(configMap.metadata) ? configMap.metadata : {};
    return { set: compileTemplateFiles(files, where, { allowEmpty: true }), from: where, changed: lastChanged(metadata) };
  } catch (err) {
    if (err instanceof TemplateError)
      throw new ConfigError([
        `${where} holds templates the injector refuses (it keeps serving its last good set; --templates DIR decides with a folder):`,
        ...err.problems.map((p) => `${p.file}: ${p.field ? `${p.field}: ` : ''}${p.message}`),
      ]);
    throw err;
  }
}

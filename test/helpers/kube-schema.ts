/**
 * Validates Kubernetes objects against the API's JSON schemas with kubernetes-models (and its
 * cert-manager package for cert-manager.io objects). Returns a problem per invalid object.
 */
interface Validatable {
  validate(): void;
}
type ModelClass = new (data: unknown) => Validatable;

async function modelFor(apiVersion: string, kind: string): Promise<ModelClass> {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  const path =
    group === 'cert-manager.io'
      ? `@kubernetes-models/cert-manager/cert-manager.io/${version}/${kind}`
      : group
        ? `kubernetes-models/${group}/${version}/${kind}`
        : `kubernetes-models/v1/${kind}`;
  const module = (await import(path)) as Record<string, ModelClass>;
  const model = module[kind];
  if (!model) throw new Error(`no schema for ${apiVersion} ${kind}`);
  return model;
}

/**
 * kustomize wraps Secret data at 70 columns. Go's base64 decoder, which the API server uses for
 * []byte fields, skips newlines, so the API accepts it; the schema's `byte` format does not.
 */
function withUnwrappedBase64(object: Record<string, any>): Record<string, any> {
  if (object.kind !== 'Secret' || !object.data) return object;
  const data = Object.fromEntries(Object.entries(object.data as Record<string, string>).map(([k, v]) => [k, v.replace(/[\r\n]/g, '')]));
  return { ...object, data };
}

/** Validates each object; returns `kind/name: problem` lines (empty when all are valid). */
export async function schemaProblems(objects: readonly Record<string, any>[]): Promise<string[]> {
  const problems: string[] = [];
  for (const object of objects) {
    const label = `${object.kind}/${object.metadata?.name}`;
    try {
      const Model = await modelFor(object.apiVersion, object.kind);
      new Model(withUnwrappedBase64(object)).validate();
    } catch (err) {
      problems.push(`${label}: ${(err as Error).message}`);
    }
  }
  return problems;
}

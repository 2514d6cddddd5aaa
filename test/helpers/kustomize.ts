/** Renders a kustomization with `kubectl kustomize` (offline) into its objects. */
import { execFileSync } from 'node:child_process';
import { parseAllDocuments } from 'yaml';

export type KubeObject = Record<string, any>;

export function kustomizeObjects(dir: string): KubeObject[] {
  let text: string;
  try {
    text = execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' });
  } catch (err) {
    throw new Error(`kubectl kustomize ${dir} failed (the kubectl client is needed; it renders offline): ${(err as Error).message}`, { cause: err });
  }
  return parseAllDocuments(text).map((d) => d.toJS() as KubeObject);
}

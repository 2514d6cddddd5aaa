/** Renders a kustomization with `kubectl kustomize` (offline) into its objects. */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
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

/** The objects of a kustomization written for the occasion (under build/, removed after): `resources` and `components`, paths from the clone's root. */
export function kustomizeWith(resources: readonly string[], components: readonly string[] = []): KubeObject[] {
  mkdirSync('build', { recursive: true });
  const dir = mkdtempSync(join('build', 'kustomize-'));
  try {
    const list = (items: readonly string[]) => items.map((item) => `  - ${relative(dir, item)}`).join('\n');
    const fields = [
      'apiVersion: kustomize.config.k8s.io/v1beta1',
      'kind: Kustomization',
      `resources:\n${list(resources)}`,
      ...(components.length > 0 ? [`components:\n${list(components)}`] : []),
    ];
    writeFileSync(join(dir, 'kustomization.yaml'), `${fields.join('\n')}\n`);
    return kustomizeObjects(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

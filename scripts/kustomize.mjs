// `kubectl kustomize` of a kustomization written for the occasion: its resources and components
// (paths from the clone's root) and any further fields (`images:`, …). kustomize takes only
// relative paths, and only from a folder of its own: the folder is made under build/ and removed.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

/** The rendered YAML text. */
export function kustomize({ resources, components = [], extra = {} }) {
  mkdirSync('build', { recursive: true });
  const dir = mkdtempSync(join('build', 'kustomize-'));
  try {
    const list = (items) => items.map((item) => `  - ${relative(dir, item)}`).join('\n');
    const fields = [
      'apiVersion: kustomize.config.k8s.io/v1beta1',
      'kind: Kustomization',
      `resources:\n${list(resources)}`,
      ...(components.length > 0 ? [`components:\n${list(components)}`] : []),
      ...Object.entries(extra).map(([field, value]) => `${field}: ${JSON.stringify(value)}`),
    ];
    writeFileSync(join(dir, 'kustomization.yaml'), `${fields.join('\n')}\n`);
    return execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', maxBuffer: 64 << 20 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

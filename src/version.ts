/**
 * The product's version: package.json's, the one place it is written. `make release` names the
 * install manifest, the image archive and its SBOM with it, and the image tag in
 * manifests/base/kustomization.yaml must equal it (test/production-install.test.ts).
 */
import { readFileSync } from 'node:fs';

/** The version in package.json (two folders above this module, in the repository and in the image). */
export function productVersion(): string {
  const text = readFileSync(new URL('../../package.json', import.meta.url), 'utf8');
  const version = (JSON.parse(text) as { version?: unknown }).version;
  if (typeof version !== 'string') throw new Error('package.json has no version');
  return version;
}

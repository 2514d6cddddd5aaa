#!/usr/bin/env node
// Renders the install (`kubectl kustomize` of a kustomization, `manifests` by default) with
// the injector's image pinned to a pushed digest: REGISTRY/NAME@sha256:…, so the cluster runs
// exactly the bytes that were built and pushed, whatever the tag says later.
//   node scripts/image/install-yaml.mjs IMAGE DIGEST_FILE [KUSTOMIZATION_DIR] > install.yaml
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';

const [image, digestFile, kustomization = 'manifests'] = process.argv.slice(2);
if (!image || !digestFile) {
  console.error('usage: install-yaml.mjs IMAGE DIGEST_FILE [KUSTOMIZATION_DIR]');
  process.exit(2);
}
let digest;
try {
  digest = readFileSync(digestFile, 'utf8').trim();
} catch {
  console.error(`install-yaml: no digest at ${digestFile}: push the image first (make push IMAGE=${image})`);
  process.exit(2);
}
if (!/^sha256:[0-9a-f]{64}$/.test(digest)) {
  console.error(`install-yaml: ${digestFile} holds no sha256 digest`);
  process.exit(2);
}
// The repository without tag or digest: a colon after the last slash starts the tag (a colon
// before it is a registry port).
const slash = image.lastIndexOf('/');
const tail = image.slice(slash + 1).replace(/[@:].*$/, '');
const name = image.slice(0, slash + 1) + tail;
// kustomize takes only relative paths, and only from a folder of its own.
mkdirSync('build', { recursive: true });
const dir = mkdtempSync(join('build', 'install-yaml-'));
try {
  writeFileSync(
    join(dir, 'kustomization.yaml'),
    [
      'apiVersion: kustomize.config.k8s.io/v1beta1',
      'kind: Kustomization',
      'resources:',
      `  - ${relative(dir, kustomization)}`,
      'images:',
      '  - name: sidecar-injector',
      `    newName: ${name}`,
      `    digest: ${digest}`,
      '',
    ].join('\n'),
  );
  process.stdout.write(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8', maxBuffer: 64 << 20 }));
} finally {
  rmSync(dir, { recursive: true, force: true });
}

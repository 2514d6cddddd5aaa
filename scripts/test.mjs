#!/usr/bin/env node
// Runs the test suites with TAP output, passes it through, and ends with the line CI reads:
// "N passed, N failed" (plus ", N skipped"), counted over every suite run.
//
// 1. The unit suite: ava over dist/ (package.json's ava config), every file in parallel.
// 2. The real-cluster suite: ava over dist/test/cluster/ (test/cluster/ava.config.mjs), inside
//    scripts/cluster.sh, which builds the pinned control plane if needed and starts it with the
//    injector installed on its real node. It needs root, Go, and what the real node runs
//    (containerd, runc, cgroup v1; real-node.ts says what is missing); without them it is skipped, saying why — except
//    in CI (CI=true), where a missing prerequisite is a failure. SIDECAR_INJECTOR_CLUSTER=off
//    skips it on purpose (a quick local run).
//
// `--cluster-only` runs only the second (npm run test:cluster). Other arguments go to ava.
import { spawn, spawnSync } from 'node:child_process';
import { createInterface } from 'node:readline';

const args = process.argv.slice(2);
const clusterOnly = args.includes('--cluster-only');
const avaArgs = args.filter((a) => a !== '--cluster-only');
const ava = 'node_modules/ava/entrypoints/cli.mjs';

let passed = 0;
let failed = 0;
let skipped = 0;

/** Runs one suite, passing its TAP through and counting its results; resolves with its exit code. */
async function suite(command, commandArgs) {
  const child = spawn(command, commandArgs, { stdio: ['ignore', 'pipe', 'inherit'] });
  let sawFailure = false;
  for await (const line of createInterface({ input: child.stdout })) {
    process.stdout.write(`${line}\n`);
    if (/^not ok \d+/.test(line)) {
      failed++;
      sawFailure = true;
    } else if (/^ok \d+ .*# SKIP/i.test(line)) skipped++;
    else if (/^ok \d+/.test(line)) passed++;
  }
  const code = await new Promise((resolve) => child.once('close', (c) => resolve(c ?? 1)));
  if (code !== 0 && !sawFailure) failed++;
  return code;
}

const machinePath = (process.env.PATH ?? '')
  .split(':')
  .filter((dir) => !dir.endsWith('/node_modules/.bin'))
  .join(':');

/** Why the real-cluster suite cannot run here, or undefined. */
async function clusterMissing() {
  if (process.env.SIDECAR_INJECTOR_CLUSTER === 'off') return 'SIDECAR_INJECTOR_CLUSTER=off';
  if (process.platform !== 'linux') return `it needs Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'it needs root (network namespaces, nftables, a kubelet)';
  for (const [tool, pkg] of [
    ['go', 'Go 1.26'],
    ['nft', "Debian's nftables"],
    ['unshare', "Debian's util-linux"],
    ['ip', "Debian's iproute2"],
    ['buildah', "Debian's buildah (make image: the real node runs the image)"],
  ])
    // The machine's tools: under npm, node_modules/.bin is first on PATH (and @vercel/nft installs an `nft`).
    if (spawnSync('sh', ['-c', `command -v ${tool}`], { env: { ...process.env, PATH: machinePath } }).status !== 0) return `${tool} is missing (${pkg})`;
  // The injector runs only on the world's real node (a kubelet with containerd and runc).
  if (process.env.SIDECAR_INJECTOR_REAL_NODE === 'off') return 'SIDECAR_INJECTOR_REAL_NODE=off (the injector runs only on the real node)';
  const { realNodeMissing } = await import('../dist/test/cluster/world/real-node.js');
  const missing = realNodeMissing();
  return missing ? `the real node cannot run: ${missing}` : undefined;
}

let code = 0;
if (!clusterOnly) code = await suite(process.execPath, [ava, '--tap', ...avaArgs]);
const missing = await clusterMissing();
if (missing && (clusterOnly || process.env.CI === 'true') && missing !== 'SIDECAR_INJECTOR_CLUSTER=off') {
  process.stderr.write(`the real-cluster suite cannot run: ${missing}\n`);
  failed++;
  code ||= 1;
} else if (missing) {
  process.stdout.write(`# the real-cluster suite skipped: ${missing}\n`);
} else {
  const clusterCode = await suite('scripts/cluster.sh', ['run', '--', process.execPath, ava, '--tap', '--config', 'test/cluster/ava.config.mjs', ...avaArgs]);
  code ||= clusterCode;
}
process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
process.exit(code);

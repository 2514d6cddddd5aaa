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
// `--cluster-only` runs only the second (npm run test:cluster); `--kubernetes MINOR` runs it on
// that minor's control plane and kubelet (scripts/cluster.sh). `--older-minors` (test:node24
// passes it) then runs the files whose behaviour depends on the Kubernetes version
// (`versionDependentFiles`) on every other supported minor, a world each. Other arguments go to ava.
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

const args = process.argv.slice(2);
const clusterOnly = args.includes('--cluster-only');
const minorAt = args.indexOf('--kubernetes');
const minor = minorAt >= 0 ? args[minorAt + 1] : undefined;
if (minorAt >= 0 && !minor) {
  process.stderr.write('--kubernetes needs a minor (1.36)\n');
  process.exit(2);
}
const olderMinors = args.includes('--older-minors');
const avaArgs = args.filter((a, i) => a !== '--cluster-only' && a !== '--older-minors' && (minorAt < 0 || (i !== minorAt && i !== minorAt + 1)));

/**
 * The real-cluster files that prove what differs between minors: the install, the admission
 * chain (the corpus and the decision matrix), Pod Security at each level, the required policies
 * and the guard, the MutatingAdmissionPolicy export (v1, the beta, or its refusal), native
 * sidecars and their fallback on a real kubelet, pod-level resources, the rollout preflight, why.
 */
const versionDependentFiles = ['install', 'corpus', 'templates', 'opt-out', 'pod-security', 'map-export', 'pod-fit', 'real-node', 'rollout', 'why'].map(
  (name) => `dist/test/cluster/${name}.test.js`,
);

/** The supported minors (a Go module each under test/cluster/tools) and the default (tools/default-minor). */
function supportedMinors() {
  const minors = readdirSync('test/cluster/tools')
    .map((d) => /^k8s-(1\.\d+)$/.exec(d)?.[1])
    .filter((m) => m !== undefined);
  const defaultMinor = readFileSync('test/cluster/tools/default-minor', 'utf8').trim();
  return { minors, defaultMinor };
}
const ava = 'node_modules/ava/entrypoints/cli.mjs';

let passed = 0;
let failed = 0;
let skipped = 0;

/** Runs one suite, passing its TAP through and counting its results; resolves with its exit code. */
async function suite(command, commandArgs, env = process.env) {
  const child = spawn(command, commandArgs, { stdio: ['ignore', 'pipe', 'inherit'], env });
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
if (!clusterOnly) {
  // The unit suite's temporary folders (os.tmpdir() reads TMPDIR) go in one folder, removed after it.
  const scratch = mkdtempSync(join(tmpdir(), 'sidecar-injector-unit-'));
  try {
    code = await suite(process.execPath, [ava, '--tap', ...avaArgs], { ...process.env, TMPDIR: scratch });
  } finally {
    // A folder a straggling child still writes to is said, not fatal: the counts below are what CI reads.
    try {
      rmSync(scratch, { recursive: true, force: true, maxRetries: 3 });
    } catch (err) {
      process.stderr.write(`could not remove the unit suite's temporary folder ${scratch}: ${err.message}\n`);
    }
  }
}
const missing = await clusterMissing();
if (missing && (clusterOnly || process.env.CI === 'true') && missing !== 'SIDECAR_INJECTOR_CLUSTER=off') {
  process.stderr.write(`the real-cluster suite cannot run: ${missing}\n`);
  failed++;
  code ||= 1;
} else if (missing) {
  process.stdout.write(`# the real-cluster suite skipped: ${missing}\n`);
} else {
  /** The real-cluster suite over `files` in a world of `kubernetes` (the default minor when undefined). */
  const clusterSuite = (kubernetes, files) =>
    suite('scripts/cluster.sh', [
      ...(kubernetes ? ['--kubernetes', kubernetes] : []),
      'run',
      '--',
      process.execPath,
      ava,
      '--tap',
      '--config',
      'test/cluster/ava.config.mjs',
      ...files,
    ]);
  // Every suite runs whatever the ones before it did (`code ||= await …` would skip it after a failure).
  const clusterCode = await clusterSuite(minor, avaArgs);
  code ||= clusterCode;
  if (olderMinors) {
    const { minors, defaultMinor } = supportedMinors();
    for (const other of minors.filter((m) => m !== (minor ?? defaultMinor))) {
      process.stdout.write(`# the version-dependent real-cluster files on Kubernetes ${other}\n`);
      const otherCode = await clusterSuite(other, versionDependentFiles);
      code ||= otherCode;
    }
  }
}
process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
process.exit(code);

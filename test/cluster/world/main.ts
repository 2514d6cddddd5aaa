/**
 * The entry of scripts/cluster.sh, inside the network and mount namespaces it made:
 *
 *   node dist/test/cluster/world/main.js --bin DIR [--opt-in NS]... -- CMD ARGS...
 *
 * Brings the world up (world.ts), runs CMD with KUBECONFIG set to the admin's kubeconfig, the
 * world's kubectl first on PATH and SIDECAR_INJECTOR_TEST_CLUSTER naming the world's state
 * folder, tears everything down when CMD ends, and exits with CMD's status. The state folder
 * (every component's log, the real node's pod logs) is kept when CMD or the
 * world failed, or with SIDECAR_INJECTOR_CLUSTER_KEEP=1, and its path printed.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { networkInterfaces, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { containerLogs, startWorld } from './world.js';

function usage(message: string): never {
  console.error(`cluster: ${message}\nusage: scripts/cluster.sh run -- CMD ARGS...`);
  process.exit(2);
}

const argv = process.argv.slice(2);
const separator = argv.indexOf('--');
if (separator < 0 || separator === argv.length - 1) usage('no command given');
const command = argv.slice(separator + 1);
let bin: string | undefined;
const optIn: string[] = [];
for (let i = 0; i < separator; i++) {
  if (argv[i] === '--bin') bin = argv[++i];
  else if (argv[i] === '--opt-in') optIn.push(argv[++i]!);
  else usage(`unknown option ${argv[i]}`);
}
if (!bin) usage('--bin DIR is required (test/cluster/build.sh prints it)');
// A fresh network namespace has only a loopback that is down: no address at all.
if (Object.keys(networkInterfaces()).length > 0)
  usage('this runs only in a fresh network namespace of its own: start it with scripts/cluster.sh, which makes one');

const clone = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..', '..');
const state = mkdtempSync(join(tmpdir(), 'sidecar-injector-cluster-'));
const keep = process.env.SIDECAR_INJECTOR_CLUSTER_KEEP === '1';
const t0 = performance.now();
let world;
try {
  world = await startWorld({ bin, state, clone, optIn, realNode: process.env.SIDECAR_INJECTOR_REAL_NODE !== 'off' });
} catch (err) {
  console.error(`cluster: the world did not come up: ${(err as Error).stack ?? err}`);
  for (const log of containerLogs(state)) console.error(`cluster: the end of ${log.file}:\n${log.tail}`);
  // What the kernel holds (the kube-proxy stand-in's history is in service-proxy.log).
  try {
    console.error(`cluster: nft list ruleset:\n${execFileSync('nft', ['list', 'ruleset'], { encoding: 'utf8' })}`);
  } catch (nftErr) {
    console.error(`cluster: nft list ruleset failed: ${(nftErr as Error).message}`);
  }
  console.error(`cluster: logs kept in ${state}`);
  process.exit(1);
}
const { startTimes, kubernetesVersion, realNode } = world.file;
console.error(
  `cluster: Kubernetes ${kubernetesVersion} up (etcd ${Math.round(startTimes.etcdMs)} ms, API server ${Math.round(startTimes.apiServerMs)} ms, ` +
    `controllers ${Math.round(startTimes.controllersMs)} ms); ` +
    (realNode
      ? `real node Ready (images ${Math.round(realNode.startMs.images)} ms, containerd ${Math.round(realNode.startMs.containerd)} ms, registry ${Math.round(realNode.startMs.registry)} ms, kubelet ${Math.round(realNode.startMs.kubeletReady)} ms); ` +
        `the injector pushed to its registry, pulled and run there, installed and healthy ${Math.round(performance.now() - t0)} ms after the start; `
      : 'no real node (SIDECAR_INJECTOR_REAL_NODE=off): only the stand-in node, and no injector installed; ') +
    `state in ${state}`,
);
const child = spawn(command[0]!, command.slice(1), {
  stdio: 'inherit',
  env: {
    ...process.env,
    KUBECONFIG: world.file.admin.kubeconfig,
    PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    SIDECAR_INJECTOR_TEST_CLUSTER: state,
  },
});
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
const code = await new Promise<number>((resolveCode) => {
  child.once('error', (err) => {
    console.error(`cluster: cannot run ${command[0]}: ${err.message}`);
    resolveCode(127);
  });
  child.once('exit', (c, signal) => resolveCode(c ?? (signal ? 128 + 15 : 1)));
});
await world.stop();
if (code !== 0 || keep) console.error(`cluster: logs kept in ${state}`);
else rmSync(state, { recursive: true, force: true });
process.exit(code);

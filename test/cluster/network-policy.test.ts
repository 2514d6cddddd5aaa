/**
 * The shipped NetworkPolicy, enforced on the real node. The world runs no network plugin that
 * enforces NetworkPolicy, so this file runs one for its test: kube-router's NetworkPolicy
 * controller (iptables rules and ipsets; built from its pinned module by
 * test/cluster/build-kube-router.sh, its pod network and service proxy left off) in the real
 * node's network namespace, which is the world's. As network plugins do, it admits what the node
 * itself sends a pod on it: the API server's webhook calls and its service proxy, the kubelet's
 * probes. The attack is a tenant's pod on the same node opening connections to each of the
 * injector's ports; Prometheus's stand-in is a pod in the namespace `monitoring`. Because the
 * node's own traffic is admitted first, the `ipBlock` that admits a control plane elsewhere is
 * tested from a network namespace of the test's own, routed through the node.
 */
import test, { type ExecutionContext } from 'ava';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, openSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'yaml';
import {
  deploy,
  eventually,
  healthyInstall,
  injectorPods,
  joinWorld,
  onRealNode,
  optedInNamespace,
  testNamespace,
  withTemplate,
  type Json,
} from './helpers.js';

const webhookPort = 10250;
const metricsPort = 8443;
const probePort = 8081;
const bridgeSysctl = '/proc/sys/net/bridge/bridge-nf-call-iptables';
/** The machine's tools kube-router runs (under npm, node_modules/.bin comes first on PATH). */
const machinePath = '/usr/sbin:/usr/bin:/sbin:/bin';

/** A pod of the busybox image on the real node that only waits, in `namespace`; its IP once it runs. */
async function waitingPod(namespace: string, name: string, command: readonly string[] = ['sleep', '3600']): Promise<string> {
  const { kube, file } = joinWorld();
  await kube.create(`/api/v1/namespaces/${namespace}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: onRealNode({ containers: [{ name: 'shell', image: file.realNode!.image, imagePullPolicy: 'IfNotPresent', command }] }),
  });
  const running = await eventually(`pod ${namespace}/${name} running`, async () => {
    const pod = await kube.find(`/api/v1/namespaces/${namespace}/pods/${name}`);
    return pod?.status?.phase === 'Running' && pod.status.podIP ? (pod as Json) : undefined;
  });
  return running.status.podIP as string;
}

/**
 * Whether a TCP connection from the pod `namespace/name` to `ip:port` is made within 2 s (busybox
 * nc, from inside the pod: exit 1 when refused or timed out). Any other failure (the exec itself)
 * is thrown, never taken for a refusal.
 */
async function connects(namespace: string, name: string, ip: string, port: number): Promise<boolean> {
  const { kubectl } = joinWorld();
  return kubectl(['exec', '-n', namespace, name, '--', 'nc', '-w', '2', ip, String(port)], '').then(
    () => true,
    (err: Error) => {
      if (/command terminated with exit code 1\b/.test(err.message)) return false;
      throw err;
    },
  );
}

/** The listener's port on the pod of `monitoring`, which no policy selects: the positive control. */
const listenerPort = 9000;

/**
 * A pod in the namespace `monitoring` (made for the test when missing: the base NetworkPolicy
 * names it by its name label), Prometheus's stand-in. It also listens on `listenerPort`.
 */
async function monitoringPod(t: ExecutionContext, pod: string): Promise<{ pod: string; ip: string }> {
  const { kube } = joinWorld();
  // One that an earlier test made may still be going.
  const found = await eventually('the namespace monitoring active or gone', async () => {
    const namespace = await kube.find('/api/v1/namespaces/monitoring');
    return namespace?.status?.phase === 'Terminating' ? undefined : { namespace };
  });
  const existed = found.namespace !== undefined;
  if (!existed) {
    await kube.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'monitoring' } });
    t.teardown(() => kube.delete('/api/v1/namespaces/monitoring'));
    await eventually('the default ServiceAccount of monitoring', () => kube.find('/api/v1/namespaces/monitoring/serviceaccounts/default'));
  }
  const ip = await waitingPod('monitoring', pod, ['sh', '-c', `while true; do nc -l -p ${listenerPort} </dev/null; done`]);
  // A namespace this test made goes with its pods.
  if (existed) t.teardown(() => kube.delete(`/api/v1/namespaces/monitoring/pods/${pod}`));
  return { pod, ip };
}

/** Installs `overlay` (the shipped install again after the test); the replicas' pod IPs, once healthy. */
async function restrictedInstall(t: ExecutionContext, overlay: string): Promise<string[]> {
  await deploy(overlay);
  t.teardown(async () => {
    await deploy();
    await healthyInstall();
  });
  await healthyInstall();
  const replicas = (await injectorPods()).filter((p) => !p.metadata.deletionTimestamp && p.status?.podIP);
  t.true(replicas.length >= 2, 'two replicas, each a target');
  return replicas.map((p) => p.status.podIP as string);
}

/**
 * A control plane on other machines, as the injector's pods see one: a network namespace of its
 * own joined to the node by a veth, its address `controlPlane` outside the pod network, routed
 * through the node to the pods (the node forwards for the test). A second address, `outsider`,
 * stands for any other host outside the pod network. Gone after the test: the namespace dies
 * with its process, the veth with it, the node's forwarding as it was.
 */
const remote = { node: '192.0.2.1', controlPlane: '192.0.2.10', outsider: '198.51.100.10' } as const;
const forwardSysctl = '/proc/sys/net/ipv4/ip_forward';

interface RemoteNetwork {
  /** Whether a TCP connection from `source` (one of `remote`'s addresses) to `ip:port` is made within 2 s. */
  connects(source: string, ip: string, port: number): Promise<boolean>;
}

async function remoteNetwork(t: ExecutionContext): Promise<RemoteNetwork> {
  const env = { ...process.env, PATH: machinePath };
  const ip = (...args: string[]) => execFileSync('ip', args, { env, stdio: ['ignore', 'ignore', 'pipe'] });
  const forwarding = readFileSync(forwardSysctl, 'utf8').trim();
  const holder = spawn('unshare', ['--net', '--', 'sleep', '3600'], { stdio: 'ignore', env });
  const pid = String(holder.pid);
  t.teardown(() => {
    holder.kill('SIGKILL');
    writeFileSync(forwardSysctl, forwarding);
  });
  const ownNamespace = readlinkSync('/proc/self/ns/net');
  await eventually('the remote network namespace', () => {
    if (holder.exitCode !== null) throw new Error(`unshare exited (${holder.exitCode})`);
    return readlinkSync(`/proc/${pid}/ns/net`) !== ownNamespace || undefined;
  });
  const inRemote = (...args: string[]) => execFileSync('nsenter', ['-t', pid, '-n', '--', 'ip', ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
  // One a killed run left behind (its namespace's process outlived it) goes first.
  try {
    ip('link', 'del', 'si-remote');
  } catch {
    // None left: the usual case.
  }
  ip('link', 'add', 'si-remote', 'type', 'veth', 'peer', 'name', 'si-remote-end', 'netns', pid);
  ip('addr', 'add', `${remote.node}/24`, 'dev', 'si-remote');
  ip('link', 'set', 'si-remote', 'up');
  // The outsider's network is reached through the same link (the far end answers for it).
  ip('route', 'add', `${remote.outsider}/32`, 'dev', 'si-remote');
  inRemote('link', 'set', 'lo', 'up');
  inRemote('addr', 'add', `${remote.controlPlane}/24`, 'dev', 'si-remote-end');
  inRemote('addr', 'add', `${remote.outsider}/32`, 'dev', 'si-remote-end');
  inRemote('link', 'set', 'si-remote-end', 'up');
  inRemote('route', 'add', 'default', 'via', remote.node, 'src', remote.controlPlane);
  writeFileSync(forwardSysctl, '1');
  // A connection either made, or refused or timed out (exit 1); anything else (exit 2) is thrown.
  const probe = `const s = require('node:net').connect({ host: process.argv[1], port: Number(process.argv[2]), localAddress: process.argv[3], timeout: 2000 });
s.on('connect', () => process.exit(0));
s.on('timeout', () => process.exit(1));
s.on('error', (e) => process.exit(['ECONNREFUSED', 'EHOSTUNREACH', 'ETIMEDOUT'].includes(e.code) ? 1 : (console.error(e.message), 2)));`;
  return {
    connects: (source, target, port) =>
      new Promise((resolve, reject) => {
        const child = spawn('nsenter', ['-t', pid, '-n', '--', process.execPath, '-e', probe, target, String(port), source], {
          stdio: ['ignore', 'ignore', 'pipe'],
          env,
        });
        let stderr = '';
        child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        child.on('error', reject);
        child.on('exit', (code) =>
          code === 0 ? resolve(true) : code === 1 ? resolve(false) : reject(new Error(`the probe from ${source} failed (${code}): ${stderr.slice(0, 300)}`)),
        );
      }),
  };
}

/** kube-router's chains and ipsets (its own `--cleanup-config` leaves the NetworkPolicy controller's in place). */
const enforcerNames = /KUBE-(ROUTER|NWPLCY|POD-FW|SRC|DST)-|kube-router-/;

/** Removes kube-router's rules from the filter table, then its ipsets; throws when any is left. */
function removeRules(env: NodeJS.ProcessEnv): void {
  const saved = execFileSync('iptables-save', ['-t', 'filter'], { env, encoding: 'utf8' });
  const kept = saved
    .split('\n')
    .filter((line) => !enforcerNames.test(line))
    .join('\n');
  execFileSync('iptables-restore', ['-T', 'filter'], { env, input: kept });
  const sets = execFileSync('ipset', ['list', '-n'], { env, encoding: 'utf8' }).split('\n');
  for (const set of sets.filter((name) => enforcerNames.test(name))) execFileSync('ipset', ['destroy', set], { env });
  const left = [
    ...execFileSync('iptables-save', ['-t', 'filter'], { env, encoding: 'utf8' }).split('\n'),
    ...execFileSync('ipset', ['list', '-n'], { env, encoding: 'utf8' }).split('\n'),
  ];
  if (left.some((line) => enforcerNames.test(line)))
    throw new Error(`kube-router's rules or ipsets are left: ${left.filter((l) => enforcerNames.test(l)).join('; ')}`);
}

/** Runs the enforcer for the rest of the test; stopped and its rules and ipsets removed after it, the bridge sysctl restored. */
async function enforce(t: ExecutionContext): Promise<ChildProcess> {
  const { file } = joinWorld();
  const binary = execFileSync('test/cluster/build-kube-router.sh', { stdio: ['ignore', 'pipe', 'inherit'] })
    .toString()
    .trim();
  // Pods of the one bridge reach each other bridged: iptables sees those packets only with this set.
  const bridged = readFileSync(bridgeSysctl, 'utf8').trim();
  writeFileSync(bridgeSysctl, '1');
  const log = openSync(join(file.realNode!.dir, 'logs', 'kube-router.log'), 'a');
  const env = { ...process.env, PATH: machinePath };
  const enforcer = spawn(
    binary,
    [
      `--kubeconfig=${file.admin.kubeconfig}`,
      `--hostname-override=${file.realNode!.name}`,
      '--run-firewall=true',
      '--run-router=false',
      '--run-service-proxy=false',
      '--enable-cni=false',
      '--metrics-port=0',
      '--health-port=0',
    ],
    { stdio: ['ignore', log, log], env },
  );
  t.teardown(async () => {
    try {
      if (enforcer.exitCode === null && enforcer.signalCode === null) {
        const exited = new Promise((resolve) => enforcer.once('exit', resolve));
        enforcer.kill('SIGTERM');
        await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
        enforcer.kill('SIGKILL');
      }
      removeRules(env);
    } finally {
      writeFileSync(bridgeSysctl, bridged);
    }
  });
  await eventually('kube-router’s network policy chains', () => {
    if (enforcer.exitCode !== null) throw new Error(`kube-router exited (${enforcer.exitCode}): see real-node/logs/kube-router.log`);
    return execFileSync('iptables', ['-S'], { env, encoding: 'utf8' }).includes('KUBE-ROUTER-FORWARD') || undefined;
  });
  return enforcer;
}

/** Why the enforcer cannot run on this machine, or undefined: it drives the machine's iptables and ipset. */
function enforcementMissing(): string | undefined {
  for (const tool of ['iptables', 'iptables-save', 'iptables-restore', 'ipset', 'ip', 'unshare', 'nsenter'])
    if (!machinePath.split(':').some((dir) => existsSync(join(dir, tool)))) return `${tool} is missing (Debian's iptables, ipset, iproute2 and util-linux)`;
  if (!existsSync(bridgeSysctl)) return 'the kernel does not pass bridged packets to iptables (br_netfilter)';
  return undefined;
}
const missing = enforcementMissing();
// In CI a missing prerequisite is a failure, as for the rest of the real-cluster suite.
const enforcedTest = missing && process.env.CI !== 'true' ? test.serial.skip : test.serial;

enforcedTest(
  `the shipped NetworkPolicy with restricted-ingress, enforced${missing ? ` (cannot run here: ${missing})` : ''}: a tenant pod reaches none of the injector’s ports, the monitoring namespace only its metrics port, and pod creation goes on`,
  async (t) => {
    if (missing) t.fail(`the enforcer cannot run: ${missing}`);
    const tenant = await testNamespace(t, 'tenant');
    await waitingPod(tenant, 'attacker');
    const { pod: prometheusPod, ip: prometheusIp } = await monitoringPod(t, `prometheus-${tenant}`);
    const targets = await restrictedInstall(t, 'test/cluster/overlays/restricted-ingress');

    // Without an enforcer the policy is words: the tenant reaches the webhook port.
    t.true(await connects(tenant, 'attacker', targets[0]!, webhookPort), 'before enforcement, the tenant connects (the attack is real)');

    await enforce(t);
    await eventually('the tenant refused at the webhook port', async () => !(await connects(tenant, 'attacker', targets[0]!, webhookPort)) || undefined, 120);
    for (const ip of targets)
      for (const port of [webhookPort, metricsPort, probePort]) t.false(await connects(tenant, 'attacker', ip, port), `tenant → ${ip}:${port} refused`);
    for (const ip of targets) {
      t.true(await connects('monitoring', prometheusPod, ip, metricsPort), `monitoring → ${ip}:${metricsPort} admitted`);
      for (const port of [webhookPort, probePort]) t.false(await connects('monitoring', prometheusPod, ip, port), `monitoring → ${ip}:${port} refused`);
    }
    // The tenant's pod still reaches a pod no policy selects: the refusals above are the policy's, not a broken pod network or exec.
    t.true(await connects(tenant, 'attacker', prometheusIp, listenerPort), 'tenant → an unselected pod admitted');

    // The API server's calls and the kubelet's probes come from the node: every create is injected, every replica stays ready.
    const { kube } = joinWorld();
    const name = 'netpol-agent';
    await withTemplate(
      t,
      name,
      stringify({
        name,
        injection: 'automatic',
        failurePolicy: 'Fail',
        objectSelector: { matchLabels: { 'netpol-test': 'yes' } },
        containers: [{ name, image: 'registry.example/agent:1' }],
      }),
    );
    const namespace = await optedInNamespace(t, 'netpol');
    for (let i = 0; i < 10; i++) {
      const created = await kube.create(`/api/v1/namespaces/${namespace}/pods`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: `web-${i}`, labels: { 'netpol-test': 'yes' } },
        spec: { containers: [{ name: 'app', image: 'registry.example/app:1' }] },
      });
      t.true(
        (created.spec.containers as Json[]).some((c) => c.name === name),
        `pod ${i} injected through the enforced policy`,
      );
    }
    const ready = (await injectorPods()).filter((p) => (p.status?.conditions as Json[] | undefined)?.some((c) => c.type === 'Ready' && c.status === 'True'));
    t.true(ready.length >= 2, 'every replica still ready: the kubelet’s probes are admitted');
    t.false(await connects(tenant, 'attacker', targets[0]!, webhookPort), 'and the tenant still refused');
  },
);

enforcedTest(
  `the NetworkPolicy's ipBlock, enforced${missing ? ` (cannot run here: ${missing})` : ''}: a control plane outside the pod network reaches each port; with the ipBlock narrowed to the control plane's network, another host outside the pod network reaches none`,
  async (t) => {
    if (missing) t.fail(`the enforcer cannot run: ${missing}`);
    const network = await remoteNetwork(t);
    const tenant = await testNamespace(t, 'tenant');
    await waitingPod(tenant, 'attacker');
    const { ip: unselected } = await monitoringPod(t, `prometheus-remote-${process.pid}`);
    const targets = await restrictedInstall(t, 'test/cluster/overlays/restricted-ingress');
    // The route and the probe work before any policy is enforced.
    for (const source of [remote.controlPlane, remote.outsider])
      t.true(await network.connects(source, targets[0]!, webhookPort), `before enforcement, ${source} connects`);

    await enforce(t);
    // The shipped shape, everything outside the pod network: both remote addresses are admitted on every port.
    await eventually(
      'the policy in force: the tenant refused at the webhook port',
      async () => !(await connects(tenant, 'attacker', targets[0]!, webhookPort)) || undefined,
      1200,
    );
    for (const source of [remote.controlPlane, remote.outsider])
      for (const ip of targets)
        for (const port of [webhookPort, metricsPort, probePort])
          t.true(await network.connects(source, ip, port), `${source} → ${ip}:${port} admitted (outside the pod network)`);

    // The ipBlock narrowed to the control plane's network: the control plane is admitted because
    // of it, another host outside the pod network is not. A cidr that missed the control plane fails here.
    await deploy('test/cluster/overlays/control-plane-cidr');
    await eventually(
      'the outsider refused at the webhook port',
      async () => !(await network.connects(remote.outsider, targets[0]!, webhookPort)) || undefined,
      1200,
    );
    for (const ip of targets)
      for (const port of [webhookPort, metricsPort, probePort]) {
        t.true(await network.connects(remote.controlPlane, ip, port), `control plane → ${ip}:${port} admitted by the ipBlock`);
        t.false(await network.connects(remote.outsider, ip, port), `outsider → ${ip}:${port} refused`);
      }
    // The outsider still reaches a pod no policy selects: its refusals are the policy's.
    t.true(await network.connects(remote.outsider, unselected, listenerPort), 'outsider → an unselected pod admitted');
  },
);

/**
 * The shipped NetworkPolicy, enforced on the real node. The world runs no network plugin that
 * enforces NetworkPolicy, so this file runs one for its test: kube-network-policies (Kubernetes
 * SIG Network's enforcer, built from its pinned module by test/cluster/build-network-policies.sh)
 * in the real node's network namespace, which is the world's. It judges the first packet of every
 * connection to or from a pod a NetworkPolicy selects, and, as most network plugins do, admits
 * what the node itself opens as root: the API server's webhook calls and its service proxy, the
 * kubelet's probes. The attack is a tenant's pod on the same node opening connections to each of
 * the injector's ports; Prometheus's stand-in is a pod in the namespace `monitoring`.
 *
 * The enforcer queues packets with nftables' `queue` expression: on a kernel without it
 * (CONFIG_NFT_QUEUE unset, as on the machine this was written on) it cannot enforce anything, and
 * the test is skipped, saying so. There it reached the API server and its nftables rules were
 * refused; it has not yet passed on any machine.
 */
import test, { type ExecutionContext } from 'ava';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { openSync, readFileSync, writeFileSync } from 'node:fs';
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
const enforcerTable = ['inet', 'kube-network-policies'];
/** The machine's nft (under npm, node_modules/.bin holds another program of that name). */
const nft = '/usr/sbin/nft';

/** A pod of the busybox image on the real node that only waits, in `namespace`; its IP once it runs. */
async function waitingPod(namespace: string, name: string): Promise<string> {
  const { kube, file } = joinWorld();
  await kube.create(`/api/v1/namespaces/${namespace}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name },
    spec: onRealNode({ containers: [{ name: 'shell', image: file.realNode!.image, imagePullPolicy: 'IfNotPresent', command: ['sleep', '3600'] }] }),
  });
  const running = await eventually(`pod ${namespace}/${name} running`, async () => {
    const pod = await kube.find(`/api/v1/namespaces/${namespace}/pods/${name}`);
    return pod?.status?.phase === 'Running' && pod.status.podIP ? (pod as Json) : undefined;
  });
  return running.status.podIP as string;
}

/** Whether a TCP connection from the pod `namespace/name` to `ip:port` is made within 2 s (busybox nc, from inside the pod). */
async function connects(namespace: string, name: string, ip: string, port: number): Promise<boolean> {
  const { kubectl } = joinWorld();
  return kubectl(['exec', '-n', namespace, name, '--', 'nc', '-w', '2', ip, String(port)], '').then(
    () => true,
    () => false,
  );
}

/** Runs the enforcer for the rest of the test; stopped, its nftables table gone and the bridge sysctl restored after it. */
async function enforce(t: ExecutionContext): Promise<ChildProcess> {
  const { file } = joinWorld();
  const binary = execFileSync('test/cluster/build-network-policies.sh', { stdio: ['ignore', 'pipe', 'inherit'] })
    .toString()
    .trim();
  // Pods of the one bridge reach each other bridged: the netfilter hooks see those packets only with this set.
  const bridged = readFileSync(bridgeSysctl, 'utf8').trim();
  writeFileSync(bridgeSysctl, '1');
  const log = openSync(join(file.realNode!.dir, 'logs', 'kube-network-policies.log'), 'a');
  // It reads the API server only as a pod does (in-cluster: the service's address in its
  // environment, a token and the CA at the service account's path): in a mount namespace of its
  // own, a tmpfs over /run holds the admin's token and the world's CA there.
  const server = new URL(file.server);
  const serviceAccount = '/run/secrets/kubernetes.io/serviceaccount';
  const args = [
    `--hostname-override=${file.realNode!.name}`,
    '--disable-nri',
    '--metrics-bind-address=127.0.0.1:19080',
    // Kernels from 6.12 have the conntrack fix this works around.
    '--netfilter-bug-1766-fix=false',
  ];
  const enforcer = spawn(
    'unshare',
    [
      '--mount',
      '--propagation',
      'private',
      'sh',
      '-c',
      `mount -t tmpfs -o mode=0755 tmpfs /run && mkdir -p ${serviceAccount} && printf %s "$TOKEN" > ${serviceAccount}/token && printf %s "$CA" > ${serviceAccount}/ca.crt && exec "$@"`,
      'enforcer',
      binary,
      ...args,
    ],
    {
      stdio: ['ignore', log, log],
      env: {
        ...process.env,
        KUBERNETES_SERVICE_HOST: server.hostname,
        KUBERNETES_SERVICE_PORT: server.port || '443',
        TOKEN: file.admin.token,
        CA: readFileSync(file.caFile, 'utf8'),
      },
    },
  );
  t.teardown(async () => {
    const exited = new Promise((resolve) => enforcer.once('exit', resolve));
    enforcer.kill('SIGTERM');
    await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 15_000))]);
    enforcer.kill('SIGKILL');
    try {
      execFileSync(nft, ['delete', 'table', ...enforcerTable], { stdio: 'ignore' });
    } catch {
      // Its own cleanup removed it.
    }
    writeFileSync(bridgeSysctl, bridged);
  });
  await eventually('the enforcer’s nftables table', () => {
    if (enforcer.exitCode !== null) throw new Error(`kube-network-policies exited (${enforcer.exitCode}): see real-node/logs/kube-network-policies.log`);
    try {
      execFileSync(nft, ['list', 'table', ...enforcerTable], { stdio: 'ignore' });
      return true;
    } catch {
      return undefined;
    }
  });
  return enforcer;
}

/**
 * Why the enforcer cannot run on this machine's kernel, or undefined: it queues packets with
 * nftables' `queue` expression (CONFIG_NFT_QUEUE), tried here in a network namespace of its own.
 */
function enforcementMissing(): string | undefined {
  try {
    execFileSync('unshare', ['--net', nft, '-f', '-'], {
      input: 'table inet probe {\n  chain c {\n    type filter hook postrouting priority 0; policy accept;\n    queue num 100 bypass\n  }\n}\n',
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    return undefined;
  } catch {
    return 'the kernel has no nftables queue expression (CONFIG_NFT_QUEUE), which kube-network-policies needs';
  }
}
const missing = enforcementMissing();
const enforcedTest = missing ? test.serial.skip : test.serial;

enforcedTest(
  `the shipped NetworkPolicy with restricted-ingress, enforced${missing ? ` (cannot run here: ${missing})` : ''}: a tenant pod reaches none of the injector’s ports, the monitoring namespace only its metrics port, and pod creation goes on`,
  async (t) => {
    const { kube } = joinWorld();
    const tenant = await testNamespace(t, 'tenant');
    // The base NetworkPolicy names the namespace monitoring by its name label.
    const monitoringExisted = (await kube.find('/api/v1/namespaces/monitoring')) !== undefined;
    if (!monitoringExisted) {
      await kube.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'monitoring' } });
      t.teardown(() => kube.delete('/api/v1/namespaces/monitoring'));
      await eventually('the default ServiceAccount of monitoring', () => kube.find('/api/v1/namespaces/monitoring/serviceaccounts/default'));
    }
    const prometheusPod = `prometheus-${tenant}`;
    await waitingPod(tenant, 'attacker');
    await waitingPod('monitoring', prometheusPod);
    // A namespace this test made goes with its pods.
    if (monitoringExisted) t.teardown(() => kube.delete(`/api/v1/namespaces/monitoring/pods/${prometheusPod}`));

    await deploy('test/cluster/overlays/restricted-ingress');
    t.teardown(async () => {
      await deploy();
      await healthyInstall();
    });
    await healthyInstall();
    const replicas = (await injectorPods()).filter((p) => !p.metadata.deletionTimestamp && p.status?.podIP);
    t.true(replicas.length >= 2, 'two replicas, each a target');
    const targets = replicas.map((p) => p.status.podIP as string);

    // Without an enforcer the policy is words: the tenant reaches the webhook port.
    t.true(await connects(tenant, 'attacker', targets[0]!, webhookPort), 'before enforcement, the tenant connects (the attack is real)');

    await enforce(t);
    await eventually('the tenant refused at the webhook port', async () => !(await connects(tenant, 'attacker', targets[0]!, webhookPort)) || undefined, 120);
    for (const ip of targets)
      for (const port of [webhookPort, metricsPort, probePort]) t.false(await connects(tenant, 'attacker', ip, port), `tenant → ${ip}:${port} refused`);
    for (const ip of targets) {
      t.true(await connects('monitoring', prometheusPod, ip, metricsPort), `monitoring → ${ip}:${metricsPort} admitted`);
      t.false(await connects('monitoring', prometheusPod, ip, webhookPort), `monitoring → ${ip}:${webhookPort} refused`);
    }

    // The API server's calls and the kubelet's probes come from the node: every create is injected, every replica stays ready.
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

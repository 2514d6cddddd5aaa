/**
 * The test cluster's network, inside a network namespace the world was started in (nothing
 * here reaches the machine's own network):
 *
 * - the node: the API server's advertise address and the whole Service range are local
 *   addresses on `lo`, so that a connection to any ClusterIP is made at all;
 * - kube-proxy's part: one nftables table that sends each ClusterIP:port to the ready
 *   endpoints of its EndpointSlices (DNAT, round robin), or while none is ready to the
 *   terminating ones that still serve, for connections from the node
 *   (the API server calling a webhook) and from pods (the injector calling the API server);
 * - pods: the real node's CNI bridge (real-node.ts) gives each pod an address of its own range;
 *   `podCidr` is the stand-in node's (its simulated pods run no process and have no network).
 */
import { execFileSync } from 'node:child_process';
import { appendFileSync } from 'node:fs';
import type { Json, Kube } from './kube.js';
import { Loop } from './processes.js';

export const addresses = {
  /** The API server's advertise address, and the node's InternalIP. */
  advertise: '10.250.0.1',
  serviceCidr: '10.96.0.0/16',
  /** The first address of the Service range: the `kubernetes` Service. */
  kubernetesService: '10.96.0.1',
  podCidr: '10.244.0.0/16',
} as const;

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });

/** Sets up the node's side; run once, first thing in the fresh network namespace. */
export function setUpNode(): void {
  // The machine's nftables, not a package's command of the same name (@vercel/nft is one).
  const version = execFileSync('nft', ['--version'], { encoding: 'utf8' });
  if (!/nftables/.test(version)) throw new Error(`the nft on PATH is not nftables (it says ${JSON.stringify(version.slice(0, 80))})`);
  ip('link', 'set', 'lo', 'up');
  ip('addr', 'add', `${addresses.advertise}/32`, 'dev', 'lo');
  ip('addr', 'add', `${addresses.kubernetesService}/16`, 'dev', 'lo');
  nft(`table ip kube-proxy {}\n`);
}

function nft(ruleset: string): void {
  execFileSync('nft', ['-f', '-'], { input: ruleset, stdio: ['pipe', 'ignore', 'pipe'] });
}

interface ServiceRule {
  readonly clusterIp: string;
  readonly port: number;
  readonly protocol: string;
  readonly endpoints: readonly string[];
}

/** The ClusterIP rules that Services and EndpointSlices say, as kube-proxy reads them. */
export function serviceRules(services: readonly Json[], slices: readonly Json[]): ServiceRule[] {
  const rules: ServiceRule[] = [];
  for (const service of services) {
    const clusterIp = service.spec?.clusterIP;
    if (!clusterIp || clusterIp === 'None' || service.spec?.type === 'ExternalName') continue;
    const ns = service.metadata.namespace;
    const name = service.metadata.name;
    const own = slices.filter((s) => s.metadata.namespace === ns && s.metadata.labels?.['kubernetes.io/service-name'] === name && s.addressType === 'IPv4');
    for (const port of service.spec.ports ?? []) {
      const protocol = (port.protocol ?? 'TCP').toLowerCase();
      const ready = new Set<string>();
      const servingTerminating = new Set<string>();
      for (const slice of own) {
        const slicePort = (slice.ports ?? []).find((p: Json) => (p.name ?? '') === (port.name ?? '') && (p.protocol ?? 'TCP').toLowerCase() === protocol);
        if (!slicePort?.port) continue;
        for (const endpoint of slice.endpoints ?? []) {
          const conditions = endpoint.conditions ?? {};
          // Unset reads as true (the API's rule for ready and serving).
          const target = conditions.ready !== false ? ready : conditions.serving !== false && conditions.terminating === true ? servingTerminating : undefined;
          for (const address of endpoint.addresses ?? []) target?.add(`${address} . ${slicePort.port}`);
        }
      }
      // Ready endpoints; only when there is none, the terminating ones that still serve (as
      // kube-proxy does: a Service whose every pod is being replaced keeps answering).
      const endpoints = ready.size > 0 ? ready : servingTerminating;
      rules.push({ clusterIp, port: port.port, protocol, endpoints: [...endpoints].sort() });
    }
  }
  return rules.sort((a, b) => `${a.clusterIp}:${a.port}`.localeCompare(`${b.clusterIp}:${b.port}`));
}

function ruleset(rules: readonly ServiceRule[]): string {
  const match = (r: ServiceRule) => `ip daddr ${r.clusterIp} ${r.protocol} dport ${r.port}`;
  const dnat = rules
    .filter((r) => r.endpoints.length > 0)
    .map((r) => `    ${match(r)} dnat ip to numgen inc mod ${r.endpoints.length} map { ${r.endpoints.map((e, i) => `${i} : ${e}`).join(', ')} }`);
  // A Service without a ready endpoint refuses at once, as kube-proxy makes it.
  const reject = rules.filter((r) => r.endpoints.length === 0).map((r) => `    ${match(r)} reject with icmp type port-unreachable`);
  const hook = (name: string, type: string, hookName: string, priority: string, target: string) => [
    `  chain ${name} {`,
    `    type ${type} hook ${hookName} priority ${priority}; policy accept;`,
    `    jump ${target}`,
    '  }',
  ];
  return [
    'table ip kube-proxy {}',
    'delete table ip kube-proxy',
    'table ip kube-proxy {',
    '  chain services {',
    ...dnat,
    '  }',
    '  chain no-endpoints {',
    ...reject,
    '  }',
    ...hook('nat-prerouting', 'nat', 'prerouting', 'dstnat', 'services'),
    ...hook('nat-output', 'nat', 'output', '-100', 'services'),
    ...hook('filter-input', 'filter', 'input', 'filter', 'no-endpoints'),
    ...hook('filter-output', 'filter', 'output', 'filter', 'no-endpoints'),
    '}',
    '',
  ].join('\n');
}

/**
 * kube-proxy's part: keeps the table equal to what the Services and their EndpointSlices say,
 * looking every quarter second (kube-proxy reacts in about a second).
 */
export class ServiceProxy {
  private last = '';
  // The API server restarting or busy: the rules in place stay, as kube-proxy's do.
  private readonly loop = new Loop('kube-proxy stand-in', 250, () => this.sync());

  /** `log`: each ruleset programmed, with its time, is appended there (for a failure's post-mortem). */
  constructor(
    private readonly kube: Kube,
    private readonly log: string,
  ) {}

  /** Programs the rules once; resolves when they are in place. */
  async sync(): Promise<void> {
    const [services, slices] = await Promise.all([this.kube.get('/api/v1/services'), this.kube.get('/apis/discovery.k8s.io/v1/endpointslices')]);
    const text = ruleset(serviceRules(services.items, slices.items));
    if (text !== this.last) {
      nft(text);
      this.last = text;
      appendFileSync(this.log, `# ${new Date().toISOString()}\n${text}\n`);
    }
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** The rules in force (for the world's log on failure). */
  current(): string {
    return this.last;
  }
}

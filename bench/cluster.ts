/**
 * The cost a user sees, through the real API server (run inside the test cluster:
 * `scripts/cluster.sh run -- node dist/bench/cluster.js`; `npm run bench` runs it last when it
 * can): pod creates in a namespace that opted in (both webhooks called, and called again after
 * the ServiceAccount plugin mounts its token into the sidecars) against one that did not, at
 * concurrency 1 and 16, a few hundred creates each, twice; latency as the client sees it, and
 * the CPU time of the injector's replicas and of kube-apiserver per create, from /proc. And the
 * same creates in a namespace the webhooks do not serve but the templates exported as a
 * MutatingAdmissionPolicy do (`policies --mutating`, bound to that namespace only): the time
 * the API server's own injection takes.
 *
 * Options: --creates N (per run, default 300), --runs N (default 2).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { joinWorld, testNamespaceName, type Json } from '../test/cluster/helpers.js';
import { mutatingPolicies } from '../src/manifests/mutating-policies.js';
import { loadTemplateDir } from '../src/templates/load.js';

const { values } = parseArgs({ options: { creates: { type: 'string', default: '300' }, runs: { type: 'string', default: '2' } } });
const creates = Number(values.creates);
const runs = Number(values.runs);

/** A pod as a Deployment's controller sends it: generateName, labels, an owner-less typical spec. */
function typicalPod(): Json {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-5d8f9c7b6d-', labels: { app: 'web', 'pod-template-hash': '5d8f9c7b6d' } },
    spec: {
      containers: [
        {
          name: 'web',
          image: 'registry.example/web:1.4.2',
          ports: [{ containerPort: 8080, name: 'http' }],
          env: [
            { name: 'LOG_LEVEL', value: 'info' },
            { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
          ],
          resources: { requests: { cpu: '100m', memory: '128Mi' }, limits: { memory: '256Mi' } },
          readinessProbe: { httpGet: { path: '/healthz', port: 'http' } },
        },
      ],
    },
  };
}

/** Processes whose command line matches: pid list. */
function pidsOf(match: (cmdline: string[]) => boolean): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (match(readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0'))) pids.push(Number(entry));
    } catch {
      // Gone meanwhile.
    }
  }
  return pids;
}

/** CPU time (user + system) of `pids` so far, in ms (clock ticks of 10 ms). */
function cpuMs(pids: readonly number[]): number {
  let total = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      total += (Number(fields[11]) + Number(fields[12])) * 10;
    } catch {
      // Gone meanwhile.
    }
  }
  return total;
}

const quantile = (sorted: readonly number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
const fmt = (n: number, digits = 2) => n.toFixed(digits);

interface Result {
  readonly p50: number;
  readonly p99: number;
  readonly injectorCpuMs: number;
  readonly apiServerCpuMs: number;
  readonly failures: number;
}

async function run(namespace: string, concurrency: number, count = creates): Promise<Result> {
  const { kube } = joinWorld();
  const injector = pidsOf((c) => c.some((a) => a.endsWith('/dist/src/cli/main.js')) && c.includes('serve'));
  const apiServer = pidsOf((c) => (c[0] ?? '').endsWith('/kube-apiserver'));
  if (injector.length === 0 || apiServer.length !== 1) throw new Error(`found ${injector.length} injector and ${apiServer.length} kube-apiserver processes`);
  const latencies: number[] = [];
  let failures = 0;
  let next = 0;
  const cpu0 = [cpuMs(injector), cpuMs(apiServer)];
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next++ < count) {
        const t0 = performance.now();
        const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, typicalPod());
        latencies.push(performance.now() - t0);
        if (answer.status !== 201) failures++;
      }
    }),
  );
  const cpu1 = [cpuMs(injector), cpuMs(apiServer)];
  await kube.call('DELETE', `/api/v1/namespaces/${namespace}/pods`, { kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 0 });
  latencies.sort((a, b) => a - b);
  return { p50: quantile(latencies, 0.5), p99: quantile(latencies, 0.99), injectorCpuMs: cpu1[0]! - cpu0[0]!, apiServerCpuMs: cpu1[1]! - cpu0[1]!, failures };
}

const { kube, file } = joinWorld();
const namespaces = { 'opted in': testNamespaceName('bench-in'), 'not opted in': testNamespaceName('bench-out'), policy: testNamespaceName('bench-map') };
const policyLabel = { 'sidecar-injector.io/bench-policy': 'true' };
for (const [kind, name] of Object.entries(namespaces)) {
  await kube.create('/api/v1/namespaces', {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: { name, labels: kind === 'opted in' ? { 'sidecar-injector.io/injection': 'enabled' } : kind === 'policy' ? policyLabel : {} },
  });
  for (let i = 0; i < 600 && !(await kube.find(`/api/v1/namespaces/${name}/serviceaccounts/default`)); i++) await new Promise((r) => setTimeout(r, 50));
}
// The installed templates exported, bound to the policy namespace only (the generated binding selects opted-in namespaces).
const apis = '/apis/admissionregistration.k8s.io/v1';
const exported = mutatingPolicies(await loadTemplateDir('templates'));
const policy = exported.objects[0]!;
const policyName = (policy.metadata as Json).name as string;
await kube.create(`${apis}/mutatingadmissionpolicies`, policy);
await kube.create(`${apis}/mutatingadmissionpolicybindings`, {
  apiVersion: 'admissionregistration.k8s.io/v1',
  kind: 'MutatingAdmissionPolicyBinding',
  metadata: { name: policyName },
  spec: { policyName, matchResources: { namespaceSelector: { matchLabels: policyLabel } } },
});
// The API server loads policies about every second: wait until a create is injected.
for (let i = 0; i < 600; i++) {
  const probe = await kube.request('POST', `/api/v1/namespaces/${namespaces.policy}/pods?dryRun=All`, typicalPod());
  if (probe.body.metadata?.annotations?.['sidecar-injector.io/status']) break;
  await new Promise((r) => setTimeout(r, 50));
}
console.log(
  `# Pod creates through kube-apiserver ${file.kubernetesVersion} (the injector's pods ${file.containers === 'real-node' ? 'on the real node, from the pushed image' : file.containers === 'image' ? "on the stand-in node, from the built image's files" : "on the stand-in node, from the clone's build"})\n`,
);
console.log(`${creates} creates per run, ${runs} runs; latency as the client sees it; CPU of the injector's replicas and of kube-apiserver per create.\n`);
console.log('namespace      conc  run   p50 ms   p99 ms  failures  injector CPU ms/create  kube-apiserver CPU ms/create');
const results: { kind: string; concurrency: number; result: Result }[] = [];
// Warm-up: the first creates of a namespace fill the API server's caches and the injector's.
for (const name of Object.values(namespaces)) await run(name, 4, 50);
for (const concurrency of [1, 16])
  for (let r = 1; r <= runs; r++)
    for (const [kind, name] of Object.entries(namespaces)) {
      const result = await run(name, concurrency);
      results.push({ kind, concurrency, result });
      console.log(
        `${kind.padEnd(13)} ${String(concurrency).padStart(5)} ${String(r).padStart(4)} ${fmt(result.p50).padStart(8)} ${fmt(result.p99).padStart(8)} ${String(result.failures).padStart(9)} ${fmt(result.injectorCpuMs / creates, 3).padStart(23)} ${fmt(result.apiServerCpuMs / creates, 3).padStart(29)}`,
      );
    }
console.log('\n## what the webhook and the exported policy add (each minus not opted in, same concurrency and run)\n');
console.log('conc  run  webhook p50 ms  webhook p99 ms  policy p50 ms  policy p99 ms  policy kube-apiserver CPU ms/create added');
for (const concurrency of [1, 16])
  for (let r = 0; r < runs; r++) {
    const of = (kind: string) => results.filter((x) => x.kind === kind && x.concurrency === concurrency)[r]!.result;
    const yes = of('opted in');
    const no = of('not opted in');
    const map = of('policy');
    console.log(
      `${String(concurrency).padStart(4)} ${String(r + 1).padStart(4)} ${fmt(yes.p50 - no.p50).padStart(15)} ${fmt(yes.p99 - no.p99).padStart(15)} ${fmt(map.p50 - no.p50).padStart(14)} ${fmt(map.p99 - no.p99).padStart(14)} ${fmt((map.apiServerCpuMs - no.apiServerCpuMs) / creates, 3).padStart(15)}`,
    );
  }
await kube.delete(`${apis}/mutatingadmissionpolicybindings/${policyName}`);
await kube.delete(`${apis}/mutatingadmissionpolicies/${policyName}`);
for (const name of Object.values(namespaces)) await kube.delete(`/api/v1/namespaces/${name}`);
kube.close();

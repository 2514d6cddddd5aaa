/**
 * The cost a user sees, through the real API server (run inside the test cluster:
 * `scripts/cluster.sh run -- node dist/bench/cluster.js`; `npm run bench` runs it last when it
 * can): pod creates at concurrency 1 and 16, a few hundred each, three runs, of
 * - a typical pod in a namespace that did not opt in (what the others are measured against);
 * - in namespaces that opted in: a typical pod (one webhook injects it: the bundled log
 *   shipper), the same pod asking for the proxy (both webhooks inject it), and a pod no template
 *   applies to (it says logging.example.com/ship=false);
 * - a typical pod in a namespace the webhooks do not serve but the templates exported as a
 *   MutatingAdmissionPolicy do (`policies --mutating`, bound to that namespace only).
 * For each: latency as the client sees it, the CPU time of the injector's replicas and of
 * kube-apiserver per create from /proc, and the webhook calls per create from the audit log.
 *
 * With `--profile DIR`, then: the replicas restarted with `--profiling on`, a CPU profile of
 * each taken while typical pods are created one at a time for `--profile-seconds` (default 20),
 * written to DIR and summarised (bench/profile-summary.ts).
 *
 * Options: --creates N (per run, default 300), --runs N (default 3), --profile DIR, --profile-seconds N,
 * --profile-only (the profiles alone, no measured runs).
 */
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { auditEvents, injectorPods, joinWorld, setInjectorEnv, testNamespaceName, type Json } from '../test/cluster/helpers.js';
import { mutatingPolicies } from '../src/manifests/mutating-policies.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { account, summarise, type Profile } from './profile-summary.js';

const { values } = parseArgs({
  options: {
    creates: { type: 'string', default: '300' },
    runs: { type: 'string', default: '3' },
    profile: { type: 'string' },
    'profile-seconds': { type: 'string', default: '20' },
    'profile-only': { type: 'boolean', default: false },
  },
});
const creates = Number(values.creates);
const runs = Number(values.runs);

/** A pod as a Deployment's controller sends it: generateName, labels, an owner-less typical spec. */
function typicalPod(extra: { labels?: Record<string, string>; annotations?: Record<string, string> } = {}): Json {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      generateName: 'web-5d8f9c7b6d-',
      labels: { app: 'web', 'pod-template-hash': '5d8f9c7b6d', ...extra.labels },
      ...(extra.annotations ? { annotations: extra.annotations } : {}),
    },
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

async function run(namespace: string, pod: Json, concurrency: number, count = creates): Promise<Result> {
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
        const answer = await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, pod);
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

/** Each case: its namespace (and how it is labelled), and the pod it creates. */
interface Case {
  readonly namespace: string;
  readonly labels: Record<string, string>;
  readonly pod: Json;
}
const optedIn = { 'sidecar-injector.io/injection': 'enabled' };
const policyLabel = { 'sidecar-injector.io/bench-policy': 'true' };
const cases: Record<string, Case> = {
  'not opted in': { namespace: testNamespaceName('bench-out'), labels: {}, pod: typicalPod() },
  'one webhook': { namespace: testNamespaceName('bench-one'), labels: optedIn, pod: typicalPod() },
  'both webhooks': {
    namespace: testNamespaceName('bench-both'),
    labels: optedIn,
    pod: typicalPod({ annotations: { 'sidecar-injector.io/templates': 'proxy' } }),
  },
  'nothing applies': { namespace: testNamespaceName('bench-none'), labels: optedIn, pod: typicalPod({ labels: { 'logging.example.com/ship': 'false' } }) },
  policy: { namespace: testNamespaceName('bench-map'), labels: policyLabel, pod: typicalPod() },
};

const { kube, file } = joinWorld();
if (!values['profile-only']) await measure();
if (values.profile) await profile(values.profile, Number(values['profile-seconds']));
kube.close();

/** The replicas with --profiling on: a profile of each while typical pods are created one at a time. */
async function profile(dir: string, seconds: number): Promise<void> {
  const setProfiling = (value: string | null) => setInjectorEnv('SIDECAR_INJECTOR_PROFILING', value);
  await setProfiling('on');
  try {
    const namespace = testNamespaceName('bench-profile');
    await kube.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace, labels: optedIn } });
    for (let i = 0; i < 600 && !(await kube.find(`/api/v1/namespaces/${namespace}/serviceaccounts/default`)); i++) await new Promise((r) => setTimeout(r, 50));
    await run(namespace, typicalPod(), 4, 100);
    mkdirSync(dir, { recursive: true });
    const pods = (await injectorPods()).map((p) => p.metadata.name as string);
    const before = auditEvents().length;
    const profiles = pods.map((name) =>
      kube.request('GET', `/api/v1/namespaces/sidecar-injector/pods/https:${name}:8443/proxy/debug/cpu-profile?seconds=${seconds}`),
    );
    const end = Date.now() + (seconds - 1) * 1000;
    let made = 0;
    const started = Date.now();
    while (Date.now() < end) {
      await kube.request('POST', `/api/v1/namespaces/${namespace}/pods`, typicalPod());
      made++;
    }
    const elapsed = (Date.now() - started) / 1000;
    const calls = auditEvents()
      .slice(before)
      .filter((e) => e.verb === 'create' && e.objectRef?.namespace === namespace && e.objectRef?.resource === 'pods')
      .reduce((n, e) => n + Object.keys(e.annotations ?? {}).filter((k) => k.startsWith('mutation.webhook.admission.k8s.io/')).length, 0);
    console.log(
      `\n# CPU profiles of both replicas, ${seconds} s, while ${made} typical pods were created one at a time (${(made / elapsed).toFixed(1)} per second; ${calls} webhook calls)\n`,
    );
    for (const [i, answer] of (await Promise.all(profiles)).entries()) {
      if (answer.status !== 200) throw new Error(`profile of ${pods[i]}: HTTP ${answer.status} ${answer.text.slice(0, 200)}`);
      writeFileSync(join(dir, `${pods[i]}.cpuprofile`), answer.text);
      console.log(`## ${pods[i]} (${join(dir, `${pods[i]}.cpuprofile`)})\n`);
      // kube-apiserver keeps its connection alive: the calls may all go to one replica. Each
      // profile is accounted per call of the whole run, and summarised per the same calls.
      const parsed = JSON.parse(answer.text) as Profile;
      console.log(account(parsed, Math.max(1, calls)));
      console.log('');
      console.log(summarise(parsed, 25, Math.max(1, calls)));
      console.log('');
    }
    await kube.delete(`/api/v1/namespaces/${namespace}`);
  } finally {
    await setProfiling(null);
  }
}

/** The measured runs of every case, and the calls per create from the audit log. */
async function measure(): Promise<void> {
  for (const { namespace, labels } of Object.values(cases)) {
    await kube.create('/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name: namespace, labels } });
    for (let i = 0; i < 600 && !(await kube.find(`/api/v1/namespaces/${namespace}/serviceaccounts/default`)); i++) await new Promise((r) => setTimeout(r, 50));
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
    const probe = await kube.request('POST', `/api/v1/namespaces/${cases.policy!.namespace}/pods?dryRun=All`, typicalPod());
    if (probe.body.metadata?.annotations?.['sidecar-injector.io/status']) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  // The leader's template conditions on both pod webhooks (the calls per create depend on them).
  const configurationPath = `${apis}/mutatingwebhookconfigurations/sidecar-injector`;
  const conditioned = ((await kube.get(configurationPath)).webhooks as Json[])
    .filter((w) => ((w.matchConditions ?? []) as Json[]).some((c) => c.name === 'a-template-may-apply'))
    .map((w) => w.name as string);
  console.log(`# Pod creates through kube-apiserver ${file.kubernetesVersion} (the injector's pods on the real node, from the pushed image)\n`);
  console.log(`${creates} creates per run, ${runs} runs; latency as the client sees it; CPU of the injector's replicas and of kube-apiserver per create.`);
  console.log(`Webhooks with the leader's template condition: ${conditioned.join(', ') || 'none'}.\n`);
  console.log('case             conc  run   p50 ms   p99 ms  failures  injector CPU ms/create  kube-apiserver CPU ms/create');
  const results: { kind: string; concurrency: number; result: Result }[] = [];
  // Warm-up: the first creates of a namespace fill the API server's caches and the injector's.
  for (const { namespace, pod } of Object.values(cases)) await run(namespace, pod, 4, 50);
  const auditedBefore = auditEvents().length;
  for (const concurrency of [1, 16])
    for (let r = 1; r <= runs; r++)
      for (const [kind, { namespace, pod }] of Object.entries(cases)) {
        const result = await run(namespace, pod, concurrency);
        results.push({ kind, concurrency, result });
        console.log(
          `${kind.padEnd(16)} ${String(concurrency).padStart(4)} ${String(r).padStart(4)} ${fmt(result.p50).padStart(8)} ${fmt(result.p99).padStart(8)} ${String(result.failures).padStart(9)} ${fmt(result.injectorCpuMs / creates, 3).padStart(23)} ${fmt(result.apiServerCpuMs / creates, 3).padStart(29)}`,
        );
      }
  console.log('\n## what each case adds to a create (minus not opted in, same concurrency and run)\n');
  console.log('case             conc  run  added p50 ms  added p99 ms  kube-apiserver CPU ms/create added');
  for (const concurrency of [1, 16])
    for (let r = 0; r < runs; r++) {
      const of = (kind: string) => results.filter((x) => x.kind === kind && x.concurrency === concurrency)[r]!.result;
      const base = of('not opted in');
      for (const kind of Object.keys(cases).filter((k) => k !== 'not opted in')) {
        const x = of(kind);
        console.log(
          `${kind.padEnd(16)} ${String(concurrency).padStart(4)} ${String(r + 1).padStart(4)} ${fmt(x.p50 - base.p50).padStart(13)} ${fmt(x.p99 - base.p99).padStart(13)} ${fmt((x.apiServerCpuMs - base.apiServerCpuMs) / creates, 3).padStart(35)}`,
        );
      }
    }
  // Calls per create, from the audit log: each mutating webhook call of a create is an annotation of its event.
  console.log('\n## webhook calls per create (audit log; round 0 and round 1)\n');
  const events = auditEvents().slice(auditedBefore);
  for (const [kind, { namespace }] of Object.entries(cases)) {
    const podCreates = events.filter(
      (e) => e.verb === 'create' && e.objectRef?.resource === 'pods' && !e.objectRef?.subresource && e.objectRef?.namespace === namespace,
    );
    const calls = podCreates.map((e) =>
      Object.entries((e.annotations ?? {}) as Record<string, string>).filter(
        ([key, value]) => key.startsWith('mutation.webhook.admission.k8s.io/') && value.includes('"configuration":"sidecar-injector"'),
      ),
    );
    const total = calls.reduce((n, c) => n + c.length, 0);
    const shapes = new Map<string, number>();
    for (const c of calls) {
      const shape = c.map(([key, value]) => `${/round_(\d+)/.exec(key)![1]}:${(JSON.parse(value) as Json).webhook.split('.')[0]}`).join(' ') || 'none';
      shapes.set(shape, (shapes.get(shape) ?? 0) + 1);
    }
    console.log(
      `${kind.padEnd(16)} ${fmt(podCreates.length ? total / podCreates.length : 0, 2).padStart(5)} calls per create over ${podCreates.length} creates; ${[...shapes].map(([shape, n]) => `${n} × [${shape}]`).join(', ')}`,
    );
  }
  await kube.delete(`${apis}/mutatingadmissionpolicybindings/${policyName}`);
  await kube.delete(`${apis}/mutatingadmissionpolicies/${policyName}`);
  for (const { namespace } of Object.values(cases)) await kube.delete(`/api/v1/namespaces/${namespace}`);
}

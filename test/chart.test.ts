/**
 * The Helm chart (charts/sidecar-injector) is generated from the kustomize manifests
 * (scripts/chart.mjs) and tested against them: the committed chart is what they generate, `helm
 * lint` passes, and `helm template` gives, object for object, what `kubectl kustomize` gives for
 * the same choices (certificate mode, monitoring, in-place updates, example templates); the values the chart
 * exposes change only their own fields. helm is the pinned one (test/cluster/build.sh builds it
 * from its Go module); without Go these tests are skipped, saying so, except in CI.
 */
import test from 'ava';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { kustomizeObjects, type KubeObject } from './helpers/kustomize.js';
import { pinnedTools } from './helpers/tools.js';

const run = promisify(execFile);
const tools = pinnedTools();
if (!tools.dir) console.log(`chart tests skipped: ${tools.why}`);
const chartTest = tools.dir || process.env.CI === 'true' ? test : test.skip;
const chart = join('charts', 'sidecar-injector');

async function helm(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  if (!tools.dir) throw new Error(`no helm: ${tools.why}`);
  return run(join(tools.dir, 'helm'), args, { maxBuffer: 64 << 20 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
  );
}

/** `helm template` with `--set` pairs, as objects. */
async function template(sets: string[] = [], namespace = 'sidecar-injector'): Promise<KubeObject[]> {
  // With the resource definitions of crds/, which helm install applies first.
  const { code, stdout, stderr } = await helm(['template', 'sidecar-injector', chart, '--include-crds', '-n', namespace, ...sets.flatMap((s) => ['--set', s])]);
  if (code !== 0) throw new Error(`helm template: ${stderr}`);
  return parseAllDocuments(stdout)
    .map((d) => d.toJS() as KubeObject)
    .filter((o) => o !== null);
}

/** `kubectl kustomize` of the given resources and components, from a folder of its own. */
async function kustomize(resources: string[], components: string[] = []): Promise<KubeObject[]> {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-chart-'));
  const list = (items: string[]) => items.map((i) => `  - ${relative(dir, i)}`).join('\n');
  await writeFile(join(dir, 'kustomization.yaml'), `resources:\n${list(resources)}\n${components.length ? `components:\n${list(components)}\n` : ''}`);
  return kustomizeObjects(dir);
}

const key = (o: KubeObject) => `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
const sorted = (objects: KubeObject[]) => [...objects].sort((a, b) => key(a).localeCompare(key(b)));
/** The install's objects less the Namespace, which Helm needs before the release (docs/helm.md). */
const withoutNamespace = (objects: KubeObject[]) => objects.filter((o) => o.kind !== 'Namespace');

chartTest('the committed chart is what the manifests generate, and helm lint passes', async (t) => {
  const generated = await run(process.execPath, [join('scripts', 'chart.mjs'), '--check']).then(
    () => '',
    (err: { stderr?: string }) => err.stderr ?? 'failed',
  );
  t.is(generated, '');
  const lint = await helm(['lint', '--strict', chart, '-n', 'sidecar-injector']);
  t.is(lint.code, 0, lint.stdout + lint.stderr);
  t.regex(lint.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
});

const choices: { name: string; sets: string[]; resources: string[]; components: string[]; examples: boolean }[] = [
  { name: 'the defaults (self-managed certificates, no monitoring, no templates)', sets: [], resources: ['manifests'], components: [], examples: false },
  { name: 'cert-manager', sets: ['certificates.mode=cert-manager'], resources: ['manifests/overlays/cert-manager'], components: [], examples: false },
  {
    name: 'monitoring and the examples',
    sets: ['monitoring.enabled=true', 'exampleTemplates={log-shipper,proxy}'],
    resources: ['manifests'],
    components: ['manifests/components/monitoring'],
    examples: true,
  },
  {
    name: 'in-place updates',
    sets: ['inPlaceUpdates.enabled=true'],
    resources: ['manifests'],
    components: ['manifests/components/in-place-updates'],
    examples: false,
  },
  {
    name: 'cert-manager with in-place updates and monitoring',
    sets: ['certificates.mode=cert-manager', 'inPlaceUpdates.enabled=true', 'monitoring.enabled=true'],
    resources: ['manifests/overlays/cert-manager'],
    components: ['manifests/components/in-place-updates', 'manifests/components/monitoring'],
    examples: false,
  },
  {
    name: 'cert-manager with monitoring',
    sets: ['certificates.mode=cert-manager', 'monitoring.enabled=true'],
    resources: ['manifests/overlays/cert-manager'],
    components: ['manifests/components/monitoring'],
    examples: false,
  },
];
for (const choice of choices) {
  chartTest(`helm template equals kubectl kustomize, object for object: ${choice.name}`, async (t) => {
    const fromHelm = await template(choice.sets);
    const fromKustomize = [
      ...withoutNamespace(await kustomize(choice.resources, choice.components)),
      ...(choice.examples ? kustomizeObjects('templates') : []),
    ];
    t.deepEqual(sorted(fromHelm).map(key), sorted(fromKustomize).map(key));
    t.deepEqual(sorted(fromHelm), sorted(fromKustomize));
  });
}

chartTest('the values change only their own fields: image by digest, replicas, resources, your own templates beside an example', async (t) => {
  const defaults = await template();
  const digest = `sha256:${'a'.repeat(64)}`;
  const own = { injection: 'automatic', containers: [{ name: 'agent', image: 'registry.example/agent:{{ params.tag }}' }], parameters: { tag: '1' } };
  const valuesFile = join(await mkdtemp(join(tmpdir(), 'sidecar-injector-chart-')), 'values.yaml');
  await writeFile(
    valuesFile,
    [
      'image: { repository: registry.example.com/platform/sidecar-injector, digest: "' + digest + '" }',
      'replicas: 3',
      'resources: { requests: { cpu: 200m, memory: 128Mi }, limits: { memory: 512Mi } }',
      'exampleTemplates: [proxy]',
      `templates: { agent: ${JSON.stringify(own)} }`,
      '',
    ].join('\n'),
  );
  const { code, stdout, stderr } = await helm(['template', 'sidecar-injector', chart, '--include-crds', '-n', 'sidecar-injector', '-f', valuesFile]);
  t.is(code, 0, stderr);
  const changed = parseAllDocuments(stdout)
    .map((d) => d.toJS() as KubeObject)
    .filter((o) => o !== null);
  const deployment = (objects: KubeObject[]) => objects.find((o) => o.kind === 'Deployment')!;
  const injector = deployment(changed).spec.template.spec.containers[0];
  t.is(injector.image, `registry.example.com/platform/sidecar-injector@${digest}`);
  t.is(deployment(changed).spec.replicas, 3);
  t.deepEqual(injector.resources, { requests: { cpu: '200m', memory: '128Mi' }, limits: { memory: '512Mi' } });
  // Put the defaults back: nothing else differs.
  const restored = structuredClone(changed.filter((o) => o.kind !== 'SidecarTemplate'));
  const d = deployment(restored);
  const original = deployment(defaults);
  d.spec.replicas = original.spec.replicas;
  d.spec.template.spec.containers[0].image = original.spec.template.spec.containers[0].image;
  d.spec.template.spec.containers[0].resources = original.spec.template.spec.containers[0].resources;
  t.deepEqual(sorted(restored), sorted(defaults));
  // Your template a SidecarTemplate named by its key, its placeholders untouched by Helm; the example as templates/ has it.
  const templates = changed.filter((o) => o.kind === 'SidecarTemplate');
  t.deepEqual(templates.map((o) => o.metadata.name).sort(), ['agent', 'proxy']);
  t.deepEqual(templates.find((o) => o.metadata.name === 'agent')!.spec, own);
  t.deepEqual(
    templates.find((o) => o.metadata.name === 'proxy'),
    kustomizeObjects('templates').find((o) => o.metadata.name === 'proxy'),
  );
});

chartTest('the chart refuses what it cannot install, saying what to do', async (t) => {
  const refused = async (args: string[]) => (await helm(['template', 'sidecar-injector', chart, ...args])).stderr;
  t.regex(await refused(['-n', 'default']), /install this chart into the namespace sidecar-injector \(helm install -n sidecar-injector/);
  // The values' schema: a wrong type or value is refused before anything renders.
  t.regex(
    await refused(['-n', 'sidecar-injector', '--set', 'certificates.mode=vault']),
    /at '\/certificates\/mode': value must be one of 'self-managed', 'cert-manager'/,
  );
  t.regex(
    await refused(['-n', 'sidecar-injector', '--set', 'exampleTemplates={proxxy}']),
    /at '\/exampleTemplates\/0': value must be one of 'log-shipper', 'proxy'/,
  );
  t.regex(await refused(['-n', 'sidecar-injector', '--set-string', 'monitoring.enabled=false']), /at '\/monitoring\/enabled': got string, want boolean/);
  t.regex(await refused(['-n', 'sidecar-injector', '--set-string', 'replicas=two']), /got string, want integer/);
  t.regex(await refused(['-n', 'sidecar-injector', '--set-string', 'templates.my_agent=x']), /invalid propertyName 'my_agent'/);
  const valuesFile = join(await mkdtemp(join(tmpdir(), 'sidecar-injector-chart-')), 'values.yaml');
  // A template is its spec as YAML: text (the old block scalar) is refused before anything renders.
  await writeFile(valuesFile, 'templates:\n  agent: |\n    containers: []\n');
  t.regex(await refused(['-n', 'sidecar-injector', '-f', valuesFile]), /at '\/templates\/agent': got string, want object/);
});

chartTest('the chart is written as Helm reads it (YAML 1.1): no plain scalar that YAML 1.1 reads as a boolean or a number', async (t) => {
  const names = (await readdir(join(chart, 'templates'))).filter((f) => f.endsWith('.yaml'));
  const texts = await Promise.all(names.map((f) => readFile(join(chart, 'templates', f), 'utf8')));
  // Values such as on, yes or 1_000 after a key or a list dash, unquoted.
  const risky = texts.flatMap((text) => [...text.matchAll(/(?::|^\s*-)\s+(on|off|yes|no|y|n|\d[\d_]*_\d[\d_]*)\s*$/gim)].map((m) => m[0].trim()));
  t.deepEqual(risky, []);
  // The generator's own writer quotes them: a string `on` comes out quoted.
  const { stringify } = await import('yaml');
  t.is(stringify({ value: 'on', count: '1_000' }, { version: '1.1' }), 'value: "on"\ncount: "1_000"\n');
});

chartTest('the chart refuses one replica beside the PodDisruptionBudget, and a memory limit below what the heap cap needs', async (t) => {
  const render = (...sets: string[]) => helm(['template', 'sidecar-injector', chart, '-n', 'sidecar-injector', ...sets.flatMap((s) => ['--set', s])]);
  const one = await render('replicas=1');
  t.not(one.code, 0);
  t.regex(one.stderr, /replicas: 1 with the PodDisruptionBudget \(minAvailable: 1\) blocks every node drain.*set replicas to 2 or more/);
  for (const low of ['128Mi', '200M', '0.2Gi', '100000000']) {
    const answer = await render(`resources.limits.memory=${low}`);
    t.not(answer.code, 0, low);
    t.regex(
      answer.stderr,
      new RegExp(`resources\\.limits\\.memory: ${low.replace('.', '\\.')} is below 256Mi, what the injector needs beside its 160 MB heap cap`),
      low,
    );
  }
  const garbage = await render('resources.limits.memory=lots');
  t.regex(garbage.stderr, /resources\.limits\.memory: expected a quantity such as 256Mi or 1Gi \(got "lots"\)/);
  for (const enough of ['256Mi', '300M', '1Gi', '0.5Gi']) t.is((await render(`resources.limits.memory=${enough}`)).code, 0, enough);
  t.is((await render('replicas=2')).code, 0);
});

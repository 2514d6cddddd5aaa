import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments, visit } from 'yaml';
import { mutate } from '../src/admission/mutate.js';
import { render } from '../src/cli/render.js';
import { optedIn } from './helpers/pods.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { createReview, prepareCreate } from './helpers/apiserver.js';

const fixture = join('test', 'fixtures', 'render', 'workloads.yaml');

async function run(argv: string[], stdin = ''): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  // The bundled examples unless the test names a folder: render reads the cluster's otherwise.
  const code = await render(argv.includes('--templates') ? argv : [...argv, '--templates', 'templates'], {
    stdin: (async function* () {
      yield stdin;
    })(),
    stdout: { write: (s: string) => (stdout += s) },
    stderr: { write: (s: string) => (stderr += s) },
  });
  return { code, stdout, stderr };
}

const docs = (text: string) => parseAllDocuments(text).map((d) => d.toJS() as Record<string, any>);
const podSpecOf = (o: Record<string, any>) => (o.kind === 'Pod' ? o.spec : o.kind === 'CronJob' ? o.spec.jobTemplate.spec.template.spec : o.spec.template.spec);

test('injects the pod template of every workload kind and writes other objects back as read, comments included', async (t) => {
  const { code, stdout } = await run(['-f', fixture]);
  t.is(code, 0);
  const out = docs(stdout);
  t.deepEqual(
    out.map((o) => o.kind),
    ['Pod', 'Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job', 'CronJob', 'ConfigMap'],
  );
  for (const object of out.slice(0, 7)) {
    const spec = podSpecOf(object);
    t.true(
      (spec.initContainers ?? []).some((c: any) => c.name === 'log-shipper' && c.restartPolicy === 'Always'),
      object.kind,
    );
    t.deepEqual(spec.volumes.map((v: any) => v.name).includes('app-logs'), true, object.kind);
  }
  t.true(
    podSpecOf(out[1]!).initContainers.some((c: any) => c.name === 'proxy'),
    'the Deployment asked for the proxy',
  );
  t.true(stdout.includes('# Not a workload: written back exactly as read, comments included.\napiVersion: v1\nkind: ConfigMap'));
  t.true(stdout.includes('metadata: { name: settings, namespace: shop }\ndata:\n  mode: "fast" # trailing comment'));
  // Workload metadata and the pod template's own fields are untouched.
  t.is(out[1]!.metadata.name, 'web');
  t.is(out[1]!.spec.template.metadata.generateName, undefined);
  t.is(out[1]!.spec.template.metadata.namespace, undefined);
});

test('is idempotent: its own output comes back unchanged', async (t) => {
  const first = await run(['-f', fixture]);
  const second = await run(['-f', '-'], first.stdout);
  t.is(second.code, 0);
  t.is(second.stdout, first.stdout);
});

test('reads JSON, single objects and Lists, from stdin', async (t) => {
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'p' }, spec: { containers: [{ name: 'p', image: 'x' }] } };
  const list = {
    apiVersion: 'v1',
    kind: 'List',
    items: [pod, { apiVersion: 'v1', kind: 'Service', metadata: { name: 's' }, spec: { ports: [{ port: 80 }] } }],
  };
  const single = await run(['-f', '-'], JSON.stringify(pod));
  t.true(podSpecOf(docs(single.stdout)[0]!).initContainers.some((c: any) => c.name === 'log-shipper'));
  const fromList = docs((await run(['-f', '-'], JSON.stringify(list))).stdout)[0]!;
  t.is(fromList.kind, 'List');
  t.true(fromList.items[0].spec.initContainers.some((c: any) => c.name === 'log-shipper'));
  t.deepEqual(fromList.items[1], list.items[1]);
});

test('--explain says per object what was injected or skipped, and why', async (t) => {
  const { stderr } = await run(['-f', fixture, '--explain', '--namespace-label', 'shop:sidecar-injector.io/injection=enabled']);
  const lines = stderr.split('\n');
  t.true(lines.includes('Deployment shop/web: injected log-shipper, proxy'));
  t.true(
    lines.includes(
      '  log-shipper: injected (initContainers log-shipper; volumes app-logs; annotations logging.example.com/shipper; env LOG_DIR, mount /var/log/app in web)',
    ),
  );
  t.true(lines.includes('  proxy: injected (initContainers proxy; volumes proxy-tmp; labels proxy.example.com/injected)'));
  t.true(lines.includes('StatefulSet shop/db: injected log-shipper'));
  t.true(lines.includes('  proxy: skipped — proxy is on request and the pod does not name it in sidecar-injector.io/templates'));
  t.true(lines.includes('ConfigMap shop/settings: not a workload; left as is'));
  t.false(stderr.includes('assumed opted in'), 'labels were given');
});

test('with namespace labels, a namespace that has not opted in is left alone and explained', async (t) => {
  const { stdout, stderr } = await run(['-f', fixture, '--explain', '--namespace', 'quiet', '--namespace-label', 'shop:sidecar-injector.io/injection=enabled']);
  t.false(stdout.includes('log-shipper'));
  t.true(stderr.includes('Deployment quiet/web: not injected: namespace quiet does not have label sidecar-injector.io/injection=enabled'));
});

test('without namespace labels every namespace counts as opted in, and --explain says so', async (t) => {
  const { stderr } = await run(['-f', fixture, '--explain']);
  t.true(stderr.includes('  namespace shop: assumed opted in (no --namespace-labels or --namespace-label given)'));
});

test('a pod the webhook would refuse makes render exit 1 with the reason', async (t) => {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'p', annotations: { 'sidecar-injector.io/templates': 'tracer' } },
    spec: { containers: [{ name: 'p', image: 'x' }] },
  };
  const { code, stderr } = await run(['-f', '-'], JSON.stringify(pod));
  t.is(code, 1);
  t.regex(stderr, /Pod default\/p: refused: annotation sidecar-injector.io\/templates names "tracer"/);
});

test('offline and in the cluster agree: a pod created from the rendered template gets no patch from the webhook', async (t) => {
  const { stdout } = await run(['-f', fixture]);
  const deployment = docs(stdout)[1]!;
  const set = await loadTemplateDir('templates');
  const namespaces = optedIn('shop');
  const pod = prepareCreate(
    { apiVersion: 'v1', kind: 'Pod', metadata: { ...deployment.spec.template.metadata, generateName: 'web-5d8f-' }, spec: deployment.spec.template.spec },
    'shop',
  );
  const outcome = await mutate(createReview(pod, { namespace: 'shop' }), { templates: () => set, namespaces });
  t.is(outcome.reason, 'already-injected');
  t.is(outcome.response.response.patch, undefined);
});

test('the pipeline from the README: sidecar-injector render -f - reads stdin and writes YAML', async (t) => {
  const child = spawn(process.execPath, [join('dist', 'src', 'cli', 'main.js'), 'render', '-f', '-', '--templates', 'templates'], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  child.stdin.end(await readFile(fixture));
  let stdout = '';
  child.stdout.on('data', (c) => (stdout += c));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  t.is(code, 0);
  t.is(docs(stdout).length, 8);
});

test('documents whose kind is a JavaScript name are no workloads; an unresolved alias is a clear error', async (t) => {
  for (const kind of ['constructor', '__proto__', 'hasOwnProperty']) {
    const { code, stdout } = await run(['-f', '-'], `apiVersion: v1\nkind: ${kind}\nmetadata: {name: x}\n`);
    t.is(code, 0, kind);
    t.regex(stdout, new RegExp(`kind: ${kind}`));
  }
  await t.throwsAsync(run(['-f', '-'], 'apiVersion: v1\nkind: Pod\nmetadata: {name: *missing}\n'), { message: /document 1/ });
});

test('--kubernetes-version 1.28: the proxy runs as an ordinary container, a Job gets no sidecar, and --explain says why; misplaced opt-in is named', async (t) => {
  const manifests = `apiVersion: apps/v1
kind: Deployment
metadata: { name: web, namespace: shop, annotations: { sidecar-injector.io/templates: proxy } }
spec:
  template:
    metadata: { labels: { app: web } }
    spec: { containers: [{ name: web, image: nginx }] }
---
apiVersion: batch/v1
kind: Job
metadata: { name: migrate, namespace: shop, labels: { sidecar-injector.io/inject: disabled } }
spec:
  template:
    spec: { restartPolicy: Never, containers: [{ name: migrate, image: migrate }] }
---
apiVersion: apps/v1
kind: Deployment
metadata: { name: api, namespace: shop }
spec:
  template:
    metadata: { annotations: { sidecar-injector.io/templates: proxy } }
    spec: { containers: [{ name: api, image: api }] }
`;
  const { code, stdout, stderr } = await run(['-f', '-', '--explain', '--kubernetes-version', '1.28'], manifests);
  t.is(code, 0);
  const [web, job, api] = docs(stdout);
  t.false(
    podSpecOf(web!).containers.some((c: any) => c.name === 'proxy'),
    'web did not ask on its pods',
  );
  t.deepEqual(
    podSpecOf(api!).containers.map((c: any) => c.name),
    ['proxy', 'api', 'log-shipper'],
  );
  t.is(api!.spec.template.metadata.annotations['kubectl.kubernetes.io/default-container'], 'api');
  t.deepEqual(
    [...(podSpecOf(job!).initContainers ?? []), ...podSpecOf(job!).containers].map((c: any) => c.name),
    ['migrate'],
  );
  t.true(
    stderr.includes(
      '  warning: Deployment carries annotation sidecar-injector.io/templates in its own metadata, which its pods do not inherit; put it under spec.template.metadata for it to apply\n',
    ),
  );
  t.true(stderr.includes('  warning: Job carries label sidecar-injector.io/inject in its own metadata, which its pods do not inherit;'));
  t.true(stderr.includes('  warning: log-shipper not injected: no native sidecars on Kubernetes 1.28, and the pod runs to completion (restartPolicy Never)\n'));
  t.true(stderr.includes('  warning: proxy: no native sidecars on Kubernetes 1.28; proxy run as ordinary containers (start order not guaranteed)\n'));
  t.true(stderr.includes("  note: kubectl.kubernetes.io/default-container set to api, the pod's first own container: proxy places its container before it\n"));
  // Rendering its own output again changes nothing at the same version; on 1.33 the ledger keeps
  // the form of what was injected, and only the Job, which got no log shipper, now gets it natively.
  t.is((await run(['-f', '-', '--kubernetes-version', '1.28'], stdout)).stdout, stdout);
  const [web2, job2, api2] = docs((await run(['-f', '-', '--kubernetes-version', '1.33'], stdout)).stdout);
  t.deepEqual([web2, api2], [web, api]);
  t.deepEqual(
    podSpecOf(job2!).initContainers.map((c: any) => [c.name, c.restartPolicy]),
    [['log-shipper', 'Always']],
  );
  // A Job that asks for the required proxy cannot have it below 1.29: refused, saying why and what to change.
  const asking = manifests.replace(
    'spec: { restartPolicy: Never',
    'metadata: { annotations: { sidecar-injector.io/templates: proxy } }\n    spec: { restartPolicy: Never',
  );
  const refused = await run(['-f', '-', '--kubernetes-version', '1.28'], asking).catch((err: { code: number; stderr: string }) => err);
  t.not(refused.code, 0);
  t.regex(
    refused.stderr,
    /required sidecar proxy cannot be injected: proxy not injected: no native sidecars on Kubernetes 1\.28, and the pod runs to completion/,
  );
});

const refusedPod = {
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'p', namespace: 'shop', annotations: { 'sidecar-injector.io/templates': 'tracer' } },
  spec: { containers: [{ name: 'p', image: 'x' }] },
};

test('all or nothing: one refused workload writes nothing to stdout and exits 1; --keep-going writes the rest, loudly', async (t) => {
  const input = `${await readFile(fixture, 'utf8')}\n---\n${JSON.stringify(refusedPod)}\n`;
  const strict = await run(['-f', '-'], input);
  t.is(strict.code, 1);
  t.is(strict.stdout, '');
  t.regex(strict.stderr, /Pod shop\/p: refused: annotation sidecar-injector.io\/templates names "tracer"/);
  t.regex(
    strict.stderr,
    /render: 1 of 9 document\(s\) refused: nothing written, so that no workload is applied without its sidecars \(--keep-going writes the rest\)\n$/,
  );
  const going = await run(['-f', '-', '--keep-going'], input);
  t.is(going.code, 1);
  t.is(docs(going.stdout).length, 9);
  t.deepEqual(docs(going.stdout)[8], refusedPod);
  t.regex(going.stderr, /render: --keep-going: WRITTEN WITHOUT THEIR SIDECARS, as read: Pod shop\/p\n$/);
});

test('-f many times, directories recursively (yaml, yml, json; hidden and other files skipped), and - for stdin once', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-render-'));
  const pod = (name: string) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace: 'shop' }, spec: { containers: [{ name, image: 'x' }] } });
  await mkdir(join(dir, 'nested', 'deeper'), { recursive: true });
  await mkdir(join(dir, '.git'));
  await writeFile(join(dir, 'a.yaml'), JSON.stringify(pod('a')));
  await writeFile(join(dir, 'nested', 'b.yml'), JSON.stringify(pod('b')));
  await writeFile(join(dir, 'nested', 'deeper', 'c.json'), JSON.stringify(pod('c')));
  await writeFile(join(dir, 'nested', 'README.md'), '# not a manifest');
  await writeFile(join(dir, '.hidden.yaml'), JSON.stringify(pod('hidden')));
  await writeFile(join(dir, '.git', 'x.yaml'), JSON.stringify(pod('git')));
  const { code, stdout } = await run(['-f', fixture, '-f', dir, '-f', '-'], JSON.stringify(pod('stdin')));
  t.is(code, 0);
  const names = docs(stdout).map((o) => o.metadata.name);
  t.is(names.length, 12);
  t.deepEqual(names.slice(8), ['a', 'b', 'c', 'stdin']);
  for (const object of docs(stdout).slice(8)) t.true(object.spec.initContainers.some((c: any) => c.name === 'log-shipper'));
  await t.throwsAsync(run(['-f', '-', '-f', '-']), { message: /stdin can be read once/ });
  await t.throwsAsync(run(['-f', join(dir, 'missing.yaml'), '-f', dir]), { message: /-f .*missing\.yaml: ENOENT/ });
  const empty = await mkdtemp(join(tmpdir(), 'sidecar-injector-render-'));
  await t.throwsAsync(run(['-f', empty]), { message: /no \*\.yaml, \*\.yml or \*\.json files in this directory/ });
});

test('no YAML anchors or aliases in the output: two application containers get plain copies', async (t) => {
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'two', namespace: 'shop' },
    spec: {
      containers: [
        { name: 'web', image: 'web:1' },
        { name: 'worker', image: 'worker:1' },
      ],
    },
  };
  // An input that uses anchors is written without them too.
  const anchored = 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: c, labels: &l { a: b } }\ndata: *l\n';
  const { code, stdout } = await run(['-f', '-'], `${JSON.stringify(pod)}\n---\n${anchored}`);
  t.is(code, 0);
  let aliases = 0;
  for (const doc of parseAllDocuments(stdout)) {
    visit(doc, {
      Alias: () => void aliases++,
      Node: (_, node) => void ('anchor' in node && node.anchor ? aliases++ : undefined),
    });
  }
  t.is(aliases, 0);
  const [out, config] = docs(stdout);
  t.deepEqual(out!.spec.containers[0].volumeMounts, out!.spec.containers[1].volumeMounts);
  t.true(out!.spec.containers[0].volumeMounts.length > 0);
  t.deepEqual(config!.data, { a: 'b' });
});

test('-o json writes one object, or a v1 List that kubectl apply reads; another format is refused', async (t) => {
  const one = await run(['-f', '-', '-o', 'json'], JSON.stringify({ ...refusedPod, metadata: { name: 'p', namespace: 'shop' } }));
  t.is(one.code, 0);
  const pod = JSON.parse(one.stdout);
  t.is(pod.kind, 'Pod');
  t.true(pod.spec.initContainers.some((c: any) => c.name === 'log-shipper'));
  const many = await run(['-f', fixture, '--output', 'json']);
  const list = JSON.parse(many.stdout);
  t.is(list.kind, 'List');
  t.is(list.apiVersion, 'v1');
  t.deepEqual(
    list.items.map((o: any) => o.kind),
    ['Pod', 'Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job', 'CronJob', 'ConfigMap'],
  );
  await t.throwsAsync(run(['-f', fixture, '-o', 'wide']), { message: /-o: expected yaml or json \(got "wide"\)/ });
});

test('--explain names the selector requirement that failed with the value seen; a NotIn one is not told to move a label', async (t) => {
  const manifests = [
    'apiVersion: apps/v1',
    'kind: Deployment',
    'metadata: {name: web, namespace: shop, labels: {logging.example.com/ship: "false"}}',
    'spec:',
    '  template:',
    '    metadata: {labels: {app: web, logging.example.com/ship: "false"}}',
    '    spec: {containers: [{name: web, image: nginx}]}',
    '---',
    'apiVersion: apps/v1',
    'kind: Deployment',
    'metadata: {name: api, namespace: shop, labels: {app: api}}',
    'spec:',
    '  template:',
    '    metadata: {labels: {logging.example.com/ship: "false"}}',
    '    spec: {containers: [{name: api, image: nginx}]}',
  ].join('\n');
  const { stderr } = await run(['-f', '-', '--explain', '--namespace-label', 'shop:sidecar-injector.io/injection=enabled'], manifests);
  const lines = stderr.split('\n');
  t.true(
    lines.includes(
      '  log-shipper: skipped — pod labels do not match its objectSelector: it needs logging.example.com/ship notin (false), and the pod template has logging.example.com/ship="false"',
    ),
    stderr,
  );
  // For a NotIn requirement the fix is removing the label from the pod template, never moving one there: no hint about the workload's own labels.
  t.is(lines.filter((l) => l.includes('own labels meet it')).length, 0);
});

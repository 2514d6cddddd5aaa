/** The README's run command, as a real process: dev certificate, bundled templates, sample review. */
import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createReview, decodePatch, prepareCreate } from './helpers/apiserver.js';
import { logShipperDoc } from './helpers/templates.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { httpsCall } from './helpers/https.js';
import { spawnServe } from './helpers/process.js';
import { FakeClock } from './helpers/fake-clock.js';
import { until } from './helpers/until.js';
import { testCertificates } from './helpers/server.js';
import { LeaderElector } from '../src/kube-api/lease.js';
import { pino } from 'pino';

const entry = join('dist', 'src', 'cli', 'main.js');

async function post(port: number, ca: string, body: string): Promise<any> {
  return JSON.parse((await httpsCall({ port, ca, path: '/mutate?timeout=10s', body })).text);
}

async function get(port: number, ca: string, path: string): Promise<string> {
  return (await httpsCall({ port, ca, path })).text;
}

test('serve runs on the bundled templates with a throw-away certificate and stops on SIGTERM', async (t) => {
  const { child, port, ca, certDir, logs, exited } = await spawnServe(['--namespace-labels', 'dev/namespaces.yaml', '--shutdown-delay-ms', '0']);
  const listening = logs.find((l) => l.msg === 'listening')!;
  t.is(listening.namespaceSource, 'local');
  t.deepEqual(
    listening.templates.map((s: string) => s.split('@')[0]),
    ['log-shipper', 'proxy'],
  );
  t.is(logs.find((l) => l.caFile)?.caFile, join(certDir, 'ca.crt'));
  const review = await post(port, ca, await readFile(join('dev', 'sample-review.json'), 'utf8'));
  t.is(review.response.uid, '705ab4f5-6393-11e8-b7cc-42010a800002');
  const paths = decodePatch(review.response).map((op) => op.path);
  t.true(paths.includes('/spec/initContainers'));
  const added = decodePatch(review.response).find((op) => op.path === '/spec/initContainers') as { value: { name: string }[] };
  t.deepEqual(
    added.value.map((c) => c.name),
    ['proxy', 'log-shipper'],
  );
  child.kill('SIGTERM');
  t.is(await exited, 0);
});

test('serve on an empty templates directory (a fresh install) admits pods unchanged, says so, and serves a template added later', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-test-'));
  // What the kubelet mounts for a ConfigMap without data: only its own dot entries.
  await mkdir(join(dir, '..data'));
  const { child, port, ca, logs, exited } = await spawnServe([
    '--templates',
    dir,
    '--namespace-labels',
    'dev/namespaces.yaml',
    '--shutdown-delay-ms',
    '0',
    '--template-check-interval-ms',
    '100',
  ]);
  t.teardown(() => child.kill('SIGKILL'));
  t.deepEqual(logs.find((l) => l.msg === 'listening')!.templates, []);
  t.truthy(logs.find((l) => l.msg === 'no templates: no pod gets a sidecar until templates are added'));
  // The sample pod without its request for the proxy (a pod naming a template that is not there is refused).
  const sampleReview = JSON.parse(await readFile(join('dev', 'sample-review.json'), 'utf8'));
  delete sampleReview.request.object.metadata.annotations;
  const sample = JSON.stringify(sampleReview);
  let review = await post(port, ca, sample);
  t.true(review.response.allowed);
  t.is(review.response.patch, undefined, 'no patch without templates');
  t.deepEqual(JSON.parse(await get(port, ca, '/status')).templates.templates, []);
  await writeFile(join(dir, 'agent.yaml'), 'name: agent\ninjection: automatic\ncontainers: [{ name: agent, image: "registry.example/agent:1" }]\n');
  await until(() => logs.some((l) => l.msg === 'templates reloaded'), 'the added template is loaded');
  review = await post(port, ca, sample);
  t.true(decodePatch(review.response).some((op) => JSON.stringify(op).includes('registry.example/agent:1')));
  child.kill('SIGTERM');
  t.is(await exited, 0);
});

async function runFailing(args: string[]): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, [entry, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => (stderr += c));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  return { code, stderr };
}

test('serve refuses to start on invalid configuration, listing the problems', async (t) => {
  const { code, stderr } = await runFailing(['serve', '--port', 'x', '--tls-key', 'k.pem']);
  t.is(code, 1);
  t.regex(stderr, /--port/);
  t.regex(stderr, /--tls-cert and --tls-key go together/);
});

test('serve refuses to start on a broken template, naming the file and the field', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-test-'));
  await writeFile(join(dir, 'broken.yaml'), 'name: broken\ncontainers:\n  - name: x\n    image: "{{ pod.secret }}"\n');
  const { code, stderr } = await runFailing(['serve', '--templates', dir, '--port', '0']);
  t.is(code, 1);
  t.regex(stderr, /broken\.yaml: containers\[0\]\.image: unknown placeholder \{\{ pod\.secret \}\}/);
});

async function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [entry, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c) => (stdout += c));
  child.stderr.on('data', (c) => (stderr += c));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  return { code, stdout, stderr };
}

test('an unknown command exits 2 in one line, naming the commands and the nearest one', async (t) => {
  const unknown = await runCli(['frobnicate']);
  t.is(unknown.code, 2);
  t.is(
    unknown.stderr,
    'sidecar-injector "frobnicate": unknown command; the commands are audit, rollout, serve, render, check, certs, policies, simulate, why, version, help, completion; see sidecar-injector --help\n',
  );
  const typo = await runCli(['rendr', '-f', 'x.yaml']);
  t.is(typo.code, 2);
  t.regex(typo.stderr, /^sidecar-injector "rendr": unknown command \(did you mean render\?\)/);
  const flag = await runCli(['render', '--tempaltes', 'x']);
  t.is(flag.code, 2);
  t.is(flag.stderr, "sidecar-injector render: Unknown option '--tempaltes' (did you mean --templates?); see sidecar-injector render --help\n");
});

test('version and --version print the version, the Node.js version and the Kubernetes versions the build knows', async (t) => {
  const { version } = JSON.parse(await readFile('package.json', 'utf8'));
  for (const args of [['version'], ['--version']]) {
    const { code, stdout, stderr } = await runCli(args);
    t.is(code, 0);
    t.is(stderr, '');
    const lines = stdout.trimEnd().split('\n');
    t.is(lines[0], `sidecar-injector ${version}`);
    t.is(lines[1], `Node.js ${process.version}`);
    t.regex(stdout, /Kubernetes API schema \(template fields\): 1\.\d+\n/);
    t.regex(stdout, /Pod Security rules: v1\.0 to v1\.\d+/);
  }
  t.is((await runCli(['version', '--json'])).code, 2);
});

test("COMMAND --help and help COMMAND print that command's help only; --help lists the commands in a screen", async (t) => {
  for (const args of [
    ['render', '--help'],
    ['render', '-f', 'x', '-h'],
    ['help', 'render'],
  ]) {
    const { code, stdout } = await runCli(args);
    t.is(code, 0);
    t.true(stdout.startsWith('Usage: sidecar-injector render '), stdout.slice(0, 80));
    t.false(stdout.includes('Usage: sidecar-injector serve'));
    t.false(stdout.includes('Usage: sidecar-injector check'));
  }
  const summary = await runCli(['--help']);
  t.true(summary.stdout.split('\n').length < 20);
  for (const command of ['serve', 'render', 'check', 'certs', 'audit', 'version', 'completion']) t.regex(summary.stdout, new RegExp(`^  ${command} `, 'm'));
  t.is((await runCli(['help', 'rendr'])).code, 2);
});

test("completion bash completes commands and each command's flags; zsh loads the same through bashcompinit", async (t) => {
  const bash = await runCli(['completion', 'bash']);
  t.is(bash.code, 0);
  const complete = (words: string[]) =>
    new Promise<string>((resolve) => {
      const child = spawn(
        'bash',
        ['-c', `eval "$SCRIPT"; COMP_WORDS=(${words.join(' ')}); COMP_CWORD=${words.length - 1}; _sidecar_injector; echo "\${COMPREPLY[*]}"`],
        { env: { ...process.env, SCRIPT: bash.stdout }, stdio: ['ignore', 'pipe', 'inherit'] },
      );
      let out = '';
      child.stdout.on('data', (c) => (out += c));
      child.once('close', () => resolve(out.trim()));
    });
  t.is(await complete(['sidecar-injector', 're']), 'render');
  t.is(await complete(['sidecar-injector', 'render', '--ex']), '--explain');
  t.is(await complete(['sidecar-injector', 'check', '--pod']), '--pod-security');
  const zsh = await runCli(['completion', 'zsh']);
  t.true(zsh.stdout.startsWith('autoload -U +X bashcompinit && bashcompinit\n'));
  t.true(zsh.stdout.endsWith(bash.stdout));
  t.is((await runCli(['completion', 'fish'])).code, 2);
});

test('serve with --kubeconfig uses the cluster source, says so, and injects by live namespace labels', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  api.create('demo', { 'sidecar-injector.io/injection': 'enabled' });
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-test-'));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
  const { child, port, ca, logs } = await spawnServe(['--kubeconfig', kubeconfig, '--shutdown-delay-ms', '0'], { waitFor: 'namespaces listed' });
  t.teardown(async () => {
    child.kill('SIGTERM');
    await api.stop();
  });
  const listening = logs.find((l) => l.msg === 'listening')!;
  t.is(listening.namespaceSource, 'cluster');
  t.is(listening.namespaceFailurePolicy, 'deny');
  const review = await post(port, ca, await readFile(join('dev', 'sample-review.json'), 'utf8'));
  t.is(review.response.patchType, 'JSONPatch');
  // The cluster source and the certificate show in the metrics.
  const metrics = await get(port, ca, '/metrics');
  t.regex(metrics, /^sidecar_injector_namespace_cache_synced 1$/m);
  t.regex(metrics, /^sidecar_injector_namespace_cache_size 1$/m);
  const expiry = Number(/^sidecar_injector_serving_certificate_expiry_timestamp_seconds (\d+)$/m.exec(metrics)?.[1]);
  t.true(expiry > Date.now() / 1000);
  t.regex(metrics, /^sidecar_injector_reviews_total\{operation="CREATE",decision="patched",reason="injected"\} 1$/m);
  // The version it serves for, learned from the cluster, and why: /version read, nodes listed (none here).
  let status: any;
  await until(async () => {
    status = JSON.parse(await get(port, ca, '/status'));
    return status.kubernetes.apiServer !== null && status.kubernetes.nodes !== null;
  }, 'the version and the nodes read');
  t.deepEqual(status.kubernetes, {
    kubernetesVersion: '1.31',
    source: 'api-server',
    reason: 'API server v1.31.4; no node reports a kubelet version',
    apiServer: 'v1.31.4',
    nodes: 0,
    settled: true,
  });
  t.is(status.podSecurityAction, 'skip');
});

test('serve, render and check refuse a --kubernetes-version that is not one, and a bad Pod Security option', async (t) => {
  for (const [args, message] of [
    [
      ['serve', '--namespace-source', 'local', '--kubernetes-version', 'latest'],
      /--kubernetes-version: expected a version such as 1\.28 or v1\.29\.3 \(got "latest"\)/,
    ],
    [['serve', '--namespace-source', 'local', '--pod-security-action', 'warn'], /--pod-security-action: expected skip, deny, inject \(got "warn"\)/],
    [['render', '-f', '-', '--kubernetes-version', '1'], /--kubernetes-version: expected a version/],
    [['check', 'templates', '--pod-security', 'strict'], /--pod-security: expected baseline or restricted \(got "strict"\)/],
    [['check', 'templates', '--kubernetes-version', 'v2'], /--kubernetes-version: expected a version/],
  ] as const) {
    const { code, stderr } = await runFailing([...args]);
    t.is(code, 1, args.join(' '));
    t.regex(stderr, message);
    t.notRegex(stderr, /\n\s+at /);
  }
});

for (const args of [
  ['serve', '--bogus'],
  ['render', '-f', '-', '--bogus'],
  ['check', '--bogus'],
  ['certs', '--bogus'],
  ['check', 'templates', 'extra'],
]) {
  test(`${args.join(' ')}: exits 2 and names what it cannot read`, async (t) => {
    const { code, stderr } = await runFailing(args);
    t.is(code, 2);
    t.regex(
      stderr,
      args.includes('extra')
        ? /check: unexpected argument "extra"/
        : new RegExp(`${args[0]}: Unknown option '--bogus'; see sidecar-injector ${args[0]} --help`),
    );
  });
}

test('--help of every command is generated from its option table', async (t) => {
  for (const [command, flag] of [
    ['serve', '--keep-alive-timeout-ms N'],
    ['render', '-f, --filename FILE'],
    ['certs', '--ca-days N'],
  ]) {
    const child = spawn(process.execPath, [entry, command!, '--help'], { stdio: ['ignore', 'pipe', 'ignore'] });
    let stdout = '';
    child.stdout.on('data', (c) => (stdout += c));
    await new Promise((resolve) => child.once('close', resolve));
    t.true(stdout.includes(flag!), `${command} --help lists ${flag}`);
  }
});

test('command-line values are data: a namespace named __proto__ is refused, nothing is polluted', async (t) => {
  for (const args of [
    ['serve', '--port', '0', '--namespace-label', '__proto__:a=b'],
    ['render', '-f', '-', '--namespace-label', '__proto__:sidecar-injector.io/injection=enabled'],
  ]) {
    const { code, stderr } = await runFailing(args);
    t.is(code, 1, args.join(' '));
    t.regex(stderr, /--namespace-label "__proto__:[^"]*": namespace "__proto__" is not a DNS-1123 label/);
    t.notRegex(stderr, /\n\s+at /, 'no stack trace');
  }
});

test('what the system refuses is a message, not a stack trace: a port in use, certificate lifetimes, a broken kustomization', async (t) => {
  const net = await import('node:net');
  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  t.teardown(() => blocker.close());
  const port = (blocker.address() as { port: number }).port;
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-test-'));
  let result = await runFailing(['serve', '--host', '127.0.0.1', '--port', String(port), '--dev-cert-dir', dir, '--namespace-source', 'local']);
  t.is(result.code, 1);
  t.regex(result.stderr, new RegExp(`cannot listen on 127.0.0.1:${port}: .*EADDRINUSE`));
  t.notRegex(result.stderr, /\n\s+at /);
  result = await runFailing(['certs', '--out', join(dir, 'certs'), '--days', '3000000']);
  t.is(result.code, 1);
  t.regex(result.stderr, /--days: expected a whole number of days from 1 to 36500/);
  result = await runFailing(['certs', '--out', join(dir, 'certs'), '--service', 'a b']);
  t.is(result.code, 1);
  t.regex(result.stderr, /--service "a b": expected a DNS-1123 label/);
  const templates = join(dir, 'templates');
  await mkdir(templates);
  await writeFile(join(templates, 'agent.yaml'), 'name: agent\ncontainers: [{ name: agent, image: x }]\n');
  await writeFile(join(templates, 'kustomization.yaml'), 'resources: {files: 7}\n');
  result = await runFailing(['check', templates]);
  t.is(result.code, 1);
  t.regex(result.stderr, /kustomization.yaml: resources: must be a list of file names/);
  t.notRegex(result.stderr, /\n\s+at /);
});

test('SIGTERM releases the audit Lease before the process exits: another replica leads at its first try', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  api.create('demo', { 'sidecar-injector.io/injection': 'enabled' });
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-test-'));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
  const { child, exited, logs } = await spawnServe(['--kubeconfig', kubeconfig, '--shutdown-delay-ms', '0', '--audit', 'on']);
  const lease = () => api.leases.get('sidecar-injector/sidecar-injector-leader');
  await until(() => Boolean(lease()?.spec?.holderIdentity), 'the replica leads');
  child.kill('SIGTERM');
  t.is(await exited, 0);
  t.is(lease()!.spec.holderIdentity, '', 'released before exit');
  t.is(lease()!.spec.leaseDurationSeconds, 1);
  const shuttingDown = logs.find((l) => l.msg === 'shutting down: still serving until another replica takes over');
  t.is(shuttingDown?.order[0], 'audit', 'the audit stops first');
  // Another replica: its first try takes the lease, no 15 s wait for it to expire.
  const next = new LeaderElector({
    kubeConfig: await api.kubeConfig(),
    log: pino({ level: 'silent' }),
    namespace: 'sidecar-injector',
    name: 'sidecar-injector-leader',
    identity: 'replica-2',
    clock: new FakeClock(),
  });
  next.start();
  await until(() => next.isLeader(), 'the next replica leads');
  t.is(lease()!.spec.holderIdentity, 'replica-2');
  await next.stop();
});

test('without a cluster: audit and rollout status say what to give in one problem, serve in cluster mode that it is not in a pod; never a stack trace', async (t) => {
  const home = await mkdtemp(join(tmpdir(), 'sidecar-injector-home-'));
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k !== 'KUBECONFIG' && !k.startsWith('KUBERNETES_SERVICE_')));
  const run = (args: string[]) =>
    new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [entry, ...args], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...env, HOME: home } });
      let stderr = '';
      child.stderr.on('data', (c) => (stderr += c));
      child.once('close', (code) => resolve({ code, stderr }));
    });
  for (const args of [['audit'], ['rollout', 'status']]) {
    const { code, stderr } = await run(args);
    t.is(code, 1, args.join(' '));
    t.regex(
      stderr,
      /^sidecar-injector: invalid configuration:\n {2}- the Kubernetes client configuration names the API server http:\/\/localhost:8080, not an https:\/\/ one .*give --kubeconfig FILE, set KUBECONFIG, or write ~\/\.kube\/config/,
    );
    t.notRegex(stderr, /\n\s+at /, 'no stack trace');
  }
  const serve = await run(['serve', '--namespace-source', 'cluster', '--port', '0']);
  t.is(serve.code, 1);
  t.regex(serve.stderr, /no Kubernetes client configuration: this is not a pod; give --kubeconfig FILE, or run it in a pod/);
});

test('a second local start on a busy port fails without replacing the running one’s development CA; a local start listens on loopback unless told otherwise', async (t) => {
  const first = await spawnServe(['--namespace-labels', 'dev/namespaces.yaml', '--shutdown-delay-ms', '0']);
  t.teardown(() => first.child.kill('SIGTERM'));
  const second = await runFailing(['serve', '--namespace-labels', 'dev/namespaces.yaml', '--port', String(first.port), '--dev-cert-dir', first.certDir]);
  t.is(second.code, 1);
  t.regex(second.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${first.port}`), 'the default host of a local run is loopback');
  t.is(await readFile(join(first.certDir, 'ca.crt'), 'utf8'), first.ca, 'the running server’s CA is still the one on disk');
  const review = await post(first.port, first.ca, await readFile(join('dev', 'sample-review.json'), 'utf8'));
  t.is(review.response.uid, '705ab4f5-6393-11e8-b7cc-42010a800002', 'and the quickstart’s curl still reaches it');
});

test('a reader that stops early (| head) ends the command quietly: no EPIPE stack trace', async (t) => {
  const entry = join('dist', 'src', 'cli', 'main.js');
  // 78 KB of policies, more than a pipe holds: the writes after head has gone fail with EPIPE.
  for (const command of ['policies --mutating --templates templates', 'check templates']) {
    const child = spawn('sh', ['-c', `"${process.execPath}" ${entry} ${command} | head -c 1`], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    t.is(code, 0, `${command}: the pipeline is as good as its last command`);
    t.is(stdout.length, 1, command);
    t.is(stderr, '', `${command}: nothing on stderr`);
  }
});

test('a read the API server refuses is one line in its words, with what a 403 means, never a stack trace (rollout status, simulate)', async (t) => {
  const { key, cert, caCert } = await testCertificates();
  const https = await import('node:https');
  const forbidding = https.createServer({ key, cert }, (req, res) => {
    res.writeHead(403, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        kind: 'Status',
        apiVersion: 'v1',
        status: 'Failure',
        reason: 'Forbidden',
        code: 403,
        message: `pods is forbidden: User "dev" cannot list resource "pods" (${req.url?.slice(0, 40)})`,
      }),
    );
  });
  await new Promise<void>((resolve) => forbidding.listen(0, '127.0.0.1', resolve));
  t.teardown(() => forbidding.close());
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-forbidden-'));
  const kubeconfig = join(dir, 'kubeconfig');
  const port = (forbidding.address() as import('node:net').AddressInfo).port;
  await writeFile(
    kubeconfig,
    `apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://localhost:${port}", certificate-authority-data: ${Buffer.from(caCert).toString('base64')}}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n`,
  );
  const entry = join('dist', 'src', 'cli', 'main.js');
  for (const args of [
    ['rollout', 'status', '--kubeconfig', kubeconfig],
    ['simulate', '--kubeconfig', kubeconfig, '--templates', 'templates'],
  ]) {
    const child = spawn(process.execPath, [entry, ...args], { stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    t.is(code, 1, args[0]);
    t.regex(
      stderr,
      /^sidecar-injector: cannot read [^\n]*HTTP 403: pods is forbidden: User "dev" cannot list resource "pods"[^\n]*the kubeconfig’s user lacks the permission the API server names/,
      args[0],
    );
    t.notRegex(stderr, /\n\s+at /, `${args[0]}: no stack trace`);
  }
});

test('serve without --rollout-probe-namespace stops every candidate: pods get the stable revision, and the candidate’s status says why', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  api.create('demo', { 'sidecar-injector.io/injection': 'enabled' });
  const { name: _name, ...stableSpec } = logShipperDoc;
  api.applyTemplate('logs', stableSpec);
  // A candidate at 100 %: live for every workload once a preflight passed it; none runs here.
  const candidateSpec = {
    ...stableSpec,
    name: 'logs',
    rollout: { role: 'candidate', share: 100 },
    containers: [{ ...stableSpec.containers[0]!, image: 'fluent/fluent-bit:4' }],
  };
  api.applyTemplate('logs-next', candidateSpec);
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-test-'));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
  const { child, port, ca } = await spawnServe(['--kubeconfig', kubeconfig, '--template-source', 'cluster', '--shutdown-delay-ms', '0'], {
    waitFor: 'namespaces listed',
  });
  t.teardown(async () => {
    child.kill('SIGTERM');
    await api.stop();
  });
  const pod = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-', namespace: 'demo', labels: { app: 'web' } },
    spec: { containers: [{ name: 'app', image: 'app:1' }] },
  };
  const review = await post(port, ca, JSON.stringify(createReview(prepareCreate(pod, 'demo'), { namespace: 'demo' })));
  // Added as a container, or as a native sidecar (the whole initContainers list).
  const images = decodePatch(review.response)
    .flatMap((op) => (Array.isArray(op.value) ? op.value : [op.value]))
    .filter((value: any) => value?.name === 'log-shipper')
    .map((value: any) => value.image);
  t.deepEqual(images, ['fluent/fluent-bit:3'], 'the stable revision, not the candidate');
  await until(() => api.sidecarTemplates.get('logs-next')?.status?.state === 'Stopped', 'the candidate’s status written');
  const halted = (api.sidecarTemplates.get('logs-next')!.status.conditions as any[]).find((c) => c.type === 'Halted');
  t.like(halted, { status: 'True', reason: 'PreflightNotRun' });
  t.regex(halted.message, /no --rollout-probe-namespace/);
});

/**
 * Ports a template's containers listen on without declaring them (src/templates/ports.ts): a
 * parameter named for a port that a container's arguments or command use, and that no `ports`
 * entry of that container declares (by the same parameter or its value), is reported by `check`
 * and by SidecarTemplate admission as a warning; the bundled proxy declares its admin port.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { answerTemplateReview } from '../src/admission/validate-templates.js';
import { compileTemplate } from '../src/templates/compile.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { undeclaredPorts, undeclaredPortText } from '../src/templates/ports.js';

const proxy = (container: Record<string, unknown>, parameters: Record<string, unknown> = { adminPort: 9901 }) => ({
  name: 'proxy',
  parameters,
  containers: [{ name: 'proxy', image: 'envoyproxy/envoy:v1.31.0', ...container }],
});
const adminArgs = { args: ['--config-yaml', '{admin: {address: {socket_address: {address: 127.0.0.1, port_value: {{ params.adminPort }}}}}}'] };

function undeclared(doc: unknown): string[] {
  const { template, problems } = compileTemplate(doc, 't.yaml');
  if (!template) throw new Error(JSON.stringify(problems));
  return undeclaredPorts(template).map((p) => undeclaredPortText(template.name, p));
}

test('a port parameter the arguments use and no ports entry declares is reported; one declared by parameter or by value is not', (t) => {
  const text = 'proxy: container proxy gets params.adminPort (9901), no such port declared; if it listens there, declare it';
  t.deepEqual(undeclared(proxy(adminArgs)), [text]);
  t.deepEqual(undeclared(proxy({ ...adminArgs, ports: [{ name: 'admin', containerPort: '{{ params.adminPort }}' }] })), []);
  t.deepEqual(undeclared(proxy({ ...adminArgs, ports: [{ name: 'admin', containerPort: 9901 }] })), []);
  // Another port declared is not this one.
  t.deepEqual(undeclared(proxy({ ...adminArgs, ports: [{ name: 'http', containerPort: 8080 }] })), [text]);
  // The command counts as the arguments do; a parameter of another name, or used elsewhere, does not.
  t.deepEqual(undeclared(proxy({ command: ['agent', '--listen=:{{ params.metrics_port }}'] }, { metrics_port: 9102 })), [
    'proxy: container proxy gets params.metrics_port (9102), no such port declared; if it listens there, declare it',
  ]);
  t.deepEqual(undeclared(proxy({ args: ['--report={{ params.report }}'] }, { report: 'daily' })), []);
  t.deepEqual(undeclared(proxy({ env: [{ name: 'PORT', value: '{{ params.adminPort }}' }] })), []);
  // A declaration with a default: the default is the value said.
  t.deepEqual(undeclared(proxy({ args: ['--port={{ params.port }}'] }, { port: { default: 15000, type: 'integer', override: 'pod' } })), [
    'proxy: container proxy gets params.port (15000), no such port declared; if it listens there, declare it',
  ]);
  t.true(text.length <= 120, 'fits a Warning header');
});

test('the bundled proxy declares its admin port; the bundled templates draw no warning', async (t) => {
  const set = await loadTemplateDir('templates');
  t.deepEqual(
    set.templates.flatMap((template) => undeclaredPorts(template)),
    [],
  );
});

test('check prints the warning with the fix, and exits 0', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-ports-'));
  await writeFile(
    join(dir, 'proxy.yaml'),
    'name: proxy\nparameters:\n  adminPort: 9901\ncontainers:\n  - name: proxy\n    image: envoyproxy/envoy:v1.31.0\n    args: ["--admin-port={{ params.adminPort }}"]\n',
  );
  const child = spawn(process.execPath, [join('dist', 'src', 'cli', 'main.js'), 'check', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  child.stdout.on('data', (c) => (stdout += c));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  t.is(code, 0);
  t.true(
    stdout.includes(
      '  warning: proxy: container proxy gets params.adminPort (9901), no such port declared; if it listens there, declare it (ports: [{ name: …, containerPort: "{{ params.adminPort }}" }]), so that pods on the node\'s network are judged by it\n',
    ),
    stdout,
  );
});

test('SidecarTemplate admission admits the template and returns the warning, for kubectl apply to print', (t) => {
  const { name: _name, ...spec } = proxy(adminArgs);
  const object = { apiVersion: 'sidecar-injector.io/v1alpha1', kind: 'SidecarTemplate', metadata: { name: 'proxy' }, spec };
  const review = {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: { uid: 'u-1', kind: { group: 'sidecar-injector.io', version: 'v1alpha1', kind: 'SidecarTemplate' }, operation: 'CREATE', name: 'proxy', object },
  };
  const answer = answerTemplateReview(review);
  t.false(answer.refused);
  t.deepEqual(answer.response.response, {
    uid: 'u-1',
    allowed: true,
    warnings: ['proxy: container proxy gets params.adminPort (9901), no such port declared; if it listens there, declare it'],
  });
});

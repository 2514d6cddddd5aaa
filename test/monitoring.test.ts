/**
 * The monitoring component: the ServiceMonitor scrapes what the Service serves, verified with
 * the CA the injector keeps; every alert of the PrometheusRule is unit-tested with promtool
 * (Debian's prometheus package; without it the promtool test is skipped, saying so, except in
 * CI); and every metric the rules and the dashboard name is one the injector exports.
 */
import test from 'ava';
import { spawnSync } from 'node:child_process';
import { copyFile, mkdtemp, readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { stringify } from 'yaml';
import { loadTemplateDir } from '../src/templates/load.js';
import { kustomizeObjects } from './helpers/kustomize.js';
import { optedIn } from './helpers/pods.js';
import { startTestServer } from './helpers/server.js';

type Json = Record<string, any>;
const component = join('manifests', 'components', 'monitoring');

async function withComponent(): Promise<Json[]> {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-monitoring-'));
  const root = relative(dir, process.cwd());
  await writeFile(
    join(dir, 'kustomization.yaml'),
    `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${join(root, 'manifests')}\ncomponents:\n  - ${join(root, component)}\n`,
  );
  return kustomizeObjects(dir);
}

const one = (objects: Json[], kind: string) => {
  const found = objects.filter((o) => o.kind === kind);
  if (found.length !== 1) throw new Error(`${found.length} objects of kind ${kind}`);
  return found[0]!;
};

test('the ServiceMonitor scrapes the Service’s metrics port (the one serve gives /metrics), verified with the CA of the Secret the injector serves from, by the name the certificate carries', async (t) => {
  const objects = await withComponent();
  const monitor = one(objects, 'ServiceMonitor');
  const service = one(objects, 'Service');
  const deployment = one(objects, 'Deployment');
  t.is(monitor.metadata.namespace, service.metadata.namespace);
  for (const [key, value] of Object.entries(monitor.spec.selector.matchLabels)) t.is(service.metadata.labels[key], value, key);
  const [endpoint] = monitor.spec.endpoints;
  // The Service's metrics port, which leads to the container's metrics port, the one serve gives /metrics.
  const servicePort = (service.spec.ports as Json[]).find((p) => p.name === endpoint.port)!;
  const container = deployment.spec.template.spec.containers[0];
  const containerPort = (container.ports as Json[]).find((p) => p.name === servicePort.targetPort)!.containerPort;
  t.true((container.args as string[]).includes(`--metrics-port=${containerPort}`));
  t.is(endpoint.scheme, 'https');
  t.is(endpoint.path, '/metrics');
  const secret = (deployment.spec.template.spec.containers[0].args as string[]).find((a) => a.startsWith('--tls-secret='))!.split('=')[1];
  t.deepEqual(endpoint.tlsConfig.ca, { secret: { name: secret, key: 'ca.crt' } });
  t.is(endpoint.tlsConfig.serverName, `${service.metadata.name}.${service.metadata.namespace}.svc`);
  const dashboard = objects.find((o) => o.kind === 'ConfigMap' && o.metadata.name === 'sidecar-injector-dashboard')!;
  t.is(dashboard.metadata.labels.grafana_dashboard, '1');
  t.is(dashboard.metadata.namespace, service.metadata.namespace);
  t.truthy(JSON.parse(dashboard.data['sidecar-injector.json']).panels.length);
  t.is(one(objects, 'PrometheusRule').metadata.namespace, service.metadata.namespace);
});

const promtool = spawnSync('promtool', ['--version'], { encoding: 'utf8' }).status === 0;
if (!promtool) console.log('monitoring: promtool tests skipped: promtool is not installed (Debian package prometheus; CI installs it)');
const promtoolTest = promtool || process.env.CI === 'true' ? test : test.skip;

promtoolTest('every alert fires on the series that mean trouble and stays quiet on a healthy install (promtool test rules)', async (t) => {
  const rule = one(await withComponent(), 'PrometheusRule');
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-promtool-'));
  await writeFile(join(dir, 'rules.yaml'), stringify({ groups: rule.spec.groups }));
  await copyFile(join(component, 'alerts.test.yaml'), join(dir, 'alerts.test.yaml'));
  const check = spawnSync('promtool', ['check', 'rules', 'rules.yaml'], { cwd: dir, encoding: 'utf8' });
  t.is(check.status, 0, check.stdout + check.stderr);
  const run = spawnSync('promtool', ['test', 'rules', 'alerts.test.yaml'], { cwd: dir, encoding: 'utf8' });
  t.is(run.status, 0, run.stdout + run.stderr);
  // Every alert of the rule has a case that fires it and one that does not.
  const tests = (await readFile(join(component, 'alerts.test.yaml'), 'utf8')).toString();
  for (const alert of (rule.spec.groups as Json[]).flatMap((g) => g.rules as Json[]).map((r) => r.alert as string)) {
    t.regex(tests, new RegExp(`alertname: ${alert}\\n\\s+exp_alerts:`), `${alert} fires in a test`);
    t.regex(tests, new RegExp(`\\{ eval_time: 2h, alertname: ${alert} \\}`), `${alert} is quiet in a test`);
  }
});

test('every metric the alerts and the dashboard name is one the injector exports', async (t) => {
  const server = await startTestServer({ templates: await loadTemplateDir('templates'), namespaces: optedIn('shop') });
  t.teardown(() => server.stop());
  const exported = new Set([...(await server.request('GET', '/metrics')).text.matchAll(/^# TYPE (\S+) (\w+)$/gm)].map((m) => m[1]!));
  const objects = await withComponent();
  const queries = [
    ...(one(objects, 'PrometheusRule').spec.groups as Json[]).flatMap((g) => (g.rules as Json[]).map((r) => r.expr as string)),
    ...(JSON.parse(objects.find((o) => o.metadata.name === 'sidecar-injector-dashboard')!.data['sidecar-injector.json']).panels as Json[]).flatMap((p) =>
      (p.targets as Json[]).map((target) => target.expr as string),
    ),
  ];
  const named = new Set(queries.flatMap((q) => [...q.matchAll(/\bsidecar_injector_[a-z_]+/g)].map((m) => m[0])));
  t.true(named.size >= 15, `${named.size} metrics named`);
  const missing = [...named].filter((name) => !exported.has(name) && !exported.has(name.replace(/_(bucket|sum|count)$/, '')));
  t.deepEqual(missing, []);
});

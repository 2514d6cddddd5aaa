/**
 * `audit --restart` against real controllers: workloads whose pods were created before their
 * namespace opted in are restarted as `kubectl rollout restart` restarts them; the new
 * ReplicaSet's (and StatefulSet's, DaemonSet's) pods come through the webhook; the audit then
 * calls them current; and run again, it restarts nothing.
 */
import test from 'ava';
import { cli, eventually, joinWorld, testNamespace, type Json } from './helpers.js';

const workloads = ['deployment/web', 'statefulset/db', 'daemonset/agent'];

function manifests(): string {
  const template = (app: string) => ({ metadata: { labels: { app } }, spec: { containers: [{ name: 'app', image: 'registry.example/app:1' }] } });
  return [
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'web' },
      spec: { replicas: 2, selector: { matchLabels: { app: 'web' } }, template: template('web') },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'StatefulSet',
      metadata: { name: 'db' },
      spec: { replicas: 2, serviceName: 'db', selector: { matchLabels: { app: 'db' } }, template: template('db') },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: 'agent' },
      spec: { selector: { matchLabels: { app: 'agent' } }, template: template('agent') },
    },
  ]
    .map((o) => JSON.stringify(o))
    .join('\n');
}

/** The audit's JSON report for `namespace`: each pod's state per template. */
async function audit(namespace: string, ...more: string[]): Promise<{ code: number; report: Json; stdout: string; stderr: string }> {
  const run = await cli(['audit', '-n', namespace, '--templates', 'templates', ...more]);
  let report: Json = {};
  try {
    report = JSON.parse(run.stdout);
  } catch {
    // Not the JSON form (a --restart run prints lines).
  }
  return { ...run, report };
}

const states = (report: Json): string[] => [...new Set(JSON.stringify(report).match(/"state":"[a-z-]+"/g) ?? [])].sort();

async function rolledOut(namespace: string): Promise<void> {
  const { kubectl } = joinWorld();
  for (const w of workloads) await kubectl(['rollout', 'status', w, '-n', namespace, '--timeout=180s']);
  // The old pods are gone (they are deleted at once on this node).
  await eventually('only the new pods left', async () => {
    const pods = (await joinWorld().kube.get(`/api/v1/namespaces/${namespace}/pods`)).items as Json[];
    return pods.length === 5 && pods.every((p) => !p.metadata.deletionTimestamp);
  });
}

test.serial(
  'audit --restart: workloads created before their namespace opted in are restarted once, their new pods injected, and the audit calls them current',
  async (t) => {
    const { kube, kubectl } = joinWorld();
    const namespace = await testNamespace(t, 'audit', { 'sidecar-injector.test/pods': 'simulated' });
    await kubectl(['apply', '-n', namespace, '-f', '-'], manifests());
    await rolledOut(namespace);
    await kube.mergePatch(`/api/v1/namespaces/${namespace}`, { metadata: { labels: { 'sidecar-injector.io/injection': 'enabled' } } });
    const before = await audit(namespace, '-o', 'json');
    t.is(before.code, 0, before.stderr);
    t.deepEqual(states(before.report), ['"state":"missing"'], 'every pod lacks the log shipper');
    const restart = await cli(['audit', '-n', namespace, '--templates', 'templates', '--restart', 'missing', '--max-per-minute', '600']);
    t.is(restart.code, 0, restart.stderr);
    for (const w of workloads) t.regex(restart.stdout, new RegExp(`restarted ${w.replace('/', '\\/')}`), `${w} restarted`);
    await rolledOut(namespace);
    const pods = (await kube.get(`/api/v1/namespaces/${namespace}/pods`)).items as Json[];
    for (const pod of pods)
      t.truthy(pod.metadata.annotations?.['sidecar-injector.io/status'], `${pod.metadata.name}: came through the webhook with its sidecar`);
    const after = await audit(namespace, '-o', 'json');
    t.deepEqual(states(after.report), ['"state":"current"']);
    // Run again: nothing to restart, and no workload gets a new revision.
    const generations = async () =>
      Promise.all(workloads.map(async (w) => (await kubectl(['get', w, '-n', namespace, '-o', 'jsonpath={.metadata.generation}'])).stdout));
    const generationsBefore = await generations();
    const again = await cli(['audit', '-n', namespace, '--templates', 'templates', '--restart', 'missing,stale']);
    t.is(again.code, 0, again.stderr);
    t.notRegex(again.stdout, /^restarted /m);
    t.deepEqual(await generations(), generationsBefore, 'no workload rolled again');
  },
);

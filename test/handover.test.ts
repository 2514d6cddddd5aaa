/**
 * A stopping replica's handover: it reads its Service's EndpointSlices as kube-proxy does and
 * hands over only to a replica that is ready there and whose pod is not being deleted.
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import https from 'node:https';
import { writeFile, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { handoverState } from '../src/kube-api/endpoints.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { until } from './helpers/until.js';

const namespace = 'sidecar-injector';
const service = 'sidecar-injector';
const key = `${namespace}/${service}`;

async function cluster(t: { teardown(fn: () => unknown): void }): Promise<FakeApiServer> {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  return api;
}

const readyPod = (api: FakeApiServer, name: string, deleting = false) => {
  api.addObject('pods', { namespace, name, ...(deleting ? { deletionTimestamp: '2026-12-06T00:00:00Z' } : {}) }, { containers: [] });
  api.setObjectStatus('pods', namespace, name, { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] });
};

test('a replica the Service does not send to has nothing to hand over', async (t) => {
  const api = await cluster(t);
  const kubeConfig = await api.kubeConfig();
  // No slice at all; a slice whose endpoints name no pod; a slice of other pods only.
  t.is(await handoverState(kubeConfig, namespace, service, 'me'), 'not-behind');
  api.serviceEndpoints.set(key, [true, true]);
  t.is(await handoverState(kubeConfig, namespace, service, 'me'), 'not-behind');
  api.serviceEndpoints.set(key, [{ ready: true, pod: 'other' }]);
  t.is(await handoverState(kubeConfig, namespace, service, 'me'), 'not-behind');
});

test('a list it may not make (403) or of a resource not served (404) is nothing to wait for; a throttled or failing one is an error (the replica serves on)', async (t) => {
  const api = await cluster(t);
  const kubeConfig = await api.kubeConfig();
  for (const code of [403, 404]) {
    api.endpointSlicesStatus = code;
    t.is(await handoverState(kubeConfig, namespace, service, 'me'), 'not-behind', String(code));
  }
  for (const code of [429, 500, 503]) {
    api.endpointSlicesStatus = code;
    await t.throwsAsync(handoverState(kubeConfig, namespace, service, 'me'), undefined, String(code));
  }
});

test('alone until another replica is ready in the slice and as a pod that is not being deleted', async (t) => {
  const api = await cluster(t);
  const kubeConfig = await api.kubeConfig();
  const me = { ready: false, serving: true, terminating: true, pod: 'me' };
  // Both old replicas deleted at once: the other one terminates too.
  api.serviceEndpoints.set(key, [me, { ready: false, serving: true, terminating: true, pod: 'old' }]);
  readyPod(api, 'old', true);
  t.is(await handoverState(kubeConfig, namespace, service, 'me'), 'alone');
  // The slice not caught up with the other's deletion: its pod says it is going.
  api.serviceEndpoints.set(key, [me, { ready: true, pod: 'old' }]);
  t.is(await handoverState(kubeConfig, namespace, service, 'me'), 'alone');
  // A new replica in the slice, not ready yet; then ready in the slice but its pod gone.
  api.serviceEndpoints.set(key, [me, { ready: false, pod: 'new' }]);
  t.is(await handoverState(kubeConfig, namespace, service, 'me'), 'alone');
  api.serviceEndpoints.set(key, [me, { ready: true, pod: 'new' }]);
  t.is(await handoverState(kubeConfig, namespace, service, 'me'), 'alone');
  readyPod(api, 'new');
  t.is(await handoverState(kubeConfig, namespace, service, 'me'), 'taken-over');
});

test('serve on SIGTERM keeps answering, ready, until another replica takes over, then closes', async (t) => {
  const api = await cluster(t);
  const dir = await mkdtemp(join(tmpdir(), 'handover-'));
  const kubeconfig = join(dir, 'kubeconfig');
  await writeFile(kubeconfig, (await api.kubeConfig()).exportConfig());
  api.serviceEndpoints.set(key, [{ ready: true, pod: 'replica-a' }]);
  const child = spawn(
    process.execPath,
    [
      'dist/src/cli/main.js',
      'serve',
      '--kubeconfig',
      kubeconfig,
      '--template-source',
      'folder',
      '--templates',
      'templates',
      '--port',
      '0',
      '--shutdown-delay-ms',
      '200',
    ],
    { env: { ...process.env, POD_NAME: 'replica-a', POD_NAMESPACE: namespace, SIDECAR_INJECTOR_LOG_LEVEL: 'info' }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  t.teardown(() => child.kill('SIGKILL'));
  const lines: { msg?: string; port?: number }[] = [];
  createInterface({ input: child.stdout! }).on('line', (line) => {
    try {
      lines.push(JSON.parse(line));
    } catch {
      // not a log line
    }
  });
  const exited = once(child, 'exit');
  await until(() => lines.some((l) => l.msg === 'listening'), 'the replica listening');
  child.kill('SIGTERM');
  await until(() => lines.some((l) => l.msg === 'handover: no other replica is ready yet; serving until one is'), 'the handover waiting');
  // Still answering, and ready: kube-proxy falls back to a terminating endpoint only while it serves.
  const port = lines.find((l) => l.msg === 'listening')!.port!;
  const readyz = await new Promise<{ status: number; connection: string | undefined }>((resolve, reject) =>
    https
      .get({ host: '127.0.0.1', port, path: '/readyz', rejectUnauthorized: false }, (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0, connection: res.headers.connection });
      })
      .on('error', reject),
  );
  t.deepEqual(readyz, { status: 200, connection: 'close' });
  // A successor in the slice whose pod is ready: taken over, seen twice a delay apart, then the close.
  api.serviceEndpoints.set(key, [
    { ready: false, serving: true, terminating: true, pod: 'replica-a' },
    { ready: true, pod: 'replica-b' },
  ]);
  readyPod(api, 'replica-b');
  const [code] = await exited;
  t.is(code, 0);
  const messages = lines.map((l) => l.msg);
  t.true(
    messages.indexOf('handover: another replica is ready behind the Service') >
      messages.indexOf('handover: no other replica is ready yet; serving until one is'),
  );
  t.false(messages.includes('handover: no other replica became ready in time; closing'));
});

/**
 * The listeners of `serve`: the webhook port serves the reviews; with `--metrics-port` and
 * `--probe-port` (the shipped Deployment), `/metrics` and `/status` and the kubelet's probes each
 * get a listener of their own, and a request on the wrong port is told which port serves it.
 */
import test from 'ava';
import { ConfigError } from '../src/errors.js';
import { loadConfig } from '../src/config.js';
import { createReview } from './helpers/apiserver.js';
import { httpsCall } from './helpers/https.js';
import { pod } from './helpers/pods.js';
import { spawnServe } from './helpers/process.js';

test('with --metrics-port and --probe-port each group of routes has its own listener, and a path of another group is told where it is', async (t) => {
  const serve = await spawnServe([
    '--namespace-source',
    'local',
    '--namespace-label',
    'team-a:sidecar-injector.io/injection=enabled',
    '--metrics-port',
    '0',
    '--probe-port',
    '0',
  ]);
  t.teardown(() => void serve.child.kill('SIGTERM'));
  const { port, metricsPort, probePort } = serve.logs.find((l) => l.msg === 'listening')!;
  t.is(new Set([port, metricsPort, probePort]).size, 3, 'three ports');
  const get = async (at: number, path: string) => {
    const answer = await httpsCall({ port: at, ca: serve.ca, path });
    return { status: answer.status, message: answer.status === 404 ? (JSON.parse(answer.text).message as string) : undefined, text: answer.text };
  };
  const review = (at: number) =>
    httpsCall({ port: at, ca: serve.ca, path: '/mutate?timeout=10s', body: JSON.stringify(createReview(pod(), { namespace: 'team-a' })) });

  // The webhook port: reviews, and nothing else.
  const answered = await review(port);
  t.is(answered.status, 200);
  t.true(JSON.parse(answered.text).response.allowed);
  for (const path of ['/metrics', '/status']) {
    const answer = await get(port, path);
    t.is(answer.status, 404);
    t.is(answer.message, `no route for GET ${path} on this port: it is served on the metrics port (--metrics-port)`);
  }
  for (const path of ['/healthz', '/readyz'])
    t.is((await get(port, path)).message, `no route for GET ${path} on this port: it is served on the probe port (--probe-port)`);

  // The metrics port: /metrics (with the review just answered counted) and /status.
  const metrics = await get(metricsPort, '/metrics');
  t.is(metrics.status, 200);
  t.regex(metrics.text, /^sidecar_injector_reviews_total\{[^}]*\} 1$/m);
  const status = await get(metricsPort, '/status');
  t.is(status.status, 200);
  t.true(JSON.parse(status.text).ready);
  t.is((await review(metricsPort)).status, 404, 'no reviews on the metrics port');
  t.regex(JSON.parse((await review(metricsPort)).text).message, /^no route for POST \/mutate on this port: it is served on the webhook port \(--port\)$/);
  t.is((await get(metricsPort, '/healthz')).status, 404);

  // The probe port: /healthz and /readyz only.
  t.is((await get(probePort, '/healthz')).status, 200);
  t.is((await get(probePort, '/readyz')).status, 200);
  t.is((await get(probePort, '/metrics')).message, 'no route for GET /metrics on this port: it is served on the metrics port (--metrics-port)');
  t.is((await review(probePort)).status, 404, 'no reviews on the probe port');

  // A stop closes every listener, and the process exits 0.
  serve.child.kill('SIGTERM');
  t.is(await serve.exited, 0);
});

test('without them, one port serves everything (a local run)', async (t) => {
  const serve = await spawnServe(['--namespace-source', 'local']);
  t.teardown(() => void serve.child.kill('SIGTERM'));
  const listening = serve.logs.find((l) => l.msg === 'listening')!;
  t.is(listening.metricsPort, undefined);
  t.is(listening.probePort, undefined);
  for (const path of ['/metrics', '/status', '/healthz', '/readyz']) t.is((await httpsCall({ port: serve.port, ca: serve.ca, path })).status, 200, path);
});

test('a port given to two listeners is refused at start, naming the flags', (t) => {
  const refused = (argv: string[]) => {
    const err = t.throws(() => loadConfig({}, argv), { instanceOf: ConfigError }) as ConfigError;
    return err.message;
  };
  t.regex(
    refused(['--port', '9000', '--metrics-port', '9000']),
    /--metrics-port: 9000 is the webhook port \(--port\); give it a port of its own, or leave it unset to serve on the webhook port/,
  );
  t.regex(refused(['--port', '9000', '--probe-port', '9000']), /--probe-port: 9000 is the webhook port \(--port\)/);
  t.regex(refused(['--metrics-port', '9001', '--probe-port', '9001']), /--probe-port: 9001 is the metrics port \(--metrics-port\); give each its own/);
  t.regex(refused(['--metrics-port', 'abc']), /--metrics-port \/ SIDECAR_INJECTOR_METRICS_PORT: expected a whole number from 0 to 65535/);
  t.deepEqual(
    (({ metricsPort, probePort }) => ({ metricsPort, probePort }))(
      loadConfig({ SIDECAR_INJECTOR_METRICS_PORT: '8443', SIDECAR_INJECTOR_PROBE_PORT: '8081' }, ['--port', '10250']),
    ),
    { metricsPort: 8443, probePort: 8081 },
  );
});

test('with --profiling on, the metrics port answers a CPU profile of the replica: one at a time, for 1 to 120 seconds; without it the path is not served', async (t) => {
  const serve = await spawnServe(['--namespace-source', 'local', '--metrics-port', '0', '--profiling', 'on']);
  t.teardown(() => void serve.child.kill('SIGTERM'));
  const { port, metricsPort } = serve.logs.find((l) => l.msg === 'listening')!;
  const first = httpsCall({ port: metricsPort, ca: serve.ca, path: '/debug/cpu-profile?seconds=1' });
  // A second while the first runs: refused, with the code.
  const second = await httpsCall({ port: metricsPort, ca: serve.ca, path: '/debug/cpu-profile?seconds=1' });
  t.is(second.status, 409);
  t.is(JSON.parse(second.text).code, 'ERR_PROFILE_RUNNING');
  const answer = await first;
  t.is(answer.status, 200);
  const profile = JSON.parse(answer.text);
  t.true(Array.isArray(profile.nodes) && profile.nodes.length > 0, 'call tree nodes');
  t.true(Array.isArray(profile.samples) && profile.samples.length > 0, 'samples');
  t.true(profile.endTime - profile.startTime >= 900_000, `about a second of samples (µs: ${profile.endTime - profile.startTime})`);
  for (const seconds of ['0', '121', 'x', '1e2']) {
    const bad = await httpsCall({ port: metricsPort, ca: serve.ca, path: `/debug/cpu-profile?seconds=${seconds}` });
    t.is(bad.status, 400, seconds);
    t.regex(JSON.parse(bad.text).message, /^seconds: expected a whole number from 1 to 120/);
  }
  // Not on the webhook port.
  t.is((await httpsCall({ port, ca: serve.ca, path: '/debug/cpu-profile?seconds=1' })).status, 404);
  // Off by default.
  const plain = await spawnServe(['--namespace-source', 'local']);
  t.teardown(() => void plain.child.kill('SIGTERM'));
  const off = await httpsCall({ port: plain.logs.find((l) => l.msg === 'listening')!.port, ca: plain.ca, path: '/debug/cpu-profile?seconds=1' });
  t.is(off.status, 404);
});

test('--profiling takes on or off', (t) => {
  t.false(loadConfig({}, ['--namespace-source', 'local']).profiling);
  t.true(loadConfig({}, ['--namespace-source', 'local', '--profiling', 'on']).profiling);
  const error = t.throws(() => loadConfig({}, ['--namespace-source', 'local', '--profiling', 'yes']), { instanceOf: ConfigError });
  t.regex(error!.message, /--profiling: expected on or off/);
});

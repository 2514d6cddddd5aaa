import test from 'ava';
import { loadConfig } from './config.js';
import { ConfigError, UsageError } from './errors.js';

test('defaults', (t) => {
  const config = loadConfig({}, []);
  // No certificate given: a throw-away development one, for this machine only.
  t.like(config, { host: '127.0.0.1', port: 8443, templatesDir: 'templates', maxBodyBytes: 7 * 1024 * 1024, logLevel: 'info' });
  t.is(loadConfig({}, ['--tls-cert', 'c.pem', '--tls-key', 'k.pem']).host, '0.0.0.0', 'a real certificate: every interface');
  t.is(loadConfig({}, ['--tls-secret', 'tls', '--namespace-source', 'cluster', '--kubeconfig', 'k']).host, '0.0.0.0');
  t.is(loadConfig({}, ['--host', '0.0.0.0']).host, '0.0.0.0', 'as told');
  t.deepEqual(config.timeouts, { headersTimeoutMs: 10_000, requestTimeoutMs: 10_000, keepAliveTimeoutMs: 120_000 });
  t.is(config.tlsCertFile, undefined);
  t.true(Object.isFrozen(config));
});

test('flags win over the environment', (t) => {
  const config = loadConfig({ SIDECAR_INJECTOR_PORT: '9000', SIDECAR_INJECTOR_TEMPLATES: '/env' }, ['--port', '9443']);
  t.is(config.port, 9443);
  t.is(config.templatesDir, '/env');
});

test('namespace labels from repeated flags', (t) => {
  const config = loadConfig({}, ['--namespace-label', 'shop:sidecar-injector.io/injection=enabled', '--namespace-label', 'shop:team=a']);
  t.deepEqual(config.namespaceLabels, { shop: { 'sidecar-injector.io/injection': 'enabled', team: 'a' } });
});

test('collects every problem in one error', (t) => {
  const err = t.throws(
    () =>
      loadConfig({ SIDECAR_INJECTOR_MAX_BODY_BYTES: 'lots' }, ['--port', '70000', '--tls-cert', 'c.pem', '--log-level', 'loud', '--namespace-label', 'bad']),
    { instanceOf: ConfigError },
  );
  t.is(err?.code, 'ERR_CONFIG');
  t.is(err?.problems.length, 5);
  t.regex(err?.message ?? '', /--port/);
  t.regex(err?.message ?? '', /--max-body-bytes/);
  t.regex(err?.message ?? '', /--tls-cert and --tls-key go together/);
  t.regex(err?.message ?? '', /--log-level/);
  t.regex(err?.message ?? '', /NAMESPACE:KEY=VALUE/);
});

test('unknown flags and stray arguments are usage errors naming them', (t) => {
  t.throws(() => loadConfig({}, ['--prot', '1']), {
    instanceOf: UsageError,
    message: /serve: Unknown option '--prot' \(did you mean --port\?\); see sidecar-injector serve --help/,
  });
  t.throws(() => loadConfig({}, ['extra']), { instanceOf: UsageError, message: /serve: unexpected argument "extra"/ });
});

test('the namespace source: auto picks cluster inside a cluster or with a kubeconfig, else local', (t) => {
  t.is(loadConfig({}, []).namespaceSource, 'local');
  t.is(loadConfig({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }, []).namespaceSource, 'cluster');
  t.is(loadConfig({}, ['--kubeconfig', 'kc.yaml']).namespaceSource, 'cluster');
  t.is(loadConfig({ KUBERNETES_SERVICE_HOST: '10.0.0.1' }, ['--namespace-source', 'local']).namespaceSource, 'local');
  t.is(loadConfig({}, []).namespaceFailurePolicy, 'deny');
  t.is(loadConfig({ SIDECAR_INJECTOR_NAMESPACE_FAILURE_POLICY: 'allow' }, []).namespaceFailurePolicy, 'allow');
  const err = t.throws(() => loadConfig({}, ['--namespace-source', 'etcd', '--namespace-failure-policy', 'maybe']), { instanceOf: ConfigError });
  t.is(err?.problems.length, 2);
});

test('--audit and --events take on or off (true and false too), on by default', (t) => {
  const base = ['--namespace-source', 'local'];
  t.true(loadConfig({}, base).audit);
  t.false(loadConfig({}, [...base, '--audit', 'off']).audit);
  t.false(loadConfig({ SIDECAR_INJECTOR_EVENTS: 'false' }, base).events);
  t.throws(() => loadConfig({}, [...base, '--audit', 'maybe']), { message: /--audit: expected on or off \(got "maybe"\)/ });
});

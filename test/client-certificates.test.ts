/**
 * `serve --client-ca`: reviews are answered only for the API server, which presents a client
 * certificate from its WebhookAdmission kubeConfigFile. Any other caller — a tenant's pod that
 * reaches the Service — is refused before a byte of its body is read; probes need no certificate.
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { loadConfig } from '../src/config.js';
import { ConfigError } from '../src/errors.js';
import { createInjector } from '../src/serving/injector.js';
import { loadTemplateDir } from '../src/templates/load.js';
import { readCaCertificates } from '../src/tls/certificates.js';
import { createReview } from './helpers/apiserver.js';
import { pod } from './helpers/pods.js';
import { startTestServer, testCertificates } from './helpers/server.js';
import { pino } from 'pino';
import { systemClock } from '../src/clock.js';

interface ClientIdentity {
  readonly ca: string;
  readonly cert: string;
  readonly key: string;
}

/** A CA and a client certificate it signed (clientAuth), made with openssl as a cluster's PKI makes them. */
async function clientIdentity(name: string): Promise<ClientIdentity> {
  const dir = await mkdtemp(join(tmpdir(), `sidecar-injector-client-${name}-`));
  const file = (f: string) => join(dir, f);
  const openssl = (args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('ca.key'), '-out', file('ca.crt'), '-days', '2', '-subj', `/CN=${name}-ca`]);
  openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', file('client.key'), '-out', file('client.csr'), '-subj', `/CN=${name}`]);
  await writeFile(file('client.ext'), 'extendedKeyUsage=clientAuth\nkeyUsage=critical,digitalSignature,keyEncipherment\n');
  openssl([
    'x509',
    '-req',
    '-in',
    file('client.csr'),
    '-CA',
    file('ca.crt'),
    '-CAkey',
    file('ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    file('client.crt'),
    '-extfile',
    file('client.ext'),
  ]);
  return { ca: await readFile(file('ca.crt'), 'utf8'), cert: await readFile(file('client.crt'), 'utf8'), key: await readFile(file('client.key'), 'utf8') };
}

const apiServer = await clientIdentity('kube-apiserver-webhook-client');
const stranger = await clientIdentity('tenant');

/** One request on a connection of its own, with the client certificate given (or none). */
async function call(port: number, path: string, body: string | undefined, identity?: ClientIdentity) {
  const { caCert } = await testCertificates();
  return new Promise<{ status: number; headers: Record<string, unknown>; json: any }>((resolve, reject) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: body === undefined ? 'GET' : 'POST',
        servername: 'localhost',
        ca: caCert,
        agent: false,
        headers: body === undefined ? {} : { 'content-type': 'application/json' },
        ...(identity ? { cert: identity.cert, key: identity.key } : {}),
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, json: JSON.parse(Buffer.concat(chunks).toString('utf8') || 'null') }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const reviewBody = () => JSON.stringify(createReview(pod({ generateName: 'web-' }), { namespace: 'shop' }));

test('with --client-ca, the API server’s certificate gets its review answered; no certificate, or one another CA signed, gets 401', async (t) => {
  const server = await startTestServer({ templates: await loadTemplateDir('templates'), clientCa: apiServer.ca });
  t.teardown(() => server.stop());
  const answered = await call(server.port, '/mutate?timeout=10s', reviewBody(), apiServer);
  t.is(answered.status, 200);
  t.is(answered.json.kind, 'AdmissionReview');
  for (const path of ['/mutate', '/mutate/required', '/mutate/optional']) {
    const anonymous = await call(server.port, path, reviewBody());
    t.is(anonymous.status, 401, path);
    t.like(anonymous.json, { code: 'ERR_CLIENT_CERTIFICATE' });
    t.regex(anonymous.json.message, /^reviews are answered only for the API server: no client certificate was presented/);
    t.is(anonymous.headers.connection, 'close');
  }
  const forged = await call(server.port, '/mutate', reviewBody(), stranger);
  t.is(forged.status, 401);
  t.regex(forged.json.message, /the client certificate presented is not signed by the configured CA \(/);
  // Probes (the kubelet presents no certificate) are answered as before.
  t.is((await call(server.port, '/healthz', undefined)).status, 200);
  t.is((await call(server.port, '/readyz', undefined)).status, 200);
  const refused = server.metrics.errors.get();
  t.is((await refused).values.find((v) => v.labels.code === 'ERR_CLIENT_CERTIFICATE')?.value, 4);
});

test('a caller without a certificate is refused before a byte of its body is read', async (t) => {
  const server = await startTestServer({ templates: await loadTemplateDir('templates'), clientCa: apiServer.ca });
  t.teardown(() => server.stop());
  const { caCert } = await testCertificates();
  const socket = tls.connect({ host: '127.0.0.1', port: server.port, ca: caCert, servername: 'localhost' });
  t.teardown(() => socket.destroy());
  await new Promise((resolve) => socket.once('secureConnect', resolve));
  // Headers announcing a 5 MB body, and not one byte of it.
  socket.write('POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 5000000\r\n\r\n');
  const answer = await new Promise<string>((resolve) => {
    let text = '';
    socket.on('data', (c: Buffer) => {
      text += c.toString('utf8');
      if (text.includes('}')) resolve(text);
    });
  });
  t.regex(answer, /^HTTP\/1\.1 401/);
  t.regex(answer, /"code":"ERR_CLIENT_CERTIFICATE"/);
  t.regex(answer, /connection: close/i);
});

test('serve --client-ca: a file that holds no CA certificate is refused at start, saying what is wrong', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-client-ca-'));
  const start = async (text: string) => {
    const file = join(dir, `ca-${Math.random().toString(36).slice(2)}.crt`);
    await writeFile(file, text);
    const config = loadConfig({}, ['--client-ca', file, '--templates', 'templates', '--port', '0', '--shutdown-delay-ms', '0']);
    t.is(config.clientCaFile, file);
    return createInjector(config, pino({ level: 'silent' }), systemClock);
  };
  await t.throwsAsync(start('not a certificate'), { instanceOf: ConfigError, message: /--client-ca: .* holds no PEM certificate/ });
  await t.throwsAsync(start(apiServer.cert), {
    instanceOf: ConfigError,
    message: /--client-ca: .*certificate 1 \(CN=kube-apiserver-webhook-client\) is not a CA/,
  });
  // A bundle of two CAs (one being replaced) is read whole.
  const bundle = join(dir, 'two.crt');
  await writeFile(bundle, `${apiServer.ca}\n${stranger.ca}`);
  t.is((await readCaCertificates(bundle)).match(/-----BEGIN CERTIFICATE-----/g)?.length, 2);
  t.throws(() => loadConfig({}, ['--client-ca', '']), { instanceOf: ConfigError, message: /--client-ca: expected a file of CA certificates/ });
});

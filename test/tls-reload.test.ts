/**
 * Certificate rotation under a running server, the way a Secret update does it: new files in
 * a new timestamped directory, then the `..data` symlink swapped atomically. Requests keep
 * flowing throughout, on kept-alive and on new connections.
 */
import test from 'ava';
import { createReviewer } from '../src/admission/mutate.js';
import { once } from 'node:events';
import { mkdir, mkdtemp, rename, symlink, writeFile } from 'node:fs/promises';
import https from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { createApp } from '../src/app.js';
import { createMetrics } from '../src/metrics.js';
import { startServer } from '../src/server.js';
import { defaultTimeouts } from '../src/server.js';
import { createCa, createServingCertificate, type Pem } from '../src/tls/certificates.js';
import { CertificateReloader, checkKeyPair, readKeyPair } from '../src/tls/reloader.js';
import { createReview, prepareCreate } from './helpers/apiserver.js';
import { httpsCall } from './helpers/https.js';
import { startLoad } from './helpers/load.js';
import { testNamespaces } from './helpers/server.js';
import { logShipperDoc, templateSet } from './helpers/templates.js';

let generation = 0;
/** Writes a pair into a new `..<timestamp>` directory and swaps `..data` to it atomically. */
async function publish(dir: string, pair: Pem, key = pair.key): Promise<void> {
  const version = join(dir, `..2026_11_22_${++generation}`);
  await mkdir(version);
  await writeFile(join(version, 'tls.crt'), pair.cert);
  await writeFile(join(version, 'tls.key'), key);
  await symlink(version, join(dir, '..data_tmp'));
  await rename(join(dir, '..data_tmp'), join(dir, '..data'));
}

async function request(port: number, ca: string, agent: https.Agent | false, body: string): Promise<{ status: number; fingerprint: string }> {
  const answer = await httpsCall({ port, ca, agent, path: '/mutate', body });
  return { status: answer.status, fingerprint: answer.fingerprint256 };
}

test('a replaced certificate is served on the next handshake, and no request fails', async (t) => {
  const ca = await createCa(1);
  const first = await createServingCertificate(ca, ['localhost'], ['127.0.0.1'], 1);
  const second = await createServingCertificate(ca, ['localhost'], ['127.0.0.1'], 1);
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-tls-'));
  await publish(dir, first);
  await symlink('..data/tls.crt', join(dir, 'tls.crt'));
  await symlink('..data/tls.key', join(dir, 'tls.key'));

  const initial = await readKeyPair(join(dir, 'tls.crt'), join(dir, 'tls.key'));
  const set = templateSet(logShipperDoc);
  const app = createApp({
    log: pino({ level: 'silent' }),
    metrics: createMetrics(),
    maxBodyBytes: 1 << 20,
    reviewer: createReviewer({ templates: () => set, namespaces: testNamespaces }),
    isReady: () => true,
  });
  const running = await startServer(app.callback(), { host: '127.0.0.1', port: 0, key: initial.key, cert: initial.cert, timeouts: defaultTimeouts });
  const reloader = new CertificateReloader(
    join(dir, 'tls.crt'),
    join(dir, 'tls.key'),
    initial,
    (pair) => running.server.setSecureContext({ key: pair.key, cert: pair.cert }),
    50,
  );
  reloader.start();
  const agent = new https.Agent({ keepAlive: true, maxSockets: 4 });
  t.teardown(async () => {
    reloader.stop();
    agent.destroy();
    running.server.closeAllConnections();
    await running.close();
  });

  let flip = false;
  const body = JSON.stringify(
    createReview(prepareCreate({ metadata: { generateName: 'w-' }, spec: { containers: [{ name: 'w', image: 'x' }] } }, 'shop'), { namespace: 'shop' }),
  );
  const load = startLoad(4, () => {
    // Half on kept-alive connections, half on a new connection each time.
    flip = !flip;
    return request(running.port, ca.cert, flip ? agent : false, body);
  });
  await load.waitFor(20);
  const reloaded = once(reloader, 'reload');
  await publish(dir, second);
  const [pair] = (await reloaded) as [ReturnType<typeof checkKeyPair>];
  await load.waitFor(20);
  await load.stop();
  const { results, failures } = load;

  const expected = checkKeyPair(second.cert, second.key).fingerprint256;
  t.is(pair.fingerprint256, expected);
  const fresh = await request(running.port, ca.cert, false, body);
  t.is(fresh.fingerprint, expected, 'the next handshake presents the new certificate');
  t.deepEqual(failures, []);
  t.true(results.every((r) => r.status === 200));
  t.true(results.some((r) => r.fingerprint === initial.fingerprint256));
  t.true(results.some((r) => r.fingerprint === expected));
});

test('files that hold no matching pair are refused and the current pair stays', async (t) => {
  const ca = await createCa(1);
  const first = await createServingCertificate(ca, ['localhost'], [], 1);
  const second = await createServingCertificate(ca, ['localhost'], [], 1);
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-tls-'));
  await publish(dir, first);
  await symlink('..data/tls.crt', join(dir, 'tls.crt'));
  await symlink('..data/tls.key', join(dir, 'tls.key'));
  const initial = await readKeyPair(join(dir, 'tls.crt'), join(dir, 'tls.key'));
  const applied: string[] = [];
  const reloader = new CertificateReloader(join(dir, 'tls.crt'), join(dir, 'tls.key'), initial, (p) => applied.push(p.fingerprint256), 60_000);
  const errors: Error[] = [];
  reloader.on('rejected', (err: Error) => errors.push(err));
  await publish(dir, second, first.key);
  await reloader.reloadNow();
  t.deepEqual(applied, []);
  t.is(reloader.current(), initial);
  t.regex(errors[0]?.message ?? '', /does not belong to the certificate/);
  await publish(dir, second);
  await reloader.reloadNow();
  t.deepEqual(applied, [checkKeyPair(second.cert, second.key).fingerprint256]);
});

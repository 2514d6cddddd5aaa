/**
 * The install path of the container image, without a container engine: production
 * dependencies only (`npm ci --omit=dev`), the production sources compiled with
 * tsconfig.build.json, the bundled templates — then `serve` starts and answers /healthz.
 */
import test from 'ava';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, cp, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { httpsCall } from './helpers/https.js';

test('the production install starts and answers /healthz', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-prod-'));
  await copyFile('package.json', join(dir, 'package.json'));
  await copyFile('package-lock.json', join(dir, 'package-lock.json'));
  execFileSync('npm', ['ci', '--omit=dev', '--no-audit', '--no-fund', '--prefer-offline'], { cwd: dir, stdio: 'ignore', timeout: 180_000 });
  execFileSync(process.execPath, [resolve('node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json', '--outDir', join(dir, 'dist')], {
    stdio: 'inherit',
  });
  await cp('templates', join(dir, 'templates'), { recursive: true });
  t.false(existsSync(join(dir, 'node_modules', 'ava')), 'no dev dependency is installed');
  t.false(existsSync(join(dir, 'dist', 'src', 'app.test.js')) || existsSync(join(dir, 'dist', 'test')), 'no test code is built');

  const child = spawn(
    process.execPath,
    ['dist/src/cli/main.js', 'serve', '--host', '127.0.0.1', '--port', '0', '--namespace-source', 'local', '--dev-cert-dir', 'certs'],
    { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  t.teardown(() => void child.kill('SIGTERM'));
  let port = 0;
  for await (const line of createInterface({ input: child.stdout })) {
    const record = JSON.parse(line);
    if (record.msg === 'listening') {
      port = record.port;
      break;
    }
  }
  const ca = await readFile(join(dir, 'certs', 'ca.crt'), 'utf8');
  const { status } = await httpsCall({ port, ca, path: '/healthz' });
  t.is(status, 200);
});

test('the Dockerfile does the same: production dependencies, build config, non-root, node as the entrypoint', async (t) => {
  const dockerfile = await readFile('Dockerfile', 'utf8');
  t.regex(dockerfile, /^FROM node:\d+-[\w-]+ AS build$/m);
  t.regex(dockerfile, /RUN npm ci --omit=dev/);
  t.regex(dockerfile, /tsc -p tsconfig\.build\.json/);
  t.regex(dockerfile, /^USER 1000:1000$/m);
  t.regex(dockerfile, /^ENTRYPOINT \["node", "dist\/src\/cli\/main\.js"\]$/m);
  t.true(existsSync('.dockerignore'));
});

/**
 * The install path of the container image, without a container engine: production
 * dependencies only (`npm ci --omit=dev`), the production sources compiled with
 * tsconfig.build.json, the bundled templates — then `serve` starts and answers /healthz.
 */
import test from 'ava';
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, cp, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { httpsCall } from './helpers/https.js';
import { spawnServe } from './helpers/process.js';

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

  const { child, port, ca } = await spawnServe(['--namespace-source', 'local'], { cwd: dir, entry: 'dist/src/cli/main.js' });
  t.teardown(() => void child.kill('SIGTERM'));
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

/**
 * The install path of the container image, without a container engine: production
 * dependencies only (`npm ci --omit=dev`), the production sources compiled with
 * tsconfig.build.json, the bundled templates — then `serve` starts and answers /healthz.
 */
import test from 'ava';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { copyFile, cp, mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
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

test("the Dockerfile: scratch under the assembled root filesystem only, the Deployment's numeric user, node as the entrypoint", async (t) => {
  const dockerfile = await readFile('Dockerfile', 'utf8');
  const instructions = dockerfile
    .split('\n')
    .filter((l) => l.trim() && !l.startsWith('#'))
    .map((l) => l.split(' ')[0]);
  t.deepEqual(instructions, ['FROM', 'COPY', 'ENV', 'WORKDIR', 'USER', 'EXPOSE', 'ENTRYPOINT', 'CMD'], 'nothing runs in the build: no RUN, no shell');
  t.regex(dockerfile, /^FROM scratch$/m);
  t.regex(dockerfile, /^COPY build\/rootfs\/ \/$/m);
  t.regex(dockerfile, /^ENTRYPOINT \["\/usr\/bin\/node", "\/app\/dist\/src\/cli\/main\.js"\]$/m);
  const deployment = parseAllDocuments(await readFile(join('manifests', 'base', 'deployment.yaml'), 'utf8'))[0]!.toJS();
  const { runAsUser, runAsGroup } = deployment.spec.template.spec.securityContext;
  t.regex(dockerfile, new RegExp(`^USER ${runAsUser}:${runAsGroup}$`, 'm'));
  t.is((await readFile('.dockerignore', 'utf8')).replace(/^#.*\n/gm, ''), '*\n!build/rootfs\n', 'the build context is the root filesystem only');
});

test('the release names one version: package.json, the image tag the manifests install, and the Makefile', async (t) => {
  const version = JSON.parse(await readFile('package.json', 'utf8')).version;
  const kustomization = parseAllDocuments(await readFile(join('manifests', 'base', 'kustomization.yaml'), 'utf8'))[0]!.toJS();
  t.deepEqual(kustomization.images, [{ name: 'sidecar-injector', newName: 'sidecar-injector', newTag: version }]);
  const makefile = await readFile('Makefile', 'utf8');
  t.regex(makefile, /^VERSION := \$\(shell node -p "require\('\.\/package\.json'\)\.version"\)$/m);
  t.regex(makefile, /^IMAGE_ARCHIVE \?= build\/sidecar-injector-\$\(VERSION\)\.oci\.tar$/m);
});

test('the SBOM is never written over the image: its name follows the archive, and the generator refuses the archive itself', async (t) => {
  const sbomOf = (archive: string) =>
    execFileSync('make', ['--no-print-directory', '--eval', 'print-sbom: ; @echo $(SBOM)', 'print-sbom', `IMAGE_ARCHIVE=${archive}`], {
      encoding: 'utf8',
    }).trim();
  t.is(sbomOf('build/sidecar-injector-1.2.3.oci.tar'), 'build/sidecar-injector-1.2.3.cdx.json');
  t.is(sbomOf('out.tar'), 'out.tar.cdx.json');
  const refused = spawnSync(process.execPath, ['scripts/image/sbom.mjs', 'contents.json', 'out.tar', './out.tar'], { encoding: 'utf8' });
  t.is(refused.status, 2);
  t.regex(refused.stderr, /the SBOM would be written over the image archive out\.tar/);
});

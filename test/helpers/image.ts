/**
 * The container image as built (`make image`): where its archive is, and the archive's OCI
 * layout unpacked into one root filesystem (its layers applied in order) with its config. The
 * image tests use it (the real-cluster world pushes the archive itself, with `make push`).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

type Json = Record<string, any>;

export interface UnpackedImage {
  readonly rootfs: string;
  readonly config: Json;
  readonly manifestDigest: string;
  /** The image's environment, and nothing of this machine's. */
  readonly env: Record<string, string>;
}

/** The archive `make image` writes for this version (or $IMAGE_ARCHIVE). */
export function imageArchive(): string {
  const version = JSON.parse(readFileSync('package.json', 'utf8')).version as string;
  return process.env.IMAGE_ARCHIVE ?? join('build', `sidecar-injector-${version}.oci.tar`);
}

/** Unpacks `archive` under `dir` (layout/ and rootfs/). */
export async function unpackImage(archive: string, dir: string): Promise<UnpackedImage> {
  const layout = join(dir, 'layout');
  const rootfs = join(dir, 'rootfs');
  await mkdir(layout, { recursive: true });
  await mkdir(rootfs, { recursive: true });
  execFileSync('tar', ['-xf', archive, '-C', layout]);
  const blob = (digest: string) => join(layout, 'blobs', ...digest.split(':'));
  const index = JSON.parse(await readFile(join(layout, 'index.json'), 'utf8'));
  const manifestDigest = index.manifests[0].digest as string;
  const manifest = JSON.parse(await readFile(blob(manifestDigest), 'utf8'));
  const config = JSON.parse(await readFile(blob(manifest.config.digest), 'utf8'));
  for (const layer of manifest.layers as Json[]) {
    execFileSync('tar', ['-x', ...(layer.mediaType.endsWith('+gzip') ? ['-z'] : []), '-f', blob(layer.digest), '-C', rootfs, '--numeric-owner']);
  }
  const env = Object.fromEntries(((config.config.Env ?? []) as string[]).map((e) => [e.slice(0, e.indexOf('=')), e.slice(e.indexOf('=') + 1)]));
  return { rootfs, config, manifestDigest, env };
}

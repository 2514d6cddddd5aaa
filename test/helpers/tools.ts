/**
 * The pinned tools the real-cluster suite builds from Go modules (test/cluster/build.sh): kubectl,
 * helm and the control plane, in one cache folder outside the clone. Built on first use when Go
 * is there (minutes cold, milliseconds cached); undefined, with the reason, when it cannot be.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { join } from 'node:path';

let found: { dir?: string; why?: string } | undefined;

/** The folder of the pinned tools, or why there is none. */
export function pinnedTools(): { dir?: string; why?: string } {
  if (found) return found;
  if (spawnSync('sh', ['-c', 'command -v go'], { stdio: 'ignore' }).status !== 0)
    return (found = { why: 'Go is not installed (Go 1.26 builds the pinned tools)' });
  try {
    const dir = execFileSync(join('test', 'cluster', 'build.sh'), { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim();
    return (found = { dir });
  } catch (err) {
    return (found = { why: `test/cluster/build.sh failed: ${(err as Error).message}` });
  }
}

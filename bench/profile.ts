/**
 * `npm run bench:profile`: where a busy server's time goes. Starts `serve` under `--cpu-prof`
 * (pinned to one core when the benchmark pins), drives it over HTTPS with API-server-shaped
 * typical reviews at concurrency 32 — pods of one ReplicaSet, then every pod different
 * — stops it with SIGTERM, and prints the profile's self time by function and by kind (our
 * code, each npm package, Node's own modules, garbage collection, the rest).
 *
 * Options: --duration-ms N (per run, default 4000), --pods same|different (default: both).
 */
import https from 'node:https';
import { once } from 'node:events';
import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { summarise, type Profile } from './profile-summary.js';
import { parseArgs } from 'node:util';
import { pinCores, sendReview, startInjector } from './serve.js';
import { replicaSetReviews, reviewText } from './reviews.js';

/** Keeps `concurrency` reviews in flight for `durationMs`, cycling through `bodies`; resolves with the count answered. */
async function drive(port: number, ca: string, bodies: readonly string[], concurrency: number, durationMs: number): Promise<number> {
  const agent = new https.Agent({ keepAlive: true, maxSockets: concurrency, ca });
  const end = Date.now() + durationMs;
  let next = 0;
  let answered = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (Date.now() < end) {
        const { status } = await sendReview(agent, port, bodies[next++ % bodies.length]!);
        if (status !== 200) throw new Error(`HTTP ${status}`);
        answered++;
      }
    }),
  );
  agent.destroy();
  return answered;
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { 'duration-ms': { type: 'string' }, pods: { type: 'string' }, top: { type: 'string' } } });
  const durationMs = Number(values['duration-ms'] ?? 4000);
  const top = Number(values.top ?? 25);
  const runs = values.pods ? [values.pods] : ['same', 'different'];
  const pinned = pinCores();
  console.log(`profile of serve under load, node ${process.version}, ${pinned ? 'server pinned to core 0' : 'not pinned'}, ${durationMs} ms per run`);
  for (const pods of runs) {
    const bodies =
      pods === 'same'
        ? replicaSetReviews('typical', '11111111-2222-3333-4444-555555555555')
        : Array.from({ length: 2000 }, (_, i) => reviewText('typical', { annotations: { 'bench.example.com/pod': String(i) } }));
    const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-profile-'));
    const injector = await startInjector('profile', ['--cpu-prof', `--cpu-prof-dir=${dir}`]);
    // The profile covers the whole process, start-up included: short beside the run.
    const answered = await drive(injector.port, injector.ca, bodies, 32, durationMs);
    injector.child.kill('SIGTERM');
    await once(injector.child, 'exit');
    const [file] = (await readdir(dir)).filter((f) => f.endsWith('.cpuprofile'));
    if (!file) throw new Error('serve wrote no profile');
    const profile = JSON.parse(await readFile(join(dir, file), 'utf8')) as Profile;
    console.log(
      `\n## ${pods === 'same' ? 'pods of one ReplicaSet (a typical pod, managedFields a second apart)' : 'every review a different typical pod'}, c=32: ${answered} reviews\n`,
    );
    console.log(summarise(profile, top, answered));
  }
}

await main();

/**
 * The injector as a child process for the benchmarks: one way to start it, with a throw-away
 * certificate and the namespaces `shop` and `demo` opted in, its output drained so that it
 * never blocks on a full pipe.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import https from 'node:https';
import { cpus } from 'node:os';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createCertificates } from '../src/tls/certificates.js';

/**
 * The core servers are pinned to, when the benchmark pins (`taskset` present, two cores or
 * more): servers on one core, the load generator on another, so that neither steals the
 * other's CPU and a server's CPU time per review is its own.
 */
export let serverCore: number | undefined;

/** Pins this process (the load generator) to core 1 and children to core 0, when `taskset` is available. */
export function pinCores(): boolean {
  if (cpus().length < 2) return false;
  try {
    execFileSync('taskset', ['-p', '-c', '1', String(process.pid)], { stdio: 'ignore' });
    serverCore = 0;
    return true;
  } catch {
    return false;
  }
}

/** Starts a child process and resolves with the first JSON line it prints that holds `port`. */
export async function startChild(
  args: string[],
  pickPort: (record: Record<string, unknown>) => number | undefined,
  env: Readonly<Record<string, string>> = {},
): Promise<{ child: ChildProcess; port: number }> {
  const options = { stdio: ['ignore', 'pipe', 'inherit'] as ('ignore' | 'pipe' | 'inherit')[], env: { ...process.env, ...env } };
  // taskset execs node in place: the child's pid is node's.
  const child =
    serverCore === undefined ? spawn(process.execPath, args, options) : spawn('taskset', ['-c', String(serverCore), process.execPath, ...args], options);
  const lines = createInterface({ input: child.stdout! });
  for await (const line of lines) {
    let record: Record<string, unknown>;
    try {
      record = JSON.parse(line);
    } catch {
      continue;
    }
    const port = pickPort(record);
    if (port) {
      // Keep draining the child's output so that it never blocks on a full pipe.
      child.stdout!.resume();
      return { child, port };
    }
  }
  throw new Error(`${args.join(' ')} exited before listening`);
}

/** A directory with a serving certificate (tls.crt, tls.key) and a namespace-labels file; `ca` is the CA (PEM). */
export async function servingFiles(prefix: string): Promise<{ dir: string; ca: string; cert: string; key: string }> {
  const dir = await mkdtemp(join(tmpdir(), `sidecar-injector-${prefix}-`));
  const certs = await createCertificates(['localhost'], ['127.0.0.1'], 1);
  await writeFile(join(dir, 'tls.crt'), certs.cert);
  await writeFile(join(dir, 'tls.key'), certs.key);
  await writeFile(join(dir, 'namespaces.yaml'), 'shop:\n  sidecar-injector.io/injection: enabled\ndemo:\n  sidecar-injector.io/injection: enabled\n');
  return { dir, ca: certs.caCert, cert: join(dir, 'tls.crt'), key: join(dir, 'tls.key') };
}

/** Starts `serve` on the bundled templates; `nodeArgs` go to node (a heap cap, say), `env` to its environment. */
export async function startInjector(
  prefix: string,
  nodeArgs: string[] = [],
  serveArgs: string[] = [],
  env: Readonly<Record<string, string>> = {},
): Promise<{ child: ChildProcess; port: number; ca: string; files: Awaited<ReturnType<typeof servingFiles>> }> {
  const files = await servingFiles(prefix);
  const args = [...nodeArgs, 'dist/src/cli/main.js', 'serve', '--host', '127.0.0.1', '--port', '0', '--tls-cert', files.cert, '--tls-key', files.key];
  args.push('--namespace-labels', join(files.dir, 'namespaces.yaml'), '--shutdown-delay-ms', '0', ...serveArgs);
  const { child, port } = await startChild(args, (r) => (r.msg === 'listening' ? (r.port as number) : undefined), env);
  return { child, port, ca: files.ca, files };
}

/** One review over `agent`: resolves with the answer's status and text (never rejects; a failure is status 0). */
export function sendReview(agent: https.Agent, port: number, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port,
        path: '/mutate?timeout=10s',
        method: 'POST',
        agent,
        servername: 'localhost',
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', () => resolve({ status: 0, text: '' }));
    req.end(body);
  });
}

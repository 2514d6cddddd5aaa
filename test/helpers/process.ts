/**
 * `sidecar-injector serve` as a real process, started one way for every test: it keeps reading
 * the child's output to the end (a child that logs more than a pipe holds never stalls), and
 * resolves once the log says `listening` (and, when asked, once another message appeared).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

export interface ServeProcess {
  readonly child: ChildProcess;
  readonly port: number;
  /** The development CA the process wrote (PEM). */
  readonly ca: string;
  /** Where it wrote that CA. */
  readonly certDir: string;
  /** Every log line so far, parsed. */
  readonly logs: Record<string, any>[];
  /** Resolves with the exit code once the process has exited and its output is read. */
  readonly exited: Promise<number | null>;
}

/**
 * Starts `serve` on 127.0.0.1, an ephemeral port and a fresh development CA, with `args` after
 * those; `cwd` and `entry` run an installed copy elsewhere. `waitFor` names one more log
 * message to wait for (e.g. `namespaces listed`). The caller stops it (SIGTERM).
 */
export async function spawnServe(args: readonly string[], options: { cwd?: string; entry?: string; waitFor?: string } = {}): Promise<ServeProcess> {
  const certDir = await mkdtemp(join(tmpdir(), 'sidecar-injector-test-'));
  const child = spawn(
    process.execPath,
    [options.entry ?? join('dist', 'src', 'cli', 'main.js'), 'serve', '--host', '127.0.0.1', '--port', '0', '--dev-cert-dir', certDir, ...args],
    { cwd: options.cwd, stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  const logs: Record<string, any>[] = [];
  const ready = new Promise<number>((resolve, reject) => {
    let port = 0;
    let seen = options.waitFor === undefined;
    const lines = createInterface({ input: child.stdout! });
    lines.on('line', (line) => {
      let record: Record<string, any>;
      try {
        record = JSON.parse(line);
      } catch {
        return;
      }
      logs.push(record);
      if (record.msg === 'listening') port = record.port;
      if (record.msg === options.waitFor) seen = true;
      if (port && seen) resolve(port);
    });
    void exited.then((code) => reject(new Error(`serve exited with ${code} before it was listening`)));
  });
  const port = await ready;
  const ca = await readFile(join(certDir, 'ca.crt'), 'utf8');
  return { child, port, ca, certDir, logs, exited };
}

/**
 * The documentation is tested: the generated reference pages are what `npm run docs` would write
 * now, every relative link resolves (files and #anchors), and every command of the quickstart and
 * the tutorial marked `sh tested` runs, with the output the page shows.
 */
import test, { type ExecutionContext } from 'ava';
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, readFile, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { commandSummary } from '../src/cli/usage.js';
import { referencePages } from '../scripts/docs.js';
import { httpsCall } from './helpers/https.js';
import { spawnServe } from './helpers/process.js';

test('every generated reference page is current (run npm run docs after changing a table)', async (t) => {
  const pages = await referencePages();
  t.true(pages.size >= 6);
  for (const [path, text] of pages) {
    const onDisk = existsSync(path) ? await readFile(path, 'utf8') : '(missing)';
    t.is(onDisk, text, `${path} is not current: run npm run docs`);
  }
});

/** Markdown files whose links are checked: README.md, DEVELOPMENT.md and docs/**. */
async function markdownFiles(): Promise<string[]> {
  const files = ['README.md', 'DEVELOPMENT.md'];
  const walk = async (dir: string): Promise<void> => {
    for (const entry of await readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await walk(path);
      else if (entry.name.endsWith('.md')) files.push(path);
    }
  };
  await walk('docs');
  return files;
}

/** The text without fenced blocks, where `# x` is not a heading. */
function withoutFences(text: string): string {
  return text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, '');
}

/** The text without fenced blocks and code spans, where `[x](y)` is not a link. */
function prose(text: string): string {
  return withoutFences(text).replace(/`[^`\n]*`/g, '');
}

/** GitHub's anchors for the headings of a page: lower case, punctuation dropped, spaces as dashes, repeats numbered. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const match of withoutFences(text).matchAll(/^#{1,6}[ \t]+(.+?)[ \t]*#*[ \t]*$/gm)) {
    const base = match[1]!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M} _-]/gu, '')
      .replace(/ /g, '-');
    const count = seen.get(base) ?? 0;
    seen.set(base, count + 1);
    out.add(count === 0 ? base : `${base}-${count}`);
  }
  return out;
}

test('anchors are made as GitHub makes them', (t) => {
  t.deepEqual(
    [...anchors('# The `render` command\n## What gets installed, and why\n## Again\n## Again\n```\n# not a heading\n```\n')],
    ['the-render-command', 'what-gets-installed-and-why', 'again', 'again-1'],
  );
});

test('every relative link in README.md, DEVELOPMENT.md and docs/ resolves, #anchors included', async (t) => {
  const broken: string[] = [];
  let checked = 0;
  for (const file of await markdownFiles()) {
    const text = await readFile(file, 'utf8');
    for (const match of prose(text).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = match[1]!;
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      checked++;
      const [path, anchor] = target.split('#') as [string, string | undefined];
      const resolved = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
      if (!existsSync(resolved)) {
        broken.push(`${file}: ${target} (no such file)`);
        continue;
      }
      if (anchor !== undefined) {
        if ((await stat(resolved)).isDirectory() || !resolved.endsWith('.md')) broken.push(`${file}: ${target} (an anchor into a file that is not Markdown)`);
        else if (!anchors(await readFile(resolved, 'utf8')).has(anchor)) broken.push(`${file}: ${target} (no heading makes #${anchor})`);
      }
    }
  }
  t.true(checked > 20, `links were found (${checked})`);
  t.deepEqual(broken, []);
});

test('every table row in README.md, DEVELOPMENT.md and docs/ has as many cells as its header (a | in a cell is escaped)', async (t) => {
  const ragged: string[] = [];
  let rows = 0;
  for (const file of await markdownFiles()) {
    let header: number | undefined;
    withoutFences(await readFile(file, 'utf8'))
      .split('\n')
      .forEach((line) => {
        if (!line.startsWith('|')) return void (header = undefined);
        const cells = line.split(/(?<!\\)\|/).length;
        rows++;
        if (header === undefined) header = cells;
        else if (cells !== header) ragged.push(`${file}: ${line.slice(0, 100)}`);
      });
  }
  t.true(rows > 50, `tables were found (${rows} rows)`);
  t.deepEqual(ragged, []);
});

test('no development diary: no issue numbers, rounds, reviews or citations of a file outside the repository', async (t) => {
  const diary = /\bthis round\b|\bbefore this (?:round|change|work)\b|\bissues? \d+|hostile reviews?\b|CONTRACT\.md|\bR-\d\d\b/i;
  const found: string[] = [];
  for (const file of await markdownFiles()) {
    for (const line of (await readFile(file, 'utf8')).split('\n')) if (diary.test(line)) found.push(`${file}: ${line.slice(0, 120)}`);
  }
  t.deepEqual(found, []);
});

test('no empty table, no section that starts mid-sentence, no path outside the repository', async (t) => {
  const found: string[] = [];
  for (const file of await markdownFiles()) {
    const lines = (await readFile(file, 'utf8')).split('\n');
    let fenced = false;
    lines.forEach((line, i) => {
      if (line.startsWith('```')) fenced = !fenced;
      if (fenced) return;
      if (/^\|(?: *:?-+:? *\|)+ *$/.test(line) && !(lines[i + 1] ?? '').startsWith('|')) found.push(`${file}:${i + 1}: a table with no rows`);
      if (/^#{1,6} /.test(line) && lines[i + 1] === '' && /^[a-z]/.test(lines[i + 2] ?? '')) found.push(`${file}:${i + 3}: the section starts mid-sentence`);
      if (/\.\.\/shared\//.test(line) && !file.endsWith('DEVELOPMENT.md')) found.push(`${file}:${i + 1}: a path outside the repository`);
    });
  }
  t.deepEqual(found, []);
});

/** A command block marked `sh tested`, and the output the page shows after it (a `text output` block), if any. */
interface TestedBlock {
  readonly commands: string;
  readonly output?: string;
}

export function testedBlocks(text: string): TestedBlock[] {
  const blocks: TestedBlock[] = [];
  const fence = /^```([^\n]*)\n([\s\S]*?)^```[ \t]*$/gm;
  let last: { commands: string; end: number } | undefined;
  for (const match of text.matchAll(fence)) {
    const info = match[1]!.trim();
    if (info === 'text output' && last && text.slice(last.end, match.index).trim() === '') {
      blocks[blocks.length - 1] = { commands: last.commands, output: match[2]! };
      last = undefined;
    } else if (info === 'sh tested') {
      last = { commands: match[2]!, end: match.index + match[0].length };
      blocks.push({ commands: match[2]! });
    } else last = undefined;
  }
  return blocks;
}

/** Does `actual` hold every non-empty line of `expected`, in order? `…` in a line stands for any text. */
export function missingLines(expected: string, actual: string): string[] {
  const lines = actual.split('\n');
  let at = 0;
  const missing: string[] = [];
  for (const want of expected.split('\n').filter((l) => l.trim() !== '')) {
    const pattern = new RegExp(
      `^${want
        .split('…')
        .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
        .join('.*')}$`,
    );
    const found = lines.findIndex((line, i) => i >= at && pattern.test(line));
    if (found === -1) missing.push(want);
    else at = found + 1;
  }
  return missing;
}

test('tested blocks and their shown output are found; output lines match in order with … as a wildcard', (t) => {
  const page = '```sh tested\necho a\n```\n\n```text output\na\n```\n\n```sh\nnot run\n```\n\n```sh tested\necho b\n```\n';
  t.deepEqual(testedBlocks(page), [{ commands: 'echo a\n', output: 'a\n' }, { commands: 'echo b\n' }]);
  t.deepEqual(missingLines('x: …@…\ny', 'x: a@1\nz\ny'), []);
  t.deepEqual(missingLines('y\nx: …', 'x: a\ny'), ['x: …']);
});

/**
 * Runs the tested blocks of `page` in one bash, in a fresh directory that holds the repository's
 * files a newcomer's clone has (symlinks), so that files the page writes never land in the
 * repository. `https://localhost:8443` is the one text replaced: the server under test listens on
 * an ephemeral port. Each block's output (stdout and stderr) is checked against the output shown.
 */
async function runPage(t: ExecutionContext, page: string, server?: { port: number; certDir: string }): Promise<string[]> {
  const blocks = testedBlocks(await readFile(page, 'utf8'));
  t.true(blocks.length >= 2, `${page} has tested blocks`);
  const dir = await mkdtemp(join(tmpdir(), 'sidecar-injector-docs-'));
  const clone = ['dev', 'dist', 'node_modules', 'scripts', 'templates', 'package.json'];
  for (const name of clone) await symlink(resolve(name), join(dir, name));
  if (server) await symlink(server.certDir, join(dir, '.dev-certs'));
  const marker = (i: number) => `@@@ block ${i} @@@`;
  const script = [
    'set -eo pipefail',
    'shopt -s expand_aliases',
    'exec 2>&1',
    ...blocks.flatMap((b, i) => [
      `echo '${marker(i)}'`,
      server ? b.commands.replaceAll('https://localhost:8443', `https://127.0.0.1:${server.port}`) : b.commands,
    ]),
    `echo '${marker(blocks.length)}'`,
  ].join('\n');
  const child = spawn('bash', ['-c', script], { cwd: dir, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.on('data', (c) => (out += c));
  const code = await new Promise<number | null>((done) => child.once('close', done));
  t.is(code, 0, `${page}: the tested commands failed:\n${out}`);
  blocks.forEach((block, i) => {
    const start = out.indexOf(marker(i));
    const end = out.indexOf(marker(i + 1));
    t.true(start !== -1 && end !== -1, `${page}: block ${i} ran`);
    if (block.output !== undefined) {
      const actual = out.slice(start + marker(i).length + 1, end);
      t.deepEqual(missingLines(block.output, actual), [], `${page}: block ${i} printed:\n${actual}`);
    }
  });
  // What the page left in the clone's root, besides the clone's own files and the scratch folder build/ (ignored by git).
  return (await readdir(dir)).filter((name) => !clone.includes(name) && name !== '.dev-certs' && name !== 'build');
}

test("the README's quickstart runs as shown, against serve started as npm start starts it", async (t) => {
  // npm start's own arguments, so that the quickstart and the start script cannot part.
  const start = JSON.parse(await readFile('package.json', 'utf8')).scripts.start as string;
  const args = start.replace(/^.*node dist\/src\/cli\/main\.js serve\s*/, '').split(/\s+/);
  t.true(args.includes('--namespace-labels'), 'npm start names the namespace labels');
  const server = await spawnServe(args);
  t.teardown(() => void server.child.kill('SIGTERM'));
  t.deepEqual(await runPage(t, 'README.md', server), [], 'the quickstart writes under build/ only');

  // The same server's /status: every field it returns is one the operating page and the HTTP reference name.
  const status = JSON.parse((await httpsCall({ port: server.port, ca: server.ca, path: '/status' })).text) as Record<string, unknown>;
  const operating = await readFile(join('docs', 'operating.md'), 'utf8');
  const table = operating.slice(operating.indexOf('## `/status`'), operating.indexOf('\n## ', operating.indexOf('## `/status`') + 1));
  const http = (await readFile(join('docs', 'reference', 'http.md'), 'utf8')).split('\n').find((l) => l.startsWith('| `GET /status`'))!;
  t.true(Object.keys(status).length >= 6);
  for (const field of Object.keys(status)) {
    t.true(table.includes(`| \`${field}\` |`), `docs/operating.md explains /status field ${field}`);
    t.true(http.includes(`\`${field}\``), `docs/reference/http.md names /status field ${field}`);
  }
});

test('the tutorial (docs/first-template.md) runs as shown', async (t) => {
  t.deepEqual(await runPage(t, join('docs', 'first-template.md')), [], 'the tutorial writes under build/ only');
});

test('docs/cli.md names every command, and its sample of a mistyped command is what the command line prints', async (t) => {
  const page = await readFile('docs/cli.md', 'utf8');
  const listed = [...commandSummary.matchAll(/^ {2}([a-z]+) {2,}/gm)].map((m) => m[1]!);
  t.true(listed.length >= 12, `${listed.length} commands in --help`);
  for (const name of listed) t.regex(page, new RegExp(`^\\| \`${name}[ \`]`, 'm'), `docs/cli.md has a row for ${name}`);
  const run = promisify(execFile);
  const answer = await run(process.execPath, [join('dist', 'src', 'cli', 'main.js'), 'rendr', '-f', 'deploy.yaml']).catch((err: { stderr: string }) => err);
  const printed = (answer as { stderr: string }).stderr.trim();
  t.true(page.includes(`$ sidecar-injector rendr -f deploy.yaml\n${printed}\n`), printed);
});

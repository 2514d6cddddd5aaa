/**
 * The floor plan holds: every import between folders of src/ points down (no folder-level
 * cycle), and the lint rule that keeps it so does fire on an upward import.
 */
import test from 'ava';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { ESLint } from 'eslint';

async function sourceFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...(await sourceFiles(path)));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) out.push(path);
  }
  return out;
}

/** `src/k8s/pod.ts` → `k8s`; a file directly in src/ is its own room (`app.ts` → `app`). */
function room(file: string): string {
  const parts = relative('src', file).split('/');
  return parts.length > 1 ? parts[0]! : parts[0]!.replace(/\.ts$/, '');
}

test('the folders of src/ import each other without a cycle', async (t) => {
  const edges = new Map<string, Set<string>>();
  for (const file of await sourceFiles('src')) {
    const text = await readFile(file, 'utf8');
    for (const match of text.matchAll(/(?:from\s+|import\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g)) {
      const target = room(resolve(dirname(file), match[1]!).replace(`${resolve('src')}/`, 'src/'));
      const from = room(file);
      if (target !== from) (edges.get(from) ?? edges.set(from, new Set()).get(from)!).add(target);
    }
  }
  t.true(edges.size > 10, 'the graph was read');
  const cycles: string[] = [];
  const visit = (node: string, path: string[]) => {
    if (path.includes(node)) return void cycles.push([...path.slice(path.indexOf(node)), node].join(' → '));
    for (const next of edges.get(node) ?? []) visit(next, [...path, node]);
  };
  for (const node of edges.keys()) visit(node, []);
  t.deepEqual(cycles, []);
  t.false(edges.get('k8s')?.has('templates') ?? false);
});

/** The rooms of DEVELOPMENT.md's floor plan, in its order (a subfolder belongs to its folder's room). */
async function documentedOrder(): Promise<string[]> {
  const text = await readFile('DEVELOPMENT.md', 'utf8');
  const section = text.slice(text.indexOf('## Layout and the floor plan'));
  const block = section.slice(section.indexOf('```\n') + 4, section.indexOf('\n```', section.indexOf('```\n') + 4));
  const order: string[] = [];
  for (const line of block.split('\n')) {
    if (!line.startsWith('src/')) continue;
    const head = line.slice('src/'.length).split(/\s{2,}/)[0]!;
    for (const entry of head.split(/,\s*/)) {
      const room = entry.endsWith('/') ? entry.split('/')[0]! : entry;
      if (!order.includes(room)) order.push(room);
    }
  }
  return order;
}

test('the floor plan is one: every room the lint knows is in DEVELOPMENT.md, and every import the lint allows names a room listed before it', async (t) => {
  const { floorPlan } = (await import(resolve('eslint.config.js'))) as { floorPlan: Record<string, string[]> };
  const order = await documentedOrder();
  const leaves = ['errors.ts', 'quote.ts', 'reloadable.ts', 'clock.ts'];
  t.deepEqual(order.slice(0, leaves.length), leaves, 'the leaves first');
  t.is(order.at(-1), 'cli', 'cli/ last');
  t.deepEqual([...order.slice(leaves.length, -1)].sort(), Object.keys(floorPlan).sort(), 'the same rooms');
  const upward: string[] = [];
  for (const [room, allowed] of Object.entries(floorPlan))
    for (const other of allowed) if (order.indexOf(other) > order.indexOf(room)) upward.push(`${room} → ${other}`);
  t.deepEqual(upward, []);
  // And every room of src/ is one of them.
  const onDisk = new Set(
    (await sourceFiles('src')).map((f) => {
      const r = room(f);
      return relative('src', f).includes('/') ? r : `${r}.ts`;
    }),
  );
  t.deepEqual([...onDisk].filter((r) => !order.includes(r)).sort(), []);
});

test('the lint rule refuses an upward import, and accepts a downward one', async (t) => {
  const eslint = new ESLint();
  const [up] = await eslint.lintText("import { render } from '../templates/render.js';\nexport const x = render;\n", { filePath: 'src/k8s/probe.ts' });
  t.true(up!.messages.some((m) => m.ruleId === 'no-restricted-imports' && /src\/k8s\/ may import only from/.test(m.message)));
  // A top-level file too: config.ts may not import the app.
  const [top] = await eslint.lintText("import { createApp } from './app.js';\nexport const x = createApp;\n", { filePath: 'src/config.ts' });
  t.true(top!.messages.some((m) => m.ruleId === 'no-restricted-imports' && /src\/config\.ts may import only from/.test(m.message)));
  const [down] = await eslint.lintText("import { parsePod } from '../k8s/pod.js';\nexport const x = parsePod;\n", { filePath: 'src/templates/probe.ts' });
  t.deepEqual(
    down!.messages.filter((m) => m.ruleId === 'no-restricted-imports'),
    [],
  );
});

test('the answer cache is a layer only the composition knows: nothing outside its folder imports it but src/reviewer.ts, on one line', async (t) => {
  const importers: string[] = [];
  const cacheFolder = resolve('src/admission/answer-cache');
  for (const file of await sourceFiles('src')) {
    if (resolve(file).startsWith(`${cacheFolder}/`)) continue;
    const text = await readFile(file, 'utf8');
    for (const match of text.matchAll(/(?:from\s+|import\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g))
      if (resolve(dirname(file), match[1]!).startsWith(cacheFolder)) importers.push(relative('.', file));
  }
  // Deleted (the folder, the import and the line that wraps): nothing else names it.
  const present = existsSync(cacheFolder);
  t.deepEqual(importers, present ? ['src/reviewer.ts'] : []);
  // Beside the import, one line uses it: deleting both leaves every body decided afresh.
  const uses = (await readFile('src/reviewer.ts', 'utf8')).split('\n').filter((line) => line.includes('withAnswerCache') && !line.startsWith('import'));
  t.is(uses.length, present ? 1 : 0);
});

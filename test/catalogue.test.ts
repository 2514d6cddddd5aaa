/** The README's lists are the code's lists: reasons (and, in cli tests, options) checked against their one table. */
import test from 'ava';
import { readFile } from 'node:fs/promises';
import { auditOptions, certsOptions, checkOptions, renderOptions } from '../src/cli/usage.js';
import { clusterWarnings } from '../src/pipeline/cluster-warnings.js';
import { serveOptions } from '../src/config.js';
import { flagText, type OptionTable } from '../src/options.js';
import { reasons } from '../src/pipeline/reasons.js';

/** Rows of the markdown table that follows `heading` in the README: cells, trimmed. */
export async function readmeTable(heading: string): Promise<string[][]> {
  const text = await readFile('README.md', 'utf8');
  const start = text.indexOf(heading);
  if (start === -1) throw new Error(`README has no ${heading}`);
  const lines = text.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const rows: string[][] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .slice(1, -1)
        .split('|')
        .map((c) => c.trim()),
    );
  }
  return rows;
}

test("the README's reasons are the catalogue's, with the same decision and code", async (t) => {
  const rows = await readmeTable('Reasons (the one catalogue');
  const readme = rows.map(([id, decision, code]) => ({ id: id!.replace(/`/g, ''), decision, code: code === '' ? undefined : Number(code) }));
  const code = Object.entries(reasons).map(([id, spec]) => ({ id, decision: spec.decision, code: 'code' in spec ? spec.code : undefined }));
  t.deepEqual(
    readme.sort((a, b) => a.id.localeCompare(b.id)),
    code.sort((a, b) => a.id.localeCompare(b.id)),
  );
});

for (const [command, heading, table, withEnv] of [
  ['serve', 'Options of `serve`', serveOptions, true],
  ['render', 'Options of `render`', renderOptions, false],
  ['certs', 'Options of `certs`', certsOptions, false],
  ['check', 'Options of `check`', checkOptions, false],
  ['audit', 'Options of `audit`', auditOptions, false],
] as const) {
  test(`the README's options of ${command} are its option table's: flag, environment, default`, async (t) => {
    const rows = await readmeTable(heading);
    const expected = Object.entries(table as OptionTable).map(([name, spec]) => {
      const cells = [`\`${flagText(name, spec)}\``];
      if (withEnv) cells.push(spec.env ? `\`${spec.env}\`` : '');
      cells.push(spec.default ?? '');
      return cells;
    });
    t.deepEqual(
      rows.map((r) => r.slice(0, withEnv ? 3 : 2)),
      expected,
    );
  });
}

test("the README's warnings about the cluster are the catalogue's, word for word", async (t) => {
  const rows = await readmeTable('The warnings about the cluster (one table');
  // Each warning with its parameters' names as placeholders: `<template> not injected: …`.
  const expected = Object.entries(clusterWarnings).map(([id, say]) => {
    const names = /^\(([^)]*)\)/
      .exec(say.toString())![1]!
      .split(',')
      .map((n) => `<${n.trim()}>`);
    return [`\`${id}\``, `\`${(say as (...a: string[]) => string)(...names)}\``];
  });
  t.true(expected.length >= 8);
  t.deepEqual(rows, expected);
});

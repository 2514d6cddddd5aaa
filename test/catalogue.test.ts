/**
 * The reference pages are the code's lists: reasons, options and warnings read back from the
 * generated tables under docs/reference/ and checked against their one table in the code.
 */
import test from 'ava';
import { readFile } from 'node:fs/promises';
import { auditOptions, certsOptions, checkOptions, renderOptions } from '../src/cli/usage.js';
import { clusterWarnings } from '../src/pipeline/cluster-warnings.js';
import { warningIds } from '../src/pipeline/warnings.js';
import { serveOptions } from '../src/config.js';
import { flagText, type OptionTable } from '../src/options.js';
import { reasons } from '../src/pipeline/reasons.js';

/** Rows of the first markdown table after `heading` in `page`: cells trimmed, `\|` read as `|`. */
export async function referenceTable(page: string, heading: string): Promise<string[][]> {
  const text = await readFile(`docs/reference/${page}`, 'utf8');
  const start = text.indexOf(heading);
  if (start === -1) throw new Error(`docs/reference/${page} has no ${heading}`);
  const lines = text.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const rows: string[][] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .slice(1, -1)
        .split(/(?<!\\)\|/)
        .map((c) => c.trim().replace(/\\\|/g, '|')),
    );
  }
  return rows;
}

test("the reference's reasons are the catalogue's, with the same decision and code", async (t) => {
  const rows = await referenceTable('reasons.md', '# Reasons');
  const page = rows.map(([id, decision, code]) => ({ id: id!.replace(/`/g, ''), decision, code: code === '' ? undefined : Number(code) }));
  const code = Object.entries(reasons).map(([id, spec]) => ({ id, decision: spec.decision, code: 'code' in spec ? spec.code : undefined }));
  t.deepEqual(
    page.sort((a, b) => a.id.localeCompare(b.id)),
    code.sort((a, b) => a.id.localeCompare(b.id)),
  );
});

for (const [command, table] of [
  ['serve', serveOptions],
  ['render', renderOptions],
  ['certs', certsOptions],
  ['check', checkOptions],
  ['audit', auditOptions],
] as const) {
  test(`the reference's options of ${command} are its option table's: flag, environment, default, meaning`, async (t) => {
    const rows = await referenceTable('flags.md', `## ${command}\n`);
    const expected = Object.entries(table as OptionTable).map(([name, spec]) => [
      `\`${flagText(name, spec)}\``,
      spec.env ? `\`${spec.env}\`` : '',
      spec.default ?? '',
      spec.help,
    ]);
    t.deepEqual(rows, expected);
  });
}

test("the reference's warnings about the cluster are the catalogue's, word for word", async (t) => {
  const rows = await referenceTable('warnings.md', '## The sentences about the cluster');
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

test("the reference's warning ids are the catalogue's", async (t) => {
  const rows = await referenceTable('warnings.md', '# Warnings');
  t.deepEqual(
    rows.map(([id, when]) => [id, when]),
    Object.entries(warningIds).map(([id, when]) => [`\`${id}\``, when]),
  );
});

#!/usr/bin/env node
// Runs the ava suite with TAP output, passes it through, and ends with the line CI reads:
// "N passed, N failed" (plus ", N skipped"). Exits with ava's own status.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';

const ava = spawn(process.execPath, ['node_modules/ava/entrypoints/cli.mjs', '--tap', ...process.argv.slice(2)], { stdio: ['ignore', 'pipe', 'inherit'] });
let passed = 0;
let failed = 0;
let skipped = 0;
for await (const line of createInterface({ input: ava.stdout })) {
  process.stdout.write(`${line}\n`);
  if (/^not ok \d+/.test(line)) failed++;
  else if (/^ok \d+ .*# SKIP/i.test(line)) skipped++;
  else if (/^ok \d+/.test(line)) passed++;
}
const code = await new Promise((resolve) => ava.once('close', (c) => resolve(c ?? 1)));
if (code !== 0 && failed === 0) failed = 1;
process.stdout.write(`\n${passed} passed, ${failed} failed${skipped ? `, ${skipped} skipped` : ''}\n`);
process.exit(code);

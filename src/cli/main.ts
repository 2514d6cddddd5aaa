#!/usr/bin/env node
/**
 * Process entry: picks the subcommand, turns configuration and template errors into a message
 * and exit code 1.
 */
import { serveUsage } from '../config.js';
import { ConfigError, TemplateError } from '../errors.js';
import { certsUsage, checkUsage, renderUsage } from './usage.js';

const usage = `Usage: sidecar-injector <command> [options]

Commands:
  serve     run the admission webhook over HTTPS
  render    inject manifests offline, as the webhook would (preview; --explain says why)
  check     validate a templates directory
  certs     write a CA, a serving certificate and a kustomize overlay for them

${serveUsage}
${renderUsage}
${checkUsage}
${certsUsage}`;

async function main(argv: readonly string[]): Promise<void> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
    process.stdout.write(usage);
    return;
  }
  if (command === 'serve') {
    if (rest.includes('--help') || rest.includes('-h')) {
      process.stdout.write(serveUsage);
      return;
    }
    // Each command loads only what it needs: `serve` stays small (no schema library, no CLI-only code).
    const { serve } = await import('./serve.js');
    await serve(rest, process.env);
    return;
  }
  if (command === 'render') {
    if (rest.includes('--help') || rest.includes('-h')) {
      process.stdout.write(renderUsage);
      return;
    }
    const { render } = await import('./render.js');
    process.exitCode = await render(rest, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr });
    return;
  }
  if (command === 'check') {
    if (rest.includes('--help') || rest.includes('-h')) {
      process.stdout.write(checkUsage);
      return;
    }
    const { check } = await import('./check.js');
    const dir = rest[0] ?? 'templates';
    const set = await check(dir);
    process.stdout.write(`ok: ${dir}: ${set.templates.map((t) => `${t.name}@${t.hash}`).join(', ')}\n`);
    return;
  }
  if (command === 'certs') {
    if (rest.includes('--help') || rest.includes('-h')) {
      process.stdout.write(certsUsage);
      return;
    }
    const { certs } = await import('./certs.js');
    const result = await certs(rest);
    process.stdout.write(
      `${result.reusedCa ? 'reused the CA in' : 'wrote a new CA to'} ${result.out}\n` +
        `serving certificate for ${result.dnsNames.join(', ')}, valid until ${result.notAfter.toISOString()}\n` +
        `apply with: kubectl apply -k ${result.out}\n`,
    );
    return;
  }
  process.stderr.write(`sidecar-injector: unknown command ${JSON.stringify(command)}\n\n${usage}`);
  process.exitCode = 2;
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof ConfigError || err instanceof TemplateError) {
    process.stderr.write(`sidecar-injector: ${err.message}\n`);
  } else {
    process.stderr.write(`sidecar-injector: ${(err as Error).stack ?? String(err)}\n`);
  }
  process.exit(1);
});

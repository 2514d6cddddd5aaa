#!/usr/bin/env node
/**
 * Process entry: picks the subcommand, turns configuration and template errors into a message
 * and exit code 1.
 */
import { serveUsage } from '../config.js';
import { ConfigError, PolicyError, TemplateError, UsageError } from '../errors.js';
import { parseOptions } from '../options.js';
import { auditUsage, certsUsage, checkOptions, checkUsage, policiesUsage, renderUsage } from './usage.js';

const usage = `Usage: sidecar-injector <command> [options]

Commands:
  serve     run the admission webhook over HTTPS
  render    inject manifests offline, as the webhook would (preview; --explain says why)
  check     validate a templates directory
  certs     write a CA, a serving certificate and a kustomize overlay for them
  audit     report pods whose sidecars are missing or stale, per workload
  policies  print ValidatingAdmissionPolicies that hold the required sidecars (YAML)

${serveUsage}
${renderUsage}
${checkUsage}
${certsUsage}
${auditUsage}
${policiesUsage}`;

/** A subcommand: its usage text and how it runs. Code is loaded on demand, so `serve` stays small. */
interface Command {
  readonly usage: string;
  run(args: readonly string[]): Promise<void>;
}

const commands: Record<string, Command> = {
  audit: {
    usage: auditUsage,
    run: async (args) => {
      const { audit } = await import('./audit.js');
      process.exitCode = await audit(args, { stdout: process.stdout, stderr: process.stderr }, process.env);
    },
  },
  policies: {
    usage: policiesUsage,
    run: async (args) => {
      const { policies } = await import('./policies.js');
      process.exitCode = await policies(args, { stdout: process.stdout, stderr: process.stderr }, process.env);
    },
  },
  serve: {
    usage: serveUsage,
    run: async (args) => {
      const { serve } = await import('./serve.js');
      await serve(args, process.env);
    },
  },
  render: {
    usage: renderUsage,
    run: async (args) => {
      const { render } = await import('./render.js');
      process.exitCode = await render(args, { stdin: process.stdin, stdout: process.stdout, stderr: process.stderr }, process.env);
    },
  },
  check: {
    usage: checkUsage,
    run: async (args) => {
      const { check, clusterCheckOptions } = await import('./check.js');
      const parsed = parseOptions('check', checkOptions, args, process.env, ['DIR']);
      const dir = parsed.positionals[0] ?? 'templates';
      const cluster = clusterCheckOptions(parsed.values);
      const set = await check(dir, cluster);
      const against = [
        cluster.podSecurity ? `PodSecurity ${cluster.podSecurity.label}` : '',
        cluster.version ? `Kubernetes ${cluster.version.major}.${cluster.version.minor}` : '',
      ]
        .filter(Boolean)
        .join(', ');
      process.stdout.write(`ok: ${dir}: ${set.templates.map((t) => `${t.name}@${t.hash}`).join(', ')}${against ? ` (checked for ${against})` : ''}\n`);
    },
  },
  certs: {
    usage: certsUsage,
    run: async (args) => {
      const { certs } = await import('./certs.js');
      const result = await certs(args);
      process.stdout.write(
        `${result.reusedCa ? 'reused the CA in' : 'wrote a new CA to'} ${result.out}\n` +
          `serving certificate for ${result.dnsNames.join(', ')}, valid until ${result.notAfter.toISOString()}\n` +
          `apply with: kubectl apply -k ${result.out}\n`,
      );
    },
  },
};

async function main(argv: readonly string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    process.stdout.write(usage);
    return;
  }
  const command = Object.hasOwn(commands, name) ? commands[name] : undefined;
  if (!command) {
    process.stderr.write(`sidecar-injector: unknown command ${JSON.stringify(name)}\n\n${usage}`);
    process.exitCode = 2;
    return;
  }
  if (rest.includes('--help') || rest.includes('-h')) {
    process.stdout.write(command.usage);
    return;
  }
  await command.run(rest);
}

main(process.argv.slice(2)).catch((err: unknown) => {
  // A command line we cannot read is the caller's mistake: exit 2, as for an unknown command.
  if (err instanceof UsageError) {
    process.stderr.write(`sidecar-injector ${err.message}\n`);
    process.exit(2);
  }
  // Configuration, templates, and what the system refused (a file, a port): a message, no stack.
  const systemError = typeof (err as { code?: unknown })?.code === 'string' && /^E[A-Z]+$/.test((err as { code: string }).code);
  if (err instanceof ConfigError || err instanceof TemplateError || err instanceof PolicyError || systemError) {
    process.stderr.write(`sidecar-injector: ${(err as Error).message}\n`);
  } else {
    process.stderr.write(`sidecar-injector: ${(err as Error).stack ?? String(err)}\n`);
  }
  process.exit(1);
});

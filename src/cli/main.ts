#!/usr/bin/env node
/**
 * Process entry: picks the subcommand, turns configuration and template errors into a message
 * and exit code 1.
 */
import { serveOptions, serveUsage } from '../config.js';
import { clusterReadFailure, ClusterError, ConfigError, KubernetesApiError, PolicyError, ResponseTooLargeError, TemplateError, UsageError } from '../errors.js';
import { parseOptions } from '../options.js';
import { nearestName } from '../k8s/schema-fields.js';
import {
  auditOptions,
  auditUsage,
  certsOptions,
  certsUsage,
  checkOptions,
  checkUsage,
  commandSummary,
  policiesOptions,
  whyOptions,
  simulateOptions,
  policiesUsage,
  completionScript,
  renderOptions,
  renderUsage,
  rolloutOptions,
  rolloutUsage,
  versionText,
  whyUsage,
  simulateUsage,
} from './usage.js';

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
  rollout: {
    usage: rolloutUsage,
    run: async (args) => {
      const { rollout } = await import('./rollout.js');
      process.exitCode = await rollout(args, { stdout: process.stdout }, process.env);
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
      const { clusterCheckOptions } = await import('./check.js');
      const { check } = await import('../pipeline/template-check.js');
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
      // Whether each template could be injected by the API server itself (docs/map-export.md).
      const { exportProblems } = await import('../templates/export-rules.js');
      for (const template of set.templates) {
        const problems = exportProblems(template, set);
        const by = template.delivery === 'policy' ? 'delivered by the MutatingAdmissionPolicy' : 'exportable as a MutatingAdmissionPolicy';
        process.stdout.write(`  ${template.name}: ${problems.length === 0 ? by : `not exportable: ${problems.join('; ')}`}\n`);
      }
      // Ports a container listens on without declaring them: the hostNetwork rule cannot see them.
      const { undeclaredPorts, undeclaredPortText } = await import('../templates/ports.js');
      for (const template of set.templates)
        for (const port of undeclaredPorts(template))
          process.stdout.write(
            `  warning: ${undeclaredPortText(template.name, port)} (ports: [{ name: …, containerPort: "{{ params.${port.parameter} }}" }]), so that pods on the node's network are judged by it\n`,
          );
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
  policies: {
    usage: policiesUsage,
    run: async (args) => {
      const { policies } = await import('./policies.js');
      process.exitCode = await policies(args, { stdout: process.stdout, stderr: process.stderr }, process.env);
    },
  },
  simulate: {
    usage: simulateUsage,
    run: async (args) => {
      const { simulate } = await import('./simulate.js');
      process.exitCode = await simulate(args, { stdout: process.stdout, stderr: process.stderr }, process.env);
    },
  },
  why: {
    usage: whyUsage,
    run: async (args) => {
      const { why } = await import('./why.js');
      process.exitCode = await why(args, { stdout: process.stdout }, process.env);
    },
  },
  version: {
    usage: 'Usage: sidecar-injector version\n\nPrints the version, the Node.js version and the Kubernetes versions this build knows.\n',
    run: async (args) => {
      parseOptions('version', {}, args);
      process.stdout.write(versionText());
    },
  },
  help: {
    usage: "Usage: sidecar-injector help [COMMAND]\n\nPrints the commands, or one command's options.\n",
    run: async (args) => {
      const [name] = parseOptions('help', {}, args, {}, ['COMMAND']).positionals;
      process.stdout.write(name === undefined ? commandSummary : commandNamed(name).usage);
    },
  },
  completion: {
    usage: 'Usage: sidecar-injector completion bash|zsh\n\nPrints a shell completion script: source <(sidecar-injector completion bash)\n',
    run: async (args) => {
      const [shell] = parseOptions('completion', {}, args, {}, ['SHELL']).positionals;
      if (shell !== 'bash' && shell !== 'zsh') throw new UsageError(`completion: expected bash or zsh (got ${JSON.stringify(shell ?? '').slice(0, 40)})`);
      process.stdout.write(completionScript(shell, completionTable));
    },
  },
};

/** Each command's flags, for the completion script. */
const completionTable: Readonly<Record<string, readonly string[]>> = {
  serve: Object.keys(serveOptions),
  render: Object.keys(renderOptions),
  check: Object.keys(checkOptions),
  certs: Object.keys(certsOptions),
  audit: Object.keys(auditOptions),
  rollout: Object.keys(rolloutOptions),
  policies: Object.keys(policiesOptions),
  why: Object.keys(whyOptions),
  simulate: Object.keys(simulateOptions),
  version: [],
  help: [],
  completion: [],
};

/** The command called `name`; a UsageError naming the nearest one when there is none. */
function commandNamed(name: string): Command {
  if (Object.hasOwn(commands, name)) return commands[name]!;
  const near = nearestName(name, Object.keys(commands));
  throw new UsageError(
    `${JSON.stringify(name).slice(0, 80)}: unknown command${near ? ` (did you mean ${near}?)` : ''}; the commands are ${Object.keys(commands).join(', ')}; see sidecar-injector --help`,
  );
}

async function main(argv: readonly string[]): Promise<void> {
  const [name, ...rest] = argv;
  if (name === undefined || name === '--help' || name === '-h') {
    process.stdout.write(commandSummary);
    return;
  }
  const command = commandNamed(name === '--version' ? 'version' : name);
  // `COMMAND --help` anywhere before a `--` prints that command's help, and only it.
  const options = rest.includes('--') ? rest.slice(0, rest.indexOf('--')) : rest;
  if (options.includes('--help') || options.includes('-h')) {
    process.stdout.write(command.usage);
    return;
  }
  await command.run(rest);
}

// A reader that stops early (`check DIR | head -1`) closes the pipe: the rest of the output has
// nowhere to go, which is no error of the command's. Exit as a command killed by SIGPIPE would
// (128 + 13), quietly.
process.stdout.on('error', (err: NodeJS.ErrnoException) => {
  if (err.code === 'EPIPE') process.exit(141);
  throw err;
});

main(process.argv.slice(2)).catch((caught: unknown) => {
  // A refused or oversized read that no command put in words: said as what the cluster did not give.
  const err = caught instanceof KubernetesApiError || caught instanceof ResponseTooLargeError ? clusterReadFailure('the cluster', caught) : caught;
  // A command line we cannot read is the caller's mistake: exit 2, as for an unknown command.
  if (err instanceof UsageError) {
    process.stderr.write(`sidecar-injector ${err.message}\n`);
    process.exit(2);
  }
  // Configuration, templates, and what the system refused (a file, a port): a message, no stack.
  const systemError = typeof (err as { code?: unknown })?.code === 'string' && /^E[A-Z]+$/.test((err as { code: string }).code);
  if (err instanceof ConfigError || err instanceof TemplateError || err instanceof PolicyError || err instanceof ClusterError || systemError) {
    process.stderr.write(`sidecar-injector: ${(err as Error).message}\n`);
  } else {
    process.stderr.write(`sidecar-injector: ${(err as Error).stack ?? String(err)}\n`);
  }
  process.exit(1);
});

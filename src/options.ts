/**
 * Command options, one table per command: each row says the flag, its value, its environment
 * variable, its default and its help line. The table drives the parser (node:util parseArgs,
 * strict), the environment look-up (flags win), `--help`, and the README's option lists (a
 * test holds them to it). An unknown flag or a stray argument is a UsageError (exit 2).
 */
import { parseArgs } from 'node:util';
import { UsageError } from './errors.js';
import { nearestName } from './k8s/schema-fields.js';

/** One option. */
export interface OptionSpec {
  /** `string` takes a value; `list` takes one per use (repeatable); `boolean` takes none. */
  readonly kind: 'string' | 'list' | 'boolean';
  /** The value's placeholder in help, e.g. `N`, `DIR`. */
  readonly value?: string;
  readonly short?: string;
  /** Environment variable read when the flag is not given. */
  readonly env?: string;
  /** The default, as shown to people (the code applies it where the value is read). */
  readonly default?: string;
  readonly help: string;
}

/** A command's options, by long flag name. */
export type OptionTable = Readonly<Record<string, OptionSpec>>;

/** What a command line said: option values (flags over environment) and positional arguments. */
export interface ParsedOptions {
  readonly values: Readonly<Record<string, string | readonly string[] | boolean | undefined>>;
  readonly positionals: readonly string[];
}

/**
 * Parses `argv` with `table`; `positionals` names the positional arguments allowed (in help
 * order). Flags win over the environment; an empty environment variable counts as unset.
 * Throws UsageError naming an unknown flag, a missing value, or an unexpected argument.
 */
export function parseOptions(
  command: string,
  table: OptionTable,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = {},
  positionals: readonly string[] = [],
): ParsedOptions {
  const options = Object.fromEntries(
    Object.entries(table).map(([name, spec]) => [
      name,
      {
        type: spec.kind === 'boolean' ? ('boolean' as const) : ('string' as const),
        ...(spec.kind === 'list' ? { multiple: true } : {}),
        ...(spec.short ? { short: spec.short } : {}),
      },
    ]),
  );
  let parsed: { values: Record<string, string | string[] | boolean | undefined>; positionals: string[] };
  try {
    parsed = parseArgs({ args: [...argv], options, strict: true, allowPositionals: true }) as typeof parsed;
  } catch (err) {
    // parseArgs says "Unknown option '--bogus'": keep its words, add the nearest flag and where to look.
    const unknown = /^Unknown option '--?([^']*)'/.exec((err as Error).message)?.[1];
    const near = unknown === undefined ? undefined : nearestName(unknown, Object.keys(table));
    throw new UsageError(
      `${command}: ${(err as Error).message.replace(/\. To specify a positional argument.*$/s, '')}${near ? ` (did you mean --${near}?)` : ''}; see sidecar-injector ${command} --help`,
      { cause: err },
    );
  }
  if (parsed.positionals.length > positionals.length) {
    const extra = parsed.positionals.slice(positionals.length);
    throw new UsageError(`${command}: unexpected argument ${JSON.stringify(extra[0]).slice(0, 80)}; see sidecar-injector ${command} --help`);
  }
  const values: Record<string, string | readonly string[] | boolean | undefined> = Object.create(null);
  for (const [name, spec] of Object.entries(table)) {
    const flag = parsed.values[name];
    const fromEnv = spec.env ? env[spec.env] : undefined;
    values[name] = flag !== undefined ? flag : fromEnv === undefined || fromEnv === '' ? undefined : spec.kind === 'boolean' ? fromEnv === 'true' : fromEnv;
  }
  return { values, positionals: parsed.positionals };
}

/** The flag as written in help and the README: `-f, --filename FILE`. */
export function flagText(name: string, spec: OptionSpec): string {
  return `${spec.short ? `-${spec.short}, ` : ''}--${name}${spec.value ? ` ${spec.value}` : ''}`;
}

/** The `--help` text of a command, generated from its table. */
export function usageText(synopsis: string, table: OptionTable, footer = ''): string {
  const rows = Object.entries(table).map(([name, spec]) => {
    const details = [spec.help, spec.default !== undefined ? `(default ${spec.default})` : '', spec.env ?? ''].filter(Boolean).join('  ');
    return `  ${flagText(name, spec).padEnd(34)} ${details}`;
  });
  return `Usage: sidecar-injector ${synopsis}\n\n${rows.join('\n')}${rows.length ? '\n' : ''}${footer ? `\n${footer}` : ''}`;
}

/**
 * `sidecar-injector policies`: prints, as YAML for GitOps, the ValidatingAdmissionPolicy and
 * binding of every required template in a directory (manifests/required-policies.ts). Notes on
 * what a policy cannot check go to stderr; the YAML on stdout is ready for `kubectl apply -f -`.
 */
import { ConfigError } from '../errors.js';
import { parseOptions } from '../options.js';
import { loadTemplateDir } from '../templates/load.js';
import { defaultValidationActions, parseValidationActions, policiesYaml, requiredPolicies } from '../manifests/required-policies.js';
import { policiesOptions } from './usage.js';
import type { CommandIo } from './io.js';

/** Where `policies` writes. */
export type PoliciesIo = CommandIo;

/** Runs `policies`; returns the exit code. Throws ConfigError, TemplateError or PolicyError with every problem. */
export async function policies(argv: readonly string[], io: PoliciesIo, env: Readonly<Record<string, string | undefined>> = {}): Promise<number> {
  const { values } = parseOptions('policies', policiesOptions, argv, env);
  const actionsText = values['validation-actions'] as string | undefined;
  const actions = actionsText === undefined ? defaultValidationActions : parseValidationActions(actionsText);
  if (typeof actions === 'string') throw new ConfigError([actions]);
  const set = await loadTemplateDir((values.templates as string | undefined) ?? 'templates');
  const generated = requiredPolicies(set, { validationActions: actions });
  io.stdout.write(policiesYaml(generated));
  if (generated.length === 0) io.stderr.write('note: no template has failurePolicy: Fail; there is nothing to guard\n');
  for (const policy of generated) for (const note of policy.notes) io.stderr.write(`note: ${note}\n`);
  return 0;
}

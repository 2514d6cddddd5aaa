/**
 * `sidecar-injector policies`: prints, as YAML for GitOps, the ValidatingAdmissionPolicy and
 * binding of every required template in a directory (manifests/required-policies.ts). Notes on
 * what a policy cannot check go to stderr; the YAML on stdout is ready for `kubectl apply -f -`.
 * With `--mutating`, the MutatingAdmissionPolicy of the exportable templates instead
 * (manifests/mutating-policies.ts), and on stderr why each other template is not exported.
 */
import { ConfigError } from '../errors.js';
import { parseOptions } from '../options.js';
import { templatesFromFlagOrCluster } from './cluster-reads.js';
import { defaultValidationActions, parseValidationActions, policiesYaml, requiredPolicies } from '../manifests/required-policies.js';
import { mutatingPolicies, mutatingPoliciesYaml } from '../manifests/mutating-policies.js';
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
  const set = await templatesFromFlagOrCluster(values.templates as string | undefined, values.kubeconfig as string | undefined, 'policies', io.stderr);
  if (values.mutating === true) {
    const only = (values.template as string | undefined)
      ?.split(',')
      .map((n) => n.trim())
      .filter((n) => n !== '');
    const exported = mutatingPolicies(set, only);
    io.stdout.write(mutatingPoliciesYaml(exported));
    for (const refusal of exported.refused) io.stderr.write(`note: template ${refusal.template} is not exported: ${refusal.reasons.join('; ')}\n`);
    if (exported.exported.length === 0) io.stderr.write('note: no template can be exported; the webhook injects them all\n');
    return 0;
  }
  if (values.template !== undefined) throw new ConfigError(['--template selects templates to export: it needs --mutating']);
  const generated = requiredPolicies(set, { validationActions: actions });
  io.stdout.write(policiesYaml(generated));
  if (generated.length === 0) io.stderr.write('note: no template has failurePolicy: Fail; there is nothing to guard\n');
  for (const policy of generated) for (const note of policy.notes) io.stderr.write(`note: ${note}\n`);
  return 0;
}

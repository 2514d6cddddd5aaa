/**
 * `sidecar-injector policies`: prints, as YAML for GitOps, the ValidatingAdmissionPolicy and
 * binding of every required template in a directory (manifests/required-policies.ts). Notes on
 * what a policy cannot check go to stderr; the YAML on stdout is ready for `kubectl apply -f -`.
 * With `--mutating`, the MutatingAdmissionPolicy of the exportable templates instead
 * (manifests/mutating-policies.ts), and on stderr why each other template is not exported: in
 * the API version `--api-version` names, else the one the cluster serves (v1, else the beta),
 * else v1 for a folder. A cluster that serves neither is told so, with what it needs.
 */
import { ClusterError, ConfigError } from '../errors.js';
import { parseOptions } from '../options.js';
import { readObject, servedMutatingPolicyApi, templatesFromFlagOrCluster } from './cluster-reads.js';
import { atLeast, formatVersion, parseReportedVersion } from '../k8s/version.js';
import { loadKubeConfig } from '../kube-api/kubeconfig.js';
import { defaultValidationActions, parseValidationActions, policiesYaml, requiredPolicies } from '../manifests/required-policies.js';
import {
  mutatingPolicies,
  mutatingPoliciesYaml,
  mutatingPolicyApiVersions,
  mutatingPolicyBetaNeeds,
  mutatingPolicyOldestMinor,
  type MutatingPolicyApiVersion,
} from '../manifests/mutating-policies.js';
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
  const asked = values['api-version'] as string | undefined;
  if (asked !== undefined && !(mutatingPolicyApiVersions as readonly string[]).includes(asked))
    throw new ConfigError([`--api-version ${JSON.stringify(asked.slice(0, 40))}: it is one of ${mutatingPolicyApiVersions.join(', ')}`]);
  if (asked !== undefined && values.mutating !== true) throw new ConfigError(["--api-version is the MutatingAdmissionPolicy's: it needs --mutating"]);
  const set = await templatesFromFlagOrCluster(values.templates as string | undefined, values.kubeconfig as string | undefined, 'policies', io.stderr);
  if (values.mutating === true) {
    const only = (values.template as string | undefined)
      ?.split(',')
      .map((n) => n.trim())
      .filter((n) => n !== '');
    const served = asked === undefined && values.templates === undefined ? await servedApi(values.kubeconfig as string | undefined) : undefined;
    const apiVersion = (asked as MutatingPolicyApiVersion | undefined) ?? served?.apiVersion ?? 'v1';
    const exported = mutatingPolicies(set, only, apiVersion);
    io.stdout.write(mutatingPoliciesYaml(exported));
    if (apiVersion === 'v1beta1')
      io.stderr.write(
        `note: written in admissionregistration.k8s.io/v1beta1, the beta API${served ? ' this cluster serves' : ''} (Kubernetes 1.35 with the MutatingAdmissionPolicy feature gate)\n`,
      );
    if (served?.versionUnknown)
      io.stderr.write(
        `note: the API server's version could not be read (${served.versionUnknown}): Kubernetes 1.34 serves the beta too, and refuses these objects (its CEL has no flatten or lists.range for new policies)\n`,
      );
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

/**
 * The API version the cluster serves MutatingAdmissionPolicies in (and why its version is unknown,
 * when `/version` could not be read); a cluster that serves none, or whose CEL cannot compile the
 * export, is a ClusterError that says what it needs.
 */
async function servedApi(kubeconfig: string | undefined): Promise<{ apiVersion: MutatingPolicyApiVersion; versionUnknown?: string }> {
  const kubeConfig = await loadKubeConfig(kubeconfig, { fallback: 'default' });
  // Discovery decides; the version only refuses 1.34, so an unreadable one is said, not fatal.
  let versionUnknown: string | undefined;
  const object = await readObject(kubeConfig, '/version', "the API server's version").catch((err: Error) => {
    versionUnknown = err.message.slice(0, 200);
    return undefined;
  });
  const version = parseReportedVersion(object?.gitVersion);
  if (!version) versionUnknown ??= `it says ${JSON.stringify(String(object?.gitVersion ?? '')).slice(0, 60)}`;
  if (version && !atLeast(version, 1, mutatingPolicyOldestMinor))
    throw new ClusterError(
      `this API server is Kubernetes ${formatVersion(version)}: it takes no exported templates, since its CEL for new policies lacks the list functions the export's mutations use (flatten, lists.range; from Kubernetes 1.${mutatingPolicyOldestMinor}). The webhooks inject every template`,
    );
  const served = await servedMutatingPolicyApi(kubeConfig);
  if (served) return { apiVersion: served, ...(served === 'v1beta1' && versionUnknown ? { versionUnknown } : {}) };
  throw new ClusterError(
    `this API server serves no MutatingAdmissionPolicy API, so the templates cannot be exported to it: ${mutatingPolicyBetaNeeds}. The webhooks inject every template meanwhile (policies --mutating --api-version v1beta1 --templates DIR prints the beta objects for a cluster that will serve them)`,
  );
}

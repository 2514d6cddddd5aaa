/**
 * The option tables of render, check and certs, and their usage texts (serve's lives in
 * config.ts). Kept apart so that `--help` loads no command code.
 */
import { readFileSync } from 'node:fs';
import { usageText, type OptionTable } from '../options.js';
import { decideAsAdmissionOptions } from './decide-flags.js';
import { podSchemaKubernetesVersion } from '../k8s/pod-schema.js';
import { newestPolicyRules } from '../k8s/pod-security.js';
import { formatVersion, nativeSidecarsSince } from '../k8s/version.js';

/** The cluster a command that reads one talks to, as kubectl finds it. */
const kubeconfigOption = {
  kind: 'string',
  value: 'FILE',
  env: 'KUBECONFIG',
  help: 'the cluster (default: $KUBECONFIG, ~/.kube/config, or the in-cluster config)',
} as const;

/** `--templates DIR` of the commands that read the templates in force: the cluster's, unless a folder is given. */
const templatesFromClusterOption = {
  kind: 'string',
  value: 'DIR',
  help: "a folder of SidecarTemplate manifests (default: the cluster's SidecarTemplates, as the injector checks them)",
} as const;

export const renderOptions = {
  filename: {
    kind: 'list',
    short: 'f',
    value: 'FILE',
    help: 'manifests to inject: a file, a directory (recursively: *.yaml, *.yml, *.json) or - for stdin; repeatable',
  },
  templates: templatesFromClusterOption,
  kubeconfig: kubeconfigOption,
  namespace: { kind: 'string', value: 'NS', help: "namespace for every object (default: each object's own, else default)" },
  'namespace-labels': { kind: 'string', value: 'FILE', help: 'YAML map: namespace -> labels' },
  'namespace-label': { kind: 'list', value: 'NS:KEY=VALUE', help: 'one namespace label (repeatable); with neither, every namespace counts as opted in' },
  explain: { kind: 'boolean', help: 'say on stderr, per object, what was injected or skipped and why' },
  'kubernetes-version': {
    kind: 'string',
    value: 'X.Y',
    env: 'SIDECAR_INJECTOR_KUBERNETES_VERSION',
    help: 'render for this Kubernetes version (default: current features)',
  },
  'pod-security-action': {
    kind: 'string',
    value: 'ACTION',
    default: 'skip',
    help: 'skip | deny | inject, for a template that would break the enforced Pod Security level',
  },
  output: { kind: 'string', short: 'o', value: 'FORMAT', default: 'yaml', help: 'yaml | json (one object, or a v1 List of them)' },
  'keep-going': { kind: 'boolean', help: 'write every document even when a workload is refused (it is written as read, without its sidecars); still exits 1' },
} as const satisfies OptionTable;

export const renderUsage = usageText(
  'render -f FILE|DIR|- [-f …] [options]',
  renderOptions,
  'Pods, Deployments, StatefulSets, DaemonSets, ReplicaSets, ReplicationControllers, Jobs and\nCronJobs are injected; other objects are written back unchanged. All or nothing: when a\nworkload is refused or a document cannot be read, nothing is written to stdout and the exit\nstatus is 1 (--keep-going writes the rest). Exit 0: written; 1: refused or unreadable input; 2: usage.\n',
);

/** `check` takes the directory and two checks about the cluster. */
export const checkOptions = {
  'pod-security': { kind: 'string', value: 'LEVEL', help: "baseline | restricted: report each template's violations of that Pod Security level" },
  'kubernetes-version': {
    kind: 'string',
    value: 'X.Y',
    env: 'SIDECAR_INJECTOR_KUBERNETES_VERSION',
    help: 'check each template in the form it takes at this version (and Pod Security rules of that version)',
  },
} as const satisfies OptionTable;

export const checkUsage = usageText(
  'check [DIR]',
  checkOptions,
  'Validates the templates in DIR (default templates) exactly as serve does: every file, the\nkustomization.yaml that lists them (when present), and each template rendered into a sample\npod against the Kubernetes Pod schema. Exits 1 and names the file and the field of every problem.\n',
);

export const certsOptions = {
  out: { kind: 'string', value: 'DIR', default: 'manifests/overlays/self-signed', help: 'where to write the overlay' },
  base: { kind: 'string', value: 'DIR', default: 'manifests/base', help: 'the kustomize base it builds on' },
  service: { kind: 'string', value: 'NAME', default: 'sidecar-injector', help: 'the webhook Service' },
  namespace: { kind: 'string', value: 'NS', default: 'sidecar-injector', help: 'its namespace' },
  days: { kind: 'string', value: 'N', default: '90', help: 'serving certificate lifetime in days' },
  'ca-days': { kind: 'string', value: 'N', default: '3650', help: 'CA lifetime in days, when a new CA is made' },
} as const satisfies OptionTable;

export const certsUsage = usageText(
  'certs [options]',
  certsOptions,
  'Writes DIR/ca.crt, DIR/ca.key, DIR/tls.crt, DIR/tls.key and DIR/kustomization.yaml.\nKeep ca.key secret; it is reused on the next run unless it expires within 30 days.\n',
);

/** `-o text | json` of the commands that report. */
const textOrJsonOption = { kind: 'string', short: 'o', value: 'FORMAT', default: 'text', help: 'text | json' } as const;

export const auditOptions = {
  kubeconfig: kubeconfigOption,
  namespace: { kind: 'string', short: 'n', value: 'NS', help: 'one namespace (default: all)' },
  templates: templatesFromClusterOption,
  output: textOrJsonOption,
  'fail-on': { kind: 'string', value: 'STATES', help: 'exit 3 when a pod is in one of these states (e.g. missing,stale)' },
  restart: { kind: 'string', value: 'STATES', help: 'restart the Deployments, StatefulSets and DaemonSets with pods in these states (e.g. missing,stale)' },
  'max-per-minute': { kind: 'string', value: 'N', default: '10', help: 'restarts per minute at most' },
  'dry-run': { kind: 'boolean', help: 'say what --restart would restart, restart nothing' },
  ...decideAsAdmissionOptions,
} as const satisfies OptionTable;

export const auditUsage = usageText(
  'audit [options]',
  auditOptions,
  "Lists pods with a metadata-only list, decides with the admission code which templates each\nshould carry (reading the workload's pod template where metadata says one is missing), compares\nwith its ledger, and reports per workload: current, stale, missing, left-out (with the rule),\norphaned, not-selected, opted-out, with the command that fixes it. --restart restarts a workload\nonce per template revision. Exit 0, or 3 with --fail-on.\n",
);

export const rolloutOptions = {
  templates: templatesFromClusterOption,
  kubeconfig: kubeconfigOption,
  namespace: { kind: 'string', short: 'n', value: 'NS', help: 'count pods of one namespace (default: all)' },
  offline: { kind: 'boolean', help: 'the --templates folder only: read no cluster' },
  output: textOrJsonOption,
} as const satisfies OptionTable;

export const rolloutUsage = usageText(
  'rollout status [options]',
  rolloutOptions,
  "Shows, per template, the stable revision, the candidate with its share and scope, and the previous\nrevision (the cluster's SidecarTemplates, or a --templates folder); each SidecarTemplate's status as\nthe injector's elected replica wrote it, with each candidate's preflight, halt and health; and how many\nworkloads and pods of the cluster run each revision (a metadata-only list of pods). See docs/rollout.md.\n",
);

export const policiesOptions = {
  templates: templatesFromClusterOption,
  kubeconfig: kubeconfigOption,
  'validation-actions': {
    kind: 'string',
    value: 'ACTIONS',
    default: 'Warn,Audit',
    help: 'what a pod without its required sidecars gets: Warn,Audit (report) or Deny (refuse); Audit may join either',
  },
  mutating: {
    kind: 'boolean',
    help: 'print instead the MutatingAdmissionPolicy that injects the exportable templates inside the API server (Kubernetes 1.36+, or 1.35 with its feature gate), see docs/map-export.md',
  },
  template: { kind: 'string', value: 'NAMES', help: 'with --mutating: export only these templates (comma-separated); one that cannot be exported is an error' },
  'api-version': {
    kind: 'string',
    value: 'VERSION',
    help: "with --mutating: the policy's admissionregistration.k8s.io version, v1 (Kubernetes 1.36+) or v1beta1 (1.35 with the MutatingAdmissionPolicy feature gate); default: the one the cluster serves, or v1 with --templates",
  },
} as const satisfies OptionTable;

export const whyOptions = {
  kubeconfig: kubeconfigOption,
  namespace: { kind: 'string', short: 'n', value: 'NS', help: "the object's namespace (default: the kubeconfig context's, else default)" },
  filename: { kind: 'string', short: 'f', value: 'FILE', help: 'a manifest (a pod or a workload) instead of an object of the cluster' },
  templates: {
    kind: 'string',
    value: 'DIR',
    help: "a folder of SidecarTemplate manifests instead of the templates in force (default: the cluster's SidecarTemplates, as the injector checks them)",
  },
  output: textOrJsonOption,
  ...decideAsAdmissionOptions,
} as const satisfies OptionTable;

export const whyUsage = usageText(
  'why [options] KIND/NAME | -f FILE',
  whyOptions,
  'Says, per template in force, why an object has or has not its sidecars: injected, present, not\napplicable (the selector requirement that failed and the value seen), left out by a rule, would be\nrefused; for a running pod that lacks one a new pod would get, what most likely happened and the\ncommand that fixes it. KIND is pod or a workload kind (deployment, deploy, sts, ds, rs, rc, job, cj).\nReads only (docs/why.md lists the permissions).\n',
);

export const simulateOptions = {
  kubeconfig: kubeconfigOption,
  templates: { kind: 'string', value: 'DIR', help: 'the new templates (required)' },
  namespace: { kind: 'string', short: 'n', value: 'NS', help: 'one namespace (default: all)' },
  output: textOrJsonOption,
  rate: { kind: 'string', value: 'N', default: '20', help: 'dry-run creates per second at most' },
  'max-failures': { kind: 'string', value: 'N', help: 'stop after N workloads would be refused' },
  strict: { kind: 'boolean', help: 'exit 3 also for a workload refused with the templates in force too' },
  ...decideAsAdmissionOptions,
} as const satisfies OptionTable;

export const simulateUsage = usageText(
  'simulate --templates DIR [options]',
  simulateOptions,
  "For every workload in scope, decides the pod its controller would create with the templates in\nforce and with DIR's, and sends the new pod as a dry-run create through the cluster's admission\nchain (nothing is stored): what changes (sidecars, QoS class, whether a Job completes) and the\nverdict (admitted, refused and by whom, refused before the change too, not a fixed point). Exit 0,\nor 3 when the change would make any workload refused (--strict: any refused at all). Needs create on pods (dry runs) and list on the workload kinds (docs/rollout.md).\n",
);

export const policiesUsage = usageText(
  'policies [options]',
  policiesOptions,
  'Prints a ValidatingAdmissionPolicy and its binding for every required template (failurePolicy: Fail):\nthe API server itself then checks that each pod the template applies to carries its containers.\nSee docs/required-policies.md. With --mutating: the MutatingAdmissionPolicy that injects the templates\ninside the API server (Kubernetes 1.36+; 1.35 with its feature gate, in v1beta1); see docs/map-export.md.\n',
);

/** `sidecar-injector --help`: the commands, one line each; each command's options are under `COMMAND --help`. */
export const commandSummary = `Usage: sidecar-injector <command> [options]

Commands:
  serve       run the admission webhook over HTTPS
  render      inject manifests offline, as the webhook would (preview; --explain says why)
  check       validate a templates directory
  certs       write a CA, a serving certificate and a kustomize overlay for them
  audit       report pods whose sidecars are missing or stale, per workload
  rollout     show each template's stable and candidate revisions and the pods on each (rollout status)
  policies    print the admission policies holding the required sidecars, or injecting the templates (--mutating)
  why         say why a pod or workload has or has not each sidecar (why -n NS deployment/web)
  simulate    what a change of templates does to every workload, through the cluster's admission chain (dry runs)
  version     print the version, the Node.js version and the Kubernetes versions this build knows
  help        print this, or one command's options (help COMMAND)
  completion  print a bash or zsh completion script (completion bash|zsh)

Run sidecar-injector COMMAND --help for a command's options.
`;

/** The package's version, from the package.json beside the build (dist/src/cli → the root). */
function packageVersion(): string {
  try {
    const { version } = JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version?: unknown };
    return typeof version === 'string' ? version : 'unknown';
  } catch {
    // Run from a copy without its package.json: the version is not known, the rest is.
    return 'unknown';
  }
}

/** `sidecar-injector version`: what this build is, what it runs on, and which Kubernetes it knows. */
export function versionText(): string {
  return [
    `sidecar-injector ${packageVersion()}`,
    `Node.js ${process.version}`,
    `Kubernetes API schema (template fields): ${podSchemaKubernetesVersion}`,
    `Pod Security rules: v1.0 to v${formatVersion(newestPolicyRules)} (newer versions and latest judged by v${formatVersion(newestPolicyRules)}, or by --kubernetes-version when older)`,
    `native sidecars: from ${formatVersion(nativeSidecarsSince)} (below, each template's nativeSidecars fallback)`,
    '',
  ].join('\n');
}

/**
 * A completion script for `shell`, from each command's flags. zsh runs the bash one through
 * bashcompinit: one script to keep right.
 */
export function completionScript(shell: 'bash' | 'zsh', flags: Readonly<Record<string, readonly string[]>>): string {
  const cases = Object.entries(flags)
    .map(([command, names]) => `    ${command}) words="${names.map((n) => `--${n}`).join(' ')} --help" ;;`)
    .join('\n');
  const bash = `_sidecar_injector() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" words
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${Object.keys(flags).join(' ')} --help --version" -- "$cur"))
    return
  fi
  case "\${COMP_WORDS[1]}" in
${cases}
    *) words="" ;;
  esac
  if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "$words" -- "$cur")); else COMPREPLY=($(compgen -f -- "$cur")); fi
}
complete -F _sidecar_injector sidecar-injector
`;
  return shell === 'bash' ? bash : `autoload -U +X bashcompinit && bashcompinit\n${bash}`;
}

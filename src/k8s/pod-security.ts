/**
 * The Pod Security Standards (baseline, restricted) as Pod Security Admission evaluates them
 * after every mutating webhook (CONTRACT R-71): the namespace's labels name a level and a
 * version per mode (enforce, warn, audit), and each check reads the pod's spec. Pure.
 *
 * Written from `kubernetes/pod-security-admission` (policy/check_*.go, api/helpers.go): the
 * check ids, the reasons and the details are upstream's words, so that what we say matches
 * what the API server would say. Version differences are honoured where a check's rule
 * changed (see `policyVersionNotes`); seccomp annotations (policy versions below 1.19) and the
 * user-namespace relaxations of 1.35 are left to the API server.
 */
import { isJsonObject, type JsonObject } from './json.js';
import { PodSecurityLabels } from './keys.js';
import { atLeast, compareVersions, type KubernetesVersion } from './version.js';

export type PodSecurityLevel = 'privileged' | 'baseline' | 'restricted';
export const podSecurityLevels: readonly PodSecurityLevel[] = ['privileged', 'baseline', 'restricted'];

/** One mode's policy: a level at a policy version (`latest`: the rules of the Kubernetes version in force). */
export interface PodSecurityPolicy {
  readonly level: PodSecurityLevel;
  readonly version: KubernetesVersion | 'latest';
  /** `restricted:latest`, `baseline:v1.25`: as the API server names the policy in its messages. */
  readonly label: string;
  /**
   * The version whose rules judge: the policy's version, capped at the Kubernetes version in
   * force, which is also what `latest` means there (an API server knows no newer rules than its
   * own). Absent when no version is known: the newest rules this build knows.
   */
  readonly rules?: KubernetesVersion;
}

/** The rules a policy version is judged by where `inForce` runs (upstream's evaluator caps the version at its newest checks). */
export function rulesAt(version: KubernetesVersion | 'latest', inForce: KubernetesVersion | undefined): KubernetesVersion | undefined {
  if (version === 'latest') return inForce;
  return inForce && compareVersions(inForce, version) < 0 ? inForce : version;
}

export type PodSecurityMode = keyof typeof PodSecurityLabels;

/** A failed check: its id, upstream's reason and detail. */
export interface PodSecurityViolation {
  readonly check: string;
  readonly reason: string;
  readonly detail: string;
}

/**
 * The namespace's policy per mode. A mode without a level label is privileged (absent here).
 * As the API server reads them: an invalid enforce level is restricted (fails closed), an
 * invalid warn or audit level privileged; an invalid version is `latest`.
 */
export function podSecurityPolicies(
  namespaceLabels: Readonly<Record<string, string>>,
  inForce?: KubernetesVersion,
): Partial<Record<PodSecurityMode, PodSecurityPolicy>> {
  const out: Partial<Record<PodSecurityMode, PodSecurityPolicy>> = {};
  for (const mode of ['enforce', 'warn', 'audit'] as const) {
    const keys = PodSecurityLabels[mode];
    if (!Object.hasOwn(namespaceLabels, keys.level)) continue;
    const raw = namespaceLabels[keys.level]!;
    const level: PodSecurityLevel = podSecurityLevels.includes(raw as PodSecurityLevel)
      ? (raw as PodSecurityLevel)
      : mode === 'enforce'
        ? 'restricted'
        : 'privileged';
    if (level === 'privileged') continue;
    const versionText = Object.hasOwn(namespaceLabels, keys.version) ? namespaceLabels[keys.version]! : 'latest';
    const match = /^v1\.(0|[1-9][0-9]{0,2})$/.exec(versionText);
    const version = match ? { major: 1, minor: Number(match[1]) } : 'latest';
    const rules = rulesAt(version, inForce);
    out[mode] = { level, version, label: `${level}:${version === 'latest' ? 'latest' : versionText}`, ...(rules ? { rules } : {}) };
  }
  return out;
}

/** A value from the pod, as text for a message: strings as they are (cut), anything else by its type. */
function text(value: unknown): string {
  return typeof value === 'string'
    ? value.slice(0, 100)
    : typeof value === 'number' || typeof value === 'boolean'
      ? String(value)
      : `(a ${value === null ? 'null' : Array.isArray(value) ? 'list' : typeof value})`;
}

function object(value: unknown): JsonObject {
  return isJsonObject(value) ? value : {};
}

function list(value: unknown): JsonObject[] {
  return Array.isArray(value) ? value.filter(isJsonObject) : [];
}

function names(containers: readonly JsonObject[]): string {
  const quoted = containers.map((c) => JSON.stringify(typeof c.name === 'string' ? c.name.slice(0, 63) : ''));
  return `${quoted.length === 1 ? 'container' : 'containers'} ${quoted.join(', ')}`;
}

/** `pod and container "a"` / `pod` / `containers "a", "b"`. */
function setters(pod: boolean, containers: readonly JsonObject[]): string {
  return [pod ? 'pod' : '', containers.length > 0 ? names(containers) : ''].filter(Boolean).join(' and ');
}

const baselineCapabilities = new Set([
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
]);
const restrictedVolumeTypes = new Set(['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret', 'image']);

/** The safe sysctls at a policy version. */
function allowedSysctls(at: (minor: number) => boolean): Set<string> {
  const allowed = [
    'kernel.shm_rmid_forced',
    'net.ipv4.ip_local_port_range',
    'net.ipv4.tcp_syncookies',
    'net.ipv4.ping_group_range',
    'net.ipv4.ip_unprivileged_port_start',
  ];
  if (at(27)) allowed.push('net.ipv4.ip_local_reserved_ports');
  if (at(29)) allowed.push('net.ipv4.tcp_keepalive_time', 'net.ipv4.tcp_fin_timeout', 'net.ipv4.tcp_keepalive_intvl', 'net.ipv4.tcp_keepalive_probes');
  if (at(32)) allowed.push('net.ipv4.tcp_rmem', 'net.ipv4.tcp_wmem');
  return new Set(allowed);
}

/** The newest policy version whose rules are written here: newer versions (and `latest`) judge by these. */
export const newestPolicyRules: KubernetesVersion = { major: 1, minor: 34 };

/** Where each check's rule changed with the policy version, for the README and --explain. */
export const policyVersionNotes = [
  'allowPrivilegeEscalation from v1.8',
  'seccompProfile (restricted) from v1.19',
  'capabilities (restricted) from v1.22',
  'runAsUser from v1.23',
  'Windows pods exempt from allowPrivilegeEscalation, seccompProfile and capabilities (restricted) from v1.25',
  'more safe sysctls at v1.27, v1.29 and v1.32',
  'SELinux type container_engine_t from v1.31',
  'probe and lifecycle hosts from v1.34',
] as const;

/**
 * Every check of `policy` the pod fails, in upstream's order (baseline ids sorted, then
 * restricted ids sorted). `pod` is the raw pod object; nothing in it is trusted to be well-formed.
 */
export function checkPodSecurity(pod: unknown, policy: PodSecurityPolicy): PodSecurityViolation[] {
  if (policy.level === 'privileged') return [];
  const rules = policy.rules ?? policy.version;
  const at = (minor: number) => rules === 'latest' || atLeast(rules, 1, minor);
  const restricted = policy.level === 'restricted';
  const metadata = object(object(pod).metadata);
  const spec = object(object(pod).spec);
  const podContext = object(spec.securityContext);
  const containers = [...list(spec.initContainers), ...list(spec.containers), ...list(spec.ephemeralContainers)];
  const context = (c: JsonObject) => object(c.securityContext);
  const windows = object(spec.os).name === 'windows' && at(25);
  const out: PodSecurityViolation[] = [];
  const fail = (check: string, reason: string, detail: string) => out.push({ check, reason, detail });

  // --- baseline (ids sorted) ---
  const apparmorAnnotations = Object.entries(object(metadata.annotations)).filter(
    ([key, value]) =>
      key.startsWith('container.apparmor.security.beta.kubernetes.io/') &&
      !(value === '' || value === 'runtime/default' || (typeof value === 'string' && value.startsWith('localhost/'))),
  );
  const apparmorUnconfined = (c: JsonObject) => object(c.appArmorProfile).type === 'Unconfined';
  const apparmorContainers = containers.filter((c) => apparmorUnconfined(context(c)));
  if (apparmorAnnotations.length > 0 || apparmorContainers.length > 0 || apparmorUnconfined(podContext)) {
    const parts = [setters(apparmorUnconfined(podContext), apparmorContainers), ...apparmorAnnotations.map(([k, v]) => `${k}=${JSON.stringify(v)}`)];
    fail('appArmorProfile', 'forbidden AppArmor profile', parts.filter(Boolean).join(', '));
  }
  // The restricted capabilities check replaces this one from v1.22 (Windows pods included: exempt from both).
  if (!(restricted && at(22))) {
    const offenders = containers.filter((c) => {
      const add = object(context(c).capabilities).add;
      return Array.isArray(add) && add.some((cap) => !baselineCapabilities.has(cap as string));
    });
    if (offenders.length > 0)
      fail(
        'capabilities_baseline',
        'non-default capabilities',
        `${names(offenders)} must not include non-default capabilities in securityContext.capabilities.add`,
      );
  }
  const hostNamespaces = (['hostNetwork', 'hostPID', 'hostIPC'] as const).filter((field) => spec[field] === true);
  if (hostNamespaces.length > 0) fail('hostNamespaces', 'host namespaces', hostNamespaces.map((f) => `${f}=true`).join(', '));
  if (!restricted) {
    const hostPaths = list(spec.volumes).filter((v) => v.hostPath !== undefined && v.hostPath !== null);
    if (hostPaths.length > 0)
      fail(
        'hostPathVolumes',
        'hostPath volumes',
        `${hostPaths.length === 1 ? 'volume' : 'volumes'} ${hostPaths.map((v) => JSON.stringify(v.name)).join(', ')}`,
      );
  }
  const hostPortContainers = containers.filter((c) => list(c.ports).some((p) => typeof p.hostPort === 'number' && p.hostPort !== 0));
  if (hostPortContainers.length > 0) {
    const ports = hostPortContainers.flatMap((c) =>
      list(c.ports)
        .map((p) => p.hostPort)
        .filter((p) => typeof p === 'number' && p !== 0),
    );
    fail(
      'hostPorts',
      'hostPort',
      `${names(hostPortContainers)} ${hostPortContainers.length === 1 ? 'uses' : 'use'} ${ports.length === 1 ? 'hostPort' : 'hostPorts'} ${ports.join(', ')}`,
    );
  }
  if (at(34)) {
    const hostOf = (handler: unknown) =>
      [object(object(handler).httpGet).host, object(object(handler).tcpSocket).host].some((h) => typeof h === 'string' && h !== '');
    const probing = containers.filter(
      (c) =>
        ['livenessProbe', 'readinessProbe', 'startupProbe'].some((p) => hostOf(c[p])) || ['postStart', 'preStop'].some((h) => hostOf(object(c.lifecycle)[h])),
    );
    if (probing.length > 0)
      fail('hostProbesAndHostLifecycle', 'probe or lifecycle host', `${names(probing)} ${probing.length === 1 ? 'uses' : 'use'} probe or lifecycle host`);
  }
  const hostProcess = (ctx: JsonObject) => object(ctx.windowsOptions).hostProcess === true;
  const hostProcessContainers = containers.filter((c) => hostProcess(context(c)));
  if (hostProcess(podContext) || hostProcessContainers.length > 0) {
    fail(
      'windowsHostProcess',
      'hostProcess',
      `${setters(hostProcess(podContext), hostProcessContainers)} must not set securityContext.windowsOptions.hostProcess=true`,
    );
  }
  const privileged = containers.filter((c) => context(c).privileged === true);
  if (privileged.length > 0) fail('privileged', 'privileged', `${names(privileged)} must not set securityContext.privileged=true`);
  const procMount = containers.filter((c) => context(c).procMount !== undefined && context(c).procMount !== null && context(c).procMount !== 'Default');
  if (procMount.length > 0) fail('procMount', 'procMount', `${names(procMount)} must not set securityContext.procMount`);
  const seccompType = (ctx: JsonObject) => object(ctx.seccompProfile).type;
  if (!(restricted && at(19))) {
    const unconfined = containers.filter((c) => seccompType(context(c)) === 'Unconfined');
    if (seccompType(podContext) === 'Unconfined' || unconfined.length > 0) {
      fail(
        'seccompProfile_baseline',
        'seccompProfile',
        `${setters(seccompType(podContext) === 'Unconfined', unconfined)} must not set securityContext.seccompProfile.type to "Unconfined"`,
      );
    }
  }
  const seLinuxTypes = new Set(['', 'container_t', 'container_init_t', 'container_kvm_t', ...(at(31) ? ['container_engine_t'] : [])]);
  const badSeLinux = (ctx: JsonObject) => {
    const options = ctx.seLinuxOptions;
    if (!isJsonObject(options)) return false;
    const type = options.type ?? '';
    return !seLinuxTypes.has(type as string) || (options.user ?? '') !== '' || (options.role ?? '') !== '';
  };
  const seLinuxContainers = containers.filter((c) => badSeLinux(context(c)));
  if (badSeLinux(podContext) || seLinuxContainers.length > 0) {
    fail('seLinuxOptions', 'seLinuxOptions', `${setters(badSeLinux(podContext), seLinuxContainers)} set forbidden securityContext.seLinuxOptions`);
  }
  const safe = allowedSysctls(at);
  const sysctls = list(podContext.sysctls)
    .map((s) => s.name)
    .filter((name) => !safe.has(name as string));
  if (sysctls.length > 0) fail('sysctls', 'forbidden sysctls', sysctls.map(text).join(', '));

  if (!restricted) return out;
  // --- restricted (ids sorted) ---
  if (at(8) && !windows) {
    const escalating = containers.filter((c) => context(c).allowPrivilegeEscalation !== false);
    if (escalating.length > 0)
      fail('allowPrivilegeEscalation', 'allowPrivilegeEscalation != false', `${names(escalating)} must set securityContext.allowPrivilegeEscalation=false`);
  }
  if (at(22) && !windows) {
    const problems: string[] = [];
    const notDropping = containers.filter((c) => {
      const drop = object(context(c).capabilities).drop;
      return !(Array.isArray(drop) && drop.includes('ALL'));
    });
    if (notDropping.length > 0) problems.push(`${names(notDropping)} must set securityContext.capabilities.drop=["ALL"]`);
    const adding = containers.filter((c) => {
      const add = object(context(c).capabilities).add;
      return Array.isArray(add) && add.some((cap) => cap !== 'NET_BIND_SERVICE');
    });
    if (adding.length > 0) problems.push(`${names(adding)} must not include capabilities other than "NET_BIND_SERVICE" in securityContext.capabilities.add`);
    if (problems.length > 0) fail('capabilities_restricted', 'unrestricted capabilities', problems.join('; '));
  }
  // A source counts when it is set, as upstream's `volume.EmptyDir != nil`: `emptyDir: null` is no emptyDir.
  const sources = (v: JsonObject) => Object.keys(v).filter((key) => key !== 'name' && v[key] !== null && v[key] !== undefined);
  const volumes = list(spec.volumes).filter((v) => !sources(v).some((key) => restrictedVolumeTypes.has(key)));
  if (volumes.length > 0) {
    const typeOf = (v: JsonObject) => sources(v)[0] ?? 'unknown';
    fail(
      'restrictedVolumes',
      'restricted volume types',
      volumes.map((v) => `volume ${JSON.stringify(v.name)} uses restricted volume type ${JSON.stringify(typeOf(v))}`).join('; '),
    );
  }
  const podNonRoot = podContext.runAsNonRoot;
  const explicitRoot = containers.filter((c) => context(c).runAsNonRoot === false);
  const unsetNonRoot = containers.filter((c) => context(c).runAsNonRoot !== true && context(c).runAsNonRoot !== false);
  if (podNonRoot === false || explicitRoot.length > 0) {
    fail('runAsNonRoot', 'runAsNonRoot != true', `${setters(podNonRoot === false, explicitRoot)} must not set securityContext.runAsNonRoot=false`);
  } else if (podNonRoot !== true && unsetNonRoot.length > 0) {
    fail('runAsNonRoot', 'runAsNonRoot != true', `pod or ${names(unsetNonRoot)} must set securityContext.runAsNonRoot=true`);
  }
  if (at(23)) {
    const root = containers.filter((c) => context(c).runAsUser === 0);
    if (podContext.runAsUser === 0 || root.length > 0)
      fail('runAsUser', 'runAsUser=0', `${setters(podContext.runAsUser === 0, root)} must not set runAsUser=0`);
  }
  if (at(19) && !windows) {
    const allowed = (type: unknown) => type === 'RuntimeDefault' || type === 'Localhost';
    const podType = seccompType(podContext);
    const badPod = podType !== undefined && podType !== null && !allowed(podType);
    const badContainers = containers.filter((c) => {
      const type = seccompType(context(c));
      return type !== undefined && type !== null && !allowed(type);
    });
    const unset = containers.filter((c) => seccompType(context(c)) === undefined || seccompType(context(c)) === null);
    if (badPod || badContainers.length > 0) {
      fail(
        'seccompProfile_restricted',
        'seccompProfile',
        `${setters(badPod, badContainers)} must not set securityContext.seccompProfile.type to ${JSON.stringify(text(badPod ? podType : seccompType(context(badContainers[0]!))))}`,
      );
    } else if (!allowed(podType) && unset.length > 0) {
      fail(
        'seccompProfile_restricted',
        'seccompProfile',
        `pod or ${names(unset)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"`,
      );
    }
  }
  return out;
}

/** `reason (detail), reason (detail)`: as the API server lists violations. */
export function describeViolations(violations: readonly PodSecurityViolation[]): string {
  return violations.map((v) => `${v.reason} (${v.detail})`).join(', ');
}

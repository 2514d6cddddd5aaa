/**
 * The Pod Security Standards (baseline, restricted) as Pod Security Admission evaluates them
 * after every mutating webhook (CONTRACT R-71): the namespace's labels name a level and a
 * version per mode (enforce, warn, audit), and each check reads the pod's spec. Pure.
 *
 * Written from `kubernetes/pod-security-admission` v0.36.5 (policy/check_*.go, helpers.go,
 * registry.go): the check ids, the reasons and the details are upstream's, word for word (its
 * pluralization, its `joinQuote`, its sorted sets), so that what we say matches what the API
 * server says. Each check's version gates and overrides are upstream's (see
 * `policyVersionNotes`): the rules of every policy version from v1.0 to v1.35.
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

/**
 * A value from the pod as Go's JSON decoding leaves it for upstream's checks: a string as it
 * is, an absent or null field as the zero value `""`. Anything else would not decode in the API
 * server (the pod is refused before Pod Security runs); it is named by its type.
 */
function str(value: unknown): string {
  if (typeof value === 'string') return value;
  if (value === undefined || value === null) return '';
  return typeof value === 'number' || typeof value === 'boolean' ? String(value) : `(a ${Array.isArray(value) ? 'list' : typeof value})`;
}

/** Set in Go's sense: a pointer field that is not nil (JSON `null` decodes to nil). */
function present(value: unknown): boolean {
  return value !== undefined && value !== null;
}

function object(value: unknown): JsonObject {
  return isJsonObject(value) ? value : {};
}

/** A list of structs as Go decodes it: a `null` item is the zero value (an empty object). */
function list(value: unknown): JsonObject[] {
  if (!Array.isArray(value)) return [];
  const out: JsonObject[] = [];
  for (const item of value) {
    if (isJsonObject(item)) out.push(item);
    else if (item === null) out.push({});
  }
  return out;
}

/** A list of strings (capabilities): each item as `str` reads it. */
function strings(value: unknown): string[] {
  return Array.isArray(value) ? value.map(str) : [];
}

/** Upstream's `joinQuote`: each item in double quotes, nothing escaped. */
function joinQuote(items: readonly string[]): string {
  return items.length === 0 ? '' : `"${items.join('", "')}"`;
}

function pluralize(singular: string, plural: string, count: number): string {
  return count === 1 ? singular : plural;
}

/**
 * Go's string order (`sort.Strings`, `sets.List`): by UTF-8 bytes, which is code point order.
 * UTF-16 code units agree except that a surrogate (a code point above U+FFFF) sorts after U+E000–U+FFFF.
 */
function goOrder(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const surrogateX = x >= 0xd800 && x <= 0xdfff;
    const surrogateY = y >= 0xd800 && y <= 0xdfff;
    if (surrogateX !== surrogateY) return surrogateX ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/** `sets.NewString(items...).List()`: distinct, in Go's order. */
function sortedSet(items: Iterable<string>): string[] {
  return [...new Set(items)].sort(goOrder);
}

const printable = /^[\p{L}\p{M}\p{N}\p{P}\p{S} ]$/u;
const shortEscapes: Readonly<Record<number, string>> = { 7: '\\a', 8: '\\b', 9: '\\t', 10: '\\n', 11: '\\v', 12: '\\f', 13: '\\r' };

/** Go's `%q` of a string (`strconv.Quote`). */
function goQuote(text: string): string {
  let out = '"';
  for (const char of text) {
    const code = char.codePointAt(0)!;
    // A lone surrogate is U+FFFD in Go (its JSON decoder replaces it), which it prints as is.
    if (char === '"' || char === '\\') out += `\\${char}`;
    else if (code >= 0xd800 && code <= 0xdfff) out += '\ufffd';
    else if (printable.test(char)) out += char;
    else if (shortEscapes[code] !== undefined) out += shortEscapes[code];
    else if (code < 0x20 || code === 0x7f) out += `\\x${code.toString(16).padStart(2, '0')}`;
    else if (code < 0x10000) out += `\\u${code.toString(16).padStart(4, '0')}`;
    else out += `\\U${code.toString(16).padStart(8, '0')}`;
  }
  return `${out}"`;
}

const name = (container: JsonObject) => str(container.name);

/** `container "a"` / `containers "a", "b"`. */
function containerList(containers: readonly JsonObject[]): string {
  return `${pluralize('container', 'containers', containers.length)} ${joinQuote(containers.map(name))}`;
}

/** `pod and containers "a", "b"` / `pod` / `container "a"`: who set a forbidden value. */
function setters(pod: boolean, containers: readonly JsonObject[]): string[] {
  return [...(pod ? ['pod'] : []), ...(containers.length > 0 ? [containerList(containers)] : [])];
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
/** The volume types restricted allows. */
const allowedVolumeTypes = ['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'image', 'persistentVolumeClaim', 'projected', 'secret'];
/** The restricted volume types, in the order upstream names a volume's type by (the first set; none known: `unknown`). */
const forbiddenVolumeTypes = [
  'hostPath',
  'gcePersistentDisk',
  'awsElasticBlockStore',
  'gitRepo',
  'nfs',
  'iscsi',
  'glusterfs',
  'rbd',
  'flexVolume',
  'cinder',
  'cephfs',
  'flocker',
  'fc',
  'azureFile',
  'vsphereVolume',
  'quobyte',
  'azureDisk',
  'photonPersistentDisk',
  'portworxVolume',
  'scaleIO',
  'storageos',
];

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

const appArmorAnnotationPrefix = 'container.apparmor.security.beta.kubernetes.io/';
const seccompPodAnnotation = 'seccomp.security.alpha.kubernetes.io/pod';
const seccompContainerAnnotationPrefix = 'container.seccomp.security.alpha.kubernetes.io/';

/** The newest policy version whose rules are written here: newer versions (and `latest`) judge by these. */
export const newestPolicyRules: KubernetesVersion = { major: 1, minor: 35 };

/** Where each check's rule changed with the policy version, for the README and --explain. */
export const policyVersionNotes = [
  'allowPrivilegeEscalation from v1.8',
  'seccompProfile: the seccomp annotations below v1.19, the seccompProfile fields (and the restricted check) from v1.19',
  'capabilities (restricted) from v1.22',
  'runAsUser from v1.23',
  'Windows pods exempt from allowPrivilegeEscalation, seccompProfile and capabilities (restricted) from v1.25',
  'more safe sysctls at v1.27, v1.29 and v1.32',
  'SELinux type container_engine_t from v1.31',
  'probe and lifecycle hosts from v1.34',
  'user-namespaced pods (hostUsers: false) exempt from procMount (baseline), runAsNonRoot and runAsUser from v1.35, when restricted keeps forbidding procMount (procMount_restricted)',
] as const;

/**
 * Every check of `policy` the pod fails, in upstream's order (baseline ids sorted, then
 * restricted ids sorted), each with upstream's reason and detail word for word. `pod` is the
 * raw pod object; nothing in it is trusted to be well-formed.
 */
export function checkPodSecurity(pod: unknown, policy: PodSecurityPolicy): PodSecurityViolation[] {
  if (policy.level === 'privileged') return [];
  const rules = policy.rules ?? policy.version;
  const at = (minor: number) => rules === 'latest' || atLeast(rules, 1, minor);
  const restricted = policy.level === 'restricted';
  const metadata = object(object(pod).metadata);
  const annotations = object(metadata.annotations);
  const spec = object(object(pod).spec);
  const podContext = object(spec.securityContext);
  // visitContainers: init containers, containers, ephemeral containers.
  const containers = [...list(spec.initContainers), ...list(spec.containers), ...list(spec.ephemeralContainers)];
  const context = (c: JsonObject) => object(c.securityContext);
  // From v1.25 a Windows pod (spec.os.name) is exempt from three restricted checks.
  const windowsExempt = object(spec.os).name === 'windows' && at(25);
  // From v1.35 a pod in a user namespace is exempt from procMount (baseline), runAsNonRoot and runAsUser.
  const userNamespaceExempt = spec.hostUsers === false && at(35);
  const out: PodSecurityViolation[] = [];
  const fail = (check: string, reason: string, detail: string) => out.push({ check, reason, detail });

  // --- baseline (ids sorted; at restricted, those a restricted check overrides are skipped) ---
  {
    const allowed = (type: unknown) => type === 'RuntimeDefault' || type === 'Localhost';
    const bad = (ctx: JsonObject) => present(ctx.appArmorProfile) && !allowed(object(ctx.appArmorProfile).type);
    const values: string[] = [];
    const badPod = bad(podContext);
    if (badPod) values.push(str(object(podContext.appArmorProfile).type));
    const badContainers = containers.filter((c) => bad(context(c)));
    for (const c of badContainers) values.push(str(object(context(c).appArmorProfile).type));
    const who = setters(badPod, badContainers);
    const forbiddenAnnotations = Object.entries(annotations)
      .filter(([key, value]) => {
        const profile = str(value);
        return key.startsWith(appArmorAnnotationPrefix) && !(profile === '' || profile === 'runtime/default' || profile.startsWith('localhost/'));
      })
      .map(([key, value]) => `${key}=${goQuote(str(value))}`)
      .sort(goOrder);
    const badValues = [...sortedSet(values), ...forbiddenAnnotations];
    if (forbiddenAnnotations.length > 0) who.push(pluralize('annotation', 'annotations', forbiddenAnnotations.length));
    if (who.length > 0)
      fail(
        'appArmorProfile',
        pluralize('forbidden AppArmor profile', 'forbidden AppArmor profiles', badValues.length),
        `${who.join(' and ')} must not set AppArmor profile type to ${joinQuote(badValues)}`,
      );
  }
  // The restricted capabilities check overrides this one from v1.22 (Windows pods included: exempt from both).
  if (!(restricted && at(22))) {
    const nonDefault: string[] = [];
    const badContainers = containers.filter((c) => {
      const added = strings(object(context(c).capabilities).add).filter((cap) => !baselineCapabilities.has(cap));
      nonDefault.push(...added);
      return added.length > 0;
    });
    if (badContainers.length > 0)
      fail(
        'capabilities_baseline',
        'non-default capabilities',
        `${containerList(badContainers)} must not include ${joinQuote(sortedSet(nonDefault))} in securityContext.capabilities.add`,
      );
  }
  {
    const hostNamespaces = (['hostNetwork', 'hostPID', 'hostIPC'] as const).filter((field) => spec[field] === true);
    if (hostNamespaces.length > 0) fail('hostNamespaces', 'host namespaces', hostNamespaces.map((f) => `${f}=true`).join(', '));
  }
  // restrictedVolumes overrides hostPathVolumes.
  if (!restricted) {
    const hostPaths = list(spec.volumes).filter((v) => present(v.hostPath));
    if (hostPaths.length > 0)
      fail('hostPathVolumes', 'hostPath volumes', `${pluralize('volume', 'volumes', hostPaths.length)} ${joinQuote(hostPaths.map(name))}`);
  }
  {
    const ports: string[] = [];
    const badContainers = containers.filter((c) => {
      const hostPorts = list(c.ports)
        .map((p) => p.hostPort)
        .filter((p) => present(p) && p !== 0);
      ports.push(...hostPorts.map(str));
      return hostPorts.length > 0;
    });
    if (badContainers.length > 0) {
      const distinct = sortedSet(ports);
      fail(
        'hostPorts',
        'hostPort',
        `${containerList(badContainers)} ${pluralize('uses', 'use', badContainers.length)} ${pluralize('hostPort', 'hostPorts', distinct.length)} ${distinct.join(', ')}`,
      );
    }
  }
  if (at(34)) {
    const names: string[] = [];
    const hosts: string[] = [];
    // A handler's httpGet and tcpSocket hosts that are set (not "").
    const hostsOf = (handler: unknown): string[] =>
      isJsonObject(handler) ? [object(handler.httpGet).host, object(handler.tcpSocket).host].map(str).filter((host) => host !== '') : [];
    for (const c of containers) {
      const lifecycle = object(c.lifecycle);
      const found = [c.livenessProbe, c.readinessProbe, c.startupProbe, lifecycle.postStart, lifecycle.preStop].flatMap(hostsOf);
      if (found.length > 0) {
        names.push(name(c));
        hosts.push(...found);
      }
    }
    if (names.length > 0) {
      const badContainers = sortedSet(names);
      const badHosts = sortedSet(hosts);
      fail(
        'hostProbesAndHostLifecycle',
        'probe or lifecycle host',
        `${pluralize('container', 'containers', badContainers.length)} ${joinQuote(badContainers)} ${pluralize('uses', 'use', badContainers.length)} ${pluralize('probe or lifecycle host', 'probe or lifecycle hosts', badHosts.length)} ${joinQuote(badHosts)}`,
      );
    }
  }
  {
    const privileged = containers.filter((c) => context(c).privileged === true);
    if (privileged.length > 0) fail('privileged', 'privileged', `${containerList(privileged)} must not set securityContext.privileged=true`);
  }
  // procMount_1_0: any procMount but Default (upstream's procMount and procMount_restricted checks).
  const procMount = () => {
    const types: string[] = [];
    const badContainers = containers.filter((c) => {
      const type = context(c).procMount;
      if (!present(type) || type === 'Default') return false;
      types.push(str(type));
      return true;
    });
    return badContainers.length === 0 ? undefined : `${containerList(badContainers)} must not set securityContext.procMount to ${joinQuote(sortedSet(types))}`;
  };
  // From v1.35 this one exempts user-namespaced pods, and at restricted procMount_restricted replaces it.
  if (!(restricted && at(35)) && !userNamespaceExempt) {
    const detail = procMount();
    if (detail !== undefined) fail('procMount', 'procMount', detail);
  }
  {
    const allowedTypes = new Set(['', 'container_t', 'container_init_t', 'container_kvm_t', ...(at(31) ? ['container_engine_t'] : [])]);
    const badTypes: string[] = [];
    let setUser = false;
    let setRole = false;
    const bad = (ctx: JsonObject) => {
      if (!present(ctx.seLinuxOptions)) return false;
      const options = object(ctx.seLinuxOptions);
      let valid = true;
      if (!allowedTypes.has(str(options.type))) {
        valid = false;
        badTypes.push(str(options.type));
      }
      if (str(options.user) !== '') {
        valid = false;
        setUser = true;
      }
      if (str(options.role) !== '') {
        valid = false;
        setRole = true;
      }
      return !valid;
    };
    const badPod = bad(podContext);
    const badContainers = containers.filter((c) => bad(context(c)));
    if (badPod || badContainers.length > 0) {
      const types = sortedSet(badTypes);
      const data = [
        ...(types.length > 0 ? [`${pluralize('type', 'types', types.length)} ${joinQuote(types)}`] : []),
        ...(setUser ? ['user may not be set'] : []),
        ...(setRole ? ['role may not be set'] : []),
      ];
      fail(
        'seLinuxOptions',
        'seLinuxOptions',
        `${setters(badPod, badContainers).join(' and ')} set forbidden securityContext.seLinuxOptions: ${data.join('; ')}`,
      );
    }
  }
  const validSeccomp = (type: unknown) => type === 'RuntimeDefault' || type === 'Localhost';
  const seccompType = (ctx: JsonObject) => str(object(ctx.seccompProfile).type);
  // The restricted seccompProfile check overrides this one from v1.19 (Windows pods included).
  if (!(restricted && at(19))) {
    if (at(19)) {
      const bad = (ctx: JsonObject) => present(ctx.seccompProfile) && !validSeccomp(object(ctx.seccompProfile).type);
      const badPod = bad(podContext);
      const badContainers = containers.filter((c) => bad(context(c)));
      if (badPod || badContainers.length > 0) {
        const values = sortedSet([...(badPod ? [seccompType(podContext)] : []), ...badContainers.map((c) => seccompType(context(c)))]);
        fail(
          'seccompProfile_baseline',
          'seccompProfile',
          `${setters(badPod, badContainers).join(' and ')} must not set securityContext.seccompProfile.type to ${joinQuote(values)}`,
        );
      }
    } else {
      // Before v1.19: the seccomp annotations, the pod's and each container's.
      const valid = (value: string) => value === 'runtime/default' || value === 'docker/default' || value.startsWith('localhost/');
      const forbidden: string[] = [];
      for (const key of [seccompPodAnnotation, ...containers.map((c) => seccompContainerAnnotationPrefix + name(c))]) {
        if (Object.hasOwn(annotations, key) && !valid(str(annotations[key]))) forbidden.push(`${key}=${goQuote(str(annotations[key]))}`);
      }
      const distinct = sortedSet(forbidden);
      if (distinct.length > 0)
        fail('seccompProfile_baseline', 'seccompProfile', `forbidden ${pluralize('annotation', 'annotations', distinct.length)} ${distinct.join(', ')}`);
    }
  }
  {
    const safe = allowedSysctls(at);
    const sysctls = list(podContext.sysctls)
      .map((s) => str(s.name))
      .filter((n) => !safe.has(n));
    if (sysctls.length > 0) fail('sysctls', 'forbidden sysctls', sysctls.join(', '));
  }
  {
    const hostProcess = (ctx: JsonObject) => object(ctx.windowsOptions).hostProcess === true;
    const badPod = hostProcess(podContext);
    const badContainers = containers.filter((c) => hostProcess(context(c)));
    if (badPod || badContainers.length > 0)
      fail('windowsHostProcess', 'hostProcess', `${setters(badPod, badContainers).join(' and ')} must not set securityContext.windowsOptions.hostProcess=true`);
  }

  if (!restricted) return out;
  // --- restricted (ids sorted) ---
  if (at(8) && !windowsExempt) {
    const escalating = containers.filter((c) => context(c).allowPrivilegeEscalation !== false);
    if (escalating.length > 0)
      fail(
        'allowPrivilegeEscalation',
        'allowPrivilegeEscalation != false',
        `${containerList(escalating)} must set securityContext.allowPrivilegeEscalation=false`,
      );
  }
  if (at(22) && !windowsExempt) {
    const notDropping: JsonObject[] = [];
    const adding: JsonObject[] = [];
    const forbidden: string[] = [];
    for (const c of containers) {
      const capabilities = context(c).capabilities;
      if (!present(capabilities)) {
        notDropping.push(c);
        continue;
      }
      if (!strings(object(capabilities).drop).includes('ALL')) notDropping.push(c);
      const added = strings(object(capabilities).add).filter((cap) => cap !== 'NET_BIND_SERVICE');
      if (added.length > 0) {
        adding.push(c);
        forbidden.push(...added);
      }
    }
    const problems = [
      ...(notDropping.length > 0 ? [`${containerList(notDropping)} must set securityContext.capabilities.drop=["ALL"]`] : []),
      ...(adding.length > 0 ? [`${containerList(adding)} must not include ${joinQuote(sortedSet(forbidden))} in securityContext.capabilities.add`] : []),
    ];
    if (problems.length > 0) fail('capabilities_restricted', 'unrestricted capabilities', problems.join('; '));
  }
  // From v1.35 the unconditional procMount check is restricted's own (user-namespaced pods included).
  if (at(35)) {
    const detail = procMount();
    if (detail !== undefined) fail('procMount_restricted', 'procMount', detail);
  }
  {
    // A source counts when it is set, as upstream's `volume.EmptyDir != nil`: `emptyDir: null` is no emptyDir.
    const badVolumes = list(spec.volumes).filter((v) => !allowedVolumeTypes.some((type) => present(v[type])));
    if (badVolumes.length > 0) {
      const types = sortedSet(badVolumes.map((v) => forbiddenVolumeTypes.find((type) => present(v[type])) ?? 'unknown'));
      fail(
        'restrictedVolumes',
        'restricted volume types',
        `${pluralize('volume', 'volumes', badVolumes.length)} ${joinQuote(badVolumes.map(name))} ${pluralize('uses', 'use', badVolumes.length)} ${pluralize('restricted volume type', 'restricted volume types', types.length)} ${joinQuote(types)}`,
      );
    }
  }
  if (!userNamespaceExempt) {
    const podNonRoot = podContext.runAsNonRoot;
    const explicitRoot = containers.filter((c) => context(c).runAsNonRoot === false);
    const unset = containers.filter((c) => !present(context(c).runAsNonRoot));
    if (podNonRoot === false || explicitRoot.length > 0) {
      fail(
        'runAsNonRoot',
        'runAsNonRoot != true',
        `${setters(podNonRoot === false, explicitRoot).join(' and ')} must not set securityContext.runAsNonRoot=false`,
      );
    } else if (podNonRoot !== true && unset.length > 0) {
      fail('runAsNonRoot', 'runAsNonRoot != true', `pod or ${containerList(unset)} must set securityContext.runAsNonRoot=true`);
    }
  }
  if (at(23) && !userNamespaceExempt) {
    const root = containers.filter((c) => context(c).runAsUser === 0);
    const rootPod = podContext.runAsUser === 0;
    if (rootPod || root.length > 0) fail('runAsUser', 'runAsUser=0', `${setters(rootPod, root).join(' and ')} must not set runAsUser=0`);
  }
  if (at(19) && !windowsExempt) {
    const podSet = present(podContext.seccompProfile);
    const badPod = podSet && !validSeccomp(object(podContext.seccompProfile).type);
    const podValid = podSet && !badPod;
    const badContainers = containers.filter((c) => present(context(c).seccompProfile) && !validSeccomp(object(context(c).seccompProfile).type));
    const unset = containers.filter((c) => !present(context(c).seccompProfile));
    if (badPod || badContainers.length > 0) {
      const values = sortedSet([...(badPod ? [seccompType(podContext)] : []), ...badContainers.map((c) => seccompType(context(c)))]);
      fail(
        'seccompProfile_restricted',
        'seccompProfile',
        `${setters(badPod, badContainers).join(' and ')} must not set securityContext.seccompProfile.type to ${joinQuote(values)}`,
      );
    } else if (!podValid && unset.length > 0) {
      fail(
        'seccompProfile_restricted',
        'seccompProfile',
        `pod or ${containerList(unset)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"`,
      );
    }
  }
  return out;
}

/**
 * `reason (detail), reason (detail)`: as the API server lists violations (upstream's
 * `ForbiddenDetail`: a violation without detail is its reason alone).
 */
export function describeViolations(violations: readonly PodSecurityViolation[]): string {
  return violations
    .map((v) => (v.detail === '' ? v.reason || 'unknown forbidden reason' : `${v.reason || 'unknown forbidden reason'} (${v.detail})`))
    .join(', ');
}

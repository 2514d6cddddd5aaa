/**
 * Pod Security cases the suite knows, shared by the unit tests of the injector's own checks
 * (src/k8s/pod-security.test.ts) and the real-cluster test that compares its verdicts with
 * kube-apiserver's PodSecurity admission: for each check a pod that fails it and one that
 * passes (beside a pod compliant with restricted), more failing pods that show the detail's
 * plural forms (several containers, values, hosts; the pod and its containers both setting a
 * value; annotations), and pods whose verdict depends on the policy version.
 *
 * Every pod here is one kube-apiserver 1.34 to 1.37 accepts as valid (API validation runs before
 * Pod Security): a pod it refused as invalid would compare nothing.
 */
export type Json = Record<string, any>;

/** A pod that passes restricted:latest; `change` edits a copy. */
export function pod(change: (p: Json) => void = () => {}): Json {
  const p: Json = {
    metadata: { name: 'p', annotations: {} },
    spec: {
      securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [{ name: 'app', image: 'app', securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
      volumes: [{ name: 'data', emptyDir: {} }],
    },
  };
  change(p);
  return p;
}
export const app = (p: Json) => p.spec.containers[0];

/** A container compliant with restricted, named `name`. */
export const compliantContainer = (name: string): Json => ({
  name,
  image: name,
  securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
});
/** Adds a compliant container `b` (or `name`) to the pod; returns it. */
export function addContainer(p: Json, name = 'b'): Json {
  const c = compliantContainer(name);
  p.spec.containers.push(c);
  return c;
}
/** Adds a compliant init container (a native sidecar with `sidecar`); returns it. */
export function addInitContainer(p: Json, name: string, sidecar = false): Json {
  const c = { ...compliantContainer(name), ...(sidecar ? { restartPolicy: 'Always' } : {}) };
  (p.spec.initContainers ??= []).push(c);
  return c;
}

/**
 * The pod as a valid Windows pod: `spec.os.name: windows`, without the fields the API server
 * forbids there (seccompProfile, capabilities, allowPrivilegeEscalation, …).
 */
export function windows(p: Json): void {
  p.spec.os = { name: 'windows' };
  delete p.spec.securityContext.seccompProfile;
  for (const c of p.spec.containers) c.securityContext = {};
}

/** Unmasked /proc, which the API server accepts only in a user namespace (`hostUsers: false`). */
function unmasked(p: Json, ...containers: Json[]): void {
  p.spec.hostUsers = false;
  for (const c of containers.length > 0 ? containers : [app(p)]) c.securityContext.procMount = 'Unmasked';
}

type Change = (p: Json) => void;
/**
 * [check id, the level that has it, a failing change, a passing change (beside the compliant
 * pod), the other checks the failing pod necessarily fails too (at that level), what the case
 * shows (several cases of one check)]. Judged at `latest`.
 */
export type Rule = [check: string, level: 'baseline' | 'restricted', failing: Change, passing: Change, alsoFails?: string[], what?: string];

export const rules: Rule[] = [
  ['hostNamespaces', 'baseline', (p) => (p.spec.hostNetwork = true), (p) => (p.spec.hostPID = false)],
  [
    'hostNamespaces',
    'baseline',
    (p) => ((p.spec.hostNetwork = true), (p.spec.hostPID = true), (p.spec.hostIPC = true)),
    (p) => ((p.spec.hostNetwork = false), (p.spec.hostIPC = false)),
    [],
    'all three',
  ],
  // Privileged without allowPrivilegeEscalation: false (the API server refuses that pair as invalid).
  [
    'privileged',
    'baseline',
    (p) => ((app(p).securityContext.privileged = true), delete app(p).securityContext.allowPrivilegeEscalation),
    (p) => (app(p).securityContext.privileged = false),
  ],
  [
    'privileged',
    'baseline',
    (p) => {
      for (const c of [app(p), addContainer(p)]) {
        c.securityContext.privileged = true;
        delete c.securityContext.allowPrivilegeEscalation;
      }
      addContainer(p, 'c').securityContext.privileged = false;
    },
    (p) => (addContainer(p).securityContext.privileged = false),
    [],
    'two containers',
  ],
  [
    'capabilities_baseline',
    'baseline',
    (p) => (app(p).securityContext.capabilities.add = ['SYS_ADMIN']),
    (p) => (app(p).securityContext.capabilities.add = ['CHOWN', 'NET_BIND_SERVICE']),
  ],
  [
    'capabilities_baseline',
    'baseline',
    (p) => {
      app(p).securityContext.capabilities.add = ['SYS_TIME', 'NET_RAW', 'CHOWN'];
      addContainer(p).securityContext.capabilities.add = ['NET_RAW', 'SYS_ADMIN'];
      addContainer(p, 'c').securityContext.capabilities.add = ['KILL'];
    },
    (p) => (addContainer(p).securityContext.capabilities.add = ['KILL', 'SETUID']),
    [],
    'two containers, three capabilities',
  ],
  [
    'hostPathVolumes',
    'baseline',
    (p) => p.spec.volumes.push({ name: 'h', hostPath: { path: '/' } }),
    (p) => p.spec.volumes.push({ name: 'c', configMap: { name: 'c' } }),
  ],
  [
    'hostPathVolumes',
    'baseline',
    (p) => p.spec.volumes.push({ name: 'logs', hostPath: { path: '/var/log' } }, { name: 'etc', hostPath: { path: '/etc' } }),
    (p) => p.spec.volumes.push({ name: 'tmp', emptyDir: {} }),
    [],
    'two volumes',
  ],
  ['hostPorts', 'baseline', (p) => (app(p).ports = [{ containerPort: 80, hostPort: 80 }]), (p) => (app(p).ports = [{ containerPort: 80, hostPort: 0 }])],
  [
    'hostPorts',
    'baseline',
    (p) => {
      app(p).ports = [
        { containerPort: 8080, hostPort: 8080 },
        { containerPort: 9000, hostPort: 9000 },
      ];
      addContainer(p).ports = [
        { containerPort: 10000, hostPort: 10000 },
        { containerPort: 8081, hostPort: 8080, protocol: 'UDP' },
      ];
    },
    (p) => (addContainer(p).ports = [{ containerPort: 10000 }]),
    [],
    'two containers, three ports sorted as text',
  ],
  [
    'hostProbesAndHostLifecycle',
    'baseline',
    (p) => (app(p).livenessProbe = { httpGet: { host: '10.0.0.1', port: 80 } }),
    (p) => (app(p).livenessProbe = { httpGet: { port: 80 } }),
  ],
  [
    'hostProbesAndHostLifecycle',
    'baseline',
    (p) => {
      addInitContainer(p, 'sidecar', true).startupProbe = { httpGet: { host: 'localhost', port: 8080 } };
      app(p).livenessProbe = { httpGet: { host: '10.0.0.1', port: 80 } };
      app(p).readinessProbe = { tcpSocket: { host: '10.0.0.2', port: 80 } };
      addContainer(p).lifecycle = { preStop: { httpGet: { host: 'example.com', port: 80 } } };
      addContainer(p, 'c').startupProbe = { httpGet: { host: '10.0.0.1', port: 80 } };
    },
    (p) => {
      addInitContainer(p, 'sidecar', true).startupProbe = { httpGet: { port: 8080 } };
      addContainer(p).lifecycle = { preStop: { httpGet: { port: 80 } } };
    },
    [],
    'a sidecar and three containers, four hosts',
  ],
  [
    'appArmorProfile',
    'baseline',
    (p) => (app(p).securityContext.appArmorProfile = { type: 'Unconfined' }),
    (p) => (p.spec.securityContext.appArmorProfile = { type: 'RuntimeDefault' }),
  ],
  [
    'appArmorProfile',
    'baseline',
    (p) => ((p.spec.securityContext.appArmorProfile = { type: 'Unconfined' }), (app(p).securityContext.appArmorProfile = { type: 'Unconfined' })),
    (p) => ((p.spec.securityContext.appArmorProfile = { type: 'RuntimeDefault' }), (app(p).securityContext.appArmorProfile = { type: 'RuntimeDefault' })),
    [],
    'the pod and a container',
  ],
  // The API server copies an annotation to its container's field (when the pod's differs) before Pod Security runs.
  [
    'appArmorProfile',
    'baseline',
    (p) => {
      addContainer(p);
      p.metadata.annotations['container.apparmor.security.beta.kubernetes.io/app'] = 'unconfined';
      p.metadata.annotations['container.apparmor.security.beta.kubernetes.io/b'] = 'unconfined';
    },
    (p) => {
      addContainer(p);
      p.metadata.annotations['container.apparmor.security.beta.kubernetes.io/app'] = 'runtime/default';
      p.metadata.annotations['container.apparmor.security.beta.kubernetes.io/b'] = 'localhost/profile';
    },
    [],
    'two annotations',
  ],
  [
    'appArmorProfile',
    'baseline',
    (p) => {
      p.spec.securityContext.appArmorProfile = { type: 'Unconfined' };
      p.metadata.annotations['container.apparmor.security.beta.kubernetes.io/app'] = 'unconfined';
    },
    (p) => (p.metadata.annotations['container.apparmor.security.beta.kubernetes.io/app'] = ''),
    [],
    'the pod and an annotation',
  ],
  [
    'seLinuxOptions',
    'baseline',
    (p) => (app(p).securityContext.seLinuxOptions = { type: 'spc_t' }),
    (p) => (app(p).securityContext.seLinuxOptions = { type: 'container_t', level: 's0:c1' }),
  ],
  [
    'seLinuxOptions',
    'baseline',
    (p) => {
      p.spec.securityContext.seLinuxOptions = { type: 'spc_t', user: 'system_u' };
      app(p).securityContext.seLinuxOptions = { role: 'system_r' };
      addContainer(p).securityContext.seLinuxOptions = { type: 'unconfined_t', level: 's0' };
      addContainer(p, 'c').securityContext.seLinuxOptions = { type: 'container_init_t' };
    },
    (p) => ((p.spec.securityContext.seLinuxOptions = { level: 's0:c1,c2' }), (addContainer(p).securityContext.seLinuxOptions = { type: 'container_kvm_t' })),
    [],
    'the pod and two containers: types, user and role',
  ],
  // procMount (baseline) lets a user-namespaced pod unmask /proc from v1.35, the only pods the
  // API server lets unmask it: restricted forbids it (procMount_restricted). See versionCases.
  ['procMount_restricted', 'restricted', (p) => unmasked(p), (p) => ((p.spec.hostUsers = false), (app(p).securityContext.procMount = 'Default'))],
  [
    'procMount_restricted',
    'restricted',
    (p) => unmasked(p, app(p), addContainer(p)),
    (p) => ((p.spec.hostUsers = false), (addContainer(p).securityContext.procMount = 'Default')),
    [],
    'two containers',
  ],
  [
    'seccompProfile_baseline',
    'baseline',
    (p) => (p.spec.securityContext.seccompProfile = { type: 'Unconfined' }),
    (p) => (p.spec.securityContext.seccompProfile = { type: 'Localhost', localhostProfile: 'x' }),
  ],
  [
    'seccompProfile_baseline',
    'baseline',
    (p) => {
      p.spec.securityContext.seccompProfile = { type: 'Unconfined' };
      app(p).securityContext.seccompProfile = { type: 'Unconfined' };
      addContainer(p).securityContext.seccompProfile = { type: 'RuntimeDefault' };
    },
    (p) => (addContainer(p).securityContext.seccompProfile = { type: 'RuntimeDefault' }),
    [],
    'the pod and a container',
  ],
  [
    'sysctls',
    'baseline',
    (p) => (p.spec.securityContext.sysctls = [{ name: 'kernel.msgmax', value: '1' }]),
    (p) => (p.spec.securityContext.sysctls = [{ name: 'net.ipv4.tcp_syncookies', value: '1' }]),
  ],
  [
    'sysctls',
    'baseline',
    (p) =>
      (p.spec.securityContext.sysctls = [
        { name: 'net.core.somaxconn', value: '1024' },
        { name: 'kernel.shm_rmid_forced', value: '1' },
        { name: 'kernel.msgmax', value: '65536' },
      ]),
    (p) =>
      (p.spec.securityContext.sysctls = [
        { name: 'net.ipv4.tcp_rmem', value: '4096 87380 16777216' },
        { name: 'net.ipv4.ip_local_port_range', value: '1024 65000' },
      ]),
    [],
    'two forbidden sysctls',
  ],
  // A hostProcess pod is a Windows pod on the host's network: it fails hostNamespaces too.
  [
    'windowsHostProcess',
    'baseline',
    (p) => (windows(p), (p.spec.hostNetwork = true), (app(p).securityContext.windowsOptions = { hostProcess: true })),
    (p) => (app(p).securityContext.windowsOptions = { hostProcess: false }),
    ['hostNamespaces'],
  ],
  [
    'windowsHostProcess',
    'baseline',
    (p) => {
      addContainer(p);
      windows(p);
      p.spec.hostNetwork = true;
      p.spec.securityContext.windowsOptions = { hostProcess: true };
      app(p).securityContext.windowsOptions = { hostProcess: true };
    },
    (p) => (addContainer(p), windows(p), (p.spec.securityContext.windowsOptions = { hostProcess: false })),
    ['hostNamespaces'],
    'the pod and a container',
  ],
  [
    'restrictedVolumes',
    'restricted',
    (p) => p.spec.volumes.push({ name: 'n', nfs: { server: 'x', path: '/' } }),
    (p) => p.spec.volumes.push({ name: 'pvc', persistentVolumeClaim: { claimName: 'c' } }),
  ],
  [
    'restrictedVolumes',
    'restricted',
    (p) =>
      p.spec.volumes.unshift(
        { name: 'shared', nfs: { server: 'nfs.example', path: '/shared' } },
        { name: 'flex', flexVolume: { driver: 'example.com/flex' } },
        { name: 'home', nfs: { server: 'nfs.example', path: '/home' } },
      ),
    (p) => p.spec.volumes.push({ name: 'config', configMap: { name: 'config' } }, { name: 'credentials', secret: { secretName: 'credentials' } }),
    [],
    'three volumes, two types',
  ],
  ['allowPrivilegeEscalation', 'restricted', (p) => delete app(p).securityContext.allowPrivilegeEscalation, () => {}],
  [
    'allowPrivilegeEscalation',
    'restricted',
    (p) => {
      delete addInitContainer(p, 'init').securityContext.allowPrivilegeEscalation;
      app(p).securityContext.allowPrivilegeEscalation = true;
      addContainer(p);
    },
    (p) => (addInitContainer(p, 'init'), addContainer(p)),
    [],
    'an init container and a container',
  ],
  [
    'runAsNonRoot',
    'restricted',
    (p) => delete p.spec.securityContext.runAsNonRoot,
    (p) => (delete p.spec.securityContext.runAsNonRoot, (app(p).securityContext.runAsNonRoot = true)),
  ],
  [
    'runAsNonRoot',
    'restricted',
    (p) => (delete p.spec.securityContext.runAsNonRoot, addContainer(p), (addContainer(p, 'c').securityContext.runAsNonRoot = true)),
    (p) => (addContainer(p), (addContainer(p, 'c').securityContext.runAsNonRoot = true)),
    [],
    'two containers that do not set it',
  ],
  [
    'runAsNonRoot',
    'restricted',
    (p) => (
      (p.spec.securityContext.runAsNonRoot = false),
      (app(p).securityContext.runAsNonRoot = false),
      (addContainer(p).securityContext.runAsNonRoot = true)
    ),
    (p) => (addContainer(p).securityContext.runAsNonRoot = true),
    [],
    'the pod and a container set false',
  ],
  ['runAsUser', 'restricted', (p) => (app(p).securityContext.runAsUser = 0), (p) => (app(p).securityContext.runAsUser = 1000)],
  [
    'runAsUser',
    'restricted',
    (p) => ((p.spec.securityContext.runAsUser = 0), (app(p).securityContext.runAsUser = 0), (addContainer(p).securityContext.runAsUser = 0)),
    (p) => ((p.spec.securityContext.runAsUser = 1000), (addContainer(p).securityContext.runAsUser = 2000)),
    [],
    'the pod and two containers',
  ],
  [
    'seccompProfile_restricted',
    'restricted',
    (p) => delete p.spec.securityContext.seccompProfile,
    (p) => (delete p.spec.securityContext.seccompProfile, (app(p).securityContext.seccompProfile = { type: 'RuntimeDefault' })),
  ],
  [
    'seccompProfile_restricted',
    'restricted',
    (p) => {
      delete p.spec.securityContext.seccompProfile;
      addInitContainer(p, 'init');
      addContainer(p).securityContext.seccompProfile = { type: 'Localhost', localhostProfile: 'profile.json' };
    },
    (p) => {
      delete p.spec.securityContext.seccompProfile;
      for (const c of [app(p), addInitContainer(p, 'init')]) c.securityContext.seccompProfile = { type: 'RuntimeDefault' };
    },
    [],
    'an init container and a container that do not set it',
  ],
  [
    'capabilities_restricted',
    'restricted',
    (p) => (app(p).securityContext.capabilities = { drop: ['NET_RAW'] }),
    (p) => (app(p).securityContext.capabilities.add = ['NET_BIND_SERVICE']),
  ],
  [
    'capabilities_restricted',
    'restricted',
    (p) => {
      delete addInitContainer(p, 'init').securityContext.capabilities;
      app(p).securityContext.capabilities = { drop: ['NET_RAW'], add: ['KILL'] };
      addContainer(p).securityContext.capabilities.add = ['NET_BIND_SERVICE', 'CHOWN'];
    },
    (p) => (addInitContainer(p, 'init'), (addContainer(p).securityContext.capabilities.add = ['NET_BIND_SERVICE'])),
    [],
    'three containers: drop and add',
  ],
];

/** Pods whose verdict changed between policy versions: [pod, level, version minor, the checks it fails]. */
export const versionCases: [string, Json, 'baseline' | 'restricted', number, string[]][] = [
  ['root user', pod((p) => (app(p).securityContext.runAsUser = 0)), 'restricted', 22, []],
  ['root user', pod((p) => (app(p).securityContext.runAsUser = 0)), 'restricted', 23, ['runAsUser']],
  ['no capability drop', pod((p) => (app(p).securityContext.capabilities = {})), 'restricted', 21, []],
  ['no capability drop', pod((p) => (app(p).securityContext.capabilities = {})), 'restricted', 22, ['capabilities_restricted']],
  ['tcp_keepalive sysctl', pod((p) => (p.spec.securityContext.sysctls = [{ name: 'net.ipv4.tcp_keepalive_time', value: '60' }])), 'baseline', 28, ['sysctls']],
  ['tcp_keepalive sysctl', pod((p) => (p.spec.securityContext.sysctls = [{ name: 'net.ipv4.tcp_keepalive_time', value: '60' }])), 'baseline', 29, []],
  [
    'tcp_notsent_lowat sysctl',
    pod((p) => (p.spec.securityContext.sysctls = [{ name: 'net.ipv4.tcp_notsent_lowat', value: '16384' }])),
    'baseline',
    36,
    ['sysctls'],
  ],
  ['tcp_notsent_lowat sysctl', pod((p) => (p.spec.securityContext.sysctls = [{ name: 'net.ipv4.tcp_notsent_lowat', value: '16384' }])), 'baseline', 37, []],
  ['container_engine_t', pod((p) => (app(p).securityContext.seLinuxOptions = { type: 'container_engine_t' })), 'baseline', 30, ['seLinuxOptions']],
  ['container_engine_t', pod((p) => (app(p).securityContext.seLinuxOptions = { type: 'container_engine_t' })), 'baseline', 31, []],
  // Windows pods are exempt from three restricted rules from v1.25.
  ['a Windows pod', pod(windows), 'restricted', 24, ['allowPrivilegeEscalation', 'capabilities_restricted', 'seccompProfile_restricted']],
  ['a Windows pod', pod(windows), 'restricted', 25, []],
  // Below v1.19 the seccomp annotations are judged (the fields from v1.19; the API server ignores the annotations since 1.27).
  ['an unconfined seccomp annotation', pod(seccompAnnotation), 'baseline', 18, ['seccompProfile_baseline']],
  ['an unconfined seccomp annotation', pod(seccompAnnotation), 'restricted', 18, ['seccompProfile_baseline']],
  ['an unconfined seccomp annotation', pod(seccompAnnotation), 'baseline', 19, []],
  ['an unconfined seccomp annotation', pod(seccompAnnotation), 'restricted', 19, []],
  ['an unconfined seccomp field', pod((p) => (p.spec.securityContext.seccompProfile = { type: 'Unconfined' })), 'baseline', 18, []],
  ['an unconfined seccomp field', pod((p) => (p.spec.securityContext.seccompProfile = { type: 'Unconfined' })), 'baseline', 19, ['seccompProfile_baseline']],
  // From v1.35 a user-namespaced pod (hostUsers: false) may unmask /proc at baseline; restricted still forbids it, as its own check.
  ['unmasked /proc in a user namespace', pod(unmaskedTwice), 'baseline', 34, ['procMount']],
  ['unmasked /proc in a user namespace', pod(unmaskedTwice), 'baseline', 35, []],
  ['unmasked /proc in a user namespace', pod(unmaskedTwice), 'restricted', 34, ['procMount']],
  ['unmasked /proc in a user namespace', pod(unmaskedTwice), 'restricted', 35, ['procMount_restricted']],
  // From v1.35 a user-namespaced pod need not run as non-root, and may run as UID 0.
  ['root in a user namespace', pod(rootInUserNamespace), 'restricted', 34, ['runAsNonRoot', 'runAsUser']],
  ['root in a user namespace', pod(rootInUserNamespace), 'restricted', 35, []],
  ['root with host users', pod((p) => (rootInUserNamespace(p), (p.spec.hostUsers = true))), 'restricted', 35, ['runAsNonRoot', 'runAsUser']],
];

function seccompAnnotation(p: Json): void {
  p.metadata.annotations['container.seccomp.security.alpha.kubernetes.io/app'] = 'unconfined';
}

function unmaskedTwice(p: Json): void {
  unmasked(p, app(p), addInitContainer(p, 'init'));
}

function rootInUserNamespace(p: Json): void {
  p.spec.hostUsers = false;
  delete p.spec.securityContext.runAsNonRoot;
  p.spec.securityContext.runAsUser = 0;
  app(p).securityContext.runAsUser = 0;
}

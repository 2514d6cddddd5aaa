/**
 * The Pod Security Standards, rule by rule (upstream's list: policy/check_*.go): for each
 * check a pod that passes and one that fails, at the level that has the check, with
 * upstream's words; upstream's own test pods (policy/check_*_test.go) and the texts it expects;
 * then the version differences and the namespace labels.
 */
import test from 'ava';
import { checkPodSecurity, describeViolations, podSecurityPolicies, type PodSecurityPolicy } from './pod-security.js';
import { addContainer, app, pod, rules, versionCases, type Json } from '../../test/helpers/pod-security-cases.js';

const restricted: PodSecurityPolicy = { level: 'restricted', version: 'latest', label: 'restricted:latest' };
const baseline: PodSecurityPolicy = { level: 'baseline', version: 'latest', label: 'baseline:latest' };
const at = (level: 'baseline' | 'restricted', minor: number): PodSecurityPolicy => ({ level, version: { major: 1, minor }, label: `${level}:v1.${minor}` });

const ids = (p: Json, policy: PodSecurityPolicy) => checkPodSecurity(p, policy).map((v) => v.check);

/** Upstream's restricted check ids: they come after the baseline ones, each level's sorted. */
const restrictedIds = new Set([
  'allowPrivilegeEscalation',
  'capabilities_restricted',
  'procMount_restricted',
  'restrictedVolumes',
  'runAsNonRoot',
  'runAsUser',
  'seccompProfile_restricted',
]);
const upstreamOrder = (checks: readonly string[]) =>
  [...checks].sort((a, b) => Number(restrictedIds.has(a)) - Number(restrictedIds.has(b)) || (a < b ? -1 : a > b ? 1 : 0));
const caseName = (id: string, what?: string) => (what ? `${id} (${what})` : id);

test('the compliant pod passes both levels', (t) => {
  t.deepEqual(checkPodSecurity(pod(), restricted), []);
  t.deepEqual(checkPodSecurity(pod(), baseline), []);
});

for (const [id, level, failing, passing, alsoFails = [], what] of rules) {
  test(`${caseName(id, what)}: a failing and a passing pod (${level})`, (t) => {
    const policy = level === 'baseline' ? baseline : restricted;
    t.deepEqual(ids(pod(failing), policy), upstreamOrder([id, ...alsoFails]));
    t.deepEqual(ids(pod(passing), policy), []);
    // A restricted rule does not exist at baseline.
    if (level === 'restricted') t.deepEqual(ids(pod(failing), baseline), upstreamOrder(alsoFails.filter((check) => !restrictedIds.has(check))));
  });
}

/**
 * What kube-apiserver (v1.36.5, where these were read) says of each failing pod of the shared table, as we send it
 * (upstream's policy package run on the same pods). The API server copies the two AppArmor
 * annotations to their containers' fields before Pod Security runs: see the next test.
 */
const expectedText: Record<string, string> = {
  hostNamespaces: 'host namespaces (hostNetwork=true)',
  'hostNamespaces (all three)': 'host namespaces (hostNetwork=true, hostPID=true, hostIPC=true)',
  privileged: 'privileged (container "app" must not set securityContext.privileged=true)',
  'privileged (two containers)': 'privileged (containers "app", "b" must not set securityContext.privileged=true)',
  capabilities_baseline: 'non-default capabilities (container "app" must not include "SYS_ADMIN" in securityContext.capabilities.add)',
  'capabilities_baseline (two containers, three capabilities)':
    'non-default capabilities (containers "app", "b" must not include "NET_RAW", "SYS_ADMIN", "SYS_TIME" in securityContext.capabilities.add)',
  hostPathVolumes: 'hostPath volumes (volume "h")',
  'hostPathVolumes (two volumes)': 'hostPath volumes (volumes "logs", "etc")',
  hostPorts: 'hostPort (container "app" uses hostPort 80)',
  'hostPorts (two containers, three ports sorted as text)': 'hostPort (containers "app", "b" use hostPorts 10000, 8080, 9000)',
  hostProbesAndHostLifecycle: 'probe or lifecycle host (container "app" uses probe or lifecycle host "10.0.0.1")',
  'hostProbesAndHostLifecycle (a sidecar and three containers, four hosts)':
    'probe or lifecycle host (containers "app", "b", "c", "sidecar" use probe or lifecycle hosts "10.0.0.1", "10.0.0.2", "example.com", "localhost")',
  appArmorProfile: 'forbidden AppArmor profile (container "app" must not set AppArmor profile type to "Unconfined")',
  'appArmorProfile (the pod and a container)': 'forbidden AppArmor profile (pod and container "app" must not set AppArmor profile type to "Unconfined")',
  'appArmorProfile (two annotations)':
    'forbidden AppArmor profiles (annotations must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/app="unconfined"", "container.apparmor.security.beta.kubernetes.io/b="unconfined"")',
  'appArmorProfile (the pod and an annotation)':
    'forbidden AppArmor profiles (pod and annotation must not set AppArmor profile type to "Unconfined", "container.apparmor.security.beta.kubernetes.io/app="unconfined"")',
  seLinuxOptions: 'seLinuxOptions (container "app" set forbidden securityContext.seLinuxOptions: type "spc_t")',
  'seLinuxOptions (the pod and two containers: types, user and role)':
    'seLinuxOptions (pod and containers "app", "b" set forbidden securityContext.seLinuxOptions: types "spc_t", "unconfined_t"; user may not be set; role may not be set)',
  procMount_restricted: 'procMount (container "app" must not set securityContext.procMount to "Unmasked")',
  'procMount_restricted (two containers)': 'procMount (containers "app", "b" must not set securityContext.procMount to "Unmasked")',
  seccompProfile_baseline: 'seccompProfile (pod must not set securityContext.seccompProfile.type to "Unconfined")',
  'seccompProfile_baseline (the pod and a container)':
    'seccompProfile (pod and container "app" must not set securityContext.seccompProfile.type to "Unconfined")',
  sysctls: 'forbidden sysctls (kernel.msgmax)',
  'sysctls (two forbidden sysctls)': 'forbidden sysctls (net.core.somaxconn, kernel.msgmax)',
  windowsHostProcess: 'host namespaces (hostNetwork=true), hostProcess (container "app" must not set securityContext.windowsOptions.hostProcess=true)',
  'windowsHostProcess (the pod and a container)':
    'host namespaces (hostNetwork=true), hostProcess (pod and container "app" must not set securityContext.windowsOptions.hostProcess=true)',
  restrictedVolumes: 'restricted volume types (volume "n" uses restricted volume type "nfs")',
  'restrictedVolumes (three volumes, two types)': 'restricted volume types (volumes "shared", "flex", "home" use restricted volume types "flexVolume", "nfs")',
  allowPrivilegeEscalation: 'allowPrivilegeEscalation != false (container "app" must set securityContext.allowPrivilegeEscalation=false)',
  'allowPrivilegeEscalation (an init container and a container)':
    'allowPrivilegeEscalation != false (containers "init", "app" must set securityContext.allowPrivilegeEscalation=false)',
  runAsNonRoot: 'runAsNonRoot != true (pod or container "app" must set securityContext.runAsNonRoot=true)',
  'runAsNonRoot (two containers that do not set it)': 'runAsNonRoot != true (pod or containers "app", "b" must set securityContext.runAsNonRoot=true)',
  'runAsNonRoot (the pod and a container set false)': 'runAsNonRoot != true (pod and container "app" must not set securityContext.runAsNonRoot=false)',
  runAsUser: 'runAsUser=0 (container "app" must not set runAsUser=0)',
  'runAsUser (the pod and two containers)': 'runAsUser=0 (pod and containers "app", "b" must not set runAsUser=0)',
  seccompProfile_restricted: 'seccompProfile (pod or container "app" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
  'seccompProfile_restricted (an init container and a container that do not set it)':
    'seccompProfile (pod or containers "init", "app" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")',
  capabilities_restricted: 'unrestricted capabilities (container "app" must set securityContext.capabilities.drop=["ALL"])',
  'capabilities_restricted (three containers: drop and add)':
    'unrestricted capabilities (containers "init", "app" must set securityContext.capabilities.drop=["ALL"]; containers "app", "b" must not include "CHOWN", "KILL" in securityContext.capabilities.add)',
};

test("every failing pod of the shared table, in upstream's words", (t) => {
  const names = rules.map(([id, , , , , what]) => caseName(id, what));
  t.deepEqual(names.toSorted(), Object.keys(expectedText).toSorted(), 'one expected text per case, and the cases have distinct names');
  for (const [id, level, failing, , , what] of rules)
    t.is(
      describeViolations(checkPodSecurity(pod(failing), level === 'baseline' ? baseline : restricted)),
      expectedText[caseName(id, what)] ?? '(no expected text)',
      caseName(id, what),
    );
});

test('AppArmor annotations the API server copied to their containers: the containers and the annotations are named', (t) => {
  const copied = pod((p) => {
    addContainer(p);
    for (const c of p.spec.containers) {
      p.metadata.annotations[`container.apparmor.security.beta.kubernetes.io/${c.name}`] = 'unconfined';
      c.securityContext.appArmorProfile = { type: 'Unconfined' };
    }
  });
  t.is(
    describeViolations(checkPodSecurity(copied, baseline)),
    'forbidden AppArmor profiles (containers "app", "b" and annotations must not set AppArmor profile type to "Unconfined", "container.apparmor.security.beta.kubernetes.io/app="unconfined"", "container.apparmor.security.beta.kubernetes.io/b="unconfined"")',
  );
});

/** Containers named as given, each with the securityContext given (none when absent). */
const named = (...specs: [string, Json?][]) => specs.map(([name, securityContext]) => (securityContext === undefined ? { name } : { name, securityContext }));

/** Upstream's test pods (policy/check_*_test.go, v0.37.2): [its name, policy, pod, check id, the reason and detail it expects]. */
const upstreamCases: [string, PodSecurityPolicy, Json, string, string, string][] = [
  [
    'allowPrivilegeEscalation: multiple containers',
    restricted,
    { spec: { containers: named(['a'], ['b', {}], ['c', { allowPrivilegeEscalation: true }]) } },
    'allowPrivilegeEscalation',
    'allowPrivilegeEscalation != false',
    'containers "a", "b", "c" must set securityContext.allowPrivilegeEscalation=false',
  ],
  [
    'appArmorProfile: unconfined pod',
    baseline,
    { spec: { securityContext: { appArmorProfile: { type: 'Unconfined' } } } },
    'appArmorProfile',
    'forbidden AppArmor profile',
    'pod must not set AppArmor profile type to "Unconfined"',
  ],
  [
    'appArmorProfile: unconfined container',
    baseline,
    { spec: { securityContext: { appArmorProfile: { type: 'RuntimeDefault' } }, containers: named(['foo', { appArmorProfile: { type: 'Unconfined' } }]) } },
    'appArmorProfile',
    'forbidden AppArmor profile',
    'container "foo" must not set AppArmor profile type to "Unconfined"',
  ],
  [
    'appArmorProfile: unconfined init container',
    baseline,
    {
      spec: {
        securityContext: { appArmorProfile: { type: 'RuntimeDefault' } },
        containers: named(['foo']),
        initContainers: named(['bar', { appArmorProfile: { type: 'Unconfined' } }]),
      },
    },
    'appArmorProfile',
    'forbidden AppArmor profile',
    'container "bar" must not set AppArmor profile type to "Unconfined"',
  ],
  [
    'appArmorProfile: multiple containers (annotations)',
    baseline,
    {
      metadata: {
        annotations: {
          'container.apparmor.security.beta.kubernetes.io/': 'bogus',
          'container.apparmor.security.beta.kubernetes.io/a': '',
          'container.apparmor.security.beta.kubernetes.io/b': 'runtime/default',
          'container.apparmor.security.beta.kubernetes.io/c': 'localhost/',
          'container.apparmor.security.beta.kubernetes.io/d': 'localhost/foo',
          'container.apparmor.security.beta.kubernetes.io/e': 'unconfined',
          'container.apparmor.security.beta.kubernetes.io/f': 'unknown',
        },
      },
      spec: {},
    },
    'appArmorProfile',
    'forbidden AppArmor profiles',
    'annotations must not set AppArmor profile type to ' +
      [
        '"container.apparmor.security.beta.kubernetes.io/="bogus""',
        '"container.apparmor.security.beta.kubernetes.io/e="unconfined""',
        '"container.apparmor.security.beta.kubernetes.io/f="unknown""',
      ].join(', '),
  ],
  [
    'capabilities_baseline: multiple containers',
    baseline,
    { spec: { containers: named(['a', { capabilities: { add: ['FOO', 'BAR'] } }], ['b', { capabilities: { add: ['BAR', 'BAZ'] } }]) } },
    'capabilities_baseline',
    'non-default capabilities',
    'containers "a", "b" must not include "BAR", "BAZ", "FOO" in securityContext.capabilities.add',
  ],
  [
    'capabilities_restricted: multiple containers',
    restricted,
    {
      spec: {
        containers: named(
          ['a', { capabilities: { add: ['FOO', 'BAR'] } }],
          ['b', { capabilities: { add: ['BAR', 'BAZ'] } }],
          ['c', { capabilities: { add: ['NET_BIND_SERVICE', 'CHOWN'], drop: ['ALL', 'FOO'] } }],
        ),
      },
    },
    'capabilities_restricted',
    'unrestricted capabilities',
    'containers "a", "b" must set securityContext.capabilities.drop=["ALL"]; containers "a", "b", "c" must not include "BAR", "BAZ", "CHOWN", "FOO" in securityContext.capabilities.add',
  ],
  [
    'capabilities_restricted: linux pod, reject if security context is not set',
    restricted,
    { spec: { os: { name: 'linux' }, containers: named(['a']) } },
    'capabilities_restricted',
    'unrestricted capabilities',
    'container "a" must set securityContext.capabilities.drop=["ALL"]',
  ],
  [
    'hostNamespaces: multiple host namespaces',
    baseline,
    { spec: { hostNetwork: true, hostPID: true, hostIPC: true } },
    'hostNamespaces',
    'host namespaces',
    'hostNetwork=true, hostPID=true, hostIPC=true',
  ],
  [
    'hostPathVolumes: host path volumes',
    baseline,
    {
      spec: {
        volumes: [
          { name: 'a', hostPath: {} },
          { name: 'b', hostPath: {} },
          { name: 'c', emptyDir: {} },
        ],
      },
    },
    'hostPathVolumes',
    'hostPath volumes',
    'volumes "a", "b"',
  ],
  [
    'hostPorts: one container, one host port',
    baseline,
    {
      spec: {
        containers: [
          { name: 'a', ports: [{ hostPort: 0 }] },
          { name: 'b', ports: [{ hostPort: 0 }, { hostPort: 20 }] },
        ],
      },
    },
    'hostPorts',
    'hostPort',
    'container "b" uses hostPort 20',
  ],
  [
    'hostPorts: multiple containers, multiple host port',
    baseline,
    {
      spec: {
        containers: [
          { name: 'a', ports: [{ hostPort: 0 }] },
          { name: 'b', ports: [{ hostPort: 0 }, { hostPort: 10 }, { hostPort: 20 }] },
          { name: 'c', ports: [{ hostPort: 0 }, { hostPort: 10 }, { hostPort: 30 }] },
        ],
      },
    },
    'hostPorts',
    'hostPort',
    'containers "b", "c" use hostPorts 10, 20, 30',
  ],
  [
    'hostProbesAndHostLifecycle: local host IP as probe host',
    baseline,
    {
      spec: {
        containers: [
          {
            name: 'a',
            livenessProbe: { httpGet: { host: '127.0.0.1' } },
            readinessProbe: { tcpSocket: { host: '::1' } },
            startupProbe: { httpGet: { host: 'localhost' } },
          },
        ],
      },
    },
    'hostProbesAndHostLifecycle',
    'probe or lifecycle host',
    'container "a" uses probe or lifecycle hosts "127.0.0.1", "::1", "localhost"',
  ],
  [
    'hostProbesAndHostLifecycle: poststart tcpsocket host',
    baseline,
    { spec: { containers: [{ name: 'd', lifecycle: { postStart: { tcpSocket: { host: 'invalid.host' } } } }] } },
    'hostProbesAndHostLifecycle',
    'probe or lifecycle host',
    'container "d" uses probe or lifecycle host "invalid.host"',
  ],
  [
    'hostProbesAndHostLifecycle: multiple containers with multiple invalid hosts',
    baseline,
    {
      spec: {
        containers: [
          { name: 'valid' },
          { name: 'invalid1', livenessProbe: { httpGet: { host: 'a.com' } } },
          { name: 'invalid2', lifecycle: { preStop: { tcpSocket: { host: 'b.com' } } }, startupProbe: { httpGet: { host: 'a.com' } } },
        ],
      },
    },
    'hostProbesAndHostLifecycle',
    'probe or lifecycle host',
    'containers "invalid1", "invalid2" use probe or lifecycle hosts "a.com", "b.com"',
  ],
  [
    'hostProbesAndHostLifecycle: invalid host in initcontainer',
    baseline,
    { spec: { initContainers: [{ name: 'init', livenessProbe: { httpGet: { host: 'invalid.init.host' } } }] } },
    'hostProbesAndHostLifecycle',
    'probe or lifecycle host',
    'container "init" uses probe or lifecycle host "invalid.init.host"',
  ],
  [
    'privileged',
    baseline,
    { spec: { containers: named(['a'], ['b', {}], ['c', { privileged: false }], ['d', { privileged: true }], ['e', { privileged: true }]) } },
    'privileged',
    'privileged',
    'containers "d", "e" must not set securityContext.privileged=true',
  ],
  [
    'procMount (baseline)',
    baseline,
    {
      spec: {
        hostUsers: true,
        containers: named(['a'], ['b', {}], ['c', { procMount: 'Default' }], ['d', { procMount: 'Unmasked' }], ['e', { procMount: 'other' }]),
      },
    },
    'procMount',
    'procMount',
    'containers "d", "e" must not set securityContext.procMount to "Unmasked", "other"',
  ],
  [
    'procMount_restricted (in a user namespace)',
    restricted,
    {
      spec: {
        hostUsers: false,
        containers: named(['a'], ['b', {}], ['c', { procMount: 'Default' }], ['d', { procMount: 'Unmasked' }], ['e', { procMount: 'other' }]),
      },
    },
    'procMount_restricted',
    'procMount',
    'containers "d", "e" must not set securityContext.procMount to "Unmasked", "other"',
  ],
  [
    'restrictedVolumes: host path volumes (every type)',
    restricted,
    {
      spec: {
        volumes: [
          ...['emptyDir', 'secret', 'persistentVolumeClaim', 'downwardAPI', 'configMap', 'projected', 'csi', 'ephemeral', 'image'].map((type, i) => ({
            name: `a${i + 1}`,
            [type]: {},
          })),
          ...[
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
          ].map((type, i) => ({ name: `b${i + 1}`, [type]: {} })),
          { name: 'c1' },
        ],
      },
    },
    'restrictedVolumes',
    'restricted volume types',
    'volumes ' +
      '"b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8", "b9", "b10", "b11", "b12", "b13", "b14", "b15", "b16", "b17", "b18", "b19", "b20", "b21", "c1"' +
      ' use restricted volume types ' +
      '"awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "fc", "flexVolume", "flocker", "gcePersistentDisk", "gitRepo", "glusterfs", ' +
      '"hostPath", "iscsi", "nfs", "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos", "unknown", "vsphereVolume"',
  ],
  [
    'runAsNonRoot: no explicit runAsNonRoot',
    restricted,
    { spec: { containers: named(['a']) } },
    'runAsNonRoot',
    'runAsNonRoot != true',
    'pod or container "a" must set securityContext.runAsNonRoot=true',
  ],
  [
    'runAsNonRoot: pod runAsNonRoot=false',
    restricted,
    { spec: { securityContext: { runAsNonRoot: false }, containers: named(['a']) } },
    'runAsNonRoot',
    'runAsNonRoot != true',
    'pod must not set securityContext.runAsNonRoot=false',
  ],
  [
    'runAsNonRoot: containers runAsNonRoot=false',
    restricted,
    {
      spec: {
        securityContext: { runAsNonRoot: true },
        containers: named(
          ['a'],
          ['b', {}],
          ['c', { runAsNonRoot: false }],
          ['d', { runAsNonRoot: false }],
          ['e', { runAsNonRoot: true }],
          ['f', { runAsNonRoot: true }],
        ),
      },
    },
    'runAsNonRoot',
    'runAsNonRoot != true',
    'containers "c", "d" must not set securityContext.runAsNonRoot=false',
  ],
  [
    'runAsNonRoot: pod nil, container fallthrough',
    restricted,
    { spec: { containers: named(['a'], ['b', {}], ['d', { runAsNonRoot: true }], ['e', { runAsNonRoot: true }]) } },
    'runAsNonRoot',
    'runAsNonRoot != true',
    'pod or containers "a", "b" must set securityContext.runAsNonRoot=true',
  ],
  [
    'runAsUser: pod runAsUser=0',
    restricted,
    { spec: { securityContext: { runAsUser: 0 }, containers: named(['a']) } },
    'runAsUser',
    'runAsUser=0',
    'pod must not set runAsUser=0',
  ],
  [
    'runAsUser: containers runAsUser=0',
    restricted,
    {
      spec: {
        securityContext: { runAsUser: 1000 },
        containers: named(['a'], ['b', {}], ['c', { runAsUser: 0 }], ['d', { runAsUser: 0 }], ['e', { runAsUser: 1 }], ['f', { runAsUser: 1 }]),
      },
    },
    'runAsUser',
    'runAsUser=0',
    'containers "c", "d" must not set runAsUser=0',
  ],
  [
    'seLinuxOptions: invalid pod and containers',
    baseline,
    {
      spec: {
        securityContext: { seLinuxOptions: { type: 'foo', user: 'bar', role: 'baz' } },
        containers: named(
          ['a', { seLinuxOptions: { type: 'container_t' } }],
          ['b', { seLinuxOptions: { type: 'container_init_t' } }],
          ['c', { seLinuxOptions: { type: 'container_kvm_t' } }],
          ['d', { seLinuxOptions: { type: 'container_engine_t' } }],
          ['e', { seLinuxOptions: { type: 'bar' } }],
          ['f', { seLinuxOptions: { user: 'bar' } }],
          ['g', { seLinuxOptions: { role: 'baz' } }],
        ),
      },
    },
    'seLinuxOptions',
    'seLinuxOptions',
    'pod and containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: types "bar", "foo"; user may not be set; role may not be set',
  ],
  [
    'seLinuxOptions: invalid pod',
    baseline,
    {
      spec: {
        securityContext: { seLinuxOptions: { type: 'foo', user: 'bar', role: 'baz' } },
        containers: named(['a', { seLinuxOptions: { type: 'container_t' } }]),
      },
    },
    'seLinuxOptions',
    'seLinuxOptions',
    'pod set forbidden securityContext.seLinuxOptions: type "foo"; user may not be set; role may not be set',
  ],
  [
    'seLinuxOptions: invalid containers',
    baseline,
    {
      spec: {
        securityContext: { seLinuxOptions: {} },
        containers: named(['e', { seLinuxOptions: { type: 'bar' } }], ['f', { seLinuxOptions: { user: 'bar' } }], ['g', { seLinuxOptions: { role: 'baz' } }]),
      },
    },
    'seLinuxOptions',
    'seLinuxOptions',
    'containers "e", "f", "g" set forbidden securityContext.seLinuxOptions: type "bar"; user may not be set; role may not be set',
  ],
  [
    'seLinuxOptions: bad type',
    baseline,
    { spec: { securityContext: { seLinuxOptions: { type: 'bad' } } } },
    'seLinuxOptions',
    'seLinuxOptions',
    'pod set forbidden securityContext.seLinuxOptions: type "bad"',
  ],
  [
    'seLinuxOptions: bad user',
    baseline,
    { spec: { securityContext: { seLinuxOptions: { user: 'bad' } } } },
    'seLinuxOptions',
    'seLinuxOptions',
    'pod set forbidden securityContext.seLinuxOptions: user may not be set',
  ],
  [
    'seLinuxOptions: bad role',
    baseline,
    { spec: { securityContext: { seLinuxOptions: { role: 'bad' } } } },
    'seLinuxOptions',
    'seLinuxOptions',
    'pod set forbidden securityContext.seLinuxOptions: role may not be set',
  ],
  [
    'seccompProfile_baseline (annotations, v1.18): pod seccomp invalid',
    at('baseline', 18),
    { metadata: { annotations: { 'seccomp.security.alpha.kubernetes.io/pod': 'unconfined' } }, spec: {} },
    'seccompProfile_baseline',
    'seccompProfile',
    'forbidden annotation seccomp.security.alpha.kubernetes.io/pod="unconfined"',
  ],
  [
    'seccompProfile_baseline (annotations, v1.18): containers seccomp invalid',
    at('baseline', 18),
    {
      metadata: {
        annotations: { 'container.seccomp.security.alpha.kubernetes.io/a': 'unconfined', 'container.seccomp.security.alpha.kubernetes.io/b': 'unknown' },
      },
      spec: { containers: named(['a'], ['b'], ['c']) },
    },
    'seccompProfile_baseline',
    'seccompProfile',
    'forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", container.seccomp.security.alpha.kubernetes.io/b="unknown"',
  ],
  [
    'seccompProfile_baseline (annotations, v1.18): pod and containers seccomp invalid',
    at('baseline', 18),
    {
      metadata: {
        annotations: {
          'seccomp.security.alpha.kubernetes.io/pod': 'unconfined',
          'container.seccomp.security.alpha.kubernetes.io/a': 'unconfined',
          'container.seccomp.security.alpha.kubernetes.io/b': 'unknown',
        },
      },
      spec: { containers: named(['a'], ['b'], ['c']) },
    },
    'seccompProfile_baseline',
    'seccompProfile',
    'forbidden annotations container.seccomp.security.alpha.kubernetes.io/a="unconfined", container.seccomp.security.alpha.kubernetes.io/b="unknown", seccomp.security.alpha.kubernetes.io/pod="unconfined"',
  ],
  [
    'seccompProfile_baseline: pod and containers seccomp invalid',
    baseline,
    {
      spec: {
        securityContext: { seccompProfile: { type: 'Unconfined' } },
        containers: named(
          ['a'],
          ['b', {}],
          ['c', { seccompProfile: { type: 'Unconfined' } }],
          ['d', { seccompProfile: { type: 'Unconfined' } }],
          ['e', { seccompProfile: { type: 'RuntimeDefault' } }],
          ['f', { seccompProfile: { type: 'RuntimeDefault' } }],
        ),
      },
    },
    'seccompProfile_baseline',
    'seccompProfile',
    'pod and containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined"',
  ],
  [
    'seccompProfile_restricted: containers seccomp invalid',
    restricted,
    {
      spec: {
        securityContext: { seccompProfile: { type: 'RuntimeDefault' } },
        containers: named(
          ['a'],
          ['b', {}],
          ['c', { seccompProfile: { type: 'Unconfined' } }],
          ['d', { seccompProfile: { type: 'Unconfined' } }],
          ['e', { seccompProfile: { type: 'RuntimeDefault' } }],
        ),
      },
    },
    'seccompProfile_restricted',
    'seccompProfile',
    'containers "c", "d" must not set securityContext.seccompProfile.type to "Unconfined"',
  ],
  [
    'seccompProfile_restricted: pod nil, container fallthrough',
    restricted,
    {
      spec: {
        containers: named(['a'], ['b', {}], ['d', { seccompProfile: { type: 'RuntimeDefault' } }], ['e', { seccompProfile: { type: 'RuntimeDefault' } }]),
      },
    },
    'seccompProfile_restricted',
    'seccompProfile',
    'pod or containers "a", "b" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"',
  ],
  ['sysctls: forbidden sysctls', baseline, { spec: { securityContext: { sysctls: [{ name: 'a' }, { name: 'b' }] } } }, 'sysctls', 'forbidden sysctls', 'a, b'],
  [
    'windowsHostProcess: host process',
    baseline,
    {
      spec: {
        securityContext: { windowsOptions: { hostProcess: true } },
        containers: named(
          ['a'],
          ['b', {}],
          ['c', { windowsOptions: {} }],
          ['d', { windowsOptions: { hostProcess: false } }],
          ['e', { windowsOptions: { hostProcess: true } }],
          ['f', { windowsOptions: { hostProcess: true } }],
        ),
      },
    },
    'windowsHostProcess',
    'hostProcess',
    'pod and containers "e", "f" must not set securityContext.windowsOptions.hostProcess=true',
  ],
];

for (const [name, policy, p, check, reason, detail] of upstreamCases) {
  test(`upstream's test: ${name}`, (t) => {
    t.deepEqual(
      checkPodSecurity(p, policy).find((v) => v.check === check),
      { check, reason, detail },
    );
  });
}

test("upstream's tests: pods allowed", (t) => {
  // runAsNonRoot and runAsUser: not for a user-namespaced pod (v1.35).
  t.deepEqual(ids({ spec: { hostUsers: false, securityContext: { runAsUser: 0 }, containers: named(['a', { runAsUser: 0 }]) } }, restricted), [
    'allowPrivilegeEscalation',
    'capabilities_restricted',
    'seccompProfile_restricted',
  ]);
  // procMount (baseline): any value in a user namespace (v1.35).
  t.deepEqual(ids({ spec: { hostUsers: false, containers: named(['d', { procMount: 'Unmasked' }], ['e', { procMount: 'other' }]) } }, baseline), []);
  // Windows pods need no capabilities, allowPrivilegeEscalation or seccompProfile (v1.25).
  t.deepEqual(ids({ spec: { os: { name: 'windows' }, securityContext: { runAsNonRoot: true }, containers: named(['a']) } }, restricted), []);
  // AppArmor: the allowed annotations and profile types.
  const allowedAppArmor = {
    metadata: { annotations: { 'container.apparmor.security.beta.kubernetes.io/test': 'localhost/sec-profile01', env: 'dev' } },
    spec: { securityContext: { appArmorProfile: { type: 'RuntimeDefault' } }, containers: named(['foo', { appArmorProfile: { type: 'Localhost' } }]) },
  };
  t.deepEqual(ids(allowedAppArmor, baseline), []);
  // Probes and handlers without a host.
  const unsetHosts = {
    spec: { containers: [{ name: 'a', livenessProbe: { httpGet: {} }, readinessProbe: { tcpSocket: {} }, lifecycle: { postStart: { httpGet: {} } } }] },
  };
  t.deepEqual(ids(unsetHosts, baseline), []);
});

test("violations come in upstream's order: baseline ids sorted as Go sorts them, then restricted's", (t) => {
  const everything = pod((p) => {
    p.spec.securityContext = {
      seccompProfile: { type: 'Unconfined' },
      seLinuxOptions: { type: 'spc_t' },
      windowsOptions: { hostProcess: true },
      sysctls: [{ name: 'kernel.msgmax', value: '1' }],
      runAsUser: 0,
    };
    p.spec.hostNetwork = true;
    p.spec.volumes.push({ name: 'h', hostPath: { path: '/' } });
    Object.assign(app(p), { ports: [{ containerPort: 80, hostPort: 80 }], livenessProbe: { httpGet: { host: 'x', port: 80 } } });
    app(p).securityContext = { privileged: true, procMount: 'Unmasked', capabilities: { add: ['SYS_ADMIN'] }, appArmorProfile: { type: 'Unconfined' } };
  });
  const baselineIds = [
    'appArmorProfile',
    'capabilities_baseline',
    'hostNamespaces',
    'hostPathVolumes',
    'hostPorts',
    'hostProbesAndHostLifecycle',
    'privileged',
    'procMount',
    'seLinuxOptions',
    'seccompProfile_baseline',
    'sysctls',
    'windowsHostProcess',
  ];
  t.deepEqual(ids(everything, baseline), baselineIds);
  // At restricted, its own checks replace capabilities_baseline, hostPathVolumes, procMount and seccompProfile_baseline.
  const replaced = ['capabilities_baseline', 'hostPathVolumes', 'procMount', 'seccompProfile_baseline'];
  t.deepEqual(ids(everything, restricted), [
    ...baselineIds.filter((id) => !replaced.includes(id)),
    'allowPrivilegeEscalation',
    'capabilities_restricted',
    'procMount_restricted',
    'restrictedVolumes',
    'runAsNonRoot',
    'runAsUser',
    'seccompProfile_restricted',
  ]);
  // Before v1.35 restricted has no procMount check of its own: the baseline one runs.
  const v134 = ids(everything, at('restricted', 34));
  t.true(v134.includes('procMount') && !v134.includes('procMount_restricted'));
});

test("Go's quoting (%q) of annotation values and Go's string order (UTF-8 bytes)", (t) => {
  const quoted = pod((p) => (p.metadata.annotations['container.apparmor.security.beta.kubernetes.io/app'] = 'say "hi"\né\u0001\u007f\u200b\u{1F600}'));
  t.is(
    checkPodSecurity(quoted, baseline)[0]!.detail,
    'annotation must not set AppArmor profile type to "container.apparmor.security.beta.kubernetes.io/app="say \\"hi\\"\\né\\x01\\x7f\\u200b\u{1F600}""',
  );
  // Code point order: U+FFFD before U+1F600, which UTF-16 order would put first.
  const hosts = {
    spec: {
      containers: [
        { name: '\u{1F600}', livenessProbe: { httpGet: { host: '\uFFFD' } } },
        { name: '\uFFFD', livenessProbe: { httpGet: { host: '\u{1F600}' } } },
        { name: 'z', livenessProbe: { httpGet: { host: 'Z' } } },
        { name: 'é', livenessProbe: { httpGet: { host: 'a' } } },
      ],
    },
  };
  t.is(checkPodSecurity(hosts, baseline)[0]!.detail, 'containers "z", "é", "\uFFFD", "\u{1F600}" use probe or lifecycle hosts "Z", "a", "\uFFFD", "\u{1F600}"');
});

test('a violation without detail is its reason alone, as upstream writes it (a sysctl named "")', (t) => {
  const unnamed = pod((p) => (p.spec.securityContext.sysctls = [{ name: '' }]));
  t.is(describeViolations(checkPodSecurity(unnamed, baseline)), 'forbidden sysctls');
});

test('init and ephemeral containers are checked like containers', (t) => {
  const withInit = pod((p) => (p.spec.initContainers = [{ name: 'sidecar', image: 's', restartPolicy: 'Always' }]));
  const violations = checkPodSecurity(withInit, restricted);
  t.deepEqual(
    violations.map((v) => v.check),
    ['allowPrivilegeEscalation', 'capabilities_restricted'],
  );
  t.is(
    describeViolations(violations),
    'allowPrivilegeEscalation != false (container "sidecar" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container "sidecar" must set securityContext.capabilities.drop=["ALL"])',
  );
  t.deepEqual(
    ids(
      pod((p) => (p.spec.ephemeralContainers = [{ name: 'debug', image: 'd', securityContext: { privileged: true } }])),
      baseline,
    ),
    ['privileged'],
  );
});

test('runAsNonRoot: pod-level false fails even when containers set true; a container false fails', (t) => {
  t.deepEqual(
    ids(
      pod((p) => ((p.spec.securityContext.runAsNonRoot = false), (app(p).securityContext.runAsNonRoot = true))),
      restricted,
    ),
    ['runAsNonRoot'],
  );
  t.deepEqual(
    ids(
      pod((p) => (app(p).securityContext.runAsNonRoot = false)),
      restricted,
    ),
    ['runAsNonRoot'],
  );
});

test('policy versions: rules that came later do not apply to earlier versions', (t) => {
  for (const [name, p, level, minor, expected] of versionCases) t.deepEqual(ids(p, at(level, minor)), expected, `${name} at ${level}:v1.${minor}`);
});

test('hostile values never throw', (t) => {
  for (const spec of [
    null,
    'x',
    [],
    { containers: 'no' },
    { containers: [null, 1, { securityContext: 'x' }] },
    { securityContext: { sysctls: [{ name: { a: 1 } }] } },
    {
      hostUsers: 'false',
      os: 'windows',
      securityContext: { appArmorProfile: 5, seccompProfile: [], seLinuxOptions: 'x', windowsOptions: null, sysctls: [null, 'x'] },
      containers: [
        {
          name: ['a'],
          ports: [{ hostPort: '80' }, null, { hostPort: { p: 1 } }],
          livenessProbe: 'x',
          readinessProbe: { httpGet: { host: 7 } },
          lifecycle: { preStop: [] },
          securityContext: { capabilities: { add: 'SYS_ADMIN', drop: [null, { x: 1 }] }, procMount: 7, seLinuxOptions: { type: [], user: {} } },
        },
      ],
      volumes: [null, 'v', { name: 1, nfs: 'x' }],
    },
  ]) {
    for (const policy of [restricted, baseline, at('restricted', 18), at('baseline', 34)]) t.notThrows(() => checkPodSecurity({ spec }, policy));
  }
  t.notThrows(() => checkPodSecurity(undefined, restricted));
  for (const metadata of [
    null,
    'x',
    { annotations: ['a'] },
    { annotations: { 'container.apparmor.security.beta.kubernetes.io/a': 1, 'seccomp.security.alpha.kubernetes.io/pod': null } },
  ])
    for (const policy of [baseline, at('baseline', 18)]) t.notThrows(() => checkPodSecurity({ metadata, spec: { containers: [{ name: 'a' }] } }, policy));
});

test('namespace labels as the API server reads them', (t) => {
  t.deepEqual(podSecurityPolicies({}), {});
  t.deepEqual(podSecurityPolicies({ 'pod-security.kubernetes.io/enforce': 'privileged' }), {});
  const policies = podSecurityPolicies({
    'pod-security.kubernetes.io/enforce': 'baseline',
    'pod-security.kubernetes.io/enforce-version': 'v1.25',
    'pod-security.kubernetes.io/warn': 'restricted',
    'pod-security.kubernetes.io/audit': 'restricted',
    'pod-security.kubernetes.io/audit-version': '1.25',
  });
  t.deepEqual(policies.enforce, { level: 'baseline', version: { major: 1, minor: 25 }, label: 'baseline:v1.25', rules: { major: 1, minor: 25 } });
  t.deepEqual(policies.warn, { level: 'restricted', version: 'latest', label: 'restricted:latest' });
  // An invalid version is latest.
  t.deepEqual(policies.audit, { level: 'restricted', version: 'latest', label: 'restricted:latest' });
  // An invalid enforce level fails closed (restricted); an invalid warn level is privileged.
  const invalid = podSecurityPolicies({ 'pod-security.kubernetes.io/enforce': 'strict', 'pod-security.kubernetes.io/warn': 'strict' });
  t.is(invalid.enforce?.level, 'restricted');
  t.is(invalid.warn, undefined);
});

test('a volume source counts when it is not null (upstream: volume.EmptyDir != nil)', (t) => {
  const nullSource = pod((p) => (p.spec.volumes = [{ name: 'host', emptyDir: null, hostPath: { path: '/' } }]));
  t.deepEqual(ids(nullSource, restricted), ['restrictedVolumes']);
  t.is(checkPodSecurity(nullSource, restricted)[0]!.detail, 'volume "host" uses restricted volume type "hostPath"');
  t.deepEqual(ids(nullSource, baseline), ['hostPathVolumes']);
  // `hostPath: null` beside an emptyDir is an emptyDir volume.
  t.deepEqual(
    ids(
      pod((p) => (p.spec.volumes = [{ name: 'v', emptyDir: {}, hostPath: null }])),
      baseline,
    ),
    [],
  );
});

test('latest, and a version newer than the one in force, mean the rules of the Kubernetes version in force', (t) => {
  const engine = pod((p) => (app(p).securityContext.seLinuxOptions = { type: 'container_engine_t' }));
  const labels = (version?: string) => ({
    'pod-security.kubernetes.io/enforce': 'baseline',
    ...(version ? { 'pod-security.kubernetes.io/enforce-version': version } : {}),
  });
  const v130 = { major: 1, minor: 30 };
  t.deepEqual(ids(engine, podSecurityPolicies(labels(), v130).enforce!), ['seLinuxOptions']);
  t.deepEqual(ids(engine, podSecurityPolicies(labels('v1.33'), v130).enforce!), ['seLinuxOptions']);
  t.deepEqual(ids(engine, podSecurityPolicies(labels(), { major: 1, minor: 31 }).enforce!), []);
  // No version known: the newest rules this build knows.
  t.deepEqual(ids(engine, podSecurityPolicies(labels()).enforce!), []);
  t.deepEqual(podSecurityPolicies(labels(), v130).enforce, { level: 'baseline', version: 'latest', label: 'baseline:latest', rules: v130 });
  // An older policy version keeps its own rules.
  t.deepEqual(podSecurityPolicies(labels('v1.25'), v130).enforce?.rules, { major: 1, minor: 25 });
});

/**
 * The Pod Security Standards, rule by rule (upstream's list: policy/check_*.go): for each
 * check a pod that passes and one that fails, at the level that has the check; then the
 * version differences and the namespace labels.
 */
import test from 'ava';
import { checkPodSecurity, describeViolations, podSecurityPolicies, type PodSecurityPolicy } from './pod-security.js';

const restricted: PodSecurityPolicy = { level: 'restricted', version: 'latest', label: 'restricted:latest' };
const baseline: PodSecurityPolicy = { level: 'baseline', version: 'latest', label: 'baseline:latest' };
const at = (level: 'baseline' | 'restricted', minor: number): PodSecurityPolicy => ({ level, version: { major: 1, minor }, label: `${level}:v1.${minor}` });

type Json = Record<string, any>;

/** A pod that passes restricted:latest; `change` edits a copy. */
function pod(change: (p: Json) => void = () => {}): Json {
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
const app = (p: Json) => p.spec.containers[0];

const ids = (p: Json, policy: PodSecurityPolicy) => checkPodSecurity(p, policy).map((v) => v.check);

// [check id, level that has it, a failing change, a passing change (beside the compliant pod)]
const rules: [string, 'baseline' | 'restricted', (p: Json) => void, (p: Json) => void][] = [
  ['hostNamespaces', 'baseline', (p) => (p.spec.hostNetwork = true), (p) => (p.spec.hostPID = false)],
  ['privileged', 'baseline', (p) => (app(p).securityContext.privileged = true), (p) => (app(p).securityContext.privileged = false)],
  [
    'capabilities_baseline',
    'baseline',
    (p) => (app(p).securityContext.capabilities.add = ['SYS_ADMIN']),
    (p) => (app(p).securityContext.capabilities.add = ['CHOWN', 'NET_BIND_SERVICE']),
  ],
  [
    'hostPathVolumes',
    'baseline',
    (p) => p.spec.volumes.push({ name: 'h', hostPath: { path: '/' } }),
    (p) => p.spec.volumes.push({ name: 'c', configMap: { name: 'c' } }),
  ],
  ['hostPorts', 'baseline', (p) => (app(p).ports = [{ containerPort: 80, hostPort: 80 }]), (p) => (app(p).ports = [{ containerPort: 80, hostPort: 0 }])],
  [
    'hostProbesAndHostLifecycle',
    'baseline',
    (p) => (app(p).livenessProbe = { httpGet: { host: '10.0.0.1', port: 80 } }),
    (p) => (app(p).livenessProbe = { httpGet: { port: 80 } }),
  ],
  [
    'appArmorProfile',
    'baseline',
    (p) => (app(p).securityContext.appArmorProfile = { type: 'Unconfined' }),
    (p) => (p.spec.securityContext.appArmorProfile = { type: 'RuntimeDefault' }),
  ],
  [
    'seLinuxOptions',
    'baseline',
    (p) => (app(p).securityContext.seLinuxOptions = { type: 'spc_t' }),
    (p) => (app(p).securityContext.seLinuxOptions = { type: 'container_t', level: 's0:c1' }),
  ],
  ['procMount', 'baseline', (p) => (app(p).securityContext.procMount = 'Unmasked'), (p) => (app(p).securityContext.procMount = 'Default')],
  [
    'seccompProfile_baseline',
    'baseline',
    (p) => (p.spec.securityContext.seccompProfile = { type: 'Unconfined' }),
    (p) => (p.spec.securityContext.seccompProfile = { type: 'Localhost', localhostProfile: 'x' }),
  ],
  [
    'sysctls',
    'baseline',
    (p) => (p.spec.securityContext.sysctls = [{ name: 'kernel.msgmax', value: '1' }]),
    (p) => (p.spec.securityContext.sysctls = [{ name: 'net.ipv4.tcp_syncookies', value: '1' }]),
  ],
  [
    'windowsHostProcess',
    'baseline',
    (p) => (app(p).securityContext.windowsOptions = { hostProcess: true }),
    (p) => (app(p).securityContext.windowsOptions = { hostProcess: false }),
  ],
  [
    'restrictedVolumes',
    'restricted',
    (p) => p.spec.volumes.push({ name: 'n', nfs: { server: 'x', path: '/' } }),
    (p) => p.spec.volumes.push({ name: 'pvc', persistentVolumeClaim: { claimName: 'c' } }),
  ],
  ['allowPrivilegeEscalation', 'restricted', (p) => delete app(p).securityContext.allowPrivilegeEscalation, () => {}],
  [
    'runAsNonRoot',
    'restricted',
    (p) => delete p.spec.securityContext.runAsNonRoot,
    (p) => (delete p.spec.securityContext.runAsNonRoot, (app(p).securityContext.runAsNonRoot = true)),
  ],
  ['runAsUser', 'restricted', (p) => (app(p).securityContext.runAsUser = 0), (p) => (app(p).securityContext.runAsUser = 1000)],
  [
    'seccompProfile_restricted',
    'restricted',
    (p) => delete p.spec.securityContext.seccompProfile,
    (p) => (delete p.spec.securityContext.seccompProfile, (app(p).securityContext.seccompProfile = { type: 'RuntimeDefault' })),
  ],
  [
    'capabilities_restricted',
    'restricted',
    (p) => (app(p).securityContext.capabilities = { drop: ['NET_RAW'] }),
    (p) => (app(p).securityContext.capabilities.add = ['NET_BIND_SERVICE']),
  ],
];

test('the compliant pod passes both levels', (t) => {
  t.deepEqual(checkPodSecurity(pod(), restricted), []);
  t.deepEqual(checkPodSecurity(pod(), baseline), []);
});

for (const [id, level, failing, passing] of rules) {
  test(`${id}: a failing and a passing pod (${level})`, (t) => {
    const policy = level === 'baseline' ? baseline : restricted;
    t.deepEqual(ids(pod(failing), policy), [id]);
    t.deepEqual(ids(pod(passing), policy), []);
    // A restricted rule does not exist at baseline.
    if (level === 'restricted') t.deepEqual(ids(pod(failing), baseline), []);
  });
}

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
  const root = pod((p) => (app(p).securityContext.runAsUser = 0));
  t.deepEqual(ids(root, at('restricted', 22)), []);
  t.deepEqual(ids(root, at('restricted', 23)), ['runAsUser']);
  const noDrop = pod((p) => (app(p).securityContext.capabilities = {}));
  t.deepEqual(ids(noDrop, at('restricted', 21)), []);
  t.deepEqual(ids(noDrop, at('restricted', 22)), ['capabilities_restricted']);
  const keepalive = pod((p) => (p.spec.securityContext.sysctls = [{ name: 'net.ipv4.tcp_keepalive_time', value: '60' }]));
  t.deepEqual(ids(keepalive, at('baseline', 28)), ['sysctls']);
  t.deepEqual(ids(keepalive, at('baseline', 29)), []);
  const engine = pod((p) => (app(p).securityContext.seLinuxOptions = { type: 'container_engine_t' }));
  t.deepEqual(ids(engine, at('baseline', 30)), ['seLinuxOptions']);
  t.deepEqual(ids(engine, at('baseline', 31)), []);
  // Windows pods are exempt from three restricted rules from v1.25.
  const windows = pod((p) => ((p.spec.os = { name: 'windows' }), (app(p).securityContext = {}), delete p.spec.securityContext.seccompProfile));
  t.deepEqual(ids(windows, at('restricted', 25)), []);
  t.deepEqual(ids(windows, at('restricted', 24)), ['allowPrivilegeEscalation', 'capabilities_restricted', 'seccompProfile_restricted']);
});

test('hostile values never throw', (t) => {
  for (const spec of [
    null,
    'x',
    [],
    { containers: 'no' },
    { containers: [null, 1, { securityContext: 'x' }] },
    { securityContext: { sysctls: [{ name: { a: 1 } }] } },
  ]) {
    t.notThrows(() => checkPodSecurity({ spec }, restricted));
  }
  t.notThrows(() => checkPodSecurity(undefined, restricted));
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

import test from 'ava';
import { checkPodSecurity, newestPolicyRules } from '../pod-security.js';
import { podSecurityChecks } from './checks.js';

test('the registry: one check per id, versions ascending, each later one says what changed, overrides name a baseline check', (t) => {
  const ids = podSecurityChecks.map((c) => c.id);
  t.is(new Set(ids).size, ids.length);
  // Their order, upstream's, is checked in pod-security.test.ts (every check failing at once).
  const baseline = new Set(podSecurityChecks.filter((c) => c.level === 'baseline').map((c) => c.id));
  for (const check of podSecurityChecks) {
    const since = check.versions.map((v) => v.since);
    t.deepEqual(
      since,
      [...since].sort((a, b) => a - b),
      check.id,
    );
    t.true(
      check.versions.slice(1).every((v) => v.change !== undefined),
      `${check.id}: every later version says what changed`,
    );
    for (const v of check.versions) for (const id of v.overrides ?? []) t.true(check.level === 'restricted' && baseline.has(id), `${check.id} overrides ${id}`);
  }
  t.deepEqual(newestPolicyRules, { major: 1, minor: 37 });
});

test('a check applies from its version, each version as it stood, and an override only while the overriding check applies', (t) => {
  const at = (minor: number | 'latest', level: 'baseline' | 'restricted', pod: unknown) =>
    checkPodSecurity(pod, { level, version: minor === 'latest' ? 'latest' : { major: 1, minor }, label: '' }).map((v) => v.check);
  const root = {
    spec: {
      securityContext: { runAsUser: 0, runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [{ name: 'a', securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } }],
    },
  };
  t.deepEqual(at(22, 'restricted', root), []);
  t.deepEqual(at(23, 'restricted', root), ['runAsUser']);
  t.deepEqual(at('latest', 'restricted', { spec: { ...root.spec, hostUsers: false } }), []);
  // capabilities_baseline judges NET_ADMIN below v1.22 at restricted; from v1.22 capabilities_restricted does instead, Windows pods included (exempt from both from v1.25).
  const adding = { spec: { os: { name: 'windows' }, containers: [{ name: 'a', securityContext: { capabilities: { add: ['NET_ADMIN'] } } }] } };
  t.true(at(21, 'restricted', adding).includes('capabilities_baseline'));
  t.true(at(22, 'restricted', adding).includes('capabilities_restricted'));
  t.false(at(25, 'restricted', adding).some((id) => id.startsWith('capabilities')));
  t.deepEqual(at(25, 'baseline', adding), ['capabilities_baseline']);
  // A later version of a check replaces the earlier one: container_engine_t is allowed from v1.31.
  const engine = { spec: { containers: [{ name: 'a', securityContext: { seLinuxOptions: { type: 'container_engine_t' } } }] } };
  t.deepEqual(at(30, 'baseline', engine), ['seLinuxOptions']);
  t.deepEqual(at(31, 'baseline', engine), []);
});

/**
 * Whether the exported MutatingAdmissionPolicy holds the templates marked `delivery: policy` at
 * their revisions (src/manifests/exported-state.ts), and the leader's watch that reads it from
 * the API server and says so in /status, a metric and the log (src/serving/exported-policy.ts).
 */
import test from 'ava';
import { pino } from 'pino';
import { Gauge, Registry } from 'prom-client';
import { exportedPolicyState } from '../src/manifests/exported-state.js';
import { mutatingPolicies } from '../src/manifests/mutating-policies.js';
import { ExportedPolicyWatch } from '../src/serving/exported-policy.js';
import type { TemplateSet } from '../src/templates/set.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { FakeClock } from './helpers/fake-clock.js';
import { templateSet } from './helpers/templates.js';
import { until } from './helpers/until.js';

/** Fits Pod Security restricted whatever the pod sets: exportable. */
const securityContext = {
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
  runAsNonRoot: true,
  seccompProfile: { type: 'RuntimeDefault' },
};
const agent = (image: string, extra: Record<string, unknown> = {}) => ({
  name: 'agent',
  failurePolicy: 'Ignore',
  containers: [{ name: 'agent', image, securityContext }],
  ...extra,
});
const other = { name: 'other', failurePolicy: 'Ignore', containers: [{ name: 'other', image: 'other:1', securityContext }] };
const marked = (image = 'agent:1') => templateSet(agent(image, { delivery: 'policy' }), other);
/** The policy and binding `policies --mutating` prints for `set`. */
const exported = (set: TemplateSet) => {
  const [policy, binding] = mutatingPolicies(set).objects;
  return { policy, binding };
};

test('the states: not used, current, absent, stale (an old revision, a template missing or no longer marked, nothing marked)', (t) => {
  const set = marked();
  t.deepEqual(exportedPolicyState(templateSet(agent('agent:1'), other), { policy: undefined, binding: undefined }), { state: 'not-used' });
  t.deepEqual(exportedPolicyState(set, exported(set)), { state: 'current' });
  t.deepEqual(exportedPolicyState(set, { policy: undefined, binding: undefined }), {
    state: 'absent',
    problem:
      'the MutatingAdmissionPolicy sidecar-injector-exported does not exist: the webhooks inject agent (delivery: policy) instead; sidecar-injector policies --mutating | kubectl apply -f -',
  });
  t.is(exportedPolicyState(set, { ...exported(set), binding: undefined }).state, 'absent');
  t.regex(
    exportedPolicyState(set, { ...exported(set), binding: undefined }).problem!,
    /^the MutatingAdmissionPolicyBinding sidecar-injector-exported does not exist/,
  );
  // The template changed since the policy was generated.
  const newer = marked('agent:2');
  const stale = exportedPolicyState(newer, exported(set));
  t.is(stale.state, 'stale');
  t.is(
    stale.problem,
    `the MutatingAdmissionPolicy sidecar-injector-exported is stale: agent is at revision ${set.byName.get('agent')!.hash}, the revision in force is ${newer.byName.get('agent')!.hash}; sidecar-injector policies --mutating | kubectl apply -f -`,
  );
  // Another template marked since: not in it.
  const both = templateSet(agent('agent:1', { delivery: 'policy' }), { ...other, delivery: 'policy' });
  t.regex(exportedPolicyState(both, exported(set)).problem!, /: other is not in it;/);
  // A template moved back to the webhook: the policy still injects it.
  const onePolicy = exported(both);
  t.regex(exportedPolicyState(set, onePolicy).problem!, /: it still holds other, no longer marked delivery: policy;/);
  // Nothing marked, and a policy left behind.
  t.regex(exportedPolicyState(templateSet(agent('agent:1'), other), onePolicy).problem!, /exists but no template is marked delivery: policy/);
  // What the cluster holds is read as data: annotations of any shape say nothing.
  t.is(exportedPolicyState(set, { policy: { metadata: { annotations: { ['__proto__']: 'x' } } }, binding: {} }).state, 'stale');
  t.is(exportedPolicyState(set, { policy: 'nonsense', binding: {} }).state, 'stale');
});

test('the watch reads the policy from the API server at start, on a timer and after a template change; /status, the metric and the log follow', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.teardown(() => api.stop());
  const clock = new FakeClock();
  const lines: Record<string, unknown>[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
  const registry = new Registry();
  const stale = new Gauge({ name: 'stale', help: 'h', registers: [registry] });
  let set = marked();
  const watch = new ExportedPolicyWatch({ kubeConfig: await api.kubeConfig(), log, clock, templates: () => set, stale, intervalMs: 60_000 });
  const gauge = async () => (await stale.get()).values[0]?.value;
  watch.start();
  t.teardown(() => watch.stop());
  await until(() => watch.status().state === 'absent', 'absent at start');
  t.is(await gauge(), 1);
  t.true(lines.some((l) => l.level === 40 && String(l.msg).startsWith('the MutatingAdmissionPolicy sidecar-injector-exported does not exist')));
  // Applied: current on the next look.
  const { policy, binding } = exported(set);
  api.admissionPolicies.mutatingadmissionpolicies.set('sidecar-injector-exported', policy!);
  api.admissionPolicies.mutatingadmissionpolicybindings.set('sidecar-injector-exported', binding!);
  clock.advance(60_000);
  await until(() => watch.status().state === 'current', 'current after the timer');
  t.is(await gauge(), 0);
  t.regex(String(watch.status().checkedAt), /^\d{4}-\d\d-\d\dT/);
  // The template changes: stale a moment later, without waiting for the minute.
  set = marked('agent:2');
  watch.templatesReloaded();
  clock.advance(2000);
  await until(() => watch.status().state === 'stale', 'stale after the change');
  t.is(await gauge(), 1);
  // A cluster of 1.34 or 1.35 with the beta API: the objects are read there.
  api.mutatingAdmissionPolicyApi = 'v1beta1';
  set = marked();
  watch.templatesReloaded();
  clock.advance(2000);
  await until(() => watch.status().state === 'current', 'current, read from the beta API');
  t.is(await gauge(), 0);
  // A cluster that serves neither: the last state stays, and the read's error is said.
  api.mutatingAdmissionPolicyApi = undefined;
  clock.advance(60_000);
  await until(() => watch.status().error !== undefined, 'the error');
  t.is(watch.status().state, 'current');
  t.is(watch.status().error, 'no MutatingAdmissionPolicy API answered: a 404 for the resource itself in v1 and v1beta1');
  // A replica that stops leading says nothing more.
  await watch.stop();
  t.deepEqual(watch.status(), {});
});

/**
 * Leader election's hand-over against the in-process API server, on a fake clock: a replica
 * that stops releases the Lease and another leads within a second of it; a follower reads a
 * lease held by another about once a second and never writes it.
 */
import test from 'ava';
import { pino } from 'pino';
import { LeaderElector } from '../src/kube-api/lease.js';
import { microTime } from '../src/kube-api/request.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { FakeClock } from './helpers/fake-clock.js';
import { until } from './helpers/until.js';

const silent = pino({ level: 'silent' });

async function setup(t: { teardown: (fn: () => unknown) => void }) {
  const api = new FakeApiServer();
  await api.start();
  const clock = new FakeClock();
  const electors: LeaderElector[] = [];
  t.teardown(async () => {
    for (const elector of electors) await elector.stop();
    await api.stop();
  });
  // Defaults: a 15 s lease, renewed every 2 s, read every second by a follower.
  const elector = async (identity: string) => {
    const made = new LeaderElector({ kubeConfig: await api.kubeConfig(), log: silent, namespace: 'sidecar-injector', name: 'audit', identity, clock });
    electors.push(made);
    return made;
  };
  // Each elector holds one timer between its tries, and a leader one more (its renew deadline):
  // a count of timers is how the test knows that every try in flight has finished.
  const tried = (timers: number) => until(() => clock.pending === timers, `${timers} timers`);
  return { api, clock, elector, tried, lease: () => api.leases.get('sidecar-injector/audit')! };
}

test('a leader that stops releases the lease, and a follower leads within a second of it', async (t) => {
  const { clock, elector, tried, lease } = await setup(t);
  const a = await elector('injector-a');
  const b = await elector('injector-b');
  a.start();
  await tried(2);
  t.true(a.isLeader());
  b.start();
  await tried(3);
  // Time passes in steps that fall between the follower's reads; a renews, b follows.
  for (let i = 0; i < 13; i++) {
    await clock.advance(700);
    await tried(3);
    t.true(a.isLeader());
    t.false(b.isLeader());
  }
  await a.stop();
  t.false(a.isLeader());
  t.is(lease().spec.holderIdentity, '', 'released');
  const released = clock.now();
  await tried(1);
  while (!b.isLeader()) {
    await clock.advance(100);
    await until(() => clock.pending === (b.isLeader() ? 2 : 1), 'b tried');
  }
  t.true(clock.now() - released <= 1000, `b led ${clock.now() - released} ms after the release`);
  t.is(lease().spec.holderIdentity, 'injector-b');
  t.is(lease().spec.leaseTransitions, 1);
});

test('a follower reads a lease another holds about once a second, never writes it, and takes over once it expires', async (t) => {
  const { api, clock, elector, tried, lease } = await setup(t);
  // Another replica holds the lease and renews it every 2 s (written here, without requests).
  let renewals = 0;
  const renew = () =>
    api.leases.set('sidecar-injector/audit', {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'audit', namespace: 'sidecar-injector', resourceVersion: `other-${++renewals}` },
      spec: { holderIdentity: 'injector-other', leaseDurationSeconds: 15, renewTime: microTime(new Date(clock.now())), leaseTransitions: 0 },
    });
  renew();
  const b = await elector('injector-b');
  b.start();
  await tried(1);
  const seconds = 30;
  for (let step = 1; step <= seconds * 10; step++) {
    await clock.advance(100);
    if (step % 20 === 0) renew();
    await tried(1);
  }
  t.false(b.isLeader());
  const requests = api.leaseRequests.length;
  t.true(requests <= seconds + 1, `${requests} requests in ${seconds} s of the lease held by another`);
  t.true(requests >= seconds / 2, `${requests} requests: it does read`);
  t.deepEqual(new Set(api.leaseRequests), new Set(['GET']), 'reads only');
  // The other replica dies: its record stays as it was, and b leads once it has seen it unchanged for the lease's 15 s.
  const lastRenewal = clock.now();
  while (!b.isLeader()) {
    await clock.advance(100);
    await until(() => clock.pending === (b.isLeader() ? 2 : 1), 'b tried');
  }
  const waited = clock.now() - lastRenewal;
  t.true(waited >= 15_000 && waited <= 16_000, `took over ${waited} ms after the last renewal (the lease is 15 s, read every second)`);
  t.is(lease().spec.holderIdentity, 'injector-b');
});

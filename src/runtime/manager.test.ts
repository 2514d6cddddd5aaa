import test from 'ava';
import { EventEmitter } from 'node:events';
import { pino } from 'pino';
import { Manager } from './manager.js';
import { systemClock, type Clock } from '../clock.js';
import type { LeaderElection, Runnable } from './runnable.js';

const silent = pino({ level: 'silent' });

/** A runnable that writes what happens to it into `trace`. */
function traced(trace: string[], name: string, extra: Partial<Runnable> = {}): Runnable {
  return { name, start: () => void trace.push(`start ${name}`), stop: () => void trace.push(`stop ${name}`), ...extra };
}

/** An election the test decides. */
class TestElection extends EventEmitter implements LeaderElection {
  leading = false;
  started = false;
  released = false;
  constructor(private readonly trace: string[] = []) {
    super();
  }
  start(): void {
    this.started = true;
    this.trace.push('start election');
  }
  async stop(): Promise<void> {
    this.released = this.leading;
    this.leading = false;
  }
  isLeader(): boolean {
    return this.leading;
  }
  status(): unknown {
    return { leading: this.leading };
  }
  lead(leading: boolean): void {
    this.leading = leading;
    this.emit(leading ? 'leading' : 'following');
  }
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

test('groups start in order (sources, the election, others, servers) and stop in reverse, each awaited; leader-only parts and the election stop first', async (t) => {
  const trace: string[] = [];
  const election = new TestElection(trace);
  const leading: boolean[] = [];
  const manager = new Manager({ log: silent, election, onLeading: (l) => leading.push(l) });
  let releaseServer!: () => void;
  manager
    .add(traced(trace, 'server', { stop: () => new Promise<void>((resolve) => (releaseServer = () => (trace.push('stop server'), resolve()))) }), 'server')
    .add(traced(trace, 'audit'), 'leader')
    .add(traced(trace, 'rollout'))
    .add(traced(trace, 'templates'), 'source')
    .add(traced(trace, 'namespaces'), 'source');
  await manager.start();
  t.deepEqual(trace, ['start templates', 'start namespaces', 'start election', 'start rollout', 'start server'], 'the election before what may ask it');
  t.false(trace.includes('start audit'), 'leader-only parts wait for the lead');
  election.lead(true);
  await settle();
  t.is(trace.at(-1), 'start audit');
  t.true(manager.isLeader());
  t.deepEqual(manager.stopOrder(), ['audit', 'leader election', 'server', 'rollout', 'namespaces', 'templates']);
  trace.length = 0;
  const stopped = manager.stop();
  t.is(manager.stop(), stopped, 'one stop, however often asked');
  await settle();
  t.deepEqual(trace, ['stop audit'], 'nothing else stops while the server drains');
  t.true(election.released, 'the lease is released before the server drains');
  releaseServer();
  await stopped;
  t.deepEqual(trace, ['stop audit', 'stop server', 'stop rollout', 'stop namespaces', 'stop templates']);
  t.deepEqual(leading, [false, true, false]);
  t.throws(() => manager.add(traced(trace, 'late')), { message: /late added after the start/ });
});

test('following stops the leader-only parts; leading again starts them again', async (t) => {
  const trace: string[] = [];
  const election = new TestElection();
  const manager = new Manager({ log: silent, election });
  manager.add(traced(trace, 'audit', { status: () => ({ pods: 3 }) }), 'leader').add(traced(trace, 'server'), 'server');
  await manager.start();
  election.lead(true);
  await settle();
  election.lead(false);
  await settle();
  election.lead(true);
  await settle();
  t.deepEqual(trace, ['start server', 'start audit', 'stop audit', 'start audit']);
  // A flap faster than a transition: the leader-only parts follow where it ends, once.
  election.lead(false);
  election.lead(true);
  await settle();
  t.deepEqual(trace.slice(4), []);
  t.deepEqual(manager.status(), { audit: { pods: 3 } }, 'a leader-only part says its status also while it follows');
  await manager.stop();
  t.deepEqual(trace.slice(-2), ['stop audit', 'stop server']);
});

test('a lead won while the rest still starts runs no leader-only part until everything runs', async (t) => {
  const trace: string[] = [];
  const election = new TestElection(trace);
  const leading: boolean[] = [];
  const manager = new Manager({ log: silent, election, onLeading: (l) => leading.push(l) });
  let releaseCertificate!: () => void;
  manager
    .add(
      traced(trace, 'certificate', { start: () => new Promise<void>((resolve) => (releaseCertificate = () => (trace.push('start certificate'), resolve()))) }),
    )
    .add(traced(trace, 'server'), 'server')
    .add(traced(trace, 'audit'), 'leader');
  const started = manager.start();
  await settle();
  election.lead(true);
  await settle();
  t.deepEqual(trace, ['start election'], 'leading, and still no audit while the certificate is awaited');
  t.deepEqual(leading, [false, true], 'the gauge says it leads at once');
  releaseCertificate();
  await started;
  await settle();
  t.deepEqual(trace, ['start election', 'start certificate', 'start server', 'start audit']);
  await manager.stop();
});

test('a leader transition that fails is logged, and the next one and the stop still run', async (t) => {
  const trace: string[] = [];
  const election = new TestElection(trace);
  let fail = true;
  const manager = new Manager({ log: silent, election });
  manager.add(
    traced(trace, 'audit', {
      start: () => {
        if (fail) throw new Error('no');
        trace.push('start audit');
      },
    }),
    'leader',
  );
  await manager.start();
  election.lead(true);
  await settle();
  t.false(trace.includes('start audit'));
  fail = false;
  election.lead(false);
  await settle();
  election.lead(true);
  await settle();
  t.is(trace.at(-1), 'start audit');
  await manager.stop();
  t.is(trace.at(-1), 'stop audit');
});

test('at a stop every part ends its leader work before the lease is released', async (t) => {
  const trace: string[] = [];
  const election = new TestElection(trace);
  const manager = new Manager({ log: silent, election });
  manager.add(traced(trace, 'certificate', { quiesce: async () => void trace.push(`quiesce certificate (leading: ${election.leading})`) }));
  await manager.start();
  election.lead(true);
  await settle();
  await manager.stop();
  t.deepEqual(trace, ['start election', 'start certificate', 'quiesce certificate (leading: true)', 'stop certificate']);
  t.true(election.released);
});

test('a start that fails stops what started, in reverse, and rejects; nothing after it starts', async (t) => {
  const trace: string[] = [];
  const manager = new Manager({ log: silent });
  manager
    .add(traced(trace, 'templates'), 'source')
    .add(
      traced(trace, 'certificate', {
        start: () => {
          throw new Error('no certificate');
        },
      }),
    )
    .add(traced(trace, 'server'), 'server');
  await t.throwsAsync(manager.start(), { message: 'no certificate' });
  t.deepEqual(trace, ['start templates', 'stop templates']);
  t.false(manager.ready());
});

test('ready only while running and every part that can say is ready', async (t) => {
  let synced = false;
  const manager = new Manager({ log: silent });
  manager.add({ name: 'namespaces', start: () => undefined, stop: () => undefined, ready: () => synced }, 'source');
  t.false(manager.ready(), 'not before the start');
  await manager.start();
  t.false(manager.ready());
  synced = true;
  t.true(manager.ready());
  const stopping = manager.stop();
  t.false(manager.ready(), 'not while stopping');
  await stopping;
});

test('a part that fails or hangs does not keep the others from stopping', async (t) => {
  // A clock whose timers fire at once: the hanging part's limit passes without waiting.
  const instant: Clock = { ...systemClock, after: (_ms, fn) => (queueMicrotask(fn), { cancel: () => undefined }) };
  const trace: string[] = [];
  const manager = new Manager({ log: silent, clock: instant });
  manager
    .add(traced(trace, 'first'), 'source')
    .add(traced(trace, 'hangs', { stop: () => new Promise<void>(() => undefined) }))
    .add(
      traced(trace, 'fails', {
        stop: () => {
          throw new Error('no');
        },
      }),
      'server',
    );
  await manager.start();
  trace.length = 0;
  await manager.stop();
  t.deepEqual(trace, ['stop first']);
});

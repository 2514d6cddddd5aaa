/** The reflector (kube-api/reflector.ts) where its callers fail: what it knows never silently differs from the server. */
import test from 'ava';
import { once } from 'node:events';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { Reflector } from '../src/kube-api/reflector.js';
import { FakeApiServer } from './helpers/fake-apiserver.js';
import { FakeClock } from './helpers/fake-clock.js';
import { until } from './helpers/until.js';

interface Named {
  metadata?: { name?: string; resourceVersion?: string };
}

test('an event the caller cannot apply is not lost: the watch ends, the error is logged, and a list replaces everything', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const lines: Record<string, unknown>[] = [];
  const log = pino(
    { level: 'info' },
    new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    }),
  );
  const known = new Map<string, string>();
  let poisoned = 1;
  const reflector = new Reflector<Named>({
    kubeConfig: await api.kubeConfig(),
    log,
    path: '/api/v1/namespaces',
    what: 'namespace',
    backoffInitialMs: 5,
    backoffMaxMs: 50,
    replace: (items) => {
      known.clear();
      for (const item of items) known.set(item.metadata!.name!, item.metadata!.resourceVersion!);
    },
    apply: (type, object) => {
      // The caller fails once on this object: a bug, or an object it did not expect.
      if (object.metadata?.name === 'poison' && poisoned-- > 0) throw new Error('cannot apply this one');
      if (type === 'DELETED') known.delete(object.metadata!.name!);
      else known.set(object.metadata!.name!, object.metadata!.resourceVersion!);
    },
  });
  t.teardown(async () => {
    reflector.stop();
    await api.stop();
  });
  const watching = once(api.events, 'watch');
  reflector.start();
  await watching;
  t.is(api.listCount, 1);
  api.create('poison');
  await until(() => known.has('poison'), 'the failed object known after all');
  t.is(api.listCount, 2, 'listed again');
  t.true(
    lines.some(
      (l) =>
        l.level === 50 && l.msg === 'namespace watch event could not be applied; listing again' && l.name === 'poison' && l.err === 'cannot apply this one',
    ),
    'the failure logged as an error',
  );
  // And the next watch applies what follows.
  api.create('after');
  await until(() => known.has('after'), 'a later event applied');
  t.is(api.listCount, 2);
});

test('an object that always fails to apply is listed again ever more slowly, not once per event', async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const clock = new FakeClock();
  const known = new Set<string>();
  const reflector = new Reflector<Named>({
    kubeConfig: await api.kubeConfig(),
    log: pino({ level: 'silent' }),
    path: '/api/v1/namespaces',
    what: 'namespace',
    clock,
    backoffInitialMs: 100,
    backoffMaxMs: 10_000,
    replace: (items) => {
      known.clear();
      for (const item of items) known.add(item.metadata!.name!);
    },
    apply: (_type, object) => {
      if (object.metadata?.name === 'poison') throw new Error('cannot apply this one');
    },
  });
  t.teardown(async () => {
    reflector.stop();
    await api.stop();
  });
  const watched = () => once(api.events, 'watch');
  let watching = watched();
  reflector.start();
  await watching;
  // Each failure ends the watch; the list after it comes after a backoff that doubles (±20 %).
  const failed = () => once(reflector, 'rejected');
  let failing = failed();
  api.create('poison');
  await failing;
  watching = watched();
  await clock.advance(120);
  await watching;
  t.is(api.listCount, 2, 'listed again after the first backoff (80–120 ms)');
  t.true(known.has('poison'));
  failing = failed();
  api.update('poison', { again: '1' });
  await failing;
  await clock.advance(150);
  t.is(api.listCount, 2, 'not yet: the second backoff is 160–240 ms, the list did not reset it');
  watching = watched();
  await clock.advance(100);
  await watching;
  t.is(api.listCount, 3);
});

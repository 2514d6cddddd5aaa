import test from 'ava';
import { pino } from 'pino';
import { Runtime } from './runtime.js';
import { systemClock, type Clock } from '../clock.js';

const silent = pino({ level: 'silent' });

test('parts stop in the reverse order they started, each awaited before the next', async (t) => {
  const runtime = new Runtime({ log: silent });
  const trace: string[] = [];
  let releaseAudit!: () => void;
  runtime.add('sources', () => void trace.push('sources'));
  runtime.add('server', async () => {
    trace.push('server');
  });
  runtime.add('audit', () => new Promise<void>((resolve) => (releaseAudit = () => (trace.push('audit'), resolve()))));
  t.deepEqual(runtime.stopOrder(), ['audit', 'server', 'sources']);
  const stopped = runtime.stop();
  t.is(runtime.stop(), stopped, 'one stop, however often asked');
  await Promise.resolve();
  t.deepEqual(trace, [], 'nothing else stops while the audit is still releasing its lease');
  releaseAudit();
  await stopped;
  t.deepEqual(trace, ['audit', 'server', 'sources']);
  t.throws(() => runtime.add('late', () => undefined), { message: /while the process is stopping/ });
});

test('a part that fails or hangs does not keep the others from stopping', async (t) => {
  // A clock whose timers fire at once: the hanging part's limit passes without waiting.
  const instant: Clock = { ...systemClock, after: (_ms, fn) => (queueMicrotask(fn), { cancel: () => undefined }) };
  const runtime = new Runtime({ log: silent, clock: instant });
  const trace: string[] = [];
  runtime.add('first', () => void trace.push('first'));
  runtime.add('hangs', () => new Promise<void>(() => undefined));
  runtime.add('fails', () => {
    throw new Error('no');
  });
  await runtime.stop();
  t.deepEqual(trace, ['first']);
});

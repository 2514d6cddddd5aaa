import test from 'ava';
import { BodyBudget, isJsonMediaType, jsonBody, jsonDepthExceeds } from './body.js';
import { RequestError } from '../errors.js';

const bytes = (s: string) => Buffer.from(s);

test('depth counts arrays and objects and skips strings, escapes included', (t) => {
  t.false(jsonDepthExceeds(bytes('{"a":[1,{"b":2}]}'), 3));
  t.true(jsonDepthExceeds(bytes('{"a":[1,{"b":2}]}'), 2));
  t.false(jsonDepthExceeds(bytes('{"a":"[[[[{{{{"}'), 1));
  t.false(jsonDepthExceeds(bytes('{"a":"\\"[[[[\\\\"}'), 1));
  t.true(jsonDepthExceeds(bytes(`${'['.repeat(1001)}${']'.repeat(1001)}`), 1000));
  t.false(jsonDepthExceeds(bytes(`${'['.repeat(1000)}${']'.repeat(1000)}`), 1000));
  t.false(jsonDepthExceeds(bytes('{"ü":"[ÿ"}'), 1));
});

test('media types: application/json with parameters, any case', (t) => {
  t.true(isJsonMediaType('application/json'));
  t.true(isJsonMediaType('Application/JSON; charset=utf-8'));
  t.false(isJsonMediaType('application/jsonx'));
  t.false(isJsonMediaType('text/json'));
  t.false(isJsonMediaType(undefined));
  t.false(isJsonMediaType(''));
});

test('a body that closes a bracket it never opened is refused before parsing', (t) => {
  const error = t.throws(() => jsonBody(Buffer.alloc(7 * 1024 * 1024, 0x5d)));
  t.is((error as RequestError).status, 400);
  t.is((error as RequestError).code, 'ERR_MALFORMED_JSON');
  t.regex(error!.message, /closes a bracket it never opened/);
  t.notThrows(() => jsonBody(Buffer.from('{"a":"]}"}')));
});

/** A clock that stands still until moved. */
const standingClock = (start = 0) => {
  let time = start;
  return { now: () => time, after: () => ({ cancel: () => undefined }), every: () => ({ cancel: () => undefined }), move: (ms: number) => (time += ms) };
};

const mib = 1024 * 1024;

test('the body budget: stalled large uploads are cut, largest first, to make room for a smaller body', (t) => {
  const clock = standingClock();
  const budget = new BodyBudget(16 * mib, clock);
  const cut: string[] = [];
  const stalled = [0, 1, 2].map((i) => budget.open((e) => cut.push(`${i}: ${e.message}`), 6_000_000 + i));
  // Three uploads at 5.65 MB each take the whole budget, fast: none is slow yet.
  for (const [i, upload] of stalled.entries()) t.is(upload.receive(5_650_000 + i), true);
  t.true(budget.inUse > 16 * mib - 200_000);
  const review = budget.open(() => t.fail('a smaller review is never cut'), 150_000);
  t.true(review.receive(150_000), 'the 150 KB review fits by cutting one upload');
  t.is(cut.length, 1);
  t.regex(cut[0]!, /^2: request body cut to make room for another review: .* was larger; try again$/);
  t.is(stalled[2]!.held, 0, 'its bytes are back');
  review.complete = true;
  // A whole body is never cut, however large, and a larger asker cuts nobody smaller and fast.
  const larger = budget.open(() => undefined, 6_000_000 + 2);
  t.false(larger.receive(6 * mib), 'nothing smaller or as large, and fast, may be cut for it');
  t.is(cut.length, 1, 'a refusal cuts nobody');
  review.release();
  review.release();
  t.is(budget.bodies, 3);
});

test('the body budget: an upload slower than the minimum rate is cut first, whatever its size', (t) => {
  const clock = standingClock();
  const budget = new BodyBudget(4 * mib, clock);
  const cut: number[] = [];
  const slow = budget.open(() => cut.push(0));
  t.true(slow.receive(mib + 64 * 1024));
  clock.move(500);
  const fast = budget.open(() => cut.push(1));
  t.true(fast.receive(2 * mib + 64 * 1024));
  // Two seconds in, the first has sent 1 MiB (half the minimum rate), the second 2 MiB in 1.5 s.
  clock.move(1500);
  const asker = budget.open(() => cut.push(2));
  t.true(asker.receive(1.5 * mib + 64 * 1024));
  t.deepEqual(cut, [0], 'the slow one goes, though the larger one could have gone too');
  t.is(budget.inUse, 2 * mib + 1.5 * mib);
});

test('the body budget: an upload is not judged slow in its first second', (t) => {
  const clock = standingClock();
  const budget = new BodyBudget(2 * mib, clock);
  const cut: number[] = [];
  const early = budget.open(() => cut.push(0));
  t.true(early.receive(0.5 * mib + 64 * 1024));
  clock.move(900);
  const asker = budget.open(() => cut.push(1));
  t.false(asker.receive(1.6 * mib + 64 * 1024), 'smaller than the asker, and not yet judged');
  t.deepEqual(cut, []);
  clock.move(200);
  const again = budget.open(() => cut.push(2));
  t.true(again.receive(1.6 * mib + 64 * 1024), 'past its first second at half the minimum rate: cut');
  t.deepEqual(cut, [0]);
});

test('the body budget: cuts are made only when they make room', (t) => {
  const clock = standingClock();
  const budget = new BodyBudget(2 * mib, clock);
  const cut: number[] = [];
  const slow = budget.open(() => cut.push(0));
  t.true(slow.receive(0.5 * mib + 64 * 1024));
  const whole = budget.open(() => cut.push(1));
  t.true(whole.receive(1.5 * mib + 64 * 1024));
  whole.complete = true;
  clock.move(5000);
  // Cutting the slow upload frees 0.5 MiB: not enough for 1 MiB beside the whole body.
  const asker = budget.open(() => cut.push(2));
  t.false(asker.receive(mib + 64 * 1024));
  t.deepEqual(cut, []);
  t.is(budget.inUse, 2 * mib);
});

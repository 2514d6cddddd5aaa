/**
 * The suite's one way to wait: until a condition holds, checked on each turn of the event loop
 * and every few milliseconds. Never a sleep standing in for "long enough"; a condition that never
 * comes fails the test through ava's timeout, with `what` in the message when given.
 */
export async function until(predicate: () => boolean | Promise<boolean>, what = 'a condition'): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`waited 30 s for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

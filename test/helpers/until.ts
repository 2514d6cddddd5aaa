/**
 * The suite's one way to wait: until a condition holds, checked on each turn of the event loop
 * and every few milliseconds. Never a sleep standing in for "long enough", and no clock: a
 * condition still false after 15,000 checks (half a minute on an idle machine, longer on a busy
 * one, never shorter) fails with `what` in the message.
 */
export async function until(predicate: () => boolean | Promise<boolean>, what = 'a condition'): Promise<void> {
  for (let checks = 0; !(await predicate()); checks++) {
    if (checks >= 15_000) throw new Error(`${what} did not come in 15,000 checks`);
    // The poll's pace, not a wait for anything: the condition is what is waited on.
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
}

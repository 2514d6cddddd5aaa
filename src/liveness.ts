/**
 * Is this replica still able to answer reviews? `/healthz` asks, and the kubelet restarts a
 * replica that says no. Readiness says "send me traffic"; liveness says "I am not broken":
 * a process whose reviews fail for an internal reason (a polluted Object.prototype, a bug
 * that throws on every pod) must be restarted, not kept serving 500s behind a green probe.
 */

/** Consecutive internal failures of /mutate, with no success between, that make a replica unhealthy. */
const maxConsecutiveInternalErrors = 5;

/** Own property names of the prototypes a hostile key could pollute. */
function prototypeShape(): string {
  return [Object.prototype, Array.prototype, Function.prototype, String.prototype].map((proto) => Object.getOwnPropertyNames(proto).sort().join(',')).join('|');
}

/** Tracks review outcomes and checks the process's invariants. */
export class Liveness {
  private consecutiveInternalErrors = 0;
  private readonly shape = prototypeShape();

  /** `canary` runs one review of a known pod through the real pipeline and throws if it fails. */
  constructor(private readonly canary?: () => Promise<void>) {}

  reviewAnswered(): void {
    this.consecutiveInternalErrors = 0;
  }

  reviewFailed(): void {
    this.consecutiveInternalErrors++;
  }

  /** Problems that make this replica unhealthy; empty when healthy. */
  async problems(): Promise<string[]> {
    const problems: string[] = [];
    if (prototypeShape() !== this.shape) problems.push('a built-in prototype was modified since start; the process state cannot be trusted');
    if (this.consecutiveInternalErrors >= maxConsecutiveInternalErrors) {
      problems.push(`the last ${this.consecutiveInternalErrors} reviews failed with an internal error`);
    }
    if (this.canary) {
      try {
        await this.canary();
      } catch (err) {
        problems.push(`a review of a sample pod failed: ${(err as Error).message.slice(0, 200)}`);
      }
    }
    return problems;
  }
}

// Teardown after a test that may have failed half-way: every step runs even when one before it failed, and the
// failures are named together at the end, as a warning (a cleanup must not hide the test's own failure).

export interface Teardown {
  /** Runs `fn`; a throw is remembered under `what` and the next step runs. */
  step: (what: string, fn: () => Promise<unknown>) => Promise<void>;
  /** Warns, under `who`, of every step that failed (nothing when none did). */
  report: (who: string) => void;
}

export function teardown(): Teardown {
  const errors: string[] = [];
  return {
    async step(what, fn) {
      try {
        await fn();
      } catch (e) {
        errors.push(`${what}: ${(e as Error).message}`);
      }
    },
    report(who) {
      if (errors.length) console.warn(`${who}: ${errors.join('; ')}`);
    },
  };
}

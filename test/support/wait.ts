// Polling for the e2e suites that watch a process from outside (the agent's port, its log, a metric).

/**
 * Polls `pred` every `everyMs` until it holds or `ms` pass. A throw counts as "not yet" (an agent's port is not open
 * before it listens) and the last one is named at the timeout.
 */
export async function waitFor(what: string, pred: () => Promise<boolean> | boolean, ms = 30_000, everyMs = 100): Promise<void> {
  const end = Date.now() + ms;
  let last: unknown;
  while (Date.now() < end) {
    try {
      if (await pred()) return;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
}

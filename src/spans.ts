// This call's clock and spans, for the log line's `timings` (plugin.ts, docs/performance.md). One helper, so every
// verb names and ends its spans the same way.
//
// process.uptime() counts from this process's start (in the single executable too, not from the snapshot build)
// and loads nothing. The `performance` global would load perf_hooks' timeline into every call's startup snapshot
// (~150 KB of heap, measured) and, in the long-running node agent, keep every entry ever measured.

/** Milliseconds since this process started. */
export const sinceStart = (): number => process.uptime() * 1000;

/**
 * CPU (user + system, ms) this process has used so far, its own threads only (not the children it ran). At main
 * it is what Node's start-up and the startup snapshot cost before any of our code ran (the log line's `cpu.boot`).
 */
export const cpuSoFar = (): number => {
  const { user, system } = process.cpuUsage();
  return (user + system) / 1000;
};

/** Span name → duration (ms) of this call; a span recorded twice keeps the later one. */
const recorded = new Map<string, number>();

/**
 * Starts a span named `name` now; the returned function ends it. For a wait that ends inside someone else's
 * callback (the attachment lock: the span ends where the locked function starts). Only the first call counts.
 */
export function span(name: string): () => void {
  const start = sinceStart();
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    recorded.set(name, sinceStart() - start);
  };
}

/** Runs fn as a span named `name`: measured when fn settles, also when it throws (a failed call's line shows it). */
export async function timed<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const end = span(name);
  try {
    return await fn();
  } finally {
    end();
  }
}

/** The spans ended so far (in the order each name first ended), and forgets them. */
export function takeSpans(): Array<[name: string, ms: number]> {
  const out = [...recorded];
  recorded.clear();
  return out;
}

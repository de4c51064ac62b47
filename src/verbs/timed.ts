// Spans for the call's log line: plugin.ts puts every performance.measure of the process in `timings`
// (docs/performance.md). One helper, so every verb names and ends its spans the same way.

/** Runs fn as a span named `name`: measured when fn settles, also when it throws (a failed call's line shows it). */
export async function timed<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const end = span(name);
  try {
    return await fn();
  } finally {
    end();
  }
}

/**
 * Starts a span named `name` now; the returned function ends it. For a wait that ends inside someone else's
 * callback (the attachment lock: the span ends where the locked function starts). Only the first call counts.
 */
export function span(name: string): () => void {
  performance.mark(name);
  let ended = false;
  return () => {
    if (ended) return;
    ended = true;
    performance.measure(name, name);
  };
}

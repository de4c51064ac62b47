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

/** One span of this call, started by span(); only its first end counts. */
export interface Span extends Disposable {
  /** Ends it now. A plain function, so it can be handed on as a callback (`.finally(s.end)`). */
  readonly end: () => void;
}

/**
 * Starts a span named `name` now. The caller ends it where the phase ends, reading straight down:
 *
 *     using adding = span('delegate.add');
 *     const result = await delegate.add(conf);
 *     adding.end();
 *
 * Declared with `using`, it also ends when a throw leaves the block (a failed call's line shows how long the
 * failing step took); declared with `const`, a span that never reached its `end()` is not recorded (ADD's
 * intent write: only a written intent record has a duration).
 */
export function span(name: string): Span {
  const start = sinceStart();
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    recorded.set(name, sinceStart() - start);
  };
  return { end, [Symbol.dispose]: end };
}

/** The spans ended so far (in the order each name first ended), and forgets them. */
export function takeSpans(): Array<[name: string, ms: number]> {
  const out = [...recorded];
  recorded.clear();
  return out;
}

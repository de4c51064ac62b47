// The agent's `confirmed` gc mode: a leak is released only once every pass over a window has found it leaked.
// PURE: the agent step (src/gc/agent-step.ts) feeds it each pass's plan and releases what it confirms.
//
// Memory only, by choice: an agent restart starts every clock again. A persisted first-seen time would let a
// restart count the minutes nobody looked (a pass that never ran cannot have found the leak), and a wall-clock
// time read back after a clock step could shorten the window; starting afresh can only make it longer.
import { attachmentKey } from '../ledger/key.js';
import type { LedgerRecord } from '../ledger/record.js';

/** The shipped window: leaked in every pass for at least 15 minutes (Calico's kube-controllers' grace) … */
export const DEFAULT_CONFIRM_AFTER_MS = 15 * 60_000;
/** … and in at least this many passes. */
export const DEFAULT_CONFIRM_PASSES = 3;

export interface ConfirmWindow {
  afterMs: number;
  passes: number;
}

/** One leak awaiting confirmation: when a pass first found it (monotonic ms) and in how many passes since. */
export interface Sighting {
  /** The record's updatedAt: a record rewritten since (a reused container ID) is another leak, counted afresh. */
  updatedAt: string;
  firstSeenMs: number;
  /** The wall-clock time of the first sighting, for the log line only. */
  firstSeenAt: string;
  passes: number;
}

/** The leaks seen so far, by attachment key: what the gc step keeps from pass to pass (Pass.state). */
export interface Confirmations {
  seen: Map<string, Sighting>;
}

export const newConfirmations = (): Confirmations => ({ seen: new Map() });

/** A pass that could not look (cache unreadable, refused, the step failed): every clock starts again. */
export function forgetAll(c: Confirmations): void {
  c.seen.clear();
}

/**
 * Records this pass's leaks (the plan's `release`: every proof apply needs) and answers which have been leaked in
 * every pass for at least `w.afterMs` and in at least `w.passes` passes. A leak this pass did not find is forgotten:
 * found again, it starts afresh.
 */
export function confirmLeaks<T extends { record: LedgerRecord }>(
  c: Confirmations,
  leaks: T[],
  nowMs: number,
  nowAt: string,
  w: ConfirmWindow,
): { confirmed: Array<T & { sighting: Sighting }>; awaiting: Array<T & { sighting: Sighting }> } {
  const next = new Map<string, Sighting>();
  const confirmed: Array<T & { sighting: Sighting }> = [];
  const awaiting: Array<T & { sighting: Sighting }> = [];
  for (const leak of leaks) {
    const key = attachmentKey(leak.record);
    const prev = c.seen.get(key);
    const sighting: Sighting =
      prev && prev.updatedAt === leak.record.updatedAt
        ? { ...prev, passes: prev.passes + 1 }
        : { updatedAt: leak.record.updatedAt, firstSeenMs: nowMs, firstSeenAt: nowAt, passes: 1 };
    next.set(key, sighting);
    (sighting.passes >= w.passes && nowMs - sighting.firstSeenMs >= w.afterMs ? confirmed : awaiting).push({ ...leak, sighting });
  }
  c.seen = next;
  return { confirmed, awaiting };
}

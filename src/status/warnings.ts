// When STATUS logs the fixes' lasting warnings (PURE). STATUS runs on every CRI Status: every 5 s per node, every
// ~100 ms while a node boots. A condition that lasts (delegate ranges overlapping reservedCIDRs) logged on each call
// is ~17,000 lines a day per node that drown everything else; logged when it appears or changes, and once an hour
// while it lasts, it is 24, and a rotated log still shows it within the hour.

/** How often a warning that has not changed is logged again. */
export const WARNING_REPEAT_MS = 3_600_000;

/** At most this much of the warnings' text is remembered (the memo stays a few hundred bytes). */
const MAX_FINGERPRINT = 4096;

export interface WarningMemo {
  /** What was last logged (or `''`: nothing to warn about), as text. */
  warned?: string;
  /** When it was last logged, ms since the epoch. */
  warnedAt?: number;
}

export interface WarningDecision {
  /** Log the warnings now. */
  log: boolean;
  /** The warnings were logged before and are gone now: say so once. */
  cleared: boolean;
  /** The memo fields to store, or undefined when the stored ones stay right. */
  memo: WarningMemo | undefined;
}

export const warningFingerprint = (warnings: readonly unknown[]): string =>
  warnings.length ? JSON.stringify(warnings).slice(0, MAX_FINGERPRINT) : '';

export function decideWarnings(fingerprint: string, memo: WarningMemo, now: number): WarningDecision {
  const before = memo.warned ?? '';
  if (fingerprint !== before) return { log: fingerprint !== '', cleared: fingerprint === '', memo: { warned: fingerprint, warnedAt: now } };
  if (fingerprint === '') return { log: false, cleared: false, memo: undefined };
  // Unchanged: again once the hour is up (or when the clock went back past the last one).
  const at = memo.warnedAt ?? 0;
  if (now - at >= WARNING_REPEAT_MS || at > now) return { log: true, cleared: false, memo: { warned: fingerprint, warnedAt: now } };
  return { log: false, cleared: false, memo: undefined };
}

// Where STATUS remembers its last verdicts between calls: `<stateDir>/<network>/.status.json`, a few numbers and the
// warnings last logged (src/status/warnings.ts),
// written only when they change (a healthy node writes nothing after its first STATUS), atomically (temp file +
// rename: a killed call leaves the old memo or the new one) and without fsync (a memo lost to a power loss only
// costs one tolerated blip; the ledger's durability policy, src/effects/fs-atomic.ts).
import { join } from 'node:path';
import { readFileNoFollowSync, writeFileAtomic } from '../effects/fs-atomic.js';
import type { StatusMemo } from './decide.js';
import type { WarningMemo } from './warnings.js';

/** Everything the memo file holds. */
export type StoredMemo = StatusMemo & WarningMemo;

const FIELDS = ['healthySince', 'failingSince', 'failures', 'failedAt', 'warnedAt'] as const;

const memoPath = (ledgerDir: string): string => join(ledgerDir, '.status.json');

/** The stored memo; anything missing or unreadable is an empty one (nothing remembered: no grace). */
export function readMemo(ledgerDir: string): StoredMemo {
  try {
    const raw = JSON.parse(readFileNoFollowSync(memoPath(ledgerDir)) ?? '{}') as Record<string, unknown>;
    const memo: StoredMemo = {};
    for (const k of FIELDS) if (Number.isSafeInteger(raw[k]) && (raw[k] as number) >= 0) memo[k] = raw[k] as number;
    if (typeof raw.warned === 'string') memo.warned = raw.warned;
    return memo;
  } catch {
    return {};
  }
}

export async function writeMemo(ledgerDir: string, memo: StoredMemo): Promise<void> {
  await writeFileAtomic(memoPath(ledgerDir), JSON.stringify(memo), { durable: false });
}

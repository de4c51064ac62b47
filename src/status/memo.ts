// Where STATUS remembers its last verdicts between calls: `<stateDir>/<network>/.status.json`, a few numbers,
// written only when they change (a healthy node writes nothing after its first STATUS), atomically (temp file +
// rename: a killed call leaves the old memo or the new one) and without fsync (a memo lost to a power loss only
// costs one tolerated blip; the ledger's durability policy, src/effects/fs-atomic.ts).
import { join } from 'node:path';
import { readFileNoFollowSync, writeFileAtomic } from '../effects/fs-atomic.js';
import type { StatusMemo } from './decide.js';

const FIELDS = ['healthySince', 'failingSince', 'failures', 'failedAt'] as const;

const memoPath = (ledgerDir: string): string => join(ledgerDir, '.status.json');

/** The stored memo; anything missing or unreadable is an empty one (nothing remembered: no grace). */
export function readMemo(ledgerDir: string): StatusMemo {
  try {
    const raw = JSON.parse(readFileNoFollowSync(memoPath(ledgerDir)) ?? '{}') as Record<string, unknown>;
    const memo: StatusMemo = {};
    for (const k of FIELDS) if (Number.isSafeInteger(raw[k]) && (raw[k] as number) >= 0) memo[k] = raw[k] as number;
    return memo;
  } catch {
    return {};
  }
}

export async function writeMemo(ledgerDir: string, memo: StatusMemo): Promise<void> {
  await writeFileAtomic(memoPath(ledgerDir), JSON.stringify(memo), { durable: false });
}

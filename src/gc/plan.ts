// Which ledger attachments GC may release. Pure: the effects (netns probes, delegate DELs) happen around it,
// so the GC verb, `ipam-shim gc` and its dry run all decide the same way.
import type { Attachment } from '../cni/config.js';
import { attachmentKey } from '../ledger/key.js';
import type { LedgerRecord, Liveness } from '../ledger/record.js';

type KeepReason = 'valid' | 'agent' | 'alive' | 'unknown' | 'recent';

export interface GcPlan {
  /** What the delegate's GC gets as its valid list: valid ∪ everything kept here. */
  keep: Attachment[];
  kept: Array<{ record: LedgerRecord; reason: KeepReason }>;
  release: Array<{ record: LedgerRecord; reason: string }>;
  /**
   * Chained records the runtime DELed (`deletedAt`), not valid and provably gone: the main plugin's DEL released the
   * address, or never completed (the runtime lost its entry). Not leaks: with apply released through the delegate's
   * DEL (a no-op when the main plugin did it: DEL is per attachment), else only forgotten, as DEL did before.
   */
  deleted: Array<{ record: LedgerRecord; reason: string }>;
}

export interface GcInputs {
  records: LedgerRecord[];
  valid: Attachment[];
  /** Liveness per record key ("cid:ifname"), probed by the caller for records not otherwise kept. */
  liveness: ReadonlyMap<string, Liveness>;
  now: number;
  /** Records younger than this are kept (an ADD may be in flight when GC is not exclusive). */
  graceMs: number;
}

/** Records that need a liveness probe: not valid, not the agent's. */
export function needsProbe(records: LedgerRecord[], valid: Attachment[]): LedgerRecord[] {
  const validKeys = new Set(valid.map(attachmentKey));
  return records.filter((r) => r.owner !== 'agent' && !validKeys.has(attachmentKey(r)));
}

export function planGc({ records, valid, liveness, now, graceMs }: GcInputs): GcPlan {
  const validKeys = new Set(valid.map(attachmentKey));
  const plan: GcPlan = { keep: valid.map(({ containerID, ifname }) => ({ containerID, ifname })), kept: [], release: [], deleted: [] };
  const keep = (record: LedgerRecord, reason: KeepReason) => {
    plan.kept.push({ record, reason });
    if (!validKeys.has(attachmentKey(record))) plan.keep.push({ containerID: record.containerID, ifname: record.ifname });
  };
  for (const record of records) {
    const key = attachmentKey(record);
    if (validKeys.has(key)) keep(record, 'valid');
    else if (record.owner === 'agent') keep(record, 'agent');
    else if (now - Date.parse(record.updatedAt) < graceMs) keep(record, 'recent');
    else {
      const state = liveness.get(key) ?? 'unknown';
      if (state === 'alive') keep(record, 'alive');
      else if (state === 'unknown') keep(record, 'unknown');
      else if (record.deletedAt)
        plan.deleted.push({ record, reason: 'DELed by the runtime, no longer cached, and its sandbox is gone or holds none of its addresses' });
      else
        plan.release.push({
          record,
          reason:
            record.state === 'intent'
              ? 'ADD never completed and the sandbox holds none of its addresses'
              : 'not valid and its sandbox is gone or holds none of its addresses',
        });
    }
  }
  return plan;
}

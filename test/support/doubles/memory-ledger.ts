// A ledger held in memory, for the verbs' unit tests: the LedgerStore contract without files or locks (one
// process, calls already serialised by the caller's await).
import { CniError, ErrorCode } from '../../../src/cni/errors.js';
import type { Attachment } from '../../../src/cni/config.js';
import { attachmentKey as keyOf } from '../../../src/ledger/key.js';
import { sameAttachment, type LedgerRecord } from '../../../src/ledger/record.js';
import type { LedgerListing, LedgerStore } from '../../../src/ledger/store.js';

export class MemoryLedger implements LedgerStore {
  readonly dir: string;
  readonly records = new Map<string, LedgerRecord>();

  constructor(
    readonly network: string,
    records: readonly LedgerRecord[] = [],
  ) {
    this.dir = `memory:${network}`;
    for (const r of records) this.records.set(keyOf(r), r);
  }

  async open(): Promise<this> {
    return this;
  }

  async get(a: Attachment): Promise<LedgerRecord | undefined> {
    return this.records.get(keyOf(a));
  }

  /** As the file ledger: an address another attachment's record holds is refused (code 11). */
  async put(rec: LedgerRecord): Promise<void> {
    for (const other of this.records.values()) {
      const ip = other.ips.find((i) => rec.ips.includes(i));
      if (ip && !sameAttachment(other, rec)) throw new CniError(ErrorCode.TryAgainLater, `address ${ip} is already recorded for ${keyOf(other)}`);
    }
    this.records.set(keyOf(rec), rec);
  }

  async remove(a: Attachment): Promise<LedgerRecord | undefined> {
    const rec = this.records.get(keyOf(a));
    this.records.delete(keyOf(a));
    return rec;
  }

  async list(): Promise<LedgerListing> {
    return { records: [...this.records.values()].sort((a, b) => (keyOf(a) < keyOf(b) ? -1 : 1)), corrupt: [] };
  }

  lockedAttachment<T>(_a: Attachment, _waitMs: number, fn: () => Promise<T>): Promise<T> {
    return fn();
  }

  lockedAgentOwner<T>(_owner: string, fn: () => Promise<T>): Promise<T> {
    return fn();
  }

  async assertWritable(): Promise<void> {}
}

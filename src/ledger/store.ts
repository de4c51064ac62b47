// The ledger as its users see it: the narrow interface the file store (src/effects/ledger.ts) implements and the
// in-memory one (test/support/doubles/memory-ledger.ts: the verbs' unit tests) stands in for.
import type { Attachment } from '../cni/config.js';
import type { LedgerRecord } from './record.js';

export interface LedgerListing {
  records: LedgerRecord[];
  /** Files that did not parse: GC must release nothing while any exist (it cannot prove what they held). */
  corrupt: string[];
}

/** What the verbs, GC and the agent-IP code use of a ledger. */
export interface LedgerStore {
  /** Where the records live (named in messages). */
  readonly dir: string;
  readonly network: string;
  open(): Promise<unknown>;
  get(a: Attachment): Promise<LedgerRecord | undefined>;
  put(rec: LedgerRecord): Promise<void>;
  remove(a: Attachment): Promise<LedgerRecord | undefined>;
  list(): Promise<LedgerListing>;
  lockedAttachment<T>(a: Attachment, waitMs: number, fn: () => Promise<T>): Promise<T>;
  /** Runs fn as the only allocate/release of this agent owner's IPs. */
  lockedAgentOwner<T>(owner: string, fn: () => Promise<T>): Promise<T>;
  /** Creates the ledger and proves it can be written now (STATUS); throws when not. */
  assertWritable(): Promise<void>;
}

// The shim's record of what it handed out, kept in files: one JSON file per attachment under
// <stateDir>/<network>/records, plus an index file per IP so a second owner for one address is caught in O(1).
// The layout is an upgrade contract: never rename it. What a record is (shape, format, owner, durability) is
// src/ledger/record.ts.
import { mkdirSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { CniError, ErrorCode } from '../cni/errors.js';
import type { Attachment } from '../cni/config.js';
import { attachmentKey, attachmentOfKey } from '../ledger/key.js';
import { AddressHeldError, durableFor, NewerLedgerFormatError, parseLedgerRecord, sameAttachment, type LedgerRecord } from '../ledger/record.js';
import type { LedgerListing, LedgerStore } from '../ledger/store.js';
import {
  assertPrivateDir,
  ensurePrivateDir,
  readFileNoFollow,
  readFileNoFollowSync,
  removeFile,
  writeFileAtomic,
  UnsafePathError,
} from './fs-atomic.js';
import { breakIfStale, withLock } from './lock.js';
import { attachmentLocked, networkLocked } from './ledger-locks.js';
import { assertLedgerLayout, fileIn, unsafe } from './ledger-dir.js';

/** NAME_MAX (255) minus what writeFileAtomic adds for its temp file (at most 16 bytes: fs-atomic.ts tempNameFor; 18 kept). */
const MAX_RECORD_NAME_BYTES = 255 - 18;

export { AttachmentLockError } from './ledger-locks.js';

const keyOf = attachmentKey;

export class Ledger implements LedgerStore {
  readonly dir: string;
  private readonly recordsDir: string;
  private readonly ipsDir: string;
  private ready = false;

  constructor(
    private readonly stateDir: string,
    readonly network: string,
  ) {
    this.dir = join(stateDir, network);
    this.recordsDir = join(this.dir, 'records');
    this.ipsDir = join(this.dir, 'ips');
  }

  /** Creates the directories (0700) and refuses unsafe ones (code 103 names the path). */
  async open(): Promise<this> {
    if (this.ready) return this;
    try {
      // The configured root is checked, never created-and-chmodded over: it may be a path the shim does not own.
      mkdirSync(this.stateDir, { recursive: true, mode: 0o700 });
      await assertPrivateDir(this.stateDir);
      assertLedgerLayout(this.dir);
      for (const d of [this.dir, this.recordsDir, this.ipsDir]) await ensurePrivateDir(d);
    } catch (e) {
      if (e instanceof UnsafePathError) throw unsafe(e);
      throw new CniError(ErrorCode.IoFailure, `cannot create ledger directory ${this.dir}`, { details: (e as Error).message, cause: e });
    }
    this.ready = true;
    return this;
  }

  /**
   * Read paths (get, list) create nothing but still refuse a ledger someone else could have written (code 103):
   * GC decides what to release from it. Missing directories are fine (nothing recorded).
   */
  private async verify(): Promise<void> {
    if (this.ready) return;
    for (const d of [this.stateDir, this.dir, this.recordsDir, this.ipsDir]) {
      try {
        await assertPrivateDir(d);
      } catch (e) {
        if (e instanceof UnsafePathError) throw unsafe(e);
        if ((e as { code?: string }).code === 'ENOENT') return;
        throw new CniError(ErrorCode.LedgerCorrupt, `ledger directory unreadable: ${d}`, { details: (e as Error).message, cause: e });
      }
    }
  }

  /** Every directory the ledger keeps private (0700, ours): the configured root, the network's, records and index. */
  directories(): string[] {
    return [this.stateDir, this.dir, this.recordsDir, this.ipsDir];
  }

  recordPath(a: Attachment): string {
    const name = `${keyOf(a)}.json`;
    if (Buffer.byteLength(name) > MAX_RECORD_NAME_BYTES) {
      throw new CniError(ErrorCode.InvalidEnvironment, 'CNI_CONTAINERID too long for the ledger', {
        details: `container ID and interface name may take ${MAX_RECORD_NAME_BYTES - 6} bytes together (file name limit); got ${Buffer.byteLength(name) - 6}`,
      });
    }
    return fileIn(this.recordsDir, name);
  }

  /** The record, or undefined. A file that does not parse → code 103 naming it. */
  async get(a: Attachment): Promise<LedgerRecord | undefined> {
    const path = this.recordPath(a);
    await this.verify();
    return this.readRecord(path);
  }

  private async readRecord(path: string): Promise<LedgerRecord | undefined> {
    let text: string | undefined;
    try {
      text = await readFileNoFollow(path);
    } catch (e) {
      throw new CniError(ErrorCode.LedgerCorrupt, `ledger record unreadable: ${path}`, { details: (e as Error).message, cause: e });
    }
    return parseLedgerRecord(path, text);
  }

  /** readRecord, synchronously (list(): thousands of small files in a row). */
  private readRecordSync(path: string): LedgerRecord | undefined {
    let text: string | undefined;
    try {
      text = readFileNoFollowSync(path);
    } catch (e) {
      throw new CniError(ErrorCode.LedgerCorrupt, `ledger record unreadable: ${path}`, { details: (e as Error).message, cause: e });
    }
    return parseLedgerRecord(path, text);
  }

  /**
   * Writes a record atomically. For each IP it claims the index entry; an IP that another live record holds
   * is refused (code 11: the delegate handed out an address the ledger knows is taken).
   */
  async put(rec: LedgerRecord): Promise<void> {
    await this.locked(async () => {
      for (const ip of rec.ips) {
        const holder = await this.ipHolder(ip);
        if (holder && !sameAttachment(holder, rec)) {
          throw new AddressHeldError(ip, holder, this.network);
        }
      }
      const previous = await this.get(rec);
      const durable = durableFor(rec.owner);
      await writeFileAtomic(this.recordPath(rec), `${JSON.stringify(rec)}\n`, { durable });
      for (const ip of rec.ips) await writeFileAtomic(this.ipPath(ip), keyOf(rec), { durable });
      for (const ip of previous?.ips ?? []) if (!rec.ips.includes(ip)) await this.dropIndex(ip, rec, durable);
    });
  }

  /** Removes a record and its index entries; a missing record is success (DEL is idempotent). */
  async remove(a: Attachment): Promise<LedgerRecord | undefined> {
    // A key too long to be a file name was never recorded.
    if (Buffer.byteLength(`${keyOf(a)}.json`) > MAX_RECORD_NAME_BYTES) return undefined;
    return this.locked(async () => {
      const rec = await this.get(a).catch((e) => {
        // Forgetting a corrupt record is fine; one of a newer format is not ours to forget.
        if (e instanceof CniError && e.code === ErrorCode.LedgerCorrupt && !(e instanceof NewerLedgerFormatError)) return undefined;
        throw e;
      });
      // A record that did not parse may be an agent's: its removal is made durable too (a missing one costs nothing).
      const durable = rec ? durableFor(rec.owner) : true;
      await removeFile(this.recordPath(a), { durable });
      for (const ip of rec?.ips ?? []) await this.dropIndex(ip, a, durable);
      // GC forgetting a killed ADD's attachment also removes the lock that ADD left; a live holder's stays.
      breakIfStale(this.attachmentLockPath(a));
      return rec;
    });
  }

  /** Every record (read-only); corrupt files are listed, not thrown. */
  async list(): Promise<LedgerListing> {
    await this.verify();
    let names: string[];
    try {
      names = readdirSync(this.recordsDir);
    } catch (e) {
      if ((e as { code?: string }).code === 'ENOENT') return { records: [], corrupt: [] };
      throw e;
    }
    const out: LedgerListing = { records: [], corrupt: [] };
    // One file at a time, synchronously: reading them all at once ran out of descriptors (EMFILE) at ~20k records
    // (at ~1k under a 1024 limit) and every record that failed to open read as corrupt, so GC released nothing;
    // and a sync read of a small file costs a fraction of the four thread-pool round trips of an async one.
    for (const n of names) {
      if (!n.endsWith('.json') || n.startsWith('.')) continue;
      const path = join(this.recordsDir, n);
      try {
        const rec = this.readRecordSync(path);
        if (rec) out.records.push(rec);
      } catch {
        out.corrupt.push(path);
      }
    }
    // A stable order for callers and reports; code-unit order, not localeCompare (ICU collation took 16 ms of a
    // 5,000-record GC, for an order nobody reads as language).
    const keyed = out.records.map((r) => [keyOf(r), r] as const).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    out.records = keyed.map(([, r]) => r);
    return out;
  }

  /**
   * Runs fn holding the attachment's own lock (`.attach-<containerID>:<ifname>.lock` in the network directory):
   * ADD, DEL and CHECK of one attachment run one at a time, whole (intent record, delegate, attached record or
   * undo), while other attachments go on in parallel. Code 11 when it cannot be had within `waitMs`; fn's own
   * errors pass through unchanged. Taken before the network lock, never while holding it.
   */
  async lockedAttachment<T>(a: Attachment, waitMs: number, fn: () => Promise<T>): Promise<T> {
    // A key too long to be a file name is never recorded: nothing to serialise against (fn's own ledger calls
    // refuse it, or find nothing).
    const path = this.attachmentLockPath(a);
    if (Buffer.byteLength(`${keyOf(a)}.json`) > MAX_RECORD_NAME_BYTES) return fn();
    return attachmentLocked({ path, dir: this.dir, key: keyOf(a), open: () => this.open() }, waitMs, fn);
  }

  async lockedAgentOwner<T>(owner: string, fn: () => Promise<T>): Promise<T> {
    await this.open();
    return withLock(fileIn(this.dir, `agent-${owner}.lock`), fn);
  }

  async assertWritable(): Promise<void> {
    await this.open();
    const probe = join(this.dir, '.status-probe');
    // Proves the directory takes a write now; nothing about it has to outlive anything.
    await writeFileAtomic(probe, String(Date.now()), { durable: false });
    await removeFile(probe, { durable: false });
  }

  /**
   * Counts for the metrics gauges, from the record file names alone (`<containerID>:<ifname>.json`); only the
   * records whose container ID `isAgent` accepts are opened (for their addresses), read as every reader reads a
   * record (parseLedgerRecord: one that is no record is code 103, never counted as whatever it holds). Missing
   * ledger: zeros.
   */
  async census(isAgent: (containerID: string) => boolean): Promise<{ attachments: number; agentIps: number }> {
    let all: string[];
    try {
      all = readdirSync(this.recordsDir);
    } catch (e) {
      if ((e as { code?: string }).code !== 'ENOENT') throw e;
      all = [];
    }
    const names = all.filter((n) => n.endsWith('.json') && !n.startsWith('.'));
    let agentIps = 0;
    for (const n of names) {
      if (!isAgent(attachmentOfKey(n.slice(0, -'.json'.length)).containerID)) continue;
      const rec = await this.readRecord(join(this.recordsDir, n));
      agentIps += rec?.ips.length ?? 0;
    }
    return { attachments: names.length, agentIps };
  }

  private attachmentLockPath(a: Attachment): string {
    return fileIn(this.dir, `.attach-${keyOf(a)}.lock`);
  }

  /** Runs fn under the network's lock (code 11 when it cannot be had in time). */
  async locked<T>(fn: () => Promise<T>): Promise<T> {
    await this.open();
    return networkLocked(this.dir, fn);
  }

  private ipPath(ip: string): string {
    return fileIn(this.ipsDir, ip.replaceAll(':', '_'));
  }

  private async ipHolder(ip: string): Promise<LedgerRecord | undefined> {
    const path = this.ipPath(ip);
    const key = await readFileNoFollow(path).catch((e) => {
      throw new CniError(ErrorCode.LedgerCorrupt, `ledger index entry unreadable: ${path}`, { details: (e as Error).message, cause: e });
    });
    if (!key) return undefined;
    const holder = await this.get(attachmentOfKey(key)).catch((e) => {
      if (e instanceof NewerLedgerFormatError) throw e; // its index entry stands
      return undefined;
    });
    // A stale index entry (its record is gone or no longer lists the IP) does not block anyone.
    return holder?.ips.includes(ip) ? holder : undefined;
  }

  private async dropIndex(ip: string, a: Attachment, durable: boolean): Promise<void> {
    const key = await readFileNoFollow(this.ipPath(ip)).catch(() => undefined);
    if (key === keyOf(a)) await removeFile(this.ipPath(ip), { durable });
  }
}

// The shim's record of what it handed out: one JSON file per attachment under <stateDir>/<network>/records,
// plus an index file per IP so a second owner for one address is caught in O(1). Layout and record shape
// are an upgrade contract: never rename them (records carry `v` so old ones keep reading).
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { CniError, ErrorCode, formatIssues } from '../cni/errors.js';
import type { Attachment } from '../cni/config.js';
import { ensurePrivateDir, readFileNoFollow, removeFile, writeFileAtomic, UnsafePathError } from './fs-atomic.js';
import { withLock, LockTimeoutError } from './lock.js';

export const LedgerRecordSchema = z.object({
  v: z.literal(1),
  containerID: z.string(),
  ifname: z.string(),
  network: z.string(),
  owner: z.enum(['pod', 'agent']),
  /** `intent`: written before a delegate ADD, so a crash after the delegate allocated still leaves a trace for GC. */
  state: z.enum(['intent', 'attached']),
  placement: z.enum(['chained', 'ipam', 'cli']),
  ips: z.array(z.string()),
  netns: z.string(),
  createdAt: z.string(),
  updatedAt: z.string(),
  note: z.string().optional(),
});
export type LedgerRecord = z.infer<typeof LedgerRecordSchema>;

export const sameAttachment = (a: Attachment, b: Attachment): boolean => a.containerID === b.containerID && a.ifname === b.ifname;

/** containerID cannot contain ':' (spec regex), so "<cid>:<ifname>" is unambiguous. */
const keyOf = (a: Attachment): string => `${a.containerID}:${a.ifname}`;

export interface LedgerListing {
  records: LedgerRecord[];
  /** Files that did not parse: GC must release nothing while any exist (it cannot prove what they held). */
  corrupt: string[];
}

export class Ledger {
  readonly dir: string;
  private readonly recordsDir: string;
  private readonly ipsDir: string;
  private ready = false;

  constructor(stateDir: string, readonly network: string) {
    this.dir = join(stateDir, network);
    this.recordsDir = join(this.dir, 'records');
    this.ipsDir = join(this.dir, 'ips');
  }

  /** Creates the directories (0700) and refuses unsafe ones (code 103 names the path). */
  async open(): Promise<this> {
    if (this.ready) return this;
    try {
      for (const d of [this.dir, this.recordsDir, this.ipsDir]) await ensurePrivateDir(d);
    } catch (e) {
      if (e instanceof UnsafePathError) throw new CniError(ErrorCode.LedgerCorrupt, `unsafe ledger directory: ${e.message}`, { details: e.path, cause: e });
      throw new CniError(ErrorCode.IoFailure, `cannot create ledger directory ${this.dir}`, { details: (e as Error).message, cause: e });
    }
    this.ready = true;
    return this;
  }

  recordPath(a: Attachment): string {
    return join(this.recordsDir, `${keyOf(a)}.json`);
  }

  /** The record, or undefined. A file that does not parse → code 103 naming it. */
  async get(a: Attachment): Promise<LedgerRecord | undefined> {
    return this.readRecord(this.recordPath(a));
  }

  private async readRecord(path: string): Promise<LedgerRecord | undefined> {
    let text: string | undefined;
    try {
      text = await readFileNoFollow(path);
    } catch (e) {
      throw new CniError(ErrorCode.LedgerCorrupt, `ledger record unreadable: ${path}`, { details: (e as Error).message, cause: e });
    }
    if (text === undefined) return undefined;
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch (e) {
      throw new CniError(ErrorCode.LedgerCorrupt, `ledger record corrupt: ${path}`, { details: (e as Error).message });
    }
    const r = LedgerRecordSchema.safeParse(parsed);
    if (!r.success) throw new CniError(ErrorCode.LedgerCorrupt, `ledger record corrupt: ${path}`, { details: formatIssues(r.error.issues) });
    return r.data;
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
          throw new CniError(ErrorCode.TryAgainLater, `address ${ip} is already recorded for ${keyOf(holder)} (owner ${holder.owner})`, {
            details: `network ${this.network}: the delegate handed out an address the ledger holds; has its store lost state?`,
          });
        }
      }
      const previous = await this.get(rec);
      await writeFileAtomic(this.recordPath(rec), `${JSON.stringify(rec)}\n`);
      for (const ip of rec.ips) await writeFileAtomic(this.ipPath(ip), keyOf(rec));
      for (const ip of previous?.ips ?? []) if (!rec.ips.includes(ip)) await this.dropIndex(ip, rec);
    });
  }

  /** Removes a record and its index entries; a missing record is success (DEL is idempotent). */
  async remove(a: Attachment): Promise<LedgerRecord | undefined> {
    return this.locked(async () => {
      const rec = await this.get(a).catch((e) => {
        if (e instanceof CniError && e.code === ErrorCode.LedgerCorrupt) return undefined; // forgetting a corrupt record is fine
        throw e;
      });
      await removeFile(this.recordPath(a));
      for (const ip of rec?.ips ?? []) await this.dropIndex(ip, a);
      return rec;
    });
  }

  /** Every record (read-only); corrupt files are listed, not thrown. */
  async list(): Promise<LedgerListing> {
    let names: string[];
    try {
      names = await readdir(this.recordsDir);
    } catch (e) {
      if ((e as { code?: string }).code === 'ENOENT') return { records: [], corrupt: [] };
      throw e;
    }
    const out: LedgerListing = { records: [], corrupt: [] };
    await Promise.all(
      names
        .filter((n) => n.endsWith('.json') && !n.startsWith('.'))
        .map(async (n) => {
          const path = join(this.recordsDir, n);
          try {
            const rec = await this.readRecord(path);
            if (rec) out.records.push(rec);
          } catch {
            out.corrupt.push(path);
          }
        }),
    );
    out.records.sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
    return out;
  }

  /** Runs fn under the network's lock (code 11 when it cannot be had in time). */
  async locked<T>(fn: () => Promise<T>): Promise<T> {
    await this.open();
    try {
      return await withLock(join(this.dir, 'lock'), fn);
    } catch (e) {
      if (e instanceof LockTimeoutError) throw new CniError(ErrorCode.TryAgainLater, e.message);
      throw e;
    }
  }

  private ipPath(ip: string): string {
    return join(this.ipsDir, ip.replaceAll(':', '_'));
  }

  private async ipHolder(ip: string): Promise<LedgerRecord | undefined> {
    const key = await readFileNoFollow(this.ipPath(ip));
    if (!key) return undefined;
    const sep = key.indexOf(':');
    const holder = await this.get({ containerID: key.slice(0, sep), ifname: key.slice(sep + 1) }).catch(() => undefined);
    // A stale index entry (its record is gone or no longer lists the IP) does not block anyone.
    return holder?.ips.includes(ip) ? holder : undefined;
  }

  private async dropIndex(ip: string, a: Attachment): Promise<void> {
    const key = await readFileNoFollow(this.ipPath(ip)).catch(() => undefined);
    if (key === keyOf(a)) await removeFile(this.ipPath(ip));
  }
}

/** Glob match for agentContainerIDs ("cilium-agent-*"). */
export function matchesAny(id: string, patterns: readonly string[]): boolean {
  return patterns.some((p) => new RegExp(`^${p.split('*').map(escapeRe).join('.*')}$`).test(id));
}
const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

// Is an attachment provably alive? What its recorded netns path names now, and whether that namespace holds one of
// its IPs. This module looks; src/ledger/netns-liveness.ts decides what the look proves.
import { readlinkSync, statfsSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Run } from './exec.js';
import type { LedgerRecord, Liveness, NetnsIdentity } from '../ledger/record.js';
import { type NetnsSight, type NsId, type ProcPid, type ReaderView, netnsVerdict, procPidOf } from '../ledger/netns-liveness.js';

// Synchronous stats (fs-atomic.ts: cheaper than thread-pool hops), and no fs/promises: ADD records the identity and
// probes a dead holder of its address with this (src/gc/stale.ts), and ADD does not load fs/promises.

/** statfs(2) f_type of the namespace file system (include/uapi/linux/magic.h). */
const NSFS_MAGIC = 0x6e736673;
/** statfs(2) f_type of procfs. */
const PROC_SUPER_MAGIC = 0x9fa0;

const errno = (e: unknown): string | undefined => (e as { code?: string }).code;

function nsId(path: string): NsId | undefined {
  try {
    const s = statSync(path);
    return { dev: s.dev, ino: s.ino };
  } catch {
    return undefined;
  }
}

/**
 * What `path` names now. A namespace file is told by its file system, nsfs (statfs f_type NSFS_MAGIC): stat alone
 * cannot tell, nsfs files are regular files to it, like the empty mount-point file left when the namespace was
 * unmounted. statfs, stat, statfs again: a path replaced in between is "could not look", never another verdict.
 */
function lookAtNetns(path: string): NetnsSight {
  try {
    const before = statfsSync(path).type;
    const s = statSync(path);
    if (statfsSync(path).type !== before) return { kind: 'unreadable' };
    return before === NSFS_MAGIC ? { kind: 'netns', dev: s.dev, ino: s.ino } : { kind: 'not-netns' };
  } catch (e) {
    if (errno(e) !== 'ENOENT') return { kind: 'unreadable' };
    try {
      return { kind: 'missing', dirInSight: statSync(dirname(path)).isDirectory() };
    } catch {
      return { kind: 'missing', dirInSight: false };
    }
  }
}

const procIsProcfs = (): boolean => {
  try {
    return statfsSync('/proc').type === PROC_SUPER_MAGIC;
  } catch {
    return false;
  }
};

/** This process's namespaces, and whether /proc is a procfs of its own pid namespace (/proc/self is this process). */
function readerView(): ReaderView {
  return { mntns: nsId('/proc/self/ns/mnt'), pidns: nsId('/proc/self/ns/pid'), procOwn: procIsOwn(), initMntns: nsId('/proc/1/ns/mnt') };
}

function procIsOwn(): boolean {
  try {
    return procIsProcfs() && readlinkSync('/proc/self') === String(process.pid);
  } catch {
    return false; // no /proc/self: not a /proc of ours
  }
}

/** /proc/<pid>: `vanished` only when /proc is a procfs and says ENOENT. */
function procPidState(pid: string): ProcPid {
  try {
    statSync(`/proc/${pid}`);
    return 'present';
  } catch (e) {
    return errno(e) === 'ENOENT' && procIsProcfs() ? 'vanished' : 'unknown';
  }
}

/**
 * The identity ADD keeps in the record (LedgerRecord.netnsId): the namespace `netns` names and the namespaces this
 * process sees it from, all on the one nsfs device. Undefined when the path names no namespace here.
 */
export function readNetnsIdentity(netns: string): NetnsIdentity | undefined {
  if (!netns) return undefined;
  const sight = lookAtNetns(netns);
  if (sight.kind !== 'netns') return undefined;
  const id: NetnsIdentity = { dev: sight.dev, ino: sight.ino };
  const mntns = nsId('/proc/self/ns/mnt');
  if (mntns?.dev === sight.dev) id.mntns = mntns.ino;
  const pidns = nsId('/proc/self/ns/pid');
  if (pidns?.dev === sight.dev && procIsOwn()) id.pidns = pidns.ino;
  return id;
}

/**
 * Read-only. `dead` only with proof (src/ledger/netns-liveness.ts): the netns path is gone, or names another
 * namespace or none, or its namespace holds none of the IPs (an intent record with no IPs yet counts as dead only
 * when the namespace is proven gone). Anything it cannot read is `unknown`, which GC treats as alive.
 */
export async function probeAttachment(run: Run, record: Pick<LedgerRecord, 'netns' | 'netnsId' | 'ips'>): Promise<Liveness> {
  const { netns, ips } = record;
  if (!netns) return 'dead';
  const sight = lookAtNetns(netns);
  const pid = procPidOf(netns);
  const verdict = netnsVerdict(record, sight, readerView, sight.kind === 'missing' && pid ? procPidState(pid) : 'unknown');
  if (verdict !== 'look') return verdict === 'gone' ? 'dead' : 'unknown';
  if (ips.length === 0) return 'unknown';
  const r = await run('nsenter', [`--net=${netns}`, 'ip', '-j', 'addr', 'show'], { check: false, timeoutMs: 5000 });
  if (r.exitCode !== 0) return 'unknown';
  let links: Array<{ addr_info?: Array<{ local?: string }> }>;
  try {
    links = JSON.parse(r.stdout);
  } catch {
    return 'unknown';
  }
  const present = new Set(links.flatMap((l) => (l.addr_info ?? []).map((a) => a.local)));
  return ips.some((ip) => present.has(ip)) ? 'alive' : 'dead';
}

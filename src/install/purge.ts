// `uninstall --purge`: what the shim leaves on a node besides the executable and the entry — the ledger
// (stateDir), the log with its rotated files, the metrics textfile — removed once nothing can run the shim any
// more. Only what the shim writes is removed: a stateDir holding anything but ledgers is kept whole (a stateDir
// set to a shared directory must not be emptied). cilium-agent's own addresses in the ledger are forgotten with it
// and named: they stay allocated to cilium-agent in the delegate's store (which names them too), as cilium-agent
// expects (docs/upgrade.md#removal-from-a-cluster); `agent-ip release` before the removal gives them back instead.
import { lstat, readdir, rm, rmdir, unlink } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { ShimSettings } from '../cni/config.js';
import { assertLedgerLayout } from '../effects/ledger-dir.js';
import { isErrno } from '../effects/fs-atomic.js';
import { attachmentOfKey } from '../ledger/key.js';
import { ownerOf } from '../ledger/owner.js';

export type PurgeSettings = Pick<ShimSettings, 'stateDir' | 'logFile' | 'logBackups' | 'metricsFile' | 'agentContainerIDs'>;

export interface PurgeOutcome {
  removed: string[];
  /** What stayed, and why (exit 1: the operator has something to do). */
  kept: Array<{ path: string; why: string }>;
  /** What the operator should know about what went (cilium-agent's addresses the ledger held). */
  notes: string[];
}

/** The stateDir entry that is not a network's ledger but is the shim's: the delegates' VERSION cache (src/network/open.ts). */
const OWN_STATE_ENTRIES = new Set(['.delegate-versions']);

async function kind(path: string): Promise<'absent' | 'dir' | 'file' | 'link' | 'other'> {
  try {
    const st = await lstat(path);
    return st.isSymbolicLink() ? 'link' : st.isDirectory() ? 'dir' : st.isFile() ? 'file' : 'other';
  } catch (e) {
    if (isErrno(e, 'ENOENT')) return 'absent';
    throw e;
  }
}

/** Why the ledger must stay (undefined: all of stateDir is the shim's and may go), and cilium-agent's records in it. */
async function inspectLedger(s: PurgeSettings): Promise<{ keep?: string; agents: string[] }> {
  const k = await kind(s.stateDir);
  if (k === 'absent') return { agents: [] };
  if (k !== 'dir') return { keep: `not a directory the shim made (${k}): left as it is`, agents: [] };
  const agents: string[] = [];
  for (const name of await readdir(s.stateDir)) {
    const path = join(s.stateDir, name);
    const nk = await kind(path);
    if (OWN_STATE_ENTRIES.has(name) && nk === 'dir') continue;
    if (nk !== 'dir') return { keep: `holds ${name}, which is not an ipam-shim ledger: check stateDir; left as it is`, agents };
    try {
      assertLedgerLayout(path);
    } catch (e) {
      return { keep: `${(e as Error).message}; left as it is`, agents };
    }
    const records = await readdir(join(path, 'records')).catch((e: unknown) => {
      if (isErrno(e, 'ENOENT')) return [] as string[];
      throw e;
    });
    for (const r of records) {
      if (!r.endsWith('.json') || r.startsWith('.')) continue;
      const { containerID } = attachmentOfKey(r.slice(0, -'.json'.length));
      if (ownerOf(containerID, s.agentContainerIDs) === 'agent') agents.push(`${name}/${containerID}`);
    }
  }
  return { agents };
}

/** Unlinks `path` when it is a file or a link (never followed); records it. */
async function removeFileIfThere(path: string, out: PurgeOutcome): Promise<void> {
  const k = await kind(path);
  if (k === 'absent') return;
  if (k === 'dir' || k === 'other') {
    out.kept.push({ path, why: `a ${k === 'dir' ? 'directory' : 'special file'}, not a file the shim writes: left as it is` });
    return;
  }
  await unlink(path);
  out.removed.push(path);
}

/** Removes the ledger, the log (and its rotated files and lock) and the metrics file; keeps what is not the shim's. */
export async function purgeState(s: PurgeSettings): Promise<PurgeOutcome> {
  const out: PurgeOutcome = { removed: [], kept: [], notes: [] };
  const ledger = await inspectLedger(s);
  if (ledger.keep) out.kept.push({ path: s.stateDir, why: ledger.keep });
  else if ((await kind(s.stateDir)) === 'dir') {
    // rm does not follow links inside: a link in the ledger is removed, never what it points at.
    await rm(s.stateDir, { recursive: true });
    out.removed.push(s.stateDir);
    if (ledger.agents.length)
      out.notes.push(
        `cilium-agent's own addresses (${ledger.agents.join(', ')}) stay allocated to it in the delegate's store, as cilium-agent expects; the shim no longer records them`,
      );
  }

  // The log: the file, every rotated `file.N` there (a larger logBackups may have left more), the rotation lock.
  const logDir = dirname(s.logFile);
  const base = basename(s.logFile);
  const names = await readdir(logDir).catch((e: unknown) => {
    if (isErrno(e, 'ENOENT')) return [] as string[];
    throw e;
  });
  const rotated = names.filter((n) => n.startsWith(`${base}.`) && /^\d+$/.test(n.slice(base.length + 1)));
  for (const n of [base, ...rotated.sort(), `${base}.rotate.lock`]) if (names.includes(n)) await removeFileIfThere(join(logDir, n), out);
  // The DaemonSet's own log directory (/var/log/ipam-shim), once empty; never a directory of others' logs.
  if (basename(logDir) === 'ipam-shim') {
    try {
      await rmdir(logDir);
      out.removed.push(logDir);
    } catch (e) {
      if (!isErrno(e, 'ENOENT') && !isErrno(e, 'ENOTEMPTY') && !isErrno(e, 'EEXIST')) {
        // EBUSY: a mount point (the directory mounted on its own); the node's path is then emptied, not removed.
        out.kept.push({ path: logDir, why: `empty, not removed: ${(e as NodeJS.ErrnoException).code}` });
      }
    }
  }

  if (s.metricsFile) for (const p of [s.metricsFile, `${s.metricsFile}.lock`]) await removeFileIfThere(p, out);
  return out;
}

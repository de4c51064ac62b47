// Is a recorded sandbox's network namespace provably gone? The one rule for ADD (an address held by another record,
// src/gc/stale.ts) and GC (src/gc/run-gc.ts); src/effects/netns-probe.ts looks, this decides. Pure.
//
// Each new proof ("the path now names another namespace", "the path is no namespace", "its /proc/<pid> is gone")
// holds only when this process sees the path as the ADD that recorded it did: the same mount namespace (a process
// in another one may not see a namespace mounted at the path after it started, and finds the empty mount-point
// file), or for a /proc path, the same pid namespace read through a /proc of its own (another pid namespace numbers
// processes differently). Without that, only the old rules hold: gone only when the path is missing and its
// directory is in sight, or when the namespace holds none of the record's addresses.
import type { NetnsIdentity } from './record.js';

/** A namespace file's identity: the device and inode stat gives it (nsfs; the inode is the namespace's number). */
export interface NsId {
  dev: number;
  ino: number;
}

/** The initial pid namespace's fixed inode number (PROC_PID_INIT_INO, include/linux/proc_ns.h). */
export const PROC_PID_INIT_INO = 0xeffffffc;

/** What a look at the record's netns path found. */
export type NetnsSight =
  /** ENOENT; `dirInSight`: its directory exists here (so the name is provably gone from it). */
  | { kind: 'missing'; dirInSight: boolean }
  /** stat or statfs failed otherwise (EACCES, EIO, …): could not look. */
  | { kind: 'unreadable' }
  /** A namespace file (statfs: nsfs), with its identity. */
  | ({ kind: 'netns' } & NsId)
  /** It exists and is no namespace (statfs: another file system): a regular file, a directory. */
  | { kind: 'not-netns' };

/** This process's view, each part undefined when it could not be read. */
export interface ReaderView {
  mntns?: NsId | undefined;
  pidns?: NsId | undefined;
  /** /proc is a procfs of this process's own pid namespace (/proc/self names this process). */
  procOwn: boolean;
  /** The mount namespace of pid 1 of that /proc: the node's, when `pidns` is the initial one. */
  initMntns?: NsId | undefined;
}

/** For a `/proc/<pid>/…` path: the pid's directory, looked at only when the path is missing. */
export type ProcPid = 'present' | 'vanished' | 'unknown';

/** `/proc/<pid>/ns/net` or `/proc/<pid>/task/<tid>/ns/net` → the pid; anything else → undefined. */
export function procPidOf(netns: string): string | undefined {
  return /^\/proc\/(\d+)\/(?:task\/\d+\/)?ns\/net$/.exec(netns)?.[1];
}

const same = (a: NsId | undefined, b: NsId | undefined): boolean => !!a && !!b && a.dev === b.dev && a.ino === b.ino;

/**
 * Whether this process sees `netns` as the ADD that recorded it did. With the ADD's identity: its mount namespace,
 * or for a /proc path its pid namespace (through a /proc of its own). A record written before the identity was
 * kept: the node's view only (the initial pid namespace, and pid 1's mount namespace), where the runtime that
 * wrote it runs.
 */
export function sameView(netns: string, recorded: NetnsIdentity | undefined, reader: ReaderView): boolean {
  const proc = procPidOf(netns) !== undefined;
  if (recorded) {
    if (proc) return reader.procOwn && !!recorded.pidns && same(reader.pidns, { dev: recorded.dev, ino: recorded.pidns });
    return !!recorded.mntns && same(reader.mntns, { dev: recorded.dev, ino: recorded.mntns });
  }
  const nodeView = reader.procOwn && reader.pidns?.ino === PROC_PID_INIT_INO;
  return proc ? nodeView : nodeView && same(reader.mntns, reader.initMntns);
}

/**
 * `gone`: proven. `look`: a namespace that may be the recorded one: the caller looks for the record's addresses in
 * it. `unknown`: could not tell (GC keeps the record, ADD keeps its 11).
 */
export type NetnsVerdict = 'gone' | 'look' | 'unknown';

/**
 * `reader` is asked only when a newer proof is at stake: the common cases (a missing path in sight, the recorded
 * namespace still there) cost no more reads than before.
 */
export function netnsVerdict(
  record: { netns: string; netnsId?: NetnsIdentity | undefined },
  sight: NetnsSight,
  reader: () => ReaderView,
  procPid: ProcPid = 'unknown',
): NetnsVerdict {
  if (!record.netns) return 'gone';
  const view = () => sameView(record.netns, record.netnsId, reader());
  switch (sight.kind) {
    case 'missing':
      if (sight.dirInSight) return 'gone';
      // /proc/<pid>/ns/net of a process that exited: /proc/<pid> itself is gone.
      return procPidOf(record.netns) !== undefined && procPid === 'vanished' && view() ? 'gone' : 'unknown';
    case 'unreadable':
      return 'unknown';
    case 'not-netns':
      return view() ? 'gone' : 'unknown';
    case 'netns': {
      const id = record.netnsId;
      // Another namespace at the path (deleted and re-created, a pid reused). The same identity proves nothing
      // more: the kernel reuses a freed namespace's number.
      if (id && (id.dev !== sight.dev || id.ino !== sight.ino) && view()) return 'gone';
      return 'look';
    }
  }
}

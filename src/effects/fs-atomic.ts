// Crash-safe files: write a temp file, rename it over the target. Never follow symlinks (a planted link must not
// redirect a root-owned write).
//
// Durability policy (docs/failure-model.md "Power loss"), decided here and stated by every caller, never defaulted:
// every write is atomic, so a SIGKILL at any instant leaves the old file or the new one, never a torn one; the
// caller says whether it must also outlive a power loss (`durable`: fsync the file, then the directory).
//   - Not durable: what a CNI verb writes for a pod (intent and attached records, IP index entries, their removal,
//     the delegate VERSION cache), lock files, the metrics file. Their durability is the page cache's, the same as
//     host-local's store and the runtime's result cache (libcni fsyncs neither); a power loss kills every pod on
//     the node anyway, and a record lost or left empty reads as absent or corrupt, never as a release.
//   - Durable: what must be there after a reboot: the agent's own IPs (records of owner `agent`: Ledger decides
//     from the owner) and what `install` puts on the node (the executable, the conflist).
import {
  chmodSync,
  closeSync,
  constants,
  fstatSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  renameSync,
  unlinkSync,
  writeSync,
  type Stats,
} from 'node:fs';
import { dirname, basename, join } from 'node:path';

const { O_CREAT, O_EXCL, O_WRONLY, O_NOFOLLOW, O_NONBLOCK, O_RDONLY, O_DIRECTORY } = constants;

// The calls below are synchronous behind async signatures. A CNI call is one short process doing a handful of
// small file operations in a row: each async fs call is a round trip through libuv's thread pool, and those
// hops cost more than the operations (measured on ADD: docs/performance.md). Children the verb started (the
// delegate, ebtables, ip) keep running meanwhile; only their output waits to be read.

export interface WriteOptions {
  /** fsync the file and its directory: the write outlives a power loss, not only a killed process (see above). */
  durable: boolean;
  /** Permission bits of a new file (default 0600). */
  mode?: number;
}

/**
 * How many temp names one write tries. Within a process writes never overlap (they are synchronous), so a taken
 * name is a dead process's leftover (its pid reused) or a live writer's in another pid namespace.
 */
const TEMP_ATTEMPTS = 64;

/**
 * `.<name>.<pid>.<attempt>.tmp` beside the target: at most 16 bytes more than the name (pid_max ≤ 2^22, 7 digits;
 * attempt < 64), which the ledger's file-name limit counts on. No random bytes: node:crypto costs a CNI call
 * ~20 modules at start-up, and O_EXCL (below) is what makes the name ours.
 */
export const tempNameFor = (path: string, attempt: number): string => join(dirname(path), `.${basename(path)}.${process.pid}.${attempt}.tmp`);

/** Atomically replaces `path` with `data`. Idempotent; a crash leaves old or new (after a power loss too when durable). */
export async function writeFileAtomic(path: string, data: string, o: WriteOptions): Promise<void> {
  writeFileAtomicSync(path, data, o);
}

/** Creates a fresh temp file for `path` (O_EXCL, never through a link): the next name while one is taken. */
function openTemp(path: string, mode: number): { fd: number; tmp: string } {
  for (let attempt = 0; ; attempt++) {
    const tmp = tempNameFor(path, attempt);
    try {
      return { fd: openSync(tmp, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW, mode), tmp };
    } catch (e) {
      if (!isErrno(e, 'EEXIST') || attempt + 1 >= TEMP_ATTEMPTS) throw e;
    }
  }
}

function writeFileAtomicSync(path: string, data: string, o: WriteOptions): void {
  const dir = dirname(path);
  const { fd, tmp } = openTemp(path, o.mode ?? 0o600);
  try {
    const buf = Buffer.from(data, 'utf8');
    for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
    if (o.durable) fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    unlinkQuiet(tmp);
    throw e;
  }
  closeSync(fd);
  try {
    // rename replaces a symlink at `path` itself rather than writing through it.
    renameSync(tmp, path);
  } catch (e) {
    unlinkQuiet(tmp);
    throw e;
  }
  if (o.durable) syncDirSync(dir);
}

/** Removes a file if it is there; never throws (cleanup after another error, lock release). */
export function unlinkQuiet(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone, or the directory went away: nothing left to clean
  }
}

export async function syncDir(dir: string): Promise<void> {
  syncDirSync(dir);
}

function syncDirSync(dir: string): void {
  const fd = openSync(dir, O_RDONLY | O_DIRECTORY);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Reads a file without following a symlink at its last component. ENOENT → undefined. */
export async function readFileNoFollow(path: string): Promise<string | undefined> {
  return readFileNoFollowSync(path);
}

/**
 * readFileNoFollow for synchronous callers. Never waiting either (O_NONBLOCK: a FIFO planted in the state dir blocked
 * the open forever), and regular files only: anything else throws, as an unreadable file.
 */
export function readFileNoFollowSync(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (e) {
    if (isErrno(e, 'ENOENT')) return undefined;
    throw e;
  }
  try {
    if (!fstatSync(fd).isFile()) throw new UnsafePathError(path, 'is not a regular file');
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}

/** Removes a file; missing is success. Durable: the directory is fsynced, so the removal outlives a power loss. */
export async function removeFile(path: string, o: Pick<WriteOptions, 'durable'>): Promise<void> {
  try {
    unlinkSync(path);
  } catch (e) {
    if (!isErrno(e, 'ENOENT')) throw e;
    return;
  }
  if (o.durable) syncDirSync(dirname(path));
}

/**
 * Creates `dir` (0700) if missing and refuses one that is a symlink, not a directory, owned by another user
 * or writable by group/others: the ledger decides which IPs get released, so nobody else may write it.
 */
export async function ensurePrivateDir(dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = assertPrivateDirSync(dir);
  if (st.mode & 0o055) chmodSync(dir, 0o700);
}

/**
 * The checks of ensurePrivateDir on an existing directory, creating and changing nothing (ENOENT propagates).
 * For directories the shim does not own the layout of (the configured stateDir itself) and for read-only paths.
 */
export async function assertPrivateDir(dir: string): Promise<Stats> {
  return assertPrivateDirSync(dir);
}

export function assertPrivateDirSync(dir: string): Stats {
  const st = lstatSync(dir);
  const uid = process.getuid?.() ?? st.uid;
  if (st.isSymbolicLink() || !st.isDirectory()) throw new UnsafePathError(dir, 'is not a directory (symlink?)');
  if (st.uid !== uid) throw new UnsafePathError(dir, `is owned by uid ${st.uid}, not ${uid}`);
  if (st.mode & 0o022) throw new UnsafePathError(dir, `is writable by group or others (mode ${(st.mode & 0o777).toString(8)})`);
  return st;
}

export class UnsafePathError extends Error {
  /** `code`: the errno that said so, when the open refused (ELOOP: a symlink; ENXIO: a FIFO with no reader). */
  constructor(
    readonly path: string,
    why: string,
    readonly code?: string,
  ) {
    super(`${path} ${why}`);
    this.name = 'UnsafePathError';
  }
}

export function isErrno(e: unknown, code: string): boolean {
  return typeof e === 'object' && e !== null && (e as { code?: unknown }).code === code;
}

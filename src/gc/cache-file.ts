// Reading one file of the runtime's result cache as a root process must read a file someone else writes: bounded,
// never through a symlink, never blocking (src/gc/cache-read.ts turns what it reads into the network's list).
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, type Stats } from 'node:fs';

/**
 * The largest cache file read. A libcni entry is a few KiB: its largest field is `config`, the network's conflist
 * base64'd (a 1 KiB conflist: ~1.4 KiB), then the result and the runtime's capability args (containerd's pod
 * annotations). 1 MiB is a few hundred times that, and bounds what one read holds (eight at a time: 8 MiB of text
 * plus its parse) whatever the file is: a 1 GB file is "could not look", not 1 GB of the agent's memory.
 */
export const MAX_CACHE_ENTRY_BYTES = 1 << 20;

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = constants;

/** What one cache file held: its text, gone (removed since the listing), or why it could not be looked at. */
export type FileRead = { text: string } | { gone: true } | { why: string };

const errnoOf = (e: unknown): string | undefined => (e as { code?: string }).code;

/** Why a file's status makes it no cache entry, or undefined. */
function notAnEntry(st: Stats): string | undefined {
  if (st.isSymbolicLink()) return 'is a symbolic link (not followed)';
  if (!st.isFile()) return `is not a regular file (${fileKind(st)})`;
  if (st.size > MAX_CACHE_ENTRY_BYTES) return `is ${st.size} bytes, more than the ${MAX_CACHE_ENTRY_BYTES} a cache entry may be`;
  return undefined;
}

/**
 * Reads one cache file as a runtime's own file must be read by a root process: only a regular file of at most
 * MAX_CACHE_ENTRY_BYTES is opened (lstat first: a FIFO, socket or device is never opened), never through a symlink
 * (a link to a root-only file would put its bytes in our hands), never blocking (O_NONBLOCK: a file swapped for a
 * FIFO after the lstat is caught by the fstat, not waited on). ENOENT is "gone": libcni's DEL removes entries at
 * any time, and a file listed a moment ago and removed since is not part of the runtime's state.
 * Synchronous: four system calls on a small local file cost less than the thread-pool round trips of async ones
 * (5,000 entries: CPU 1.3 s async, see docs/performance.md), and the ledger beside it is read the same way.
 */
export function readCacheFile(path: string): FileRead {
  let fd: number;
  try {
    const why = notAnEntry(lstatSync(path));
    if (why) return { why };
    fd = openSync(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (e) {
    const code = errnoOf(e);
    if (code === 'ENOENT') return { gone: true };
    if (code === 'ELOOP') return { why: 'is a symbolic link (not followed)' };
    return { why: `cannot be opened (${code ?? (e as Error).name})` };
  }
  try {
    const st = fstatSync(fd);
    const why = notAnEntry(st);
    if (why) return { why };
    // One byte more than it claims, in one read (a short read of a regular file is its end): a file that grew past
    // the bound since fstat is still refused; one rewritten in place meanwhile reads as what was there (the parse decides).
    const buf = Buffer.allocUnsafe(st.size + 1);
    const n = readSync(fd, buf, 0, buf.length, 0);
    if (n > MAX_CACHE_ENTRY_BYTES) return { why: `grew past the ${MAX_CACHE_ENTRY_BYTES} bytes a cache entry may be while read` };
    return { text: buf.toString('utf8', 0, n) };
  } catch (e) {
    return { why: `cannot be read (${errnoOf(e) ?? (e as Error).name})` };
  } finally {
    closeSync(fd);
  }
}

function fileKind(st: {
  isDirectory(): boolean;
  isFIFO(): boolean;
  isSocket(): boolean;
  isCharacterDevice(): boolean;
  isBlockDevice(): boolean;
}): string {
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  return 'not a file';
}

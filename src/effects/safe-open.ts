// The one way the shim and the agent open a file an operator names (`logFile`, `metricsFile`, the lock files beside
// them): never through a symlink at the name (O_NOFOLLOW), never waiting (O_NONBLOCK: a FIFO with no writer opens
// at once for reading, one with no reader is ENXIO for writing), never becoming a controlling terminal (O_NOCTTY),
// then regular files only (fstat on the descriptor: a FIFO, socket, device or directory is refused) and, to read,
// within a size bound (a sparse file or a huge one is refused from its size, never read: a symlink to /dev/zero and
// a sparse file cost a CNI call 673 / 585 MiB when read whole). Refusals are UnsafePathError, for the caller to log
// once and skip; a missing file is the caller's to decide (ENOENT is left as it is).
import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, type Stats } from 'node:fs';
import { basename, dirname } from 'node:path';
import { isErrno, UnsafePathError } from './fs-atomic.js';

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK, O_NOCTTY, O_DIRECTORY } = constants;

/** What fstat found that is not a regular file, for the refusal's message. */
function kindOf(st: Stats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isDirectory()) return 'a directory';
  return 'something else';
}

/** The open's own refusals, said as what stands at the path; other errors (ENOENT, EACCES) as they are. */
function refusal(path: string, e: unknown): unknown {
  if (isErrno(e, 'ELOOP')) return new UnsafePathError(path, 'is a symlink (not followed)', 'ELOOP');
  if (isErrno(e, 'ENXIO')) return new UnsafePathError(path, 'is a FIFO or socket with no reader (not waited on)', 'ENXIO');
  if (isErrno(e, 'EISDIR')) return new UnsafePathError(path, 'is a directory', 'EISDIR');
  return e;
}

export interface OpenOptions {
  /** Permission bits when O_CREAT creates it. */
  mode?: number;
  /** Refuse a file with more than one link (a hard link to a file elsewhere: writes would land there). */
  singleLink?: boolean;
  /** The name said in a refusal, when `path` is a descriptor-relative one (see within()). */
  shownAs?: string;
}

/**
 * Opens `path` with `flags` plus O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, and keeps it only when it is a regular file
 * (and, with `singleLink`, has one link). Throws UnsafePathError for anything else standing there.
 */
export function openRegular(path: string, flags: number, o: OpenOptions = {}): number {
  const shown = o.shownAs ?? path;
  let fd: number;
  try {
    fd = openSync(path, flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, o.mode ?? 0o600);
  } catch (e) {
    throw refusal(shown, e);
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new UnsafePathError(shown, `is not a regular file (${kindOf(st)})`);
    if (o.singleLink && st.nlink > 1) throw new UnsafePathError(shown, `has ${st.nlink} links (a hard link to a file elsewhere?)`);
    return fd;
  } catch (e) {
    closeSync(fd);
    throw e;
  }
}

/**
 * A regular file's content, at most `maxBytes` of it: undefined when there is none (ENOENT); UnsafePathError when
 * it is no regular file or larger than the bound (its size is not read, only fstat'ed; a file that grows past the
 * bound while read is refused too). Other errors as the file system says. `shownAs`: the name in a refusal.
 */
export function readRegularSync(path: string, maxBytes: number, shownAs = path): string | undefined {
  let fd: number;
  try {
    fd = openRegular(path, O_RDONLY, { shownAs });
  } catch (e) {
    if (isErrno(e, 'ENOENT')) return undefined;
    throw e;
  }
  try {
    const size = fstatSync(fd).size;
    if (size > maxBytes) throw new UnsafePathError(shownAs, `is ${size} bytes, over the ${maxBytes}-byte bound (not read)`);
    // One byte more than the bound: a file that grew meanwhile is seen to.
    const buf = Buffer.allocUnsafe(Math.min(size, maxBytes) + 1);
    let got = 0;
    for (let n; got < buf.length && (n = readSync(fd, buf, got, buf.length - got, null)) > 0; ) got += n;
    if (got > maxBytes) throw new UnsafePathError(shownAs, `grew past the ${maxBytes}-byte bound while read (not read)`);
    return buf.toString('utf8', 0, got);
  } finally {
    closeSync(fd);
  }
}

/**
 * A directory held open without following a symlink at its own name (O_DIRECTORY | O_NOFOLLOW): the files in it
 * are then named through the descriptor (`at(name)`: /proc/self/fd/N/name, what openat(2) does), so the directory
 * swapped for a symlink after it was opened redirects nothing. Only the last component is checked: a symlink higher
 * up (/var/log on another disk) is the node's layout, and replacing one needs the rights its parent gives.
 */
export class HeldDir {
  private constructor(
    readonly path: string,
    private readonly fd: number,
  ) {}

  /** Throws UnsafePathError when `path` is a symlink or not a directory; ENOENT as it is. */
  static open(path: string): HeldDir {
    let fd: number;
    try {
      fd = openSync(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK);
    } catch (e) {
      // O_DIRECTORY | O_NOFOLLOW on a symlink is ENOTDIR on Linux (ELOOP elsewhere): lstat says which it was.
      if (isErrno(e, 'ELOOP') || (isErrno(e, 'ENOTDIR') && isSymlink(path)))
        throw new UnsafePathError(path, 'is a symlink (a directory of a file the operator names is never followed)', 'ELOOP');
      if (isErrno(e, 'ENOTDIR')) throw new UnsafePathError(path, 'is not a directory', 'ENOTDIR');
      throw e;
    }
    return new HeldDir(path, fd);
  }

  /** The held directory's file `name`, as a path that resolves through the descriptor, never through `path`. */
  at(name: string): string {
    return `/proc/self/fd/${this.fd}/${name}`;
  }

  close(): void {
    try {
      closeSync(this.fd);
    } catch {
      // gone either way
    }
  }
}

const isSymlink = (path: string): boolean => {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
};

/** `path`'s directory and last name: what HeldDir and at() take. */
export const splitPath = (path: string): { dir: string; name: string } => ({ dir: dirname(path), name: basename(path) });

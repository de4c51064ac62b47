// The plugin's log file, bounded in size with a few rotated backups (`logMaxBytes`, `logBackups`): `file` →
// `file.1` → … → `file.N`, the oldest dropped. The bound is hard: no file ever holds more than `logMaxBytes`.
// Many plugin processes append to one file at once, so:
//   - every line is one write(2) on an O_APPEND descriptor: the kernel appends it whole (no interleaving);
//   - each line is checked and written under a lock file (`file.rotate.lock`, microseconds per line): the check
//     sees `file` as it is, so a line that would take it past the bound rotates first, and two writers can never
//     both see room for their line in the last bytes (checked without the lock, 48 concurrent calls ended a file
//     237 bytes past an 8 KiB bound); a descriptor whose file another process rotated away is reopened on `file`;
//   - a line the file cannot take within the bound (larger than the bound, the lock not had in time, a rotation
//     that fails) is refused: `append` says so and the caller sends it to stderr (src/log.ts), never dropped and
//     never past the bound (written anyway after a 200 ms wait, one line ended a file 677 bytes past an 8 KiB
//     bound on a machine at load 17).
// The log path is never followed nor waited on: a symlink there would append into a file elsewhere, a FIFO with
// no reader would block every call (STATUS too: the node goes NotReady). Nor is its directory: it is held open
// without following a symlink at its name (src/effects/safe-open.ts HeldDir), and every name in it (the log, its
// backups, the rotation lock) is reached through that descriptor, so a log directory that is a symlink, or is
// swapped for one while a process logs, never gets a line nor a rename (it wrote into the victim directory's 0600
// ipam.log). The rotation renames and unlinks names (a symlink at a backup is moved, never written through); the
// lock is read the same way, within a size bound (src/effects/lock.ts).
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, renameSync, unlinkSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { isErrno } from './fs-atomic.js';
import { withLockSync } from './lock.js';
import { HeldDir, openRegular, splitPath } from './safe-open.js';

const { O_WRONLY, O_APPEND, O_CREAT } = constants;

export interface LogBound {
  /** No file holds more than this many bytes: the file is rotated before a line would take it past. */
  maxBytes: number;
  /** How many rotated files are kept (`file.1` … `file.N`); 0: the full file is dropped. */
  backups: number;
}

/** How long a line waits for another process's rotation (microseconds of work); then it is refused (stderr). */
const ROTATE_LOCK_WAIT_MS = 200;

/** A write that failed under the lock (not a rotation): rethrown as the file system's error. */
class WriteFailed extends Error {
  constructor(readonly cause: unknown) {
    super('log write failed');
  }
}

export class LogFile {
  private fd: number;
  /** The log's directory, held (see the header); `at(name)` names a file in it. */
  private readonly dir: HeldDir;
  private readonly name: string;

  /** Throws when `path` cannot be the log (its directory a symlink: UnsafePathError; the file: see openLog). */
  constructor(
    readonly path: string,
    public bound: LogBound | undefined,
  ) {
    mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
    const { dir, name } = splitPath(path);
    this.dir = HeldDir.open(dir);
    this.name = name;
    try {
      this.fd = openLog(this.dir.at(name), path);
    } catch (e) {
      this.dir.close();
      throw e;
    }
  }

  /** The log's own name in its held directory. */
  private get file(): string {
    return this.dir.at(this.name);
  }

  /**
   * Appends one line (one write), rotating first when it would pass the bound. False: the line was not written, the
   * file cannot take it within the bound (see the header). Throws what the file system throws on the write itself.
   */
  append(buf: Buffer): boolean {
    const bound = this.bound;
    if (!bound) {
      this.write(buf);
      return true;
    }
    if (buf.length > bound.maxBytes) return false; // no file within the bound can hold it
    try {
      return withLockSync(this.dir.at(`${this.name}.rotate.lock`), () => this.makeRoomAndWrite(buf, bound), ROTATE_LOCK_WAIT_MS);
    } catch (e) {
      if (e instanceof WriteFailed) throw e.cause;
      // Rotation failed (a read-only or bind-mounted log file cannot be renamed, no room for the lock, something
      // that is not our log put at the path): writing would pass the bound.
      return false;
    }
  }

  /** Under the lock: `path` is the file writers append to now; rotated first when the line would not fit. */
  private makeRoomAndWrite(buf: Buffer, { maxBytes, backups }: LogBound): void {
    const current = lstatQuiet(this.file);
    if (current && current.size + buf.length > maxBytes) {
      rotate(this.file, backups);
      this.reopen();
    } else if (!current || !sameFile(current, fstatSync(this.fd))) this.reopen(); // rotated away by another process
    try {
      this.write(buf);
    } catch (e) {
      throw new WriteFailed(e); // the line's own failure, not the rotation's: the caller's to see
    }
  }

  private write(buf: Buffer): void {
    for (let off = 0; off < buf.length; ) off += writeSync(this.fd, buf, off);
  }

  private reopen(): void {
    const fd = openLog(this.file, this.path);
    try {
      closeSync(this.fd);
    } catch {
      // the old descriptor is gone either way
    }
    this.fd = fd;
  }
}

/**
 * Opens `path` to append, 0640 when created (`shown`: its name for a refusal). Through src/effects/safe-open.ts:
 * never through a symlink and never waiting (a FIFO with no reader is refused at once), a regular file with one link
 * only (a FIFO with a reader, a socket, a device, a directory or a hard link to a file elsewhere: UnsafePathError).
 */
function openLog(path: string, shown: string): number {
  return openRegular(path, O_WRONLY | O_APPEND | O_CREAT, { mode: 0o640, singleLink: true, shownAs: shown });
}

const sameFile = (a: { dev: number; ino: number }, b: { dev: number; ino: number }) => a.dev === b.dev && a.ino === b.ino;

/** What is at `path` itself (a symlink is not followed: it is not the file we hold, so it gets reopened, and refused). */
function lstatQuiet(path: string) {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

/** `file.(N-1)` → `file.N`, …, `file` → `file.1`; with no backups, `file` is dropped. Names only: nothing is opened. */
function rotate(path: string, backups: number): void {
  if (backups === 0) {
    unlinkSync(path);
    return;
  }
  for (let i = backups - 1; i >= 1; i--) {
    try {
      renameSync(`${path}.${i}`, `${path}.${i + 1}`);
    } catch (e) {
      if (!isErrno(e, 'ENOENT')) throw e;
    }
  }
  renameSync(path, `${path}.1`);
}

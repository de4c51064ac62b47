// The plugin's log file, bounded in size with a few rotated backups (`logMaxBytes`, `logBackups`): `file` →
// `file.1` → … → `file.N`, the oldest dropped. Many plugin processes append to one file at once, so:
//   - every line is one write(2) on an O_APPEND descriptor: the kernel appends it whole (no interleaving);
//   - before a line, the descriptor's file is checked (one fstat): a line that would take it past the bound
//     rotates under a lock file (`file.rotate.lock`), and the rotation is decided again under the lock on what
//     `file` is then, so two processes that both saw it full rotate once; a descriptor whose file another
//     process rotated away is reopened on `file` (or, if its file was dropped as the oldest, at once);
//   - a line written between another process's rename and this process's reopen lands in `file.1`: kept.
import { closeSync, fstatSync, mkdirSync, openSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { isErrno } from './fs-atomic.js';
import { withLockSync } from './lock.js';

export interface LogBound {
  /** The file is rotated before a line would take it past this many bytes. */
  maxBytes: number;
  /** How many rotated files are kept (`file.1` … `file.N`); 0: the full file is dropped. */
  backups: number;
}

/** How long a line waits for another process's rotation (microseconds of work); then it is written beyond the bound, never dropped. */
const ROTATE_LOCK_WAIT_MS = 200;

export class LogFile {
  private fd: number;

  constructor(
    readonly path: string,
    public bound: LogBound | undefined,
  ) {
    mkdirSync(dirname(path), { recursive: true, mode: 0o755 });
    this.fd = openLog(path);
  }

  /** Appends one line (one write), rotating first when it would pass the bound. Throws what the file system throws. */
  append(buf: Buffer): void {
    if (this.bound) this.makeRoom(buf.length, this.bound);
    for (let off = 0; off < buf.length; ) off += writeSync(this.fd, buf, off);
  }

  private makeRoom(len: number, { maxBytes, backups }: LogBound): void {
    let own = fstatSync(this.fd);
    if (own.nlink === 0) {
      this.reopen(); // dropped as the oldest backup by another process's rotation
      own = fstatSync(this.fd);
    }
    if (own.size + len <= maxBytes) return;
    try {
      withLockSync(
        `${this.path}.rotate.lock`,
        () => {
          const current = statQuiet(this.path);
          // Rotated only when the file at `path` itself is full (a line larger than the bound still goes into an empty file).
          if (current && current.size > 0 && current.size + len > maxBytes) rotate(this.path, backups);
          else if (current && current.ino === fstatSync(this.fd).ino) return;
          this.reopen();
        },
        ROTATE_LOCK_WAIT_MS,
      );
    } catch {
      // Rotation failed (a read-only or bind-mounted log file cannot be renamed, no room for the lock): the line
      // goes into the file as it is, beyond the bound, rather than nowhere.
    }
  }

  private reopen(): void {
    const fd = openLog(this.path);
    try {
      closeSync(this.fd);
    } catch {
      // the old descriptor is gone either way
    }
    this.fd = fd;
  }
}

const openLog = (path: string): number => openSync(path, 'a', 0o640);

function statQuiet(path: string) {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
}

/** `file.(N-1)` → `file.N`, …, `file` → `file.1`; with no backups, `file` is dropped. */
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

// A per-network lock file: O_EXCL create holding "pid starttime". A holder that died (SIGKILL by kubelet's
// timeout) is detected by pid + start time and its lock broken under a second, short-lived lock.
// File operations are synchronous (see fs-atomic.ts: thread-pool hops cost more than these tiny calls); only the
// wait between attempts yields.
import { closeSync, constants, openSync, readFileSync, statSync, writeSync } from 'node:fs';
import { isErrno, UnsafePathError, unlinkQuiet } from './fs-atomic.js';
import { readRegularSync } from './safe-open.js';

const { O_CREAT, O_EXCL, O_WRONLY, O_NOFOLLOW } = constants;

export class LockTimeoutError extends Error {
  constructor(
    readonly path: string,
    readonly holder: string,
  ) {
    super(`timed out waiting for lock ${path} (held by ${holder || 'unknown'})`);
    this.name = 'LockTimeoutError';
  }
}

function startTime(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Field 22 (starttime) counted after the ")" that closes the command name.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}

/**
 * "pid starttime" of this process, read from /proc/self each time a lock is taken (~15 µs), never kept: the startup
 * snapshot's warm-up takes locks too (src/warm.ts), and a value kept in the snapshot keyed by pid was the build
 * process's start time in every later process that happened to get the build's pid (small pid namespaces make
 * that likely). A concurrent caller then judged the live holder dead and broke its lock.
 */
const ownId = (): string => `${process.pid} ${startTime(process.pid) ?? '?'}`;
/** An empty lock file younger than this belongs to a live holder that has not written its id yet. */
const EMPTY_LOCK_STALE_MS = 5_000;

function holderAlive(content: string): boolean {
  const [pidText, start] = content.trim().split(' ');
  const pid = Number(pidText);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  const actual = startTime(pid);
  return actual !== undefined && (start === '?' || actual === start);
}

/** What stands at a lock path that is not a holder's lock file: a symlink, a FIFO, a device, a directory. */
const FOREIGN = Symbol('foreign');

/** A holder's lock file holds "pid starttime" (~30 bytes); anything larger is no lock of ours and is never read. */
const LOCK_MAX_BYTES = 4096;

/**
 * A lock file's content; undefined when there is none, FOREIGN when something other than a lock file stands
 * there. Never through a symlink, never waiting (a FIFO without a writer blocked the open forever, /dev/zero never
 * ends), never read past LOCK_MAX_BYTES (a sparse file at the log's rotation lock cost every line 1.9 GiB when read
 * whole): src/effects/safe-open.ts.
 */
const readQuiet = (path: string): string | undefined | typeof FOREIGN => {
  try {
    return readRegularSync(path, LOCK_MAX_BYTES);
  } catch (e) {
    return e instanceof UnsafePathError ? FOREIGN : undefined;
  }
};
const statQuiet = (path: string) => {
  try {
    return statSync(path);
  } catch {
    return undefined;
  }
};

function tryCreate(path: string, content: string): boolean {
  try {
    const fd = openSync(path, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW, 0o600);
    try {
      writeSync(fd, content);
    } catch (e) {
      // ENOSPC and the like: leave no empty lock behind for everyone else to wait out.
      try {
        closeSync(fd);
      } catch {
        // the write error is the one to report
      }
      unlinkQuiet(path);
      throw e;
    }
    closeSync(fd);
    return true;
  } catch (e) {
    if (isErrno(e, 'EEXIST')) return false;
    throw e;
  }
}

/**
 * Who may remove something other than a lock file standing at a lock path: `break` in a directory of our own (the
 * ledger's state dir: only the shim names files there, so a symlink or FIFO at its lock name is no holder's and its
 * name is unlinked, never followed), `wait` in a shared one (the log's directory: it is waited out, never removed).
 */
export type ForeignAtLock = 'break' | 'wait';

/**
 * Breaks `path` if its holder is dead; the check-and-unlink runs under `<path>.break` so two breakers cannot race.
 * True when what stands there is no lock file and is not ours to remove (`wait`): no holder will ever release it.
 */
export function breakIfStale(path: string, foreign: ForeignAtLock = 'break'): boolean {
  const content = readQuiet(path);
  if (content === FOREIGN && foreign === 'wait') return true;
  if (content === undefined) return false;
  if (content !== FOREIGN && holderAlive(content)) return false;
  if (content !== FOREIGN && content.trim() === '') {
    // A holder between its O_EXCL create and its write: alive. Only a long-empty file was left by a crash there.
    const st = statQuiet(path);
    if (!st || Date.now() - st.mtimeMs < EMPTY_LOCK_STALE_MS) return false;
  }
  const breaker = `${path}.break`;
  if (!tryCreate(breaker, ownId())) {
    // A breaker that died mid-break leaves this file; it is only ever held for microseconds.
    const st = statQuiet(breaker);
    if (st && Date.now() - st.mtimeMs > 10_000) unlinkQuiet(breaker);
    return false;
  }
  try {
    if (readQuiet(path) === content) unlinkQuiet(path);
  } finally {
    unlinkQuiet(breaker);
  }
  return false;
}

/** Runs `fn` holding the lock at `path`; waits up to `timeoutMs`, then throws LockTimeoutError. */
export async function withLock<T>(path: string, fn: () => Promise<T>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let delay = 2;
  const id = ownId();
  while (!tryCreate(path, id)) {
    breakIfStale(path);
    if (Date.now() > deadline) {
      const holder = readQuiet(path);
      throw new LockTimeoutError(path, holder === FOREIGN ? 'not a lock file' : (holder ?? '').trim());
    }
    await new Promise((r) => setTimeout(r, delay + Math.random() * delay));
    delay = Math.min(delay * 2, 50);
  }
  try {
    return await fn();
  } finally {
    unlinkQuiet(path);
  }
}

/** Something to Atomics.wait on for a synchronous pause; made on first use, not in the startup snapshot. */
let pause: Int32Array | undefined;

/**
 * withLock for a synchronous critical section of microseconds (rotating the log file): waits up to `timeoutMs` in
 * 1 ms sleeps. Its lock lives in a shared directory, so whatever else stands at its path is never removed: no holder
 * will release it, so it is not waited for either. Returns false, fn not run, when the lock could not be had.
 */
export function withLockSync(path: string, fn: () => void, timeoutMs: number): boolean {
  const deadline = Date.now() + timeoutMs;
  const id = ownId();
  while (!tryCreate(path, id)) {
    if (breakIfStale(path, 'wait')) return false;
    if (Date.now() > deadline) return false;
    Atomics.wait((pause ??= new Int32Array(new SharedArrayBuffer(4))), 0, 0, 1);
  }
  try {
    fn();
  } finally {
    unlinkQuiet(path);
  }
  return true;
}

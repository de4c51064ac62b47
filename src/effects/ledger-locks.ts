// The ledger's two locks, over effects/lock.ts: an attachment's own (ADD, DEL and CHECK of one attachment, the agent's
// steps, GC) and the network's (every write), each failure turned into the CNI error its callers act on.
import { join } from 'node:path';
import { CniError, ErrorCode } from '../cni/errors.js';
import { withLock, LockTimeoutError } from './lock.js';

/**
 * How long a writer waits for the network's lock. Holders keep it for a few file writes, but with many
 * parallel ADDs on a starved node (64 at once on 2 busy cores: p50 1.5 s, max 9 s measured) 10 s was too
 * short and ADDs failed with 11. A dead holder's lock is broken at once, so waiting longer costs nothing
 * else; host-local itself waits on its flock without any limit.
 */
const LEDGER_LOCK_WAIT_MS = 30_000;

/** Ledger.lockedAttachment could not take the lock (the ledger is unusable, or another call holds it): fn never ran. */
export class AttachmentLockError extends CniError {}

/**
 * fn under the attachment lock at `at.path`, `at.open()`ing the ledger first: code 11 AttachmentLockError when it
 * cannot be had within `waitMs`, the ledger's own code when it cannot be opened, IoFailure when the lock file cannot be
 * made; fn's own errors pass through unchanged.
 */
export async function attachmentLocked<T>(
  at: { path: string; dir: string; key: string; open: () => Promise<unknown> },
  waitMs: number,
  fn: () => Promise<T>,
): Promise<T> {
  try {
    await at.open();
  } catch (e) {
    throw new AttachmentLockError((e as CniError).code, (e as CniError).msg, { details: (e as CniError).details, cause: e });
  }
  let entered = false;
  try {
    return await withLock(at.path, () => ((entered = true), fn()), waitMs);
  } catch (e) {
    if (entered) throw e;
    if (e instanceof LockTimeoutError) {
      throw new AttachmentLockError(ErrorCode.TryAgainLater, `another ADD, DEL or CHECK of ${at.key} is still running`, { details: e.message });
    }
    throw new AttachmentLockError(ErrorCode.IoFailure, `cannot take the attachment lock in ${at.dir}`, {
      details: (e as Error).message,
      cause: e,
    });
  }
}

/** fn under the network's lock in `dir` (code 11 when it cannot be had in time, IoFailure for a file system error). */
export async function networkLocked<T>(dir: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await withLock(join(dir, 'lock'), fn, LEDGER_LOCK_WAIT_MS);
  } catch (e) {
    if (e instanceof LockTimeoutError) throw new CniError(ErrorCode.TryAgainLater, e.message);
    // A file system error (ENOSPC, EROFS, EIO…) is an I/O failure with its path, not an internal error (999).
    if (!(e instanceof CniError) && typeof (e as { code?: unknown }).code === 'string') {
      throw new CniError(ErrorCode.IoFailure, `ledger write failed in ${dir}`, { details: (e as Error).message, cause: e });
    }
    throw e;
  }
}

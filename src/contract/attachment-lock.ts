// The agent touches an attachment only as the only ADD, DEL or CHECK of it would: under the attachment's own lock
// (Ledger.lockedAttachment, the one the verbs take through `exclusively`). It waits briefly: a CNI call holding
// the lock is working on that attachment right now, and the next pass will look again.
import { type Attachment, attachmentName } from '../cni/config.js';
import { ErrorCode } from '../cni/errors.js';
import { AttachmentLockError } from '../effects/ledger.js';
import type { LedgerStore } from '../ledger/store.js';

/** How long a pass waits for one attachment's lock. */
export const AGENT_LOCK_WAIT_MS = 5_000;

/** fn never ran: a CNI call of this attachment held its lock (THE rule for "busy": the agent's steps and GC). */
export class AttachmentBusy extends Error {}

export async function exclusiveAttachment<T>(
  ledger: Pick<LedgerStore, 'lockedAttachment'>,
  a: Attachment,
  fn: () => Promise<T>,
  waitMs = AGENT_LOCK_WAIT_MS,
): Promise<T> {
  try {
    return await ledger.lockedAttachment(a, waitMs, fn);
  } catch (e) {
    if (e instanceof AttachmentLockError && e.code === ErrorCode.TryAgainLater)
      throw new AttachmentBusy(`${attachmentName(a)} is busy`, { cause: e });
    throw e;
  }
}

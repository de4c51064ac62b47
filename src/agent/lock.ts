// The agent touches an attachment only as the only ADD, DEL or CHECK of it would: under the attachment's lock.
import type { Attachment } from '../cni/config.js';
import type { OpenNetwork } from '../cli/network.js';

export async function exclusiveAttachment<T>(_net: OpenNetwork, _a: Attachment, fn: () => Promise<T>): Promise<T> {
  return fn(); // TODO(merge): Ledger.lockedAttachment from issue 14
}

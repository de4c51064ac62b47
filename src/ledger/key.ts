// The ledger's spelling of an attachment as a map key and a record file name (`<containerID>:<ifname>`): the
// ledger's file names and IP index, GC's plan, the agent's steps. PURE.
import type { Attachment } from '../cni/config.js';

/**
 * The one spelling of an attachment as a map key and a ledger file name (`<containerID>:<ifname>`): a container
 * ID holds no `:` (the spec's regex, checked on every CNI call), so the FIRST `:` splits it back (attachmentOfKey);
 * an ifname may hold one (libcni forbids it in CNI_IFNAME, but a GC valid list's ifname is any string).
 */
export const attachmentKey = (a: Attachment): string => `${a.containerID}:${a.ifname}`;

/** THE attachment a record (or anything naming one) is for: its container ID and ifname alone. */
export const attachmentOfRecord = (r: Attachment): Attachment => ({ containerID: r.containerID, ifname: r.ifname });

/** attachmentKey's inverse. */
export function attachmentOfKey(key: string): Attachment {
  const at = key.indexOf(':');
  return { containerID: key.slice(0, at), ifname: key.slice(at + 1) };
}

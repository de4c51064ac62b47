// An ADD whose address the ledger already holds for another attachment. The holder may be a dead pod's record (its
// sandbox went without a DEL: a power loss, a runtime that lost track): the IPAM, which handed the address out
// again, no longer counts it as that pod's, and a refusal (11) would repeat for every pod a lowest-free allocator
// gives the same address. GC's rule decides (src/effects/netns-probe.ts, src/ledger/netns-liveness.ts): only a pod's
// record whose netns is provably gone (the path gone, or naming another namespace or none), or provably holds none
// of its addresses, loses the address; a live or unknown holder, or one of cilium-agent's, keeps it and the ADD keeps
// its 11.
import { type Attachment, attachmentName } from '../cni/config.js';
import { attachmentOfRecord } from '../ledger/key.js';
import type { LedgerRecord } from '../ledger/record.js';
import type { LedgerStore } from '../ledger/store.js';
import { probeAttachment } from '../effects/netns-probe.js';
import type { Run } from '../effects/exec.js';
import type { Logger } from '../log.js';

/** How long the ADD waits for the holder's attachment lock (a DEL of it in flight decides itself). */
const HOLDER_LOCK_WAIT_MS = 2_000;

export type HolderVerdict = 'forgotten' | 'dropped' | 'alive' | 'unknown' | 'agent' | 'changed';

/**
 * Takes `ip` away from `holder` when the holder is provably dead: a record left with no address is forgotten
 * (`forgotten`), else rewritten without it (`dropped`: its other addresses stay for GC, which releases them through
 * the delegate in the IPAM slot). Under the holder's attachment lock, and only if its record is still `holder`.
 * Never calls the delegate: the address is already the claimant's in the IPAM's store.
 */
export async function takeFromDeadHolder(
  o: { ledger: LedgerStore; run: Run; log: Logger },
  holder: LedgerRecord,
  ip: string,
  claimant: Attachment,
): Promise<HolderVerdict> {
  if (holder.owner === 'agent') return 'agent';
  const liveness = await probeAttachment(o.run, holder);
  if (liveness !== 'dead') return liveness;
  const att = attachmentOfRecord(holder);
  const verdict = await o.ledger.lockedAttachment(att, HOLDER_LOCK_WAIT_MS, async (): Promise<HolderVerdict> => {
    const current = await o.ledger.get(att);
    if (current?.updatedAt !== holder.updatedAt) return 'changed';
    const rest = current.ips.filter((x) => x !== ip);
    if (!rest.length) {
      await o.ledger.remove(att);
      return 'forgotten';
    }
    const note = `${ip} taken by ${attachmentName(claimant)}: this pod was provably gone`;
    await o.ledger.put({ ...current, ips: rest, updatedAt: new Date().toISOString(), note });
    return 'dropped';
  });
  o.log.warn(
    {
      holder: {
        containerID: holder.containerID,
        ifname: holder.ifname,
        ips: holder.ips,
        netns: holder.netns,
        state: holder.state,
        updatedAt: holder.updatedAt,
      },
      ip,
      outcome: verdict,
    },
    verdict === 'changed'
      ? 'the stale holder of this address changed meanwhile: left alone'
      : `address ${ip} was recorded for a pod that is provably gone: its record ${verdict === 'forgotten' ? 'forgotten' : 'no longer holds it'}`,
  );
  return verdict;
}

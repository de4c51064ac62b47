// PURE: the node agent's view of every pod the runtime knows (its result cache, src/gc/from-cache.ts) against the
// shim's ledger. Pods started while the shim was not in the chain (before it was installed, in the window a
// cilium-agent or CNS rewrite leaves, during an upgrade) are in the cache only: their addresses are what the fixes'
// steps act on for them (the residue step cleans for them), their count tells the operator that pods start outside
// the chain. A fix may hold addresses apart (Fix.holds, the reserved fix's reservedCIDRs): those are listed, never
// among the unseen pods' addresses, so no step acts on them. The view names no fix.
import { attachmentName } from '../cni/config.js';
import { attachmentKey } from '../ledger/key.js';
import type { CachedPod } from './cached-pod.js';
import type { LedgerRecord } from '../ledger/record.js';
import type { IpRange } from '../net/cidr.js';

/** An address a fix holds apart (Fix.holds): the address as checked and the fix's CIDR that holds it. */
export type PodHold = (ip: string) => { ip: string; cidr: string } | undefined;

/** A cached pod's address held apart by a fix (one entry per address). */
interface HeldAddress {
  pod: CachedPod;
  ip: string;
  cidr: string;
  /** The fix holding it (Fix.name). */
  fix: string;
}

export interface PodsView {
  /** In the runtime's cache, not in the ledger: pods the shim never saw. */
  unseen: CachedPod[];
  /** Cached pods' addresses (seen or not) a fix holds apart, one entry per address. */
  held: HeldAddress[];
  /** Cached pods whose addresses could not be read from their cache entry. */
  unreadable: CachedPod[];
  /** Unseen pods with their addresses no fix holds apart (pods left with none are left out): what steps act on. */
  unseenAddresses: CachedPod[];
}

/** A pod's name for logs and doctor: namespace/name from CNI_ARGS, else its attachment. */
export const podName = (p: CachedPod): string =>
  p.namespace && p.name ? `${p.namespace}/${p.name}` : `${attachmentName(p)} (no K8S_POD_NAME in its CNI_ARGS)`;

/** `holds`: each fix's hold for the network (src/fix-list/pod-holds.ts); the first fix holding an address names it. */
export function viewPods(
  cached: readonly CachedPod[],
  records: readonly LedgerRecord[],
  holds: ReadonlyArray<{ fix: string; hold: PodHold }>,
): PodsView {
  const known = new Set(records.map(attachmentKey));
  const out: PodsView = { unseen: [], held: [], unreadable: [], unseenAddresses: [] };
  for (const pod of cached) {
    if (pod.unreadable) out.unreadable.push(pod);
    const hits = pod.ips.flatMap((ip) => {
      for (const { fix, hold } of holds) {
        const hit = hold(ip);
        if (hit) return [{ pod, ip: hit.ip, cidr: hit.cidr, fix }];
      }
      return [];
    });
    out.held.push(...hits);
    if (known.has(attachmentKey(pod))) continue;
    out.unseen.push(pod);
    const ips = pod.ips.filter((ip) => !hits.some((h) => h.ip === ip));
    if (ips.length) out.unseenAddresses.push({ ...pod, ips });
  }
  return out;
}

/** The network's pod ranges, and where they were read (for logs and docs). */
export interface PodRanges {
  ranges: ReadonlyArray<IpRange & { text: string }>;
  /** e.g. `delegate host-local ranges`, `the ledger's subnets`; `none` when nothing could tell. */
  source: string;
}

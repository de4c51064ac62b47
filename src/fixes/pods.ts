// PURE: the node agent's view of every pod the runtime knows (its result cache, src/gc/from-cache.ts) against the
// shim's ledger. Pods started while the shim was not in the chain (before it was installed, in the window a
// cilium-agent or CNS rewrite leaves, during an upgrade) are in the cache only: their residue is the agent's to
// remove, their count tells the operator that pods start outside the chain, and one holding a reserved address is
// reported (never touched: the address may be the reserved subnet's real owner's too).
import { attachmentName } from '../cni/config.js';
import { attachmentKey } from '../ledger/key.js';
import type { CachedPod } from '../gc/cached-pod.js';
import type { LedgerRecord } from '../ledger/record.js';
import type { Cidr } from '../net/cidr.js';
import { findReservedHit } from '../reserved/ranges.js';
import { reservedCidrs } from '../reserved/decision.js';
import type { NetConf } from '../cni/config.js';
import type { OpenNetwork } from '../network/open.js';
import { assessRanges } from '../reserved/ranges.js';
import { ipamSources } from '../reserved/ipam-sources.js';
import { ledgerSubnets, type PodRanges } from '../residue/cleanable.js';

interface ReservedPod {
  pod: CachedPod;
  ip: string;
  cidr: string;
}

export interface PodsView {
  /** In the runtime's cache, not in the ledger: pods the shim never saw. */
  unseen: CachedPod[];
  /** Cached pods holding an address inside reservedCIDRs (one entry per address). */
  reserved: ReservedPod[];
  /** Cached pods whose addresses could not be read from their cache entry. */
  unreadable: CachedPod[];
  /** Unseen pods with their addresses outside reservedCIDRs: the residue step cleans for these as for the ledger's. */
  residueTargets: CachedPod[];
}

/** A pod's name for logs and doctor: namespace/name from CNI_ARGS, else its attachment. */
export const podName = (p: CachedPod): string =>
  p.namespace && p.name ? `${p.namespace}/${p.name}` : `${attachmentName(p)} (no K8S_POD_NAME in its CNI_ARGS)`;

export function viewPods(cached: readonly CachedPod[], records: readonly LedgerRecord[], reserved: readonly Cidr[]): PodsView {
  const known = new Set(records.map(attachmentKey));
  const out: PodsView = { unseen: [], reserved: [], unreadable: [], residueTargets: [] };
  for (const pod of cached) {
    if (pod.unreadable) out.unreadable.push(pod);
    const hits = pod.ips.flatMap((ip) => {
      const hit = reserved.length ? findReservedHit(ip, reserved) : undefined;
      return hit ? [{ pod, ip: hit.ip, cidr: hit.cidr.text }] : [];
    });
    out.reserved.push(...hits);
    if (known.has(attachmentKey(pod))) continue;
    out.unseen.push(pod);
    const ips = pod.ips.filter((ip) => !hits.some((h) => h.ip === ip));
    if (ips.length) out.residueTargets.push({ ...pod, ips });
  }
  return out;
}

/** viewPods for a network, with its reservedCIDRs (the agent's pods step and doctor's runtime-pods check). */
export const viewNetworkPods = (conf: Pick<NetConf, 'settings'>, cached: readonly CachedPod[], records: readonly LedgerRecord[]): PodsView =>
  viewPods(cached, records, reservedCidrs(conf));

/**
 * The network's pod ranges, for THE cleaning rule (src/residue/cleanable.ts): the host-local ranges of every IPAM
 * config that hands out this network's addresses (the delegate's, and chained, the main plugin's: the reserved
 * fix's one reader of that shape), plus, when one of them has none to read (azure-ipam, cilium's) or there is none,
 * the subnets the ledger's addresses were handed out in. Nothing readable at all: no range, and no unseen pod's
 * address is a target.
 */
export function networkPodRanges(net: Pick<OpenNetwork, 'conf' | 'shim'>, ledgerIps: readonly string[]): PodRanges {
  const ranges: PodRanges['ranges'][number][] = [];
  const where: string[] = [];
  const sources = ipamSources(net);
  let unreadable = sources.length === 0;
  for (const src of sources) {
    let sets: ReturnType<typeof assessRanges> = [];
    try {
      sets = assessRanges(src.ipam, []);
    } catch {
      // malformed: ADD fails on it anyway; its addresses are bounded by the ledger's subnets below
    }
    const found = sets.flatMap((s) =>
      s.ranges.map((r) => ({ family: r.range.family, first: r.range.first, last: r.range.last, text: r.range.text })),
    );
    if (!found.length) unreadable = true;
    else where.push(`${src.where} host-local ranges`);
    ranges.push(...found);
  }
  if (unreadable) {
    const subnets = ledgerSubnets(ledgerIps);
    ranges.push(...subnets);
    where.push(subnets.length ? "the ledger's subnets" : 'no readable IPAM ranges and no ledger address');
  }
  return { ranges, source: where.join(' + ') };
}

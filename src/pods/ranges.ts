// Where the network's pod ranges are read: host-local's ranges (src/cni/host-local.ts) of the IPAM configs that
// hand out the network's addresses (src/conflist.ts podIpamSources), the ledger's subnets (src/ledger/subnets.ts)
// where none can be read. The agent's pass hands them to a step (Pass.podRanges).
import { hostLocalRangeSets } from '../cni/host-local.js';
import type { NetConf } from '../cni/config.js';
import { podIpamSources, type ShimConflist } from '../conflist.js';
import type { PodRanges } from './view.js';
import type { LedgerRecord } from '../ledger/record.js';
import { ledgerSubnets } from '../ledger/subnets.js';

/**
 * The network's pod ranges, for THE cleaning rule (src/residue/cleanable.ts): the host-local ranges of every IPAM
 * config that hands out this network's addresses (src/conflist.ts podIpamSources), plus, when one of them has none to read (azure-ipam, cilium's) or there is none, the
 * subnets the ledger's addresses were handed out in (as their records keep them). Nothing readable at all: no
 * range, and no unseen pod's address is a target.
 */
export function networkPodRanges(
  net: { conf: NetConf; shim: Pick<ShimConflist, 'list' | 'index'> },
  records: readonly Pick<LedgerRecord, 'subnets'>[],
): PodRanges {
  const ranges: PodRanges['ranges'][number][] = [];
  const where: string[] = [];
  const sources = podIpamSources(net);
  let unreadable = sources.length === 0;
  for (const src of sources) {
    let sets: ReturnType<typeof hostLocalRangeSets> = [];
    try {
      sets = hostLocalRangeSets(src.ipam);
    } catch {
      // malformed: ADD fails on it anyway; its addresses are bounded by the ledger's subnets below
    }
    const found = sets.flat().map((r) => ({ family: r.family, first: r.first, last: r.last, text: r.text }));
    if (!found.length) unreadable = true;
    else where.push(`${src.where} host-local ranges`);
    ranges.push(...found);
  }
  if (unreadable) {
    const subnets = ledgerSubnets(records);
    ranges.push(...subnets);
    where.push(subnets.length ? "the ledger's subnets" : 'no readable IPAM ranges and no ledger address');
  }
  return { ranges, source: where.join(' + ') };
}

// Where the network's pod ranges are read: host-local ranges through the reserved fix's reader, the ledger's
// subnets (src/ledger/subnets.ts) where none can be read. A fix's part, so it sits with the list of fixes, not in
// the fix-neutral pods view (src/pods/view.ts); the agent's pass hands it to a step (Pass.podRanges).
import type { OpenNetwork } from '../network/open.js';
import { assessRanges } from '../reserved/ranges.js';
import { podIpamSources } from '../conflist.js';
import type { PodRanges } from '../pods/view.js';
import type { LedgerRecord } from '../ledger/record.js';
import { ledgerSubnets } from '../ledger/subnets.js';

/**
 * The network's pod ranges, for THE cleaning rule (src/residue/cleanable.ts): the host-local ranges of every IPAM
 * config that hands out this network's addresses (src/conflist.ts podIpamSources; read by the reserved fix's one
 * reader of that shape), plus, when one of them has none to read (azure-ipam, cilium's) or there is none, the
 * subnets the ledger's addresses were handed out in (as their records keep them). Nothing readable at all: no
 * range, and no unseen pod's address is a target.
 */
export function networkPodRanges(net: Pick<OpenNetwork, 'conf' | 'shim'>, records: readonly Pick<LedgerRecord, 'subnets'>[]): PodRanges {
  const ranges: PodRanges['ranges'][number][] = [];
  const where: string[] = [];
  const sources = podIpamSources(net);
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
    const subnets = ledgerSubnets(records);
    ranges.push(...subnets);
    where.push(subnets.length ? "the ledger's subnets" : 'no readable IPAM ranges and no ledger address');
  }
  return { ranges, source: where.join(' + ') };
}

// PURE. THE rule for the subnets the ledger's addresses were handed out in: the network's pod ranges when its IPAM
// has none to read (azure-ipam, cilium's). Read from what each record's writer kept (`subnets`: the prefix the
// result gave, src/cni/result.ts resultSubnets), never guessed from `ips`, which are recorded without a prefix.
import { parseCidr, type Cidr } from '../net/cidr.js';
import type { LedgerRecord } from './record.js';

/**
 * The subnets of `records`, each once, in the order first recorded. A record without `subnets` (an older shim's)
 * names none; a text parseCidr refuses is skipped (the record's schema takes any string).
 */
export function ledgerSubnets(records: readonly Pick<LedgerRecord, 'subnets'>[]): Cidr[] {
  const out = new Map<string, Cidr>();
  for (const text of records.flatMap((r) => r.subnets ?? [])) {
    try {
      const c = parseCidr(text);
      if (!out.has(c.text)) out.set(c.text, c);
    } catch {
      // not a CIDR: names no subnet
    }
  }
  return [...out.values()];
}

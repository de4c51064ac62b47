// PURE: which IPAM configs of the shim's conflist hand out this network's addresses, so their host-local ranges
// can be judged against the reserved CIDRs (doctor's reserved-ranges look).
import type { ShimConflist } from '../conflist.js';

/** Where a host-local IPAM config was found in the conflist. */
export interface IpamSource {
  /** e.g. `delegate`, `plugins[0].ipam`. */
  where: string;
  ipam: unknown;
}

/** The IPAM configs whose ranges hand out this network's addresses: the delegate, and chained, the others' `ipam`. */
export function ipamSources(net: { conf: ShimConflist['conf']; shim: Pick<ShimConflist, 'list' | 'index'> }): IpamSource[] {
  const out: IpamSource[] = [];
  if (net.conf.settings.delegate) out.push({ where: 'delegate', ipam: net.conf.settings.delegate });
  if (net.conf.placement === 'chained') {
    const plugins = Array.isArray(net.shim.list.plugins) ? (net.shim.list.plugins as unknown[]) : [];
    plugins.forEach((p, i) => {
      if (i === net.shim.index || !p || typeof p !== 'object') return;
      const ipam = (p as Record<string, unknown>).ipam;
      if (ipam && typeof ipam === 'object' && !out.some((o) => JSON.stringify(o.ipam) === JSON.stringify(ipam)))
        out.push({ where: `plugins[${i}].ipam`, ipam });
    });
  }
  return out;
}

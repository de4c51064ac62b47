// Which IPAM config the node's shim mirrors: the explicit delegate, or (chained) the allocator's own ipam.
import { isObject } from '../cni/json.js';
import { allocatorOf } from '../conflist.js';
import type { OpenNetwork } from '../network/open.js';

export const typeOf = (v: unknown): string | undefined => (isObject(v) && typeof v.type === 'string' ? v.type : undefined);

/** The IPAM config whose store the ledger mirrors: `delegate`, or (chained without one) the allocator's `ipam`. */
export function effectiveIpam(net: OpenNetwork): Record<string, unknown> | undefined {
  if (net.conf.settings.delegate) return net.conf.settings.delegate;
  const ipam = allocatorOf((net.shim.list.plugins as unknown[]) ?? [], net.shim.index)?.ipam;
  return isObject(ipam) ? ipam : undefined;
}

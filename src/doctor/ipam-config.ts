// Which IPAM config the node's shim mirrors: the explicit delegate, or (chained) the allocator's own ipam.
import { isObject } from '../cni/json.js';
import { ANCHOR_TYPE } from '../cni/config.js';
import type { OpenNetwork } from '../network/open.js';

export const typeOf = (v: unknown): string | undefined => (isObject(v) && typeof v.type === 'string' ? v.type : undefined);

/** The plugin that allocates the addresses the chained shim sees: cilium-cni if listed, else the one before it. */
export function allocator(net: OpenNetwork): Record<string, unknown> | undefined {
  const plugins = (net.shim.list.plugins as unknown[]) ?? [];
  const cilium = plugins.find((p) => typeOf(p) === ANCHOR_TYPE);
  if (cilium) return cilium as Record<string, unknown>;
  const prev = plugins[net.shim.index - 1];
  return isObject(prev) ? prev : undefined;
}

/** The IPAM config whose store the ledger mirrors: `delegate`, or (chained without one) the allocator's `ipam`. */
export function effectiveIpam(net: OpenNetwork): Record<string, unknown> | undefined {
  if (net.conf.settings.delegate) return net.conf.settings.delegate;
  const ipam = allocator(net)?.ipam;
  return isObject(ipam) ? ipam : undefined;
}

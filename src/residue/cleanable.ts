// PURE. THE rule for "may residue be removed for this address, and is this rule residue at all" (the agent's step,
// ADD and CHECK through findResidue, `residue scan/clean`, doctor). Residue is a dead pod's; the node's own plumbing
// has the same shapes (azure-vnet answers ARP for the node's IP and the gateway with per-pod-shaped rules), so:
// - an address the node holds (any interface, IPv4 or IPv6) or routes through (a next hop) is never a target;
// - a rule answering with or rewriting to a MAC of the node's own interfaces delivers to the node: never residue;
// - an address the runtime's cache names for a pod the shim never saw is a target only inside the network's pod
//   ranges (the delegate's host-local ranges; without readable ones, the subnets the ledger's addresses were
//   handed out in: src/ledger/subnets.ts): a cache entry is the runtime's word, not the shim's, and may name anything.
// The node's addresses are read by an effect (src/effects/node-addresses.ts, routes.ts); without them nothing is
// decided here: the callers do not clean ("could not look" is never "found nothing").
import type { NodeAddresses } from '../effects/node-addresses.js';
import type { IpRange } from '../net/cidr.js';
import { exactIp, parseIp } from '../net/ip.js';
import type { Route } from '../net/route.js';
import type { PodRanges } from '../pods/view.js';

/** What the node holds: its interfaces' addresses and MACs, and its routes' next hops. */
export interface NodeFacts extends NodeAddresses {
  /** Next hops of the node's routes (the gateway), canonical text → the device the route goes out of. */
  gateways: ReadonlyMap<string, string>;
}

type RefusalKind = 'node-address' | 'next-hop' | 'outside-ranges';

export interface Refusal {
  ip: string;
  kind: RefusalKind;
  /** Why, in words (for logs, errors and reports). */
  why: string;
}

/** PURE: the next hops of `routes` (and the devices they go out of). */
export function routeGateways(routes: readonly Route[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const r of routes) {
    for (const h of [{ gateway: r.gateway, dev: r.dev }, ...(r.nexthops ?? [])]) {
      const ip = h.gateway ? exactIp(h.gateway) : undefined;
      if (ip) out.set(ip, h.dev ?? r.dev ?? '?');
    }
  }
  return out;
}

/**
 * THE decision. Why residue for `ip` (canonical, no prefix) must not be removed, or undefined when it may be.
 * `ranges` applies to addresses only the runtime's cache names (unseen pods); a ledger address (the shim handed it
 * out), an ADD's and an operator's `--ip` skip it (pass undefined).
 */
export function refusal(ip: string, node: NodeFacts, ranges?: PodRanges): Refusal | undefined {
  const dev = node.ips.get(ip);
  if (dev !== undefined)
    return { ip, kind: 'node-address', why: `${ip} is an address of this node (on ${dev}): its rules and neighbours are the node's own` };
  const via = node.gateways.get(ip);
  if (via !== undefined)
    return { ip, kind: 'next-hop', why: `${ip} is a next hop of this node's routes (via ${via}): its rules and neighbours are the node's own` };
  if (ranges && !inRanges(ip, ranges.ranges))
    return {
      ip,
      kind: 'outside-ranges',
      why: ranges.ranges.length
        ? `${ip} is outside the network's pod ranges (${ranges.source}: ${ranges.ranges.map((r) => r.text).join(', ')})`
        : `the network's pod ranges are unknown (${ranges.source}): ${ip} cannot be told to be a pod's`,
    };
  return undefined;
}

/** PURE. A rule pointing at a MAC of the node's own interfaces delivers to the node: never residue. */
export const pointsAtNode = (rule: { mac: string }, node: Pick<NodeFacts, 'macs'>): boolean => node.macs.has(rule.mac);

function inRanges(ip: string, ranges: readonly IpRange[]): boolean {
  const { family, value } = parseIp(ip);
  return ranges.some((r) => r.family === family && r.first <= value && value <= r.last);
}

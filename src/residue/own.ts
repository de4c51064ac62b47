// The one rule for "this neighbour entry is the pod's own, not residue" (ADD, CHECK, doctor, residue scan/clean):
// an entry for the pod's address on the pod's own host-side interface. That interface is known two ways, and
// either proves it:
// - the attachment's CNI result names it (an interface without `sandbox`: ptp's and cilium-cni's host veth);
// - the host routes exactly that address through it (a /32 or /128 route: what ptp and cilium's endpoint routes
//   install). An azure-vnet leftover sits on its bridge (azure0), which carries at most the subnet's route.
// Callers without the result (doctor, residue scan/clean) rely on the routes; ADD and CHECK have both.
import type { Neighbour } from '../net/neighbour.js';
import { routeDst, type Route } from '../net/route.js';
import { addressOf } from '../net/ip.js';

/** PURE. For each address, the devices the host reaches it through by a host route (any table, unicast). */
export function hostRouteDevices(routes: readonly Route[]): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const r of routes) {
    if (r.type !== 'unicast') continue;
    const dst = routeDst(r);
    if (!dst || dst.prefix !== (r.family === 4 ? 32 : 128)) continue;
    const ip = addressOf(dst.text);
    const devs = [r.dev, ...(r.nexthops ?? []).map((h) => h.dev)].filter((d): d is string => typeof d === 'string');
    if (!ip || !devs.length) continue;
    let set = out.get(ip);
    if (!set) out.set(ip, (set = new Set()));
    for (const d of devs) set.add(d);
  }
  return out;
}

export interface OwnInterfaces {
  /** Host-side interfaces from the attachment's CNI result (resultHostDevices). */
  devs?: readonly string[];
  /** hostRouteDevices of the node's routes, when they were read. */
  routed?: ReadonlyMap<string, ReadonlySet<string>>;
}

/** PURE. THE rule: a neighbour entry on the pod's own host-side interface is the pod's, never residue. */
export function isPodOwnNeighbour(n: Pick<Neighbour, 'ip' | 'dev'>, own: OwnInterfaces): boolean {
  return (own.devs ?? []).includes(n.dev) || (own.routed?.get(n.ip)?.has(n.dev) ?? false);
}

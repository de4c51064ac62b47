// PURE: THE uplink rule, which interface the node's default routes name (the probe rewrite on ADD, the agent and
// `probe-rewrite`; doctor's `reserved-routes` and `ipv6-probe`). A decision, so not in effects/: they read the routes.
import type { Family } from './ip.js';
import type { Route } from './route.js';

/**
 * The order in which default routes name the uplink: IPv6 first. The node has ONE uplink (the "uplink" setting
 * is one interface), and everything that names it goes through defaultUplink (over what effects/uplink.ts or effects/routes.ts read),
 * so doctor's route check and the probe rewrite never disagree. IPv6 wins because the probe rewrite is the one
 * caller whose rules are useless on the wrong interface (LB probes are IPv6 and arrive where the IPv6 default
 * route leaves); Azure nodes have one NIC, where both families name the same device anyway.
 */
export const UPLINK_FAMILIES: readonly Family[] = [6, 4];

/**
 * The uplink: the interface of the main table's best (lowest metric) unicast default route, families tried in
 * UPLINK_FAMILIES order; a multipath route names its devices per nexthop. undefined when there is none. The one
 * rule for it (effects/uplink.ts applies it to what it reads, reserved/node-routes.ts to the routes it lists).
 */
export function defaultUplink(routes: readonly Route[]): string | undefined {
  for (const family of UPLINK_FAMILIES) {
    const defaults = routes.filter((x) => x.family === family && x.table === 'main' && x.dst === 'default' && x.type === 'unicast');
    for (const r of defaults.sort((a, b) => (a.metric ?? 0) - (b.metric ?? 0))) {
      const dev = r.dev ?? r.nexthops?.find((n) => n.dev)?.dev;
      if (dev) return dev;
    }
  }
  return undefined;
}

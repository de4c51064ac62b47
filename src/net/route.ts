// A route and the routing-table facts the fixes decide on (src/reserved/capture.ts, src/residue/own.ts, doctor), as
// src/effects/routes.ts reads them from `ip -j route` and `ip -j rule`. Data and pure helpers only.
import { type Cidr, parseCidr } from './cidr.js';
import type { Family } from './ip.js';

export interface RouteNexthop {
  gateway?: string;
  dev?: string;
}

/** One route as `ip -j route` reports it, normalised a little. */
export interface Route {
  family: Family;
  /** `unicast` when ip omits it; else blackhole, unreachable, prohibit, local, broadcast, multicast, throw, … */
  type: string;
  /** As ip prints it: `default`, `10.0.0.0/8`, or a host address without prefix. */
  dst: string;
  /** `main` when ip omits it. */
  table: string;
  dev?: string;
  gateway?: string;
  protocol?: string;
  scope?: string;
  metric?: number;
  /** Multipath routes: one entry per nexthop. */
  nexthops?: RouteNexthop[];
  flags: string[];
}

/** Per family, the routing tables some `ip rule` looks up; `all` when any table may be (an l3mdev/VRF rule). */
export type ActiveTables = Record<Family, ReadonlySet<string> | 'all'>;

/** The route's destination as a Cidr (`default` = /0, a bare address = host route), or undefined if unparseable. */
export function routeDst(route: Route): Cidr | undefined {
  if (route.dst === 'default') return parseCidr(route.family === 4 ? '0.0.0.0/0' : '::/0');
  try {
    const c = parseCidr(route.dst);
    return c.family === route.family ? c : undefined;
  } catch {
    return undefined;
  }
}

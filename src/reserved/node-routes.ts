// THE look at the node's routes for reserved subnets, taken by doctor's `reserved-routes` and by the agent's reserved
// step on every pass: every route of every table and the tables `ip rule` reaches, the uplink (the shim's `uplink`
// setting, else the default route's device), and the routes that capture a reserved CIDR (src/reserved/capture.ts).
import type { Run } from '../effects/exec.js';
import { listActiveTables, listRoutes } from '../effects/routes.js';
import { defaultUplink } from '../net/uplink.js';
import type { Cidr } from '../net/cidr.js';
import type { ActiveTables, Route } from '../net/route.js';
import { findCapturingRoutes, type CapturingRoute } from './capture.js';

export interface RouteLook {
  routes: Route[];
  tables: ActiveTables;
  /** undefined: none configured and no default route (then nothing can be judged). */
  uplink: string | undefined;
  uplinkSource: 'config' | 'default route';
}

/** Reads the node's routes and rules (throws when `ip` cannot list them: "could not look"). */
export async function lookAtRoutes(run: Run, configuredUplink: string | undefined): Promise<RouteLook> {
  const [routes, tables] = await Promise.all([listRoutes(run), listActiveTables(run)]);
  return { routes, tables, uplink: configuredUplink ?? defaultUplink(routes), uplinkSource: configuredUplink ? 'config' : 'default route' };
}

/** PURE: the routes of `look` that capture a reserved CIDR; none when no uplink is known (nothing to judge against). */
export function capturingRoutes(
  look: { routes: readonly Route[]; uplink: string | undefined; tables?: ActiveTables },
  reserved: readonly Cidr[],
): CapturingRoute[] {
  if (!look.uplink) return [];
  return findCapturingRoutes(look.routes, reserved, { uplink: look.uplink, ...(look.tables ? { activeTables: look.tables } : {}) });
}

/** PURE: the gateway(s) a route sends to, as one label value (`` for a blackhole or a device route). */
export function routeGateway(route: Route): string {
  const hops = route.nexthops?.length ? route.nexthops.map((h) => h.gateway) : [route.gateway];
  return [...new Set(hops.filter((g): g is string => !!g))].join(',');
}

// PURE: routes that capture a reserved CIDR (docs/reserved.md: a node CIDR over a firewall subnet sends the
// firewall's replies to a node instead of the VNet). The routes themselves are read by src/effects/routes.ts.
import { type ActiveTables, type Route, type RouteNexthop, routeDst } from '../net/route.js';
import { type Cidr, intersect, parseCidr, rangeOverlap } from '../net/cidr.js';
import { familyOf, type Family, parseIp } from '../net/ip.js';

/** Routes of the main table's default routes through `uplink`: where reserved subnets are normally reached. */
export function uplinkGateways(routes: readonly Route[], uplink: string): string[] {
  const out = new Set<string>();
  for (const r of routes) {
    if (r.table !== 'main' || r.dst !== 'default' || r.type !== 'unicast') continue;
    for (const hop of hopsOf(r)) if (hop.dev === uplink && hop.gateway) out.add(hop.gateway);
  }
  return [...out];
}

type CaptureReason = 'other-device' | 'other-gateway' | 'blackhole' | 'unreachable' | 'prohibit' | 'no-nexthop';

export interface CapturingRoute {
  route: Route;
  /** The route as `ip route` would print it (one line). */
  text: string;
  /** The reserved CIDR (canonical text) it captures. */
  reserved: string;
  /** `full`: the route covers the whole reserved CIDR; `partial`: only part of it. */
  overlap: 'full' | 'partial';
  reason: CaptureReason;
  /** One line telling the operator what to do. */
  fix: string;
}

export interface CaptureOptions {
  /** The interface reserved subnets are reached through (the `uplink` setting, docs/configuration.md). */
  uplink: string;
  /**
   * Gateways on the uplink that lead to the reserved subnets (default: the gateways of the main table's default
   * routes via the uplink). A route via the uplink to any other gateway — another node — captures. When no such
   * gateway is known, routes via the uplink are never reported.
   */
  uplinkGateways?: readonly string[];
  /** Tables `ip rule` looks up (listActiveTables); routes in other tables are never used, so never reported. */
  activeTables?: ActiveTables;
}

const SKIP_TYPES = new Set(['local', 'broadcast', 'anycast', 'multicast', 'throw', 'nat']);
const DROP_TYPES = new Set(['blackhole', 'unreachable', 'prohibit']);
const NOT_ROUTED: Cidr[] = ['169.254.0.0/16', '224.0.0.0/4', 'fe80::/10', 'ff00::/8'].map(parseCidr);

/**
 * PURE. Routes (any table but `local`) whose destination overlaps a reserved CIDR and that send it somewhere other
 * than the uplink: another device (any nexthop of a multipath route), a gateway on the uplink that is not one of
 * `uplinkGateways` (the seed case: another node's pod-CIDR route), or blackhole/unreachable/prohibit.
 * One finding per (route, reserved CIDR), routes in input order.
 *
 * Not reported: the `local` table and local/broadcast/anycast/multicast/throw routes; link-local and multicast
 * destinations; default (/0) routes, which are the fallback rather than a capture (policy tables and VRFs end in
 * one); routes in a table no `ip rule` looks up (`activeTables`: no packet ever consults them); and a broad
 * route whose overlap with the reserved CIDR is fully covered by a more specific route of the same table,
 * whatever that route does (longest prefix wins, so the broad route never sees that traffic: the specific route
 * is judged on its own, and a fix adding it again would fail because it exists).
 */
export function findCapturingRoutes(routes: readonly Route[], reserved: readonly Cidr[], opts: CaptureOptions): CapturingRoute[] {
  const gateways = (opts.uplinkGateways ?? uplinkGateways(routes, opts.uplink)).map(toGateway).filter((g): g is Gateway => g !== undefined);
  const parsed = routes.map((route) => ({ route, dst: routeDst(route) }));
  const active = (r: Route) => {
    const tables = opts.activeTables?.[r.family];
    return tables === undefined || tables === 'all' || tables.has(r.table);
  };
  // Any more specific route of the same table takes that traffic from a broader one, whatever it does with it.
  const specific = parsed.filter((p) => p.dst !== undefined);
  const out: CapturingRoute[] = [];
  for (const { route, dst } of parsed) {
    if (!dst || route.table === 'local' || SKIP_TYPES.has(route.type) || dst.prefix === 0 || !active(route)) continue;
    if (NOT_ROUTED.some((n) => rangeOverlap(dst, n) === 'full')) continue;
    const reason = verdict(route, opts.uplink, gateways);
    if (!reason) continue;
    for (const r of reserved) {
      const region = intersect(dst, r);
      if (!region) continue;
      const shadowed = specific.some(
        (o) => o.route.table === route.table && o.dst!.family === dst.family && o.dst!.prefix > dst.prefix && rangeOverlap(region, o.dst!) === 'full',
      );
      if (shadowed) continue;
      const overlap = rangeOverlap(r, dst) === 'full' ? 'full' : 'partial';
      out.push({ route, text: routeText(route), reserved: r.text, overlap, reason, fix: fixFor(route, dst, r, reason, opts.uplink, gateways) });
    }
  }
  return out;
}

/** Why `route` sends traffic away from the uplink, or undefined when it does not. */
function verdict(route: Route, uplink: string, gateways: readonly Gateway[]): CaptureReason | undefined {
  if (DROP_TYPES.has(route.type)) return route.type as CaptureReason;
  if (route.type !== 'unicast') return undefined;
  const hops = hopsOf(route);
  if (!hops.length) return 'no-nexthop';
  for (const hop of hops) {
    if (!hop.dev || hop.dev !== uplink) return 'other-device';
  }
  for (const hop of hops) {
    if (hop.gateway && gateways.length && !isKnownGateway(hop.gateway, gateways)) return 'other-gateway';
  }
  return undefined;
}

function hopsOf(route: Route): RouteNexthop[] {
  if (route.nexthops?.length) return route.nexthops;
  if (route.dev === undefined && route.gateway === undefined) return [];
  const hop: RouteNexthop = {};
  if (route.dev !== undefined) hop.dev = route.dev;
  if (route.gateway !== undefined) hop.gateway = route.gateway;
  return [hop];
}

interface Gateway {
  family: Family;
  value: bigint;
  text: string;
}

function toGateway(ip: string): Gateway | undefined {
  try {
    return { ...parseIp(ip), text: ip };
  } catch {
    return undefined;
  }
}

function isKnownGateway(ip: string, gateways: readonly Gateway[]): boolean {
  const g = toGateway(ip);
  return g !== undefined && gateways.some((k) => k.family === g.family && k.value === g.value);
}

/** `inet6` for an IPv4 route via an IPv6 nexthop (RFC 5549), as ip prints it. */
function viaFamily(family: Family, gateway: string): string[] {
  return family === 4 && familyOf(gateway) === 6 ? ['inet6'] : [];
}

/** One line in `ip route` syntax. */
export function routeText(route: Route): string {
  const parts: string[] = [];
  if (route.type !== 'unicast') parts.push(route.type);
  parts.push(route.dst);
  if (route.gateway) parts.push('via', ...viaFamily(route.family, route.gateway), route.gateway);
  if (route.dev && !(route.type !== 'unicast' && route.dev === 'lo')) parts.push('dev', route.dev);
  if (route.table !== 'main') parts.push('table', route.table);
  if (route.protocol) parts.push('proto', route.protocol);
  if (route.metric !== undefined) parts.push('metric', String(route.metric));
  for (const hop of route.nexthops ?? []) {
    parts.push('nexthop');
    if (hop.gateway) parts.push('via', ...viaFamily(route.family, hop.gateway), hop.gateway);
    if (hop.dev) parts.push('dev', hop.dev);
  }
  return parts.join(' ');
}

function fixFor(route: Route, dst: Cidr, r: Cidr, reason: CaptureReason, uplink: string, gateways: readonly Gateway[]): string {
  const ip = route.family === 6 ? 'ip -6 route' : 'ip route';
  const table = route.table !== 'main' ? ` table ${route.table}` : '';
  const del = `${ip} del ${route.type !== 'unicast' ? `${route.type} ` : ''}${route.dst}${table}`;
  if (DROP_TYPES.has(reason)) return `traffic to ${dst.text} (reserved ${r.text}) is dropped here: \`${del}\` if nothing needs it`;
  if (dst.prefix >= r.prefix) {
    // The route is for (part of) the reserved subnet itself: typically a node CIDR handed out over it.
    const why = reason === 'other-gateway' ? 'another host on the uplink' : reason === 'other-device' ? 'another device' : 'no nexthop';
    return `${dst.text} lies in reserved ${r.text} and is routed to ${why}: take it out of the pod pool (see \`ipam-shim plan\`), then \`${del}\``;
  }
  const gw = gateways.find((g) => g.family === route.family);
  const via = gw ? `via ${gw.text} ` : '';
  return `add a more specific route for the reserved subnet: \`${ip} add ${r.text} ${via}dev ${uplink}${table}\`, or narrow ${dst.text}`;
}

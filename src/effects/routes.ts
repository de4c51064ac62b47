// The node's routing tables (`ip -j route show table all`, both families) and the PURE check that finds routes
// capturing a reserved CIDR (field notes §4: a node CIDR over a firewall subnet sends the firewall's replies to
// a node instead of the VNet).
import { ToolError } from '../cni/errors.js';
import type { Run } from './exec.js';
import { type Cidr, intersect, parseCidr, rangeOverlap } from '../net/cidr.js';
import { type Family, parseIp } from '../net/ip.js';

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

/**
 * Lists every route of every table, IPv4 and IPv6, read concurrently. Read-only. `-4` is explicit because
 * `ip route show table all` without a family prints IPv6 routes too (iproute2 6.1). Tolerates a kernel without
 * IPv6 (no IPv6 routes); any other failure throws ToolError.
 */
export async function listRoutes(run: Run): Promise<Route[]> {
  const [v4, v6] = await Promise.all([
    run('ip', ['-j', '-4', 'route', 'show', 'table', 'all']),
    run('ip', ['-j', '-6', 'route', 'show', 'table', 'all'], { check: false }),
  ]);
  let v6Routes: Route[] = [];
  if (v6.exitCode === 0) v6Routes = parseRoutes(v6.stdout, 6);
  else if (!/not supported|no such file|address family/i.test(v6.stderr)) {
    throw new ToolError('ip', ['-j', '-6', 'route', 'show', 'table', 'all'], v6.exitCode, v6.stderr, { timedOut: v6.timedOut });
  }
  return [...parseRoutes(v4.stdout, 4), ...v6Routes];
}

/** Per family, the routing tables some `ip rule` looks up; `all` when any table may be (an l3mdev/VRF rule). */
export type ActiveTables = Record<Family, ReadonlySet<string> | 'all'>;

/**
 * Reads `ip -j -4 rule show` and `ip -j -6 rule show`: which tables a lookup can reach. Read-only. A family
 * whose rules cannot be read counts as `all` (a route is never called inactive on a guess).
 */
export async function listActiveTables(run: Run): Promise<ActiveTables> {
  const [v4, v6] = await Promise.all([4, 6].map((f) => run('ip', ['-j', `-${f}`, 'rule', 'show'], { check: false })));
  const parse = (r: Awaited<ReturnType<Run>>): ReadonlySet<string> | 'all' => (r.exitCode === 0 ? parseRuleTables(r.stdout) : 'all');
  return { 4: parse(v4!), 6: parse(v6!) };
}

/** PURE: `ip -j rule show` output → the tables its rules look up (`all` for an l3mdev rule or bad output). */
export function parseRuleTables(json: string): ReadonlySet<string> | 'all' {
  let raw: unknown;
  try {
    raw = JSON.parse(json.trim() || '[]');
  } catch {
    return 'all';
  }
  if (!Array.isArray(raw)) return 'all';
  const out = new Set<string>();
  for (const rule of raw as Array<Record<string, unknown>>) {
    if ('l3mdev' in rule) return 'all'; // the table comes from the VRF device: any table may be in use
    if (rule.table !== undefined) out.add(String(rule.table));
  }
  return out;
}

/** PURE: parses `ip -j [-4|-6] route show …` output. Empty output = no routes. */
export function parseRoutes(json: string, family: Family): Route[] {
  const text = json.trim();
  if (!text) return [];
  const raw: unknown = JSON.parse(text);
  if (!Array.isArray(raw)) throw new Error('ip -j route: expected a JSON array');
  return raw.map((r: Record<string, unknown>) => {
    const route: Route = {
      family,
      type: typeof r.type === 'string' ? r.type : 'unicast',
      dst: String(r.dst ?? 'default'),
      table: r.table === undefined ? 'main' : String(r.table),
      flags: Array.isArray(r.flags) ? r.flags.map(String) : [],
    };
    const gw = gatewayOf(r);
    if (gw) route.gateway = gw;
    if (typeof r.dev === 'string') route.dev = r.dev;
    if (typeof r.protocol === 'string') route.protocol = r.protocol;
    if (typeof r.scope === 'string') route.scope = r.scope;
    if (typeof r.metric === 'number') route.metric = r.metric;
    if (Array.isArray(r.nexthops)) {
      route.nexthops = r.nexthops.map((n: Record<string, unknown>) => {
        const hop: RouteNexthop = {};
        const g = gatewayOf(n);
        if (g) hop.gateway = g;
        if (typeof n.dev === 'string') hop.dev = n.dev;
        return hop;
      });
    }
    return route;
  });
}

function gatewayOf(r: Record<string, unknown>): string | undefined {
  if (typeof r.gateway === 'string') return r.gateway;
  const via = r.via as { host?: unknown } | undefined; // RFC 5549: IPv4 route via an IPv6 nexthop
  return via && typeof via.host === 'string' ? via.host : undefined;
}

/** The interface of the main table's default route (IPv4 first), or undefined. */
export function defaultUplink(routes: readonly Route[]): string | undefined {
  for (const family of [4, 6] as const) {
    const r = routes.find((x) => x.family === family && x.table === 'main' && x.dst === 'default' && x.type === 'unicast' && x.dev);
    if (r) return r.dev;
  }
  return undefined;
}

/** Routes of the main table's default routes through `uplink`: where reserved subnets are normally reached. */
export function uplinkGateways(routes: readonly Route[], uplink: string): string[] {
  const out = new Set<string>();
  for (const r of routes) {
    if (r.table !== 'main' || r.dst !== 'default' || r.type !== 'unicast') continue;
    for (const hop of hopsOf(r)) if (hop.dev === uplink && hop.gateway) out.add(hop.gateway);
  }
  return [...out];
}

export type CaptureReason = 'other-device' | 'other-gateway' | 'blackhole' | 'unreachable' | 'prohibit' | 'no-nexthop';

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
  /** The interface reserved subnets are reached through (design.md `uplink`). */
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
  return family === 4 && gateway.includes(':') ? ['inet6'] : [];
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

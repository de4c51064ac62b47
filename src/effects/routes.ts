// The node's routing tables (`ip -j route show table all`, both families) and `ip rule`'s tables, read and parsed
// into Route objects (src/net/route.ts). What a route means for a fix is decided there (src/reserved/capture.ts:
// routes capturing a reserved CIDR; src/residue/own.ts: a pod's own host routes).
import { ToolError } from '../cni/errors.js';
import { TOOL_TIMEOUT_MS, type Run } from './exec.js';
import type { ActiveTables, Route, RouteNexthop } from '../net/route.js';
import type { Family } from '../net/ip.js';

/**
 * Lists every route of every table, IPv4 and IPv6, read concurrently. Read-only. `-4` is explicit because
 * `ip route show table all` without a family prints IPv6 routes too (iproute2 6.1). Tolerates a kernel without
 * IPv6 (no IPv6 routes); any other failure throws ToolError.
 */
export async function listRoutes(run: Run): Promise<Route[]> {
  const [v4, v6] = await Promise.all([
    run('ip', ['-j', '-4', 'route', 'show', 'table', 'all'], { timeoutMs: TOOL_TIMEOUT_MS }),
    run('ip', ['-j', '-6', 'route', 'show', 'table', 'all'], { check: false, timeoutMs: TOOL_TIMEOUT_MS }),
  ]);
  let v6Routes: Route[] = [];
  if (v6.exitCode === 0) v6Routes = parseRoutes(v6.stdout, 6);
  else if (!/not supported|no such file|address family/i.test(v6.stderr)) {
    throw new ToolError('ip', ['-j', '-6', 'route', 'show', 'table', 'all'], v6.exitCode, v6.stderr, { timedOut: v6.timedOut });
  }
  return [...parseRoutes(v4.stdout, 4), ...v6Routes];
}

/**
 * Reads `ip -j -4 rule show` and `ip -j -6 rule show`: which tables a lookup can reach. Read-only. A family
 * whose rules cannot be read counts as `all` (a route is never called inactive on a guess).
 */
export async function listActiveTables(run: Run): Promise<ActiveTables> {
  const [v4, v6] = await Promise.all([4, 6].map((f) => run('ip', ['-j', `-${f}`, 'rule', 'show'], { check: false, timeoutMs: TOOL_TIMEOUT_MS })));
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

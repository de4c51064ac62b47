// The node's uplink as the default route names it: `ip -j [-6] route show default`, read family by family in
// UPLINK_FAMILIES order and judged by the one uplink rule (defaultUplink in src/net/uplink.ts), so the probe rewrite and
// the route checks never disagree on it.
import { ToolError } from '../cni/errors.js';
import type { Run } from './exec.js';
import type { Family } from '../net/ip.js';
import { parseRoutes } from './routes.js';
import { defaultUplink, UPLINK_FAMILIES } from '../net/uplink.js';

const TIMEOUT_MS = 5_000;

/** PURE: the uplink in `ip -j [-6] route show default` stdout (main table, lowest metric, multipath per nexthop), or null. */
export function parseDefaultRouteDev(stdout: string, family: Family = 6): string | null {
  return defaultUplink(parseRoutes(stdout, family)) ?? null;
}

/**
 * The interface of the default route, by defaultUplink's rule (IPv6 first, see UPLINK_FAMILIES); null when there
 * is none (or `ip` is missing). Read-only, one `ip` call per family tried (a family is read only when the ones
 * before it have no default route, so the answer is defaultUplink's over both families' routes).
 * Throws ToolError when `ip` itself fails.
 */
export async function readDefaultUplink(run: Run): Promise<string | null> {
  for (const family of UPLINK_FAMILIES) {
    const args = ['-j', ...(family === 6 ? ['-6'] : []), 'route', 'show', 'default'];
    const r = await run('ip', args, { check: false, timeoutMs: TIMEOUT_MS });
    if (r.notFound) return null;
    if (r.exitCode !== 0) throw new ToolError('ip', args, r.exitCode, r.stderr, { timedOut: r.timedOut });
    const dev = parseDefaultRouteDev(r.stdout, family);
    if (dev) return dev;
  }
  return null;
}

// The node's uplink as the default route names it: `ip -j [-6] route show default`, read with the one uplink
// rule (defaultUplink in routes.ts), so the probe rewrite and the route checks never disagree on it.
import { ToolError } from '../cni/errors.js';
import type { Run } from './exec.js';
import type { Family } from '../net/ip.js';
import { defaultUplink, parseRoutes } from './routes.js';

const TIMEOUT_MS = 5_000;

/** PURE: the uplink in `ip -j [-6] route show default` stdout (main table, lowest metric, multipath per nexthop), or null. */
export function parseDefaultRouteDev(stdout: string, family: Family = 6): string | null {
  return defaultUplink(parseRoutes(stdout, family), [family]) ?? null;
}

/**
 * The interface of the default route, families tried in `prefer` order (IPv6 first: the probe rewrite's
 * traffic is IPv6); null when there is none (or `ip` is missing). Read-only, one `ip` call per family tried.
 * Throws ToolError when `ip` itself fails.
 */
export async function readDefaultUplink(run: Run, prefer: readonly Family[] = [6, 4]): Promise<string | null> {
  for (const family of prefer) {
    const args = ['-j', ...(family === 6 ? ['-6'] : []), 'route', 'show', 'default'];
    const r = await run('ip', args, { check: false, timeoutMs: TIMEOUT_MS });
    if (r.notFound) return null;
    if (r.exitCode !== 0) throw new ToolError('ip', args, r.exitCode, r.stderr, { timedOut: r.timedOut });
    const dev = parseDefaultRouteDev(r.stdout, family);
    if (dev) return dev;
  }
  return null;
}

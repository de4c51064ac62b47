// Is an attachment provably alive? Its recorded network namespace still exists and holds one of its IPs.
import { statSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Run } from './exec.js';
import type { Liveness } from '../ledger/record.js';

/**
 * Read-only. `dead` only with proof: the netns path is gone, or it exists and holds none of the IPs (an
 * intent record with no IPs yet counts as dead only when the netns is gone). Anything it cannot read is
 * `unknown`, which GC treats as alive. A path is only "gone" when its directory is in sight: a process in
 * another mount namespace (a pod without /run/netns mounted from the host, HostToContainer) sees no
 * directory at all, and that proves nothing.
 */
export async function probeAttachment(run: Run, netns: string, ips: string[]): Promise<Liveness> {
  if (!netns) return 'dead';
  // Synchronous stats (fs-atomic.ts: cheaper than thread-pool hops), and no fs/promises: ADD probes a dead holder
  // of its address with this (src/gc/stale.ts), and ADD does not load fs/promises.
  try {
    statSync(netns);
  } catch (e) {
    if ((e as { code?: string }).code !== 'ENOENT') return 'unknown';
    try {
      return statSync(dirname(netns)).isDirectory() ? 'dead' : 'unknown';
    } catch {
      return 'unknown';
    }
  }
  if (ips.length === 0) return 'unknown';
  const r = await run('nsenter', [`--net=${netns}`, 'ip', '-j', 'addr', 'show'], { check: false, timeoutMs: 5000 });
  if (r.exitCode !== 0) return 'unknown';
  let links: Array<{ addr_info?: Array<{ local?: string }> }>;
  try {
    links = JSON.parse(r.stdout);
  } catch {
    return 'unknown';
  }
  const present = new Set(links.flatMap((l) => (l.addr_info ?? []).map((a) => a.local)));
  return ips.some((ip) => present.has(ip)) ? 'alive' : 'dead';
}

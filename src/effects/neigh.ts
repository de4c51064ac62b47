// Neighbour (ARP/NDP) entries via iproute2's JSON output. azure-vnet leaves `<podIP> lladdr <MAC> PERMANENT`
// on its bridge; such an entry never expires, so it has to be deleted explicitly.
import { ToolError } from '../cni/errors.js';
import { exactIp } from '../net/ip.js';
import { normaliseMac } from '../net/mac.js';
import { TOOL_TIMEOUT_MS, type Run } from './exec.js';
import type { Neighbour } from '../net/neighbour.js';

/**
 * Lists neighbour entries with one `ip -j neigh show` call (both families unless `family` narrows it).
 * Read-only. Owns nothing. Tolerates empty output (older iproute2 prints nothing for an empty table) and
 * skips entries without a parseable address; a failing `ip` throws ToolError.
 */
export async function listNeighbours(run: Run, family?: 4 | 6): Promise<Neighbour[]> {
  const args = [...(family ? [`-${family}`] : []), '-j', 'neigh', 'show'];
  const r = await run('ip', args, { timeoutMs: TOOL_TIMEOUT_MS });
  return parseNeighbours(r.stdout);
}

/**
 * The PERMANENT entries (the only ones residue can be) of the families asked for. A Run whose netns's /proc can be
 * read (Run.readProc: the exec wrapper's and its wrappers', the warm-up's script) reads IPv4 from /proc/net/arp,
 * the kernel's own table, and starts `ip` only for IPv6: an IPv4 pod's ADD starts no process for its neighbours.
 * Any other Run (another netns, tests) gets one `ip -j neigh show` for both families.
 */
export async function listPermanentNeighbours(run: Run, families: { v4: boolean; v6: boolean }): Promise<Neighbour[]> {
  const permanent = (ns: Neighbour[]) => ns.filter((n) => n.state.includes('PERMANENT'));
  if (!families.v4 && !families.v6) return [];
  const { readProc } = run;
  if (!readProc) return permanent(await listNeighbours(run));
  const v4 = families.v4 ? parseArpTable(readProc('/proc/net/arp')) : [];
  return families.v6 ? [...v4, ...permanent(await listNeighbours(run, 6))] : v4;
}

/**
 * PURE: /proc/net/arp → its PERMANENT entries (ATF_PERM, 0x4, in the flags column: the kernel sets it for
 * NUD_PERMANENT), without proxy-ARP entries (ATF_PUBL, 0x8: `ip neigh show` does not list them either).
 * Columns: IP address, HW type, Flags, HW address, Mask, Device.
 */
export function parseArpTable(text: string): Neighbour[] {
  const out: Neighbour[] = [];
  for (const line of text.split('\n').slice(1)) {
    const [addr, , flags, hw, , dev] = line.trim().split(/\s+/);
    const ip = addr ? exactIp(addr) : undefined;
    const f = Number(flags);
    if (!ip || !dev || !(f & 0x4) || f & 0x8) continue;
    const mac = hw ? normaliseMac(hw) : undefined;
    out.push({ ip, dev, ...(mac ? { mac } : {}), state: ['PERMANENT'] });
  }
  return out;
}

/** PURE: `ip -j neigh show` JSON → Neighbour[]. */
export function parseNeighbours(json: string): Neighbour[] {
  if (!json.trim()) return [];
  const raw: unknown = JSON.parse(json);
  if (!Array.isArray(raw)) return [];
  const out: Neighbour[] = [];
  for (const e of raw as Array<Record<string, unknown>>) {
    const ip = typeof e.dst === 'string' ? exactIp(e.dst) : undefined;
    if (!ip || typeof e.dev !== 'string') continue;
    const mac = typeof e.lladdr === 'string' ? normaliseMac(e.lladdr) : undefined;
    const state = Array.isArray(e.state) ? e.state.filter((s): s is string => typeof s === 'string') : [];
    out.push({ ip, dev: e.dev, ...(mac ? { mac } : {}), state });
  }
  return out;
}

/**
 * Deletes the entry for `ip` on `dev` (`ip neigh del IP dev DEV`). Idempotent: an entry or device that is
 * already gone returns `'absent'`. Owns only that one (ip, dev) entry — never flushes. Other failures throw.
 */
export async function deleteNeighbour(run: Run, ip: string, dev: string): Promise<'deleted' | 'absent'> {
  const args = ['neigh', 'del', ip, 'dev', dev];
  const r = await run('ip', args, { check: false, timeoutMs: TOOL_TIMEOUT_MS });
  if (r.exitCode === 0 && !r.timedOut) return 'deleted';
  // "RTNETLINK answers: No such file or directory" (entry gone), 'Cannot find device "x"' (device gone).
  if (/No such file or directory|Cannot find device/i.test(r.stderr)) return 'absent';
  throw new ToolError('ip', args, r.exitCode, r.stderr, { timedOut: r.timedOut });
}

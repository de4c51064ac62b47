// The node's own addresses and MACs (`ip -j addr show`: every interface of the current netns, IPv4 and IPv6), which
// residue must never take for a pod's (src/residue/cleanable.ts decides; this module only reads).
import { exactIp } from '../net/ip.js';
import { normaliseMac } from '../net/mac.js';
import { TOOL_TIMEOUT_MS, type Run } from './exec.js';

export interface NodeAddresses {
  /** Each address an interface holds → that interface (canonical text, no prefix). */
  ips: ReadonlyMap<string, string>;
  /** Each interface MAC → that interface (normalised; loopback's all-zero address dropped). */
  macs: ReadonlyMap<string, string>;
}

/** Read-only, one `ip -j addr show`; a failing `ip` throws ToolError (never an empty answer). */
export async function readNodeAddresses(run: Run): Promise<NodeAddresses> {
  const r = await run('ip', ['-j', 'addr', 'show'], { timeoutMs: TOOL_TIMEOUT_MS });
  return parseNodeAddresses(r.stdout);
}

/** PURE: `ip -j addr show` JSON → the addresses and MACs of every interface. Throws on output that is not a list. */
export function parseNodeAddresses(json: string): NodeAddresses {
  const raw: unknown = JSON.parse(json.trim() || '[]');
  if (!Array.isArray(raw)) throw new TypeError('ip -j addr show: not a JSON list');
  const ips = new Map<string, string>();
  const macs = new Map<string, string>();
  for (const l of raw as Array<Record<string, unknown>>) {
    const dev = typeof l.ifname === 'string' ? l.ifname : '?';
    const mac = typeof l.address === 'string' ? normaliseMac(l.address) : undefined;
    if (mac && mac !== '00:00:00:00:00:00') macs.set(mac, dev);
    for (const a of Array.isArray(l.addr_info) ? (l.addr_info as Array<Record<string, unknown>>) : []) {
      const ip = typeof a.local === 'string' ? exactIp(a.local) : undefined;
      if (ip) ips.set(ip, dev);
    }
  }
  return { ips, macs };
}

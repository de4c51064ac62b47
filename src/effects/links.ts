// The node's network interfaces (`ip -j link`): their MAC addresses, and whether one exists.
import { TOOL_TIMEOUT_MS, type Run } from './exec.js';
import { normaliseMac } from '../net/mac.js';

/** MACs of every interface in the current netns (`ip -j link`). Read-only; a failing `ip` throws ToolError. */
export async function localMacs(run: Run): Promise<Set<string>> {
  const r = await run('ip', ['-j', 'link', 'show'], { timeoutMs: TOOL_TIMEOUT_MS });
  return parseLinkMacs(r.stdout);
}

/** PURE: `ip -j link` JSON → normalised MACs (loopback's all-zero address dropped). */
export function parseLinkMacs(json: string): Set<string> {
  const out = new Set<string>();
  const raw: unknown = json.trim() ? JSON.parse(json) : [];
  for (const l of Array.isArray(raw) ? (raw as Array<Record<string, unknown>>) : []) {
    const mac = typeof l.address === 'string' ? normaliseMac(l.address) : undefined;
    if (mac && mac !== '00:00:00:00:00:00') out.add(mac);
  }
  return out;
}

/** Whether `dev` is an interface in the current netns (`ip link show dev` answers). Read-only. */
export async function linkExists(run: Run, dev: string): Promise<boolean> {
  const r = await run('ip', ['-j', 'link', 'show', 'dev', dev], { check: false, timeoutMs: TOOL_TIMEOUT_MS });
  return r.exitCode === 0;
}

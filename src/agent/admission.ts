// Which connection the agent's HTTP port closes when one more arrives (issue 34, item 6). The port is on the
// node's address (hostNetwork), so any pod can reach it: with a plain cap on connections, 64 idle clients held
// every slot and the kubelet's probes failed until they left. Here a source (one address: a pod's, the node's
// own for the kubelet) holds at most PER_SOURCE connections, and a full port makes room by closing an idle
// connection of the source holding the most, never one serving a request. A client that sends its request (a
// probe, a scrape) is therefore never kept out by clients that send nothing, from any number of sources.
// A source is an IPv4 address, or an IPv6 /64 (issue 45, item 4): one host holds a whole /64 as easily as one
// address (SLAAC, privacy addresses, a pod adding addresses to its own interface), and counted per /128, 80
// addresses of one /64 held every slot with equal weights and nothing could displace them. And a newcomer whose
// source would still hold fewer than the other's after it gets in displaces an idle connection of that other, even
// when it holds just one: 72 IPv4 addresses each holding one idle connection (reconnecting when closed) kept
// every scrape from a 73rd out while the flood lasted (a newcomer had to be outweighed by two).
import { formatIp, parseIp } from '../net/ip.js';

/** The IPv4-mapped form a dual-stack socket reports an IPv4 peer in (`::ffff:10.224.0.9`). */
const MAPPED = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/i;

/**
 * PURE: the source a peer's address (as the socket reports it) counts toward: an IPv4 address as itself (also
 * when a dual-stack socket reports it mapped), an IPv6 address as its /64 (`fd00:45::/64`). Text that is no
 * address is its own source.
 */
export function sourceOf(address: string | undefined): string {
  if (!address) return '?';
  const text = MAPPED.exec(address)?.[1] ?? address;
  try {
    const ip = parseIp(text);
    return ip.family === 4 ? formatIp(4, ip.value) : `${formatIp(6, (ip.value >> 64n) << 64n)}/64`;
  } catch {
    return address;
  }
}

/** One open connection as admission sees it. */
export interface Held {
  /** The peer's source (sourceOf). */
  source: string;
  /**
   * A request is being answered on it (idle: none yet, between keep-alive requests, or an answer written and
   * waiting for the client to read it).
   */
  busy: boolean;
}

export interface Limits {
  /** Connections open at once. */
  total: number;
  /** Connections one source may hold at once. */
  perSource: number;
}

/**
 * PURE: for a newcomer from `source`, given the connections held (oldest activity first: the order they arrived
 * or last became idle), which one to close: a held connection, the newcomer itself, or none.
 * - The newcomer's source is at its limit: its own oldest idle connection (a client reconnecting displaces
 *   only its own); all busy: the newcomer.
 * - The port is full: an idle connection of a source holding more than the newcomer's does now (the heaviest
 *   first, the oldest of it), so a source new to the port always finds room while anything is idle; otherwise the
 *   newcomer (a source does not displace one that would then hold no more than it: no churn between equals).
 */
export function admit<T extends Held>(held: readonly T[], source: string, limits: Limits): T | 'newcomer' | undefined {
  const count = new Map<string, number>();
  for (const h of held) count.set(h.source, (count.get(h.source) ?? 0) + 1);
  const mine = count.get(source) ?? 0;
  const oldestIdle = (of: string) => held.find((h) => h.source === of && !h.busy);
  if (mine >= limits.perSource) return oldestIdle(source) ?? 'newcomer';
  if (held.length < limits.total) return undefined;
  const heavier = [...count].filter(([, n]) => n > mine).sort((a, b) => b[1] - a[1]);
  for (const [other] of heavier) {
    const victim = oldestIdle(other);
    if (victim) return victim;
  }
  return 'newcomer';
}

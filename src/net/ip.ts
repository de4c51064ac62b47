// PURE: single IP addresses, parsed and printed with ip-num: one family inferred from the text, integers for
// arithmetic, canonical text (RFC 5952 for IPv6) for matching what `ip` and ebtables print.
import { IPv4, IPv6, Validator, collapseIPv6Number } from 'ip-num';

export type Family = 4 | 6;

export const BITS: Record<Family, number> = { 4: 32, 6: 128 };

/** Parses one address (no prefix). Throws with a message naming the text. */
export function parseIp(text: string): { family: Family; value: bigint } {
  const s = text.trim();
  if (s.includes('%')) throw new Error(`invalid IP address "${text}": zone indexes are not accepted`);
  if (s.includes(':')) {
    const [ok] = Validator.isValidIPv6String(s);
    if (ok) {
      try {
        return { family: 6, value: IPv6.fromString(s).value };
      } catch {
        // fall through to the error below
      }
    }
    throw new Error(`invalid IP address "${text}": not an IPv6 address`);
  }
  const [ok] = Validator.isValidIPv4String(s);
  if (ok && /^\d{1,3}(\.\d{1,3}){3}$/.test(s)) return { family: 4, value: IPv4.fromString(s).value };
  throw new Error(`invalid IP address "${text}": not an IPv4 or IPv6 address`);
}

/** Formats an address integer (IPv6 compressed per RFC 5952: longest zero run of 2+ groups, lowercase). */
export function formatIp(family: Family, value: bigint): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((s) => String((value >> s) & 0xffn)).join('.');
  const groups: number[] = [];
  for (let i = 7; i >= 0; i--) groups.push(Number((value >> BigInt(i * 16)) & 0xffffn));
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (bestLen < 2) return hex.join(':');
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLen).join(':')}`;
}

/**
 * A single host address, written with or without a full-length mask (`/32`, `/255.255.255.255`).
 * Returns the canonical dotted quad, or undefined for ranges and malformed text.
 */
export function exactIPv4(s: string): string | undefined {
  const [addr, mask, ...rest] = s.split('/');
  if (rest.length || !addr || (mask !== undefined && mask !== '32' && mask !== '255.255.255.255')) return undefined;
  if (!/^\d{1,3}(\.\d{1,3}){3}$/.test(addr) || !Validator.isValidIPv4String(addr)[0]) return undefined;
  return IPv4.fromString(addr).toString();
}

/** As exactIPv4 for IPv6 (`/128` or an all-ones mask); returns RFC 5952 form, as `ip` and ebtables print it. */
export function exactIPv6(s: string): string | undefined {
  const [addr, mask, ...rest] = s.split('/');
  if (rest.length || !addr || (mask !== undefined && mask !== '128' && !isAllOnesV6(mask))) return undefined;
  if (!addr.includes(':') || !Validator.isValidIPv6String(addr)[0]) return undefined;
  return collapseIPv6Number(IPv6.fromString(addr).toString());
}

function isAllOnesV6(mask: string): boolean {
  return Validator.isValidIPv6String(mask)[0] && IPv6.fromString(mask).getValue() === (1n << 128n) - 1n;
}

/** Either family; undefined when `s` is not a single address. */
export function exactIp(s: string): string | undefined {
  return s.includes(':') ? exactIPv6(s) : exactIPv4(s);
}

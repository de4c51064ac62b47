// PURE: single IP addresses, parsed and printed with ip-num: one family inferred from the text, integers for
// arithmetic, canonical text (RFC 5952 for IPv6) for matching what `ip` and ebtables print.
import { IPv4, IPv6, Validator, collapseIPv6Number } from 'ip-num';

export type Family = 4 | 6;

export const BITS: Record<Family, number> = { 4: 32, 6: 128 };

/** THE family of an address text the shim holds (`address[/prefix]`, already taken by parseIp's rules): 6 with a colon. */
export const familyOf = (text: string): Family => (text.includes(':') ? 6 : 4);

/**
 * The one rule for IPv4-mapped IPv6 addresses (::ffff:0:0/96, e.g. `::ffff:10.224.0.9`), wherever an address is
 * taken (results and prevResults, reservedCIDRs, the ledger, residue, GC, CLI flags): refused, never read as IPv6.
 * Go's netlink configures one as the IPv4 address it maps (the pod gets 10.224.0.9), so judging it as the IPv6
 * value it spells let it past an IPv4 reserved CIDR and made it match nothing the node holds. Refused rather than
 * mapped: an IPAM plugin that hands one out is broken, and its answer is not ours to rewrite.
 */
export class MappedAddressError extends Error {}

const isMapped = (value: bigint): boolean => value >> 32n === 0xffffn;

/** Parses one address (no prefix). Throws with a message naming the text (MappedAddressError for a mapped one). */
export function parseIp(text: string): { family: Family; value: bigint } {
  const s = text.trim();
  if (s.includes('%')) throw new Error(`invalid IP address "${text}": zone indexes are not accepted`);
  if (s.includes(':')) {
    const [ok] = Validator.isValidIPv6String(s);
    let value: bigint | undefined;
    if (ok) {
      try {
        value = IPv6.fromString(s).value;
      } catch {
        // the error below
      }
    }
    if (value === undefined) throw new Error(`invalid IP address "${text}": not an IPv6 address`);
    if (isMapped(value)) {
      throw new MappedAddressError(
        `invalid IP address "${text}": an IPv4-mapped IPv6 address is refused (it is the IPv4 address ${formatIp(4, value & 0xffffffffn)}; write that)`,
      );
    }
    return { family: 6, value };
  }
  const [ok] = Validator.isValidIPv4String(s);
  if (ok && /^\d{1,3}(\.\d{1,3}){3}$/.test(s)) return { family: 4, value: IPv4.fromString(s).value };
  throw new Error(`invalid IP address "${text}": not an IPv4 or IPv6 address`);
}

/** Formats an address integer: a dotted quad, or IPv6 compressed per RFC 5952 (ip-num's collapse). */
export function formatIp(family: Family, value: bigint): string {
  return family === 4 ? new IPv4(value).toString() : collapseIPv6Number(new IPv6(value).toString());
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

/**
 * As exactIPv4 for IPv6 (`/128` or an all-ones mask); returns RFC 5952 form, as `ip` and ebtables print it.
 * An IPv4-mapped address is not one (parseIp's rule).
 */
export function exactIPv6(s: string): string | undefined {
  const [addr, mask, ...rest] = s.split('/');
  if (rest.length || !addr || (mask !== undefined && mask !== '128' && !isAllOnesV6(mask))) return undefined;
  if (!addr.includes(':') || !Validator.isValidIPv6String(addr)[0]) return undefined;
  const ip = IPv6.fromString(addr);
  if (isMapped(ip.value)) return undefined;
  return collapseIPv6Number(ip.toString());
}

function isAllOnesV6(mask: string): boolean {
  return Validator.isValidIPv6String(mask)[0] && IPv6.fromString(mask).getValue() === (1n << 128n) - 1n;
}

/** Either family; undefined when `s` is not a single address. */
export function exactIp(s: string): string | undefined {
  return s.includes(':') ? exactIPv6(s) : exactIPv4(s);
}

/**
 * Why `text` (`address[/prefix]`, the form of a result's `ips[].address`) is not an address the shim takes, or
 * undefined. `mapped`: an IPv4-mapped IPv6 address (parseIp's rule); `invalid`: not an IP address at all.
 */
export function addressProblem(text: string): { kind: 'invalid' | 'mapped'; message: string } | undefined {
  const [addr = '', prefix, ...rest] = text.split('/');
  const v6 = addr.includes(':');
  if (rest.length || (prefix !== undefined && (!/^\d{1,3}$/.test(prefix) || Number(prefix) > (v6 ? 128 : 32)))) {
    return { kind: 'invalid', message: `"${text}" is not an IP address with a prefix length` };
  }
  if (addr !== addr.trim()) return { kind: 'invalid', message: `"${text}" is not an IP address` };
  try {
    parseIp(addr);
    return undefined;
  } catch (e) {
    return { kind: e instanceof MappedAddressError ? 'mapped' : 'invalid', message: (e as Error).message };
  }
}

/**
 * THE rule for the address of `address[/prefix]` (a result's `ips[].address`, a ledger entry, a route's `dst`, an
 * operator's `--ip`): the prefix is dropped unread ("10.0.0.5/24" → 10.0.0.5) and the address parsed by parseIp's
 * rules (a mapped one refused). `text` is its canonical text (dotted quad, RFC 5952): the ledger's index, residue
 * and GC compare text, so `FD00:0::5/64` and `fd00::5` must be one address. Throws as parseIp does.
 */
export function parseAddressOf(text: string): { family: Family; value: bigint; text: string } {
  const { family, value } = parseIp(text.split('/')[0] ?? '');
  return { family, value, text: formatIp(family, value) };
}

/** The canonical text of an address (`address[/prefix]`: the prefix is dropped; parseAddressOf's rule). Throws. */
export function canonicalIp(text: string): string {
  return parseAddressOf(text).text;
}

/** As canonicalIp, undefined instead of a throw: for callers that skip or report what is not an address. */
export function addressOf(text: string): string | undefined {
  try {
    return canonicalIp(text);
  } catch {
    return undefined;
  }
}

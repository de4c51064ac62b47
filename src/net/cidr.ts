// PURE: CIDRs and address ranges as bigint ranges (reservedCIDRs, host-local ranges, cluster pools, routes).
//
// Decisions (documented in the README section on `reservedCIDRs`):
// - IPv4 and IPv6 are both accepted, parsed with ip-num; the family is inferred from the text.
// - A bare address means that one address: /32 for IPv4, /128 for IPv6 (Calico's reservedCIDRs takes IPs too).
// - Host bits after the prefix are accepted and cleared (`10.4.76.5/24` → `10.4.76.0/24`, like Go's
//   net.ParseCIDR); `input` keeps what the operator wrote so messages can quote it.
// - Overlapping and duplicate entries are allowed: every check is "in any of them", and the first matching entry
//   in list order is the one reported.
// - IPv6 zone indexes (`fe80::1%eth0`), IPv4-mapped IPv6 addresses (`::ffff:10.0.0.0/104`: src/net/ip.ts parseIp's
//   rule) and anything else ip-num rejects are refused with a message naming the entry and its position.
import { BITS, formatIp, MappedAddressError, parseIp, type Family } from './ip.js';

/** An inclusive range of addresses of one family, as integers. */
export interface IpRange {
  family: Family;
  first: bigint;
  last: bigint;
}

/** A parsed CIDR: the range plus its prefix, canonical text and the text it came from. */
export interface Cidr extends IpRange {
  prefix: number;
  /** Canonical form: network address (IPv6 compressed per RFC 5952) and prefix, e.g. `fd00:10::/64`. */
  text: string;
  /** What was given, trimmed. */
  input: string;
}

export type Overlap = 'none' | 'partial' | 'full';

/** The inclusive range of `prefix` bits around `value`. */
function cidrRange(family: Family, value: bigint, prefix: number): IpRange {
  const hostBits = BigInt(BITS[family] - prefix);
  const size = 1n << hostBits;
  const first = (value >> hostBits) << hostBits;
  return { family, first, last: first + size - 1n };
}

/** Builds a Cidr from family, address and prefix (host bits cleared). */
export function makeCidr(family: Family, value: bigint, prefix: number, input?: string): Cidr {
  const r = cidrRange(family, value, prefix);
  const text = `${formatIp(family, r.first)}/${prefix}`;
  return { ...r, prefix, text, input: input ?? text };
}

/** Parses one CIDR or bare address (→ /32, /128). Throws an Error naming the text on anything else. */
export function parseCidr(text: string): Cidr {
  if (typeof text !== 'string') throw new Error(`invalid CIDR ${JSON.stringify(text)}: not a string`);
  const s = text.trim();
  if (s === '') throw new Error('invalid CIDR "": empty');
  const parts = s.split('/');
  if (parts.length > 2) throw new Error(`invalid CIDR "${text}": more than one "/"`);
  const [addrText, prefixText] = parts as [string, string | undefined];
  let ip: { family: Family; value: bigint };
  try {
    ip = parseIp(addrText);
  } catch (e) {
    if (e instanceof MappedAddressError) throw new Error(`invalid CIDR "${text}": ${e.message}`);
    throw new Error(`invalid CIDR "${text}": "${addrText}" is not an IPv4 or IPv6 address`);
  }
  const max = BITS[ip.family];
  let prefix = max;
  if (prefixText !== undefined) {
    if (!/^\d{1,3}$/.test(prefixText)) throw new Error(`invalid CIDR "${text}": prefix "${prefixText}" is not a number`);
    prefix = Number(prefixText);
    if (prefix > max) throw new Error(`invalid CIDR "${text}": prefix /${prefix} is longer than /${max} for IPv${ip.family}`);
  }
  return makeCidr(ip.family, ip.value, prefix, s);
}

const MAX_LISTED_ERRORS = 10;

/**
 * Parses a list of CIDRs (IPv4 and IPv6 mixed, overlaps allowed, order kept). Throws one Error naming the list
 * (`what`) and the bad entries with their indexes (the first 10, then a count), so an operator fixes them in one go.
 */
export function parseCidrs(list: readonly string[], what = 'reserved CIDR list'): Cidr[] {
  const out: Cidr[] = [];
  const errors: string[] = [];
  list.forEach((item, i) => {
    try {
      out.push(parseCidr(item));
    } catch (e) {
      errors.push(`[${i}] ${(e as Error).message}`);
    }
  });
  if (errors.length) {
    const more = errors.length > MAX_LISTED_ERRORS ? `; and ${errors.length - MAX_LISTED_ERRORS} more` : '';
    throw new Error(`invalid ${what}: ${errors.slice(0, MAX_LISTED_ERRORS).join('; ')}${more}`);
  }
  return out;
}

/**
 * How much of `a` lies inside `b`: `full` (a ⊆ b), `partial` (they intersect, a ⊄ b) or `none` (disjoint or
 * different families). Not symmetric: rangeOverlap(pool, reserved) = `full` means the whole pool is reserved.
 */
export function rangeOverlap(a: IpRange, b: IpRange): Overlap {
  if (a.family !== b.family) return 'none';
  if (a.last < b.first || b.last < a.first) return 'none';
  if (b.first <= a.first && a.last <= b.last) return 'full';
  return 'partial';
}

/** The intersection of two ranges, or undefined. */
export function intersect(a: IpRange, b: IpRange): IpRange | undefined {
  if (a.family !== b.family) return undefined;
  const first = a.first > b.first ? a.first : b.first;
  const last = a.last < b.last ? a.last : b.last;
  return first <= last ? { family: a.family, first, last } : undefined;
}

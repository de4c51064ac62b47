// PURE: reserved CIDRs (config `reservedCIDRs`, `plan --reserved`, doctor's route check) as bigint ranges.
//
// Decisions (documented in the README section on `reservedCIDRs`):
// - IPv4 and IPv6 are both accepted, parsed with ip-num; the family is inferred from the text.
// - A bare address means that one address: /32 for IPv4, /128 for IPv6 (Calico's reservedCIDRs takes IPs too).
// - Host bits after the prefix are accepted and cleared (`10.4.76.5/24` → `10.4.76.0/24`, like Go's
//   net.ParseCIDR); `input` keeps what the operator wrote so messages can quote it.
// - Overlapping and duplicate entries are allowed: every check is "in any of them", and the first matching entry
//   in list order is the one reported.
// - IPv6 zone indexes (`fe80::1%eth0`), IPv4-mapped IPv6 text and anything else ip-num rejects are refused with
//   a message naming the entry and its position.
import { IPv4, IPv6, Validator } from 'ip-num';

export type Family = 4 | 6;

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

/** The inclusive range of `prefix` bits around `value`. */
export function cidrRange(family: Family, value: bigint, prefix: number): IpRange {
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
  } catch {
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

export interface ReservedHit {
  /** The address as checked (without any prefix). */
  ip: string;
  /** The first reserved CIDR (list order) containing it. */
  cidr: Cidr;
}

/**
 * The first reserved CIDR containing `ip`, or undefined. `ip` may carry a prefix (`10.0.0.5/24`, the form CNI
 * results use): only the address counts. O(R) bigint compares. Throws on an unparseable address.
 */
export function findReservedHit(ip: string, cidrs: readonly Cidr[]): ReservedHit | undefined {
  const addr = ip.trim().split('/')[0] ?? '';
  const { family, value } = parseIp(addr);
  for (const c of cidrs) {
    if (c.family === family && c.first <= value && value <= c.last) return { ip: addr, cidr: c };
  }
  return undefined;
}

/** One host-local range (after host-local's defaults), as configured and as integers. */
export interface HostLocalRange extends IpRange {
  subnet: string;
  rangeStart?: string;
  rangeEnd?: string;
  /** `first-last` of the addresses host-local may hand out. */
  text: string;
}

export interface RangeInReserved {
  range: HostLocalRange;
  /** Every address host-local may hand out from `range` lies in `cidr`. */
  fully: boolean;
  cidr: Cidr;
}

/**
 * host-local ranges of an IPAM config that lie wholly or partly inside reserved CIDRs: one entry per
 * (range, reserved CIDR) pair that intersect, ranges in host-local's order (top-level `subnet` first, then
 * `ranges` sets in order). Range bounds follow host-local: rangeStart defaults to network+1, rangeEnd to the
 * last address (IPv4: minus broadcast). `fully` is per CIDR: a range split across two reserved CIDRs gives two
 * `fully: false` entries. A config without `subnet`/`ranges` (another IPAM type) gives []. Malformed subnets or
 * bounds throw an Error naming the path.
 */
export function rangesInReserved(ipamConfig: unknown, cidrs: readonly Cidr[]): RangeInReserved[] {
  const out: RangeInReserved[] = [];
  for (const range of hostLocalRanges(ipamConfig)) {
    for (const cidr of cidrs) {
      const o = rangeOverlap(range, cidr);
      if (o !== 'none') out.push({ range, fully: o === 'full', cidr });
    }
  }
  return out;
}

/** The ranges host-local would allocate from, in its order. */
export function hostLocalRanges(ipamConfig: unknown): HostLocalRange[] {
  if (!isObject(ipamConfig)) return [];
  // `path` names the object holding subnet/rangeStart/rangeEnd: '' for the top level, `.ranges[i][j]` otherwise.
  const raw: Array<{ path: string; value: unknown }> = [];
  if (ipamConfig.subnet !== undefined) raw.push({ path: '', value: ipamConfig });
  const ranges = ipamConfig.ranges;
  if (ranges !== undefined) {
    if (!Array.isArray(ranges)) throw new Error('ipam.ranges: not an array of range sets');
    ranges.forEach((set, i) => {
      if (!Array.isArray(set)) throw new Error(`ipam.ranges[${i}]: not an array of ranges`);
      set.forEach((r, j) => raw.push({ path: `.ranges[${i}][${j}]`, value: r }));
    });
  }
  return raw.map(({ path, value }) => toHostLocalRange(path, value));
}

function toHostLocalRange(path: string, value: unknown): HostLocalRange {
  if (!isObject(value) || typeof value.subnet !== 'string') throw new Error(`ipam${path}.subnet: must be a CIDR string`);
  let subnet: Cidr;
  try {
    subnet = parseCidr(value.subnet);
  } catch (e) {
    throw new Error(`ipam${path}.subnet: ${(e as Error).message}`);
  }
  if (!value.subnet.includes('/')) throw new Error(`ipam${path}.subnet: "${value.subnet}" has no prefix length`);
  const bound = (key: 'rangeStart' | 'rangeEnd'): bigint | undefined => {
    const v = value[key];
    if (v === undefined || v === '') return undefined;
    if (typeof v !== 'string') throw new Error(`ipam${path}.${key}: must be an IP address string`);
    let ip: { family: Family; value: bigint };
    try {
      ip = parseIp(v);
    } catch (e) {
      throw new Error(`ipam${path}.${key}: ${(e as Error).message}`);
    }
    if (ip.family !== subnet.family || ip.value < subnet.first || ip.value > subnet.last) {
      throw new Error(`ipam${path}.${key}: ${v} is outside subnet ${subnet.text}`);
    }
    return ip.value;
  };
  const lastDefault = subnet.family === 4 && subnet.last > subnet.first + 1n ? subnet.last - 1n : subnet.last;
  const firstDefault = subnet.last > subnet.first ? subnet.first + 1n : subnet.first;
  let first = bound('rangeStart') ?? firstDefault;
  let last = bound('rangeEnd') ?? lastDefault;
  if (first > last) {
    // host-local rejects this config; check the whole subnet rather than nothing.
    first = subnet.first;
    last = subnet.last;
  }
  const out: HostLocalRange = {
    family: subnet.family,
    first,
    last,
    subnet: subnet.text,
    text: `${formatIp(subnet.family, first)}-${formatIp(subnet.family, last)}`,
  };
  if (typeof value.rangeStart === 'string' && value.rangeStart) out.rangeStart = value.rangeStart;
  if (typeof value.rangeEnd === 'string' && value.rangeEnd) out.rangeEnd = value.rangeEnd;
  return out;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

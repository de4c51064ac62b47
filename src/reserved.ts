// PURE: reserved CIDRs (config `reservedCIDRs`, `plan --reserved`, doctor's route check): which addresses and
// host-local ranges fall inside them. Parsing rules are in src/net/cidr.ts.
import { isObject } from './cni/json.js';
import { formatIp, parseIp, type Family } from './net/ip.js';
import { parseCidr, rangeOverlap, type Cidr, type IpRange } from './net/cidr.js';

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

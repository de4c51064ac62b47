// PURE: reserved CIDRs (config `reservedCIDRs`, doctor's checks): which addresses and host-local ranges fall
// inside them, and which parts of a range are left. Parsing rules are in src/net/cidr.ts.
import { parseAddressOf, type Family } from '../net/ip.js';
import { rangeOverlap, type Cidr, type IpRange } from '../net/cidr.js';
import { hostLocalRangeSets, type HostLocalRange } from '../cni/host-local.js';

export interface ReservedHit {
  /** The address as checked: without any prefix, in canonical text (parseAddressOf). */
  ip: string;
  /** The first reserved CIDR (list order) containing it. */
  cidr: Cidr;
}

/**
 * The first reserved CIDR containing `ip`, or undefined. `ip` may carry a prefix (`10.0.0.5/24`, the form CNI
 * results use): only the address counts. O(R) bigint compares. Throws on an unparseable address.
 */
export function findReservedHit(ip: string, cidrs: readonly Cidr[]): ReservedHit | undefined {
  const { family, value, text } = parseAddressOf(ip);
  for (const c of cidrs) {
    if (c.family === family && c.first <= value && value <= c.last) return { ip: text, cidr: c };
  }
  return undefined;
}

/** One host-local range judged against the reserved CIDRs. */
interface RangeAssessment {
  range: HostLocalRange;
  /** Addresses in the range. */
  size: bigint;
  /** The reserved CIDRs overlapping the range, in list order (duplicates kept). */
  reserved: Cidr[];
  /** The parts of the range outside every reserved CIDR, ascending. */
  unreserved: IpRange[];
  /** Addresses in `unreserved`: 0 when the reserved CIDRs together cover the range. */
  usable: bigint;
}

/** One host-local range set judged against the reserved CIDRs. */
export interface RangeSetAssessment {
  ranges: RangeAssessment[];
  /** The set has ranges and every address of them is reserved: host-local's pick from it is always refused. */
  whollyReserved: boolean;
}

/**
 * THE reserved-range decision (STATUS, doctor): each host-local range set of `ipamConfig` (hostLocalRangeSets'
 * order) with, per range, the reserved CIDRs over it and its unreserved pieces. A config that is not host-local
 * shaped gives []; a malformed one throws (hostLocalRangeSets). O(sets·ranges·R log R).
 */
export function assessRanges(ipamConfig: unknown, reserved: readonly Cidr[]): RangeSetAssessment[] {
  return hostLocalRangeSets(ipamConfig).map((set) => {
    const ranges = set.map((range): RangeAssessment => {
      const unreserved = unreservedPieces(range, reserved);
      return {
        range,
        size: range.last - range.first + 1n,
        reserved: reserved.filter((r) => rangeOverlap(range, r) !== 'none'),
        unreserved,
        usable: unreserved.reduce((n, p) => n + (p.last - p.first + 1n), 0n),
      };
    });
    return { ranges, whollyReserved: ranges.length > 0 && ranges.every((r) => r.usable === 0n) };
  });
}

/** Every range set is wholly reserved (not merely one of them). */
export function everySetWhollyReserved(sets: readonly RangeSetAssessment[]): boolean {
  return sets.length > 0 && sets.every((s) => s.whollyReserved);
}

/** PURE: the parts of `range` outside every reserved CIDR, ascending. */
export function unreservedPieces(range: IpRange, reserved: readonly Cidr[]): IpRange[] {
  const out: IpRange[] = [];
  let cursor = range.first;
  for (const r of mergedReserved(reserved, range.family)) {
    if (r.last < cursor) continue;
    if (r.first > range.last) break;
    if (r.first > cursor) out.push({ family: range.family, first: cursor, last: r.first - 1n });
    cursor = r.last + 1n;
    if (cursor > range.last) return out;
  }
  if (cursor <= range.last) out.push({ family: range.family, first: cursor, last: range.last });
  return out;
}

/** Sorted, merged intervals of the reserved CIDRs of one family. */
function mergedReserved(reserved: readonly Cidr[], family: Family): IpRange[] {
  const list = reserved.filter((r) => r.family === family).sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
  const out: IpRange[] = [];
  for (const r of list) {
    const last = out.at(-1);
    if (last && r.first <= last.last + 1n) {
      if (r.last > last.last) last.last = r.last;
    } else out.push({ family, first: r.first, last: r.last });
  }
  return out;
}

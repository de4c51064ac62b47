// PURE: the reference host-local plugin's range sets as it reads its IPAM config (the top-level `subnet`, then each `ranges[i]`, with
// its rangeStart/rangeEnd defaults): the one reader of that shape, for the reserved fix's range decision (STATUS,
// doctor) and the network's pod ranges (src/pods/ranges.ts). CIDRs are parsed by src/net/cidr.ts.
import { isObject } from './json.js';
import { parseCidr, type Cidr, type IpRange } from '../net/cidr.js';
import { formatIp, parseIp, type Family } from '../net/ip.js';

/** One host-local range (after host-local's defaults), as configured and as integers. */
export interface HostLocalRange extends IpRange {
  subnet: string;
  rangeStart?: string;
  rangeEnd?: string;
  /** `first-last` of the addresses host-local may hand out. */
  text: string;
}

/**
 * host-local's range sets, in its order: the top-level `subnet` (with its rangeStart/rangeEnd) is set 0 when
 * present, then each `ranges[i]`. host-local hands out one address from EVERY set. The one reader of the
 * `subnet`/`ranges` shape: STATUS and doctor (assessRanges), the network's pod ranges. Errors name the real path.
 */
export function hostLocalRangeSets(ipamConfig: unknown): HostLocalRange[][] {
  if (!isObject(ipamConfig)) return [];
  const sets: HostLocalRange[][] = [];
  // `path` names the object holding subnet/rangeStart/rangeEnd: '' for the top level, `.ranges[i][j]` otherwise.
  if (ipamConfig.subnet !== undefined) sets.push([toHostLocalRange('', ipamConfig)]);
  const ranges = ipamConfig.ranges;
  if (ranges !== undefined) {
    if (!Array.isArray(ranges)) throw new Error('ipam.ranges: not an array of range sets');
    ranges.forEach((set, i) => {
      if (!Array.isArray(set)) throw new Error(`ipam.ranges[${i}]: not an array of ranges`);
      sets.push(set.map((r, j) => toHostLocalRange(`.ranges[${i}][${j}]`, r)));
    });
  }
  return sets;
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

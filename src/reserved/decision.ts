// The reserved-subnet decisions the verbs call: ADD and CHECK refuse an address inside a reserved CIDR (code 100);
// STATUS fails (50) when a delegate range set is wholly reserved, judged by assessRanges as doctor judges it.
// `install --shim-config` and doctor parse the list with the same rule (code 7).
import { CniError, ErrorCode } from '../cni/errors.js';
import type { NetConf } from '../cni/config.js';
import { parseCidrs, type Cidr } from '../net/cidr.js';
import type { PodHold } from '../pods/view.js';
import { assessRanges, everySetWhollyReserved, findReservedHit, type RangeSetAssessment } from './ranges.js';

/** The fix's name (Fix.name): the pods view names the fix holding an address by it. */
export const RESERVED = 'reserved';

/** A reservedCIDRs list as the plugin reads it: code 7 when an entry is not a CIDR. */
export function parseReservedCidrs(list: readonly string[]): Cidr[] {
  try {
    return parseCidrs(list);
  } catch (e) {
    throw new CniError(ErrorCode.InvalidNetworkConfig, 'invalid reservedCIDRs', { details: (e as Error).message });
  }
}

const parsedReserved = new WeakMap<object, Cidr[]>();

/**
 * The configured reservedCIDRs, parsed once per config; code 7 when one is not a CIDR. ADD calls it before
 * anything is allocated or recorded (DEL never needs it, so a typo cannot stop a pod from going away).
 */
export function reservedCidrs(conf: Pick<NetConf, 'settings'>): Cidr[] {
  let cidrs = parsedReserved.get(conf);
  if (!cidrs) {
    cidrs = parseReservedCidrs(conf.settings.reservedCIDRs);
    parsedReserved.set(conf, cidrs);
  }
  return cidrs;
}

/**
 * The pods view's hold (Fix.holds, src/pods/view.ts): a pod's address inside reservedCIDRs is reported, never acted
 * on (its residue may be the reserved subnet's real owner's). No reservedCIDRs: no hold.
 */
export function reservedHold(conf: Pick<NetConf, 'settings'>): PodHold | undefined {
  const cidrs = reservedCidrs(conf);
  if (!cidrs.length) return undefined;
  return (ip) => {
    const hit = findReservedHit(ip, cidrs);
    return hit && { ip: hit.ip, cidr: hit.cidr.text };
  };
}

/** ADD, CHECK: code 100 for the first address inside a reserved CIDR. */
export function refuseReserved(conf: Pick<NetConf, 'name' | 'settings'>, ips: readonly string[]): void {
  const cidrs = reservedCidrs(conf);
  if (!cidrs.length) return;
  for (const ip of ips) {
    const hit = findReservedHit(ip, cidrs);
    if (hit) {
      // Logged once, on the call's error line (plugin.ts), with the address and the CIDR as fields.
      const msg = `address ${hit.ip} is inside reserved CIDR ${hit.cidr.text} (network ${conf.name})`;
      throw new CniError(ErrorCode.ReservedAddress, msg, {
        logFields: { ip: hit.ip, reservedCIDR: hit.cidr.text },
        details: `replies to ${hit.ip} would be routed to ${hit.cidr.text}'s owner and lost; shrink the IPAM range or the pool so it avoids ${hit.cidr.text}`,
      });
    }
  }
}

export interface DelegateRangesVerdict {
  /** Why ADD can only be refused (a delegate range set wholly reserved), or undefined. */
  problem: string | undefined;
  /** Delegate ranges (`first-last`) that overlap reserved CIDRs without making ADD impossible. */
  overlapping: string[];
}

/**
 * STATUS: can the delegate's ranges still give ADD an address? host-local takes one address from each range set,
 * so one set wholly inside the union of the reserved CIDRs (one CIDR or several together) refuses every ADD.
 * A delegate that is not host-local shaped (or malformed) tells nothing here.
 */
export function delegateRangesVerdict(conf: Pick<NetConf, 'settings'>): DelegateRangesVerdict {
  const cidrs = reservedCidrs(conf);
  const delegate = conf.settings.delegate;
  const none: DelegateRangesVerdict = { problem: undefined, overlapping: [] };
  if (!cidrs.length || !delegate) return none;
  let sets: RangeSetAssessment[];
  try {
    sets = assessRanges(delegate, cidrs);
  } catch {
    return none; // not host-local shaped: nothing we can tell
  }
  const dead = sets.filter((s) => s.whollyReserved);
  if (dead.length) {
    const texts = dead.flatMap((s) => s.ranges.map((r) => r.range.text)).join(', ');
    return {
      problem: everySetWhollyReserved(sets)
        ? `every delegate range lies inside reserved CIDRs (${texts}): ADD can only be refused`
        : `delegate range set ${texts} lies inside reserved CIDRs: host-local takes an address from every set, so ADD can only be refused`,
      overlapping: [],
    };
  }
  const overlapping = [...new Set(sets.flatMap((s) => s.ranges.filter((r) => r.reserved.length).map((r) => r.range.text)))];
  return { problem: undefined, overlapping };
}

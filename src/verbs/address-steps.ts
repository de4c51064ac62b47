// What the shim does with every address it hands out or passes through, in both placements: refuse
// reserved ones, remove azure-vnet residue naming them, keep the IPv6 probe rewrite in place.
import { CniError, ErrorCode } from '../cni/errors.js';
import { findReservedHit, hostLocalRanges, rangesInReserved } from '../reserved.js';
import { parseCidrs, type Cidr, type IpRange } from '../net/cidr.js';
import { cleanResidue, listResidueFor } from '../residue/clean.js';
import {
  defaultUplink6,
  ensureProbeRewrite,
  isProbeHandledByBpf,
  listProbeTable,
  probeDue,
  type ProbeRewriteOptions,
} from '../effects/probe-rewrite.js';
import type { VerbContext } from './context.js';
import { prefetching, type Run } from '../effects/exec.js';
import { LIST_PREROUTING } from '../effects/ebtables.js';
import { LIST_NEIGHBOURS } from '../effects/neigh.js';

export interface AddressContext {
  /** Host-side interfaces of this attachment: their neighbour entries are the pod's own, not residue. */
  ownDevs: string[];
}

const parsedReserved = new WeakMap<object, Cidr[]>();

/**
 * The configured reservedCIDRs, parsed once per config; code 7 when one is not a CIDR. ADD calls it before
 * anything is allocated or recorded (DEL never needs it, so a typo cannot stop a pod from going away).
 */
export function reservedCidrs(ctx: Pick<VerbContext, 'conf'>): Cidr[] {
  let cidrs = parsedReserved.get(ctx.conf);
  if (!cidrs) {
    try {
      cidrs = parseCidrs(ctx.conf.settings.reservedCIDRs);
    } catch (e) {
      throw new CniError(ErrorCode.InvalidNetworkConfig, 'invalid reservedCIDRs', { details: (e as Error).message });
    }
    parsedReserved.set(ctx.conf, cidrs);
  }
  return cidrs;
}

/** Code 100 for the first address inside a reserved CIDR. */
function refuseReserved(ctx: VerbContext, ips: string[]): void {
  const cidrs = reservedCidrs(ctx);
  if (!cidrs.length) return;
  for (const ip of ips) {
    const hit = findReservedHit(ip, cidrs);
    if (hit) {
      // Logged once, on the call's error line (plugin.ts), with the address and the CIDR as fields.
      const msg = `address ${hit.ip} is inside reserved CIDR ${hit.cidr.text} (network ${ctx.conf.name})`;
      throw new CniError(ErrorCode.ReservedAddress, msg, {
        logFields: { ip: hit.ip, reservedCIDR: hit.cidr.text },
        details: `replies to ${hit.ip} would be routed to ${hit.cidr.text}'s owner and lost; shrink the IPAM range or the pool so it avoids ${hit.cidr.text}`,
      });
    }
  }
}

/**
 * IPAM slot: starts the residue listing (ebtables, neighbours) now, so it runs while the delegate allocates;
 * prepareAddresses called with the returned Run as `ctx.run` takes the listing from it.
 */
export function prefetchResidue(ctx: VerbContext): Run {
  const { ebtables, neigh } = ctx.conf.settings.residue;
  return prefetching(ctx.run, [...(ebtables ? [LIST_PREROUTING] : []), ...(neigh ? [LIST_NEIGHBOURS] : [])], 'residue.prefetch');
}

const residueOpts = (ctx: VerbContext) => ({ ebtables: ctx.conf.settings.residue.ebtables, neigh: ctx.conf.settings.residue.neigh });

/** ADD: runs the per-address steps; throws a CniError when the address must not be used. */
export async function prepareAddresses(ctx: VerbContext, ips: string[], ac: AddressContext): Promise<void> {
  refuseReserved(ctx, ips);
  // The residue cleanup and the probe-rewrite check touch different things (ebtables/neighbours, one nft table):
  // they run side by side, and a residue failure is reported first whatever finished first.
  const [residue, probe] = await Promise.allSettled([
    cleanResidueFor(ctx, ips, ac),
    ips.some((ip) => ip.includes(':')) ? ensureProbeRewriteIfDue(ctx) : Promise.resolve(),
  ]);
  if (residue.status === 'rejected') throw residue.reason;
  if (probe.status === 'rejected') throw probe.reason;
}

async function cleanResidueFor(ctx: VerbContext, ips: string[], ac: AddressContext): Promise<void> {
  const { residue } = ctx.conf.settings;
  if (!residue.ebtables && !residue.neigh) return;
  const cleaned = await cleanResidue(ctx.run, ips, { ...residueOpts(ctx), excludeDevs: ac.ownDevs });
  const { rules, neighbours } = cleaned.removed;
  ctx.counters.residueRules += rules.length;
  ctx.counters.residueNeighbours += neighbours.length;
  if (rules.length || neighbours.length) {
    ctx.log.warn({ ips, rules: rules.map((r) => r.text), neighbours: neighbours.map((n) => `${n.ip} dev ${n.dev}`) }, 'removed stale residue');
  }
}

/** `auto`: ensure only when the table is missing and no BPF program handles probes; `on`: failures fail the ADD. */
async function ensureProbeRewriteIfDue(ctx: VerbContext): Promise<void> {
  const { ipv6ProbeRewrite: mode, uplink: configured, probeSource, probeGlobal } = ctx.conf.settings;
  if (mode === 'off') return;
  performance.mark('probe6');
  try {
    // The uplink lookup and the table listing are independent reads: one `ip` and one `nft` at once.
    const [found, listing] = await Promise.allSettled([configured ?? defaultUplink6(ctx.run), listProbeTable(ctx.run)]);
    if (found.status === 'rejected') throw found.reason; // the uplink's failure first, as when they ran in turn
    const uplink = found.value;
    if (!uplink) throw new CniError(ErrorCode.InvalidNetworkConfig, 'no uplink for the IPv6 probe rewrite', { details: 'no default route; set "uplink"' });
    const opts: ProbeRewriteOptions = { uplink, ...(probeSource ? { probeSource } : {}), ...(probeGlobal ? { probeGlobal } : {}) };
    if (listing.status === 'rejected') throw listing.reason;
    const due = probeDue(listing.value, opts);
    if (!due.available) throw new CniError(ErrorCode.InvalidNetworkConfig, 'nftables is not available for the IPv6 probe rewrite', { details: due.reason });
    if (!due.due) return;
    if (mode === 'auto' && !due.tablePresent && (await isProbeHandledByBpf(ctx.run, uplink))) {
      ctx.log.info({ uplink }, 'IPv6 probes are handled by a BPF program on the uplink; not installing the nftables rewrite');
      return;
    }
    const r = await ensureProbeRewrite(ctx.run, opts);
    if (!r.available) throw new CniError(ErrorCode.InvalidNetworkConfig, 'nftables is not available for the IPv6 probe rewrite', { details: r.reason });
    ctx.log.info({ uplink }, 'ensured the IPv6 probe rewrite');
  } catch (e) {
    if (mode === 'on') throw e;
    ctx.log.warn({ err: e }, 'IPv6 probe rewrite not ensured (ipv6ProbeRewrite=auto: continuing)');
  } finally {
    performance.measure('probe6', 'probe6'); // the ADD log line's timings
  }
}

/** CHECK: the same conditions, read-only (the pod's own interfaces excepted, as ADD excepts them). */
export async function checkAddresses(ctx: VerbContext, ips: string[], ac: AddressContext = { ownDevs: [] }): Promise<void> {
  refuseReserved(ctx, ips);
  const { residue } = ctx.conf.settings;
  if (!residue.ebtables && !residue.neigh) return;
  const found = await listResidueFor(ctx.run, ips, { ...residueOpts(ctx), excludeDevs: ac.ownDevs });
  if (found.rules.length || found.neighbours.length) {
    throw new CniError(ErrorCode.ResidueCleanupFailed, `stale residue is back for ${ips.join(', ')}`, {
      details: [...found.rules.map((r) => r.text), ...found.neighbours.map((n) => `neigh ${n.ip} dev ${n.dev} lladdr ${n.mac ?? '?'}`)].join('; '),
    });
  }
}

/** STATUS: a reason ADD cannot succeed now (every delegate range is reserved), or undefined. */
export async function statusProblems(ctx: VerbContext): Promise<string | undefined> {
  const cidrs = reservedCidrs(ctx);
  const delegate = ctx.conf.settings.delegate;
  if (!cidrs.length || !delegate) return undefined;
  let hits;
  try {
    hits = rangesInReserved(delegate, cidrs);
  } catch {
    return undefined; // not host-local shaped: nothing we can tell
  }
  const ranges = new Set(hits.map((h) => h.range.text));
  // host-local hands out one address from each range set: one set wholly inside the union of the reserved CIDRs
  // (one CIDR or several together) refuses every ADD.
  const d = delegate as Record<string, unknown>;
  const sets = [
    ...(d.subnet !== undefined ? [{ subnet: d.subnet, rangeStart: d.rangeStart, rangeEnd: d.rangeEnd }] : []),
    ...(Array.isArray(d.ranges) ? d.ranges.map((set) => ({ ranges: [set] })) : []),
  ].map((set) => hostLocalRanges(set));
  const dead = sets.filter((rs) => rs.length > 0 && rs.every((r) => coveredBy(r, cidrs)));
  if (dead.length) {
    const texts = dead.flat().map((r) => r.text).join(', ');
    return dead.length === sets.length
      ? `every delegate range lies inside reserved CIDRs (${texts}): ADD can only be refused`
      : `delegate range set ${texts} lies inside reserved CIDRs: host-local takes an address from every set, so ADD can only be refused`;
  }
  if (ranges.size) ctx.log.warn({ ranges: [...ranges] }, 'delegate ranges overlap reserved CIDRs: some ADDs will be refused');
  return undefined;
}

/** Whether the union of `cidrs` covers every address of `r`. */
function coveredBy(r: IpRange, cidrs: readonly Cidr[]): boolean {
  let next = r.first;
  for (const c of [...cidrs].filter((c) => c.family === r.family).sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0))) {
    if (c.first > next) return false;
    if (c.last >= next) next = c.last + 1n;
    if (next > r.last) return true;
  }
  return next > r.last;
}

// What the shim does with every address it hands out or passes through, in both placements: refuse
// reserved ones, remove azure-vnet residue naming them, keep the IPv6 probe rewrite in place.
import { CniError, ErrorCode } from '../cni/errors.js';
import { delegateRangesVerdict, refuseReserved } from '../reserved/decision.js';
import { cleanResidue, listResidueFor, nodeBackends } from '../residue/clean.js';
import { readDefaultUplink } from '../effects/uplink.js';
import { decide } from '../probe-rewrite/decide.js';
import { ensureProbeRewrite, isProbeHandledByBpf, listProbeTable, tableState } from '../probe-rewrite/node.js';
import { resolveOptions, type ProbeRewriteOptions } from '../probe-rewrite/ruleset.js';
import type { VerbContext } from './context.js';
import { span } from '../spans.js';
import { prefetching, type Run } from '../effects/exec.js';
import { listPreroutingCall } from '../effects/ebtables.js';
import { addressProblem, canonicalIp } from '../net/ip.js';
import type { Result } from '../cni/result.js';

/**
 * The addresses a result hands out, each once, in canonical text (dotted quad; RFC 5952 for IPv6): the ledger's
 * index and the residue and GC matches compare text, so `FD00:0::5` and `fd00::5` must be one address. An address
 * the shim does not take is refused here, at the boundary, by src/net/ip.ts's rule: in a prevResult, one that is
 * not an IP is 6 (it cannot be decoded) and an IPv4-mapped one 7; in a delegate's result (Delegate.add checked
 * it already) 101.
 */
export function resultIps(result: Result, origin: 'prevResult' | 'delegate'): string[] {
  for (const ip of result.ips ?? []) {
    const problem = addressProblem(ip.address);
    if (!problem) continue;
    const code =
      origin === 'delegate' ? ErrorCode.DelegateFailed : problem.kind === 'mapped' ? ErrorCode.InvalidNetworkConfig : ErrorCode.DecodingFailure;
    const what = problem.kind === 'mapped' ? 'an IPv4-mapped IPv6 address' : 'an address that is not an IP';
    throw new CniError(code, `${origin} holds ${what}: ${JSON.stringify(ip.address)}`, { details: problem.message });
  }
  return [...new Set((result.ips ?? []).map((ip) => canonicalIp(ip.address)))];
}

export interface AddressContext {
  /** Host-side interfaces of this attachment: their neighbour entries are the pod's own, not residue. */
  ownDevs: string[];
}

/**
 * IPAM slot: starts the ebtables residue listing now, so it runs while the delegate allocates; prepareAddresses
 * called with the returned Run as `ctx.run` takes the listing from it.
 */
export function prefetchResidue(ctx: VerbContext): Run {
  const { ebtables, ebtablesBackends } = ctx.conf.settings.residue;
  // Not the neighbours: which families to list is only known from the delegate's answer, and IPv4's are a file
  // read (src/effects/neigh.ts listPermanentNeighbours). One listing per backend that may hold rules.
  const calls = ebtables ? nodeBackends(ebtablesBackends).read.map((b) => listPreroutingCall(b.program)) : [];
  return prefetching(ctx.run, calls, 'residue.prefetch');
}

const residueOpts = (ctx: Pick<VerbContext, 'conf'>) => {
  const { ebtables, neigh, ebtablesBackends } = ctx.conf.settings.residue;
  return { ebtables, neigh, backends: ebtablesBackends };
};

/** ADD: runs the per-address steps; throws a CniError when the address must not be used. */
export async function prepareAddresses(ctx: VerbContext, ips: string[], ac: AddressContext): Promise<void> {
  refuseReserved(ctx.conf, ips);
  // The residue cleanup and the probe-rewrite check touch different things (ebtables/neighbours, one nft table):
  // they run side by side, and a residue failure is reported first whatever finished first.
  const [residue, probe] = await Promise.allSettled([
    cleanResidueFor(ctx, ips, ac),
    ips.some((ip) => ip.includes(':')) ? ensureProbeRewriteIfDue(ctx) : Promise.resolve('off'),
  ]);
  if (residue.status === 'rejected') throw residue.reason;
  if (probe.status === 'rejected') throw probe.reason;
  ctx.counters.residueRules += residue.value.rules;
  ctx.counters.residueNeighbours += residue.value.neighbours;
}

/**
 * Removes the residue naming `ips` (the rule ADD applies, and the node agent for ledger addresses); throws
 * CniError 102 when some stays. Returns how many rules and neighbour entries went.
 */
export async function cleanResidueFor(
  ctx: Pick<VerbContext, 'conf' | 'run' | 'log'>,
  ips: string[],
  ac: AddressContext,
): Promise<{ rules: number; neighbours: number }> {
  const { residue } = ctx.conf.settings;
  if (!residue.ebtables && !residue.neigh) return { rules: 0, neighbours: 0 };
  const cleaned = await cleanResidue(ctx.run, ips, { ...residueOpts(ctx), excludeDevs: ac.ownDevs });
  const { rules, neighbours } = cleaned.removed;
  if (rules.length || neighbours.length) {
    // Which backend held each rule: the operator learns where azure-vnet wrote them.
    const byBackend = rules.map((r) => ({ backend: r.backend, program: r.program, rule: r.text }));
    ctx.log.warn(
      { ips, rules: rules.map((r) => r.text), ebtables: byBackend, neighbours: neighbours.map((n) => `${n.ip} dev ${n.dev}`) },
      'removed stale residue',
    );
  }
  const blind = cleaned.ebtablesBackends.filter((b) => b.blind);
  if (blind.length) ctx.log.warn({ ips, backends: blind }, 'an ebtables backend that may hold rules could not be read');
  return { rules: rules.length, neighbours: neighbours.length };
}

/** What ensureProbeRewriteIfDue did: nothing to do, installed/restored the table, left it to BPF, or failed. */
export type ProbeOutcome = 'off' | 'in-place' | 'ensured' | 'bpf' | 'failed';

/**
 * decide() on this call's facts (IPv6 addresses in play): `auto` leaves probes to a BPF handler on the uplink
 * whatever the table's state; `on` keeps the table regardless and its failures throw (they fail the ADD). ADD
 * calls it when it hands out an IPv6 address; the node agent when the ledger holds one.
 */
export async function ensureProbeRewriteIfDue(ctx: Pick<VerbContext, 'conf' | 'run' | 'log'>): Promise<ProbeOutcome> {
  const { ipv6ProbeRewrite: mode, uplink: configured, probeSource, probeGlobal } = ctx.conf.settings;
  if (mode === 'off') return 'off'; // decide() never acts when off: not even a read
  const probed = span('probe6');
  try {
    // The uplink lookup and the table listing are independent reads: one `ip` and one `nft` at once.
    const [found, listing] = await Promise.allSettled([configured ?? readDefaultUplink(ctx.run), listProbeTable(ctx.run)]);
    if (found.status === 'rejected') throw found.reason; // the uplink's failure first, as when they ran in turn
    const uplink = found.value;
    const opts: ProbeRewriteOptions | null = uplink
      ? { uplink, ...(probeSource ? { probeSource } : {}), ...(probeGlobal ? { probeGlobal } : {}) }
      : null;
    if (opts) resolveOptions(opts); // bad settings are code 7 before anything else
    if (listing.status === 'rejected') throw listing.reason;
    const facts = { table: tableState(listing.value, opts), uplink: opts !== null, bpf: undefined as boolean | undefined, mode, ipv6: true };
    let d = decide(facts);
    if (d.action === 'look-for-bpf') d = decide({ ...facts, bpf: await isProbeHandledByBpf(ctx.run, opts!.uplink) });
    switch (d.action) {
      case 'none':
        if (d.verdict === 'handled-by-bpf')
          ctx.log.info({ uplink, table: facts.table }, 'IPv6 probes are handled by a BPF program on the uplink; leaving the nftables rewrite alone');
        return d.verdict === 'handled-by-bpf' ? 'bpf' : 'in-place';
      case 'fail':
        throw d.verdict === 'no-uplink'
          ? new CniError(ErrorCode.InvalidNetworkConfig, 'no uplink for the IPv6 probe rewrite', { details: 'no default route; set "uplink"' })
          : new CniError(ErrorCode.InvalidNetworkConfig, 'nftables is not available for the IPv6 probe rewrite', {
              details: listing.value.available ? '' : listing.value.reason,
            });
      default: {
        const r = await ensureProbeRewrite(ctx.run, opts!);
        if (!r.available)
          throw new CniError(ErrorCode.InvalidNetworkConfig, 'nftables is not available for the IPv6 probe rewrite', { details: r.reason });
        ctx.log.info({ uplink, was: d.verdict }, 'ensured the IPv6 probe rewrite');
        return 'ensured';
      }
    }
  } catch (e) {
    if (mode === 'on') throw e;
    ctx.log.warn({ err: e }, 'IPv6 probe rewrite not ensured (ipv6ProbeRewrite=auto: continuing)');
    return 'failed';
  } finally {
    probed();
  }
}

/** CHECK: the same conditions, read-only (the pod's own interfaces excepted, as ADD excepts them). */
export async function checkAddresses(ctx: VerbContext, ips: string[], ac: AddressContext = { ownDevs: [] }): Promise<void> {
  refuseReserved(ctx.conf, ips);
  const { residue } = ctx.conf.settings;
  if (!residue.ebtables && !residue.neigh) return;
  const found = await listResidueFor(ctx.run, ips, { ...residueOpts(ctx), excludeDevs: ac.ownDevs });
  if (found.rules.length || found.neighbours.length) {
    throw new CniError(ErrorCode.ResidueCleanupFailed, `stale residue is back for ${ips.join(', ')}`, {
      details: [...found.rules.map((r) => r.text), ...found.neighbours.map((n) => `neigh ${n.ip} dev ${n.dev} lladdr ${n.mac ?? '?'}`)].join('; '),
    });
  }
}

/** STATUS: a reason ADD cannot succeed now (a delegate range set wholly reserved), or undefined. */
export async function statusProblems(ctx: VerbContext): Promise<string | undefined> {
  const { problem, overlapping } = delegateRangesVerdict(ctx.conf);
  if (overlapping.length) ctx.log.warn({ ranges: overlapping }, 'delegate ranges overlap reserved CIDRs: some ADDs will be refused');
  return problem;
}

// What the verbs do with every address they hand out or pass through, in both placements: the registry's loop
// (src/fixes/address-steps.ts, shared with `agent-ip allocate`) over this call's context, and the addresses a result
// holds. This module knows no fix by name.
import { CniError, ErrorCode } from '../cni/errors.js';
import type { NetConf } from '../cni/config.js';
import type { Run } from '../effects/exec.js';
import type { AddressCall } from '../fix/fix.js';
import * as steps from '../fixes/address-steps.js';
import { tally, type VerbContext } from './context.js';
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

/** ADD, first: every fix's check of its settings (code 7), before the delegate allocates anything. */
export function validateFixes(conf: NetConf): void {
  steps.validateFixes(conf);
}

/** IPAM slot: every fix's early reads, started now so they run while the delegate allocates. */
export function prefetchFixes(ctx: VerbContext): Run {
  return steps.prefetchFixes(ctx.conf, ctx.run);
}

const callFor = (ctx: VerbContext, ips: string[], ac: AddressContext): AddressCall => ({
  conf: ctx.conf,
  run: ctx.run,
  log: ctx.log,
  ips,
  ownDevs: ac.ownDevs,
  tally: (name, by) => tally(ctx.counters, name, by),
});

/** ADD: every fix refuses, then applies; throws a CniError when the address must not be used. */
export async function prepareAddresses(ctx: VerbContext, ips: string[], ac: AddressContext): Promise<void> {
  await steps.prepareAddresses(callFor(ctx, ips, ac));
}

/** CHECK: the same refusals, then every fix's read-only verification (the pod's own interfaces excepted). */
export async function checkAddresses(ctx: VerbContext, ips: string[], ac: AddressContext = { ownDevs: [] }): Promise<void> {
  await steps.checkAddresses(callFor(ctx, ips, ac));
}

/** STATUS: the first reason a fix gives that no ADD can succeed now, or undefined. */
export function statusProblems(ctx: Pick<VerbContext, 'conf' | 'log'>): string | undefined {
  return steps.statusProblems(ctx.conf, ctx.log);
}

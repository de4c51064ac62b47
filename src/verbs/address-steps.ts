// What the shim does with every address it hands out or passes through, in both placements: every fix of the
// registry (src/fixes/registry.ts) refuses, applies and verifies in turn. This module knows no fix by name.
import { CniError, ErrorCode } from '../cni/errors.js';
import type { NetConf } from '../cni/config.js';
import type { Run } from '../effects/exec.js';
import type { AddressCall } from '../fixes/fix.js';
import { FIXES } from '../fixes/registry.js';
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
  for (const fix of FIXES) fix.validate?.(conf);
}

/** IPAM slot: every fix's early reads, started now so they run while the delegate allocates. */
export function prefetchFixes(ctx: VerbContext): Run {
  let run = ctx.run;
  for (const fix of FIXES) if (fix.prefetch) run = fix.prefetch(ctx.conf, run);
  return run;
}

const callFor = (ctx: VerbContext, ips: string[], ac: AddressContext): AddressCall => ({
  conf: ctx.conf,
  run: ctx.run,
  log: ctx.log,
  ips,
  ownDevs: ac.ownDevs,
  tally: (name, by) => tally(ctx.counters, name, by),
});

/**
 * Every fix's `hook` side by side (they touch different things); the first failure in registry order is
 * reported, whatever finished first.
 */
async function each(call: AddressCall, hook: 'apply' | 'verify'): Promise<void> {
  const settled = await Promise.allSettled(FIXES.map((fix) => fix[hook]?.(call)));
  for (const s of settled) if (s.status === 'rejected') throw s.reason;
}

/** ADD: every fix refuses, then applies; throws a CniError when the address must not be used. */
export async function prepareAddresses(ctx: VerbContext, ips: string[], ac: AddressContext): Promise<void> {
  for (const fix of FIXES) fix.refuse?.(ctx.conf, ips);
  await each(callFor(ctx, ips, ac), 'apply');
}

/** CHECK: the same refusals, then every fix's read-only verification (the pod's own interfaces excepted). */
export async function checkAddresses(ctx: VerbContext, ips: string[], ac: AddressContext = { ownDevs: [] }): Promise<void> {
  for (const fix of FIXES) fix.refuse?.(ctx.conf, ips);
  await each(callFor(ctx, ips, ac), 'verify');
}

/** STATUS: the first reason a fix gives that no ADD can succeed now, or undefined. */
export function statusProblems(ctx: Pick<VerbContext, 'conf' | 'log'>): string | undefined {
  for (const fix of FIXES) {
    const problem = fix.status?.(ctx.conf, ctx.log);
    if (problem) return problem;
  }
  return undefined;
}

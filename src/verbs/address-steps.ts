// What the verbs do with every address they hand out or pass through, in both placements: the registry's loop
// (src/fixes/address-steps.ts, shared with `agent-ip allocate`) over this call's context. The addresses a result
// holds are src/cni/result.ts's (resultIps). This module knows no fix by name.
import type { NetConf } from '../cni/config.js';
import type { Run } from '../effects/exec.js';
import type { AddressCall } from '../fixes/fix.js';
import * as steps from '../fixes/address-steps.js';
import { tally, type VerbContext } from './context.js';

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

// What the shim does with every address it hands out or passes through: every fix of the registry validates its
// settings, refuses, applies and verifies in turn. The verbs (ADD, CHECK, STATUS: src/verbs/address-steps.ts) and
// `agent-ip allocate` (src/agent-ips/allocate.ts: cilium-agent's own addresses) loop here, so an address gets the
// same cures whoever hands it out. This module knows no fix by name.
import type { NetConf } from '../cni/config.js';
import type { Run } from '../effects/exec.js';
import type { Logger } from '../log.js';
import type { AddressCall } from '../fix/fix.js';
import { FIXES } from './registry.js';

/** First: every fix's check of its settings (code 7), before the delegate allocates anything. */
export function validateFixes(conf: NetConf): void {
  for (const fix of FIXES) fix.validate?.(conf);
}

/** Every fix's early reads, started now so they run while the delegate allocates; the Run the hooks then get. */
export function prefetchFixes(conf: NetConf, run: Run): Run {
  let prefetched = run;
  for (const fix of FIXES) if (fix.prefetch) prefetched = fix.prefetch(conf, prefetched);
  return prefetched;
}

/**
 * Every fix's `hook` side by side (they touch different things); the first failure in registry order is
 * reported, whatever finished first.
 */
async function each(call: AddressCall, hook: 'apply' | 'verify'): Promise<void> {
  const settled = await Promise.allSettled(FIXES.map((fix) => fix[hook]?.(call)));
  for (const s of settled) if (s.status === 'rejected') throw s.reason;
}

/** Handing addresses out: every fix refuses, then applies; throws a CniError when an address must not be used. */
export async function prepareAddresses(call: AddressCall): Promise<void> {
  for (const fix of FIXES) fix.refuse?.(call.conf, call.ips);
  await each(call, 'apply');
}

/** CHECK: the same refusals, then every fix's read-only verification. */
export async function checkAddresses(call: AddressCall): Promise<void> {
  for (const fix of FIXES) fix.refuse?.(call.conf, call.ips);
  await each(call, 'verify');
}

/** STATUS: the first reason a fix gives that no ADD can succeed now, or undefined. */
export function statusProblems(conf: NetConf, log: Logger): string | undefined {
  for (const fix of FIXES) {
    const problem = fix.status?.(conf, log);
    if (problem) return problem;
  }
  return undefined;
}

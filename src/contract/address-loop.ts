// What the shim does with every address it hands out or passes through: every fix of a list validates its
// settings, refuses, applies and verifies in turn. The list is the caller's (the registry's, src/fix-list/registry.ts,
// handed down by src/fix-list/address-steps.ts for the verbs and by the CLI to `agent-ip allocate`), so an address gets
// the same cures whoever hands it out, and no fix folder imports the registry. This module knows no fix by name.
import type { NetConf } from '../cni/config.js';
import type { Run } from '../effects/exec.js';
import type { AddressCall, Fix } from './fix.js';

/** First: every fix's check of its settings (code 7), before the delegate allocates anything. */
export function validateFixes(fixes: readonly Fix[], conf: Pick<NetConf, 'settings'>): void {
  for (const fix of fixes) fix.validate?.(conf);
}

/** Every fix's early reads, started now so they run while the delegate allocates; the Run the hooks then get. */
export function prefetchFixes(fixes: readonly Fix[], conf: NetConf, run: Run): Run {
  let prefetched = run;
  for (const fix of fixes) if (fix.prefetch) prefetched = fix.prefetch(conf, prefetched);
  return prefetched;
}

/**
 * Every fix's `hook` side by side (they touch different things); the first failure in list order is reported,
 * whatever finished first.
 */
async function each(fixes: readonly Fix[], call: AddressCall, hook: 'apply' | 'verify'): Promise<void> {
  const settled = await Promise.allSettled(fixes.map((fix) => fix[hook]?.(call)));
  for (const s of settled) if (s.status === 'rejected') throw s.reason;
}

/** Handing addresses out: every fix refuses, then applies; throws a CniError when an address must not be used. */
export async function prepareAddresses(fixes: readonly Fix[], call: AddressCall): Promise<void> {
  for (const fix of fixes) fix.refuse?.(call.conf, call.ips);
  await each(fixes, call, 'apply');
}

/** CHECK: the same refusals, then every fix's read-only verification. */
export async function checkAddresses(fixes: readonly Fix[], call: AddressCall): Promise<void> {
  for (const fix of fixes) fix.refuse?.(call.conf, call.ips);
  await each(fixes, call, 'verify');
}

/** What STATUS learns from the fixes: the first reason a fix gives that no ADD can succeed now, and their warnings. */
export interface StatusLook {
  problem?: string;
  warnings: Array<{ fix: string; msg: string; fields: Record<string, unknown> }>;
}

/** STATUS: every fix's look, in list order, up to the first problem. */
export function statusLook(fixes: readonly Fix[], conf: NetConf): StatusLook {
  const warnings: StatusLook['warnings'] = [];
  for (const fix of fixes) {
    const found = fix.status?.(conf);
    if (found?.warning) warnings.push({ fix: fix.name, ...found.warning });
    if (found?.problem) return { problem: found.problem, warnings };
  }
  return { warnings };
}

// The registry's address steps: src/contract/address-loop.ts's loop over every fix of the registry, as ADD, CHECK and
// STATUS call it (each builds its AddressCall from its context: src/verbs/context.ts addressCall). `agent-ip
// allocate` runs the same loop over the list the CLI hands its command (src/cli/index.ts). No fix is named here.
import type { NetConf } from '../cni/config.js';
import type { Run } from '../effects/exec.js';
import * as steps from '../contract/address-loop.js';
import type { AddressCall } from '../contract/fix.js';
import { FIXES } from './registry.js';

/** ADD, first, and install: every fix's check of its settings (code 7), before the delegate allocates anything. */
export function validateFixes(conf: Pick<NetConf, 'settings'>): void {
  steps.validateFixes(FIXES, conf);
}

/** IPAM slot: every fix's early reads, started now so they run while the delegate allocates. */
export function prefetchFixes(ctx: { conf: NetConf; run: Run }): Run {
  return steps.prefetchFixes(FIXES, ctx.conf, ctx.run);
}

/** ADD: every fix refuses, then applies; throws a CniError when the address must not be used. */
export function prepareAddresses(call: AddressCall): Promise<void> {
  return steps.prepareAddresses(FIXES, call);
}

/** CHECK: the same refusals, then every fix's read-only verification (the pod's own interfaces excepted). */
export function checkAddresses(call: AddressCall): Promise<void> {
  return steps.checkAddresses(FIXES, call);
}

/** STATUS: every fix's look (src/contract/address-loop.ts). */
export function statusLook(conf: NetConf): steps.StatusLook {
  return steps.statusLook(FIXES, conf);
}

// Every fix's hold on the runtime's pods' addresses (Fix.holds), for the pods view (src/pods/view.ts): the agent's
// pods step and doctor's runtime-pods check see the same holds, in registry order.
import type { NetConf } from '../cni/config.js';
import type { PodHold } from '../pods/view.js';
import { FIXES } from './registry.js';

/** Throws what a fix's settings reader throws (a reservedCIDRs entry that is not a CIDR: code 7). */
export function podHolds(conf: NetConf): Array<{ fix: string; hold: PodHold }> {
  return FIXES.flatMap((f) => {
    const hold = f.holds?.(conf);
    return hold ? [{ fix: f.name, hold }] : [];
  });
}

// The checks `ipam-shim doctor` runs, in order: the node's own (the conflists, the shim and its delegate, the
// state dir, the ledger), every fix's (src/fix-list/registry.ts), then the pods the runtime knows.
import type { DoctorCheck } from '../contract/doctor-check.js';
import { NODE_CHECKS } from './node.js';
import { podsCheck } from './pods.js';
import { FIXES } from '../fix-list/registry.js';

export async function doctorChecks(): Promise<DoctorCheck[]> {
  const fixes = await Promise.all(FIXES.map((f) => f.doctor?.() ?? []));
  return [...NODE_CHECKS, ...fixes.flat(), podsCheck];
}

// The checks `ipam-shim doctor` runs, in order. Each lives in its own module; add new ones here.
import type { DoctorCheck } from './check.js';
import { NODE_CHECKS } from './node.js';
import { agentCheck } from './agent.js';
import { probeCheck } from './probe.js';
import { reservedCheck } from './routes.js';
import { residueCheck } from './residue.js';
import { podsCheck } from './pods.js';

export const CHECKS: DoctorCheck[] = [...NODE_CHECKS, probeCheck, reservedCheck, residueCheck, podsCheck, agentCheck];

// Every fix the shim applies, in the order ADD refuses, applies and reports them: one line each. ADD, CHECK,
// STATUS, the node agent, doctor, the metrics and the build's warm-up loop over this list (docs/architecture.md).
import type { Fix } from '../contract/fix.js';
import { reservedFix } from '../reserved/fix.js';
import { residueFix } from '../residue/fix.js';
import { probeRewriteFix } from '../probe-rewrite/fix.js';
import { agentIpsFix } from '../agent-ips/fix.js';

export const FIXES: readonly Fix[] = [reservedFix, residueFix, probeRewriteFix, agentIpsFix];

// Fix 2, cilium-agent's own IPs under delegated IPAM: `ipam-shim agent-ip allocate` records them (allocate.ts,
// idempotent across restarts) under container IDs that match agentContainerIDs, and GC keeps every such record
// (src/gc/plan.ts). Nothing to do per pod address; doctor checks each recorded one is complete and still held.
import type { Fix } from '../fix/fix.js';

export const agentIpsFix: Fix = {
  name: 'agent-ips',
  doctor: async () => [(await import('./doctor.js')).agentCheck],
  commands: { 'agent-ip': async (fixes) => (await import('./cli.js')).agentIpCommand(fixes) },
};

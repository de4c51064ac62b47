// Fix 2, cilium-agent's own IPs under delegated IPAM: `ipam-shim agent-ip allocate` records them (allocate.ts,
// idempotent across restarts) under container IDs that match agentContainerIDs, and GC keeps every such record
// (src/gc/plan.ts). Nothing to do per pod address; doctor checks each recorded one is complete and still held; the
// agent's step confirms them every pass and re-allocates one the IPAM store forgot (agent-step.ts).
import type { Fix } from '../contract/fix.js';

export const agentIpsFix: Fix = {
  name: 'agent-ips',
  about: 'agent IPs',
  agent: {
    step: 'agent-ips',
    families: [
      {
        name: 'ipam_shim_agent_ip_reallocated_total',
        type: 'counter',
        help: 'cilium-agent addresses the agent re-allocated because the IPAM store no longer held them (the new address: ipam-shim agent-ip list).',
        labelNames: ['network'],
        perNetwork: [{}],
      },
      {
        name: 'ipam_shim_agent_ip_unverified',
        type: 'gauge',
        help: 'cilium-agent addresses nothing could confirm the IPAM store still holds (CHECK proves nothing and a repeated ADD failed).',
        labelNames: ['network'],
      },
    ],
    notes: { agentIpsChecked: 0, agentIpsReallocated: 0, agentIpsUnverified: 0 },
    load: async (fixes) => (await import('./agent-step.js')).agentIpsStep(fixes),
  },
  doctor: async () => [(await import('./doctor.js')).agentCheck],
  commands: { 'agent-ip': async (fixes) => (await import('./cli.js')).agentIpCommand(fixes) },
};

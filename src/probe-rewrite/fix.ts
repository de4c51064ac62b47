// Fix 3, IPv6 load-balancer probes from a link-local source: the stateless nftables rewrite (table ip6
// azureSLBProbe, priority -300) is put in place when an ADD hands out an IPv6 address, kept in place by the node
// agent while the ledger holds one (or always, mode `on`), and left alone where a BPF program does the same.
import type { Fix } from '../contract/fix.js';
import { ensureProbeRewriteIfDue } from './ensure.js';
import { checkProbeSettings } from './ruleset.js';
import { warmRun } from './warm.js';
import { familyOf } from '../net/ip.js';

export const probeRewriteFix: Fix = {
  name: 'probe-rewrite',
  about: 'IPv6 probes',
  // The addresses and uplink name the rewrite is built from (an IPv6 ADD builds it; install refuses them too).
  validate: ({ settings: { uplink, probeSource, probeGlobal } }) =>
    checkProbeSettings({ ...(uplink ? { uplink } : {}), ...(probeSource ? { probeSource } : {}), ...(probeGlobal ? { probeGlobal } : {}) }),
  async apply(call) {
    // Only an ADD that hands out an IPv6 address acts (an IPv4 pod's ADD starts no nft); the agent keeps the
    // table in place for mode `on` (agent-step.ts).
    if (call.ips.some((ip) => familyOf(ip) === 6)) await ensureProbeRewriteIfDue(call);
  },
  agent: {
    step: 'probe',
    families: [
      {
        name: 'ipam_shim_agent_probe_restores_total',
        type: 'counter',
        help: 'Times the IPv6 probe rewrite table was found missing or drifted and put back.',
        zero: true,
      },
    ],
    load: async () => (await import('./agent-step.js')).probeStep,
  },
  doctor: async () => [(await import('./doctor.js')).probeCheck],
  warm: { run: warmRun },
  commands: { 'probe-rewrite': async () => (await import('./cli.js')).probeRewriteCommand },
};

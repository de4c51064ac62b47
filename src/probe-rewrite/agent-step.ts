// The node agent's probe step: the IPv6 probe rewrite put back where due (probeRewriteNeeded on the ledger's
// addresses, the rule doctor and `probe-rewrite status` judge by), with ADD's decision.
import type { AgentStep } from '../contract/agent-step.js';
import { probeRewriteNeeded } from './decide.js';
import { ensureProbeRewriteIfDue } from './ensure.js';
import { familyOf } from '../net/ip.js';

export const probeStep: AgentStep = {
  async reconcile(pass) {
    const { net } = pass;
    pass.note({ probeRestored: false });
    const mode = net.conf.settings.ipv6ProbeRewrite;
    if (mode === 'off') return 'skipped';
    // `on` needs no ledger read; `auto` needs an IPv6 address in the ledger.
    const ipv6 = mode === 'auto' && (await pass.records()).some((r) => r.ips.some((ip) => familyOf(ip) === 6));
    if (!probeRewriteNeeded(mode, ipv6)) return 'skipped';
    const outcome = await ensureProbeRewriteIfDue(net);
    if (outcome === 'ensured') {
      pass.note({ probeRestored: true });
      pass.counter('ipam_shim_agent_probe_restores_total').inc();
      net.log.warn({ step: 'probe' }, 'probe: the IPv6 probe rewrite table was missing or drifted: put back');
    }
    if (outcome === 'failed') throw new Error('IPv6 probe rewrite not ensured (see the warning above)');
    return 'ok';
  },
};

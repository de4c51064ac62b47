// The agent's agent-ips step: every pass, confirms cilium-agent's addresses with the delegate the way `agent-ip
// allocate` does (allocate.ts: a CHECK where CHECK can fail, else a repeated ADD under the owner's identity) and
// re-allocates, under the same identity, one the IPAM store forgot (CNS restarted from a pod list that has no pod
// holding it). The new address goes where the operator and cilium-agent's operator look: the ledger
// (`ipam-shim agent-ip list`), a warning log line, ipam_shim_agent_ip_reallocated_total.
// Bounded: at most MAX_PER_PASS owners a pass (round robin beyond), one delegate call each when the address holds.
import { agentIpOwner } from '../ledger/owner.js';
import type { AgentStep } from '../contract/agent-step.js';
import type { Fix } from '../contract/fix.js';
import { confirmAgentIp } from './allocate.js';

const MAX_PER_PASS = 4;

export const agentIpsStep = (fixes: readonly Fix[]): AgentStep => ({
  async reconcile(pass) {
    const { net } = pass;
    const network = net.conf.name;
    const unverifiedGauge = pass.gauge('ipam_shim_agent_ip_unverified');
    const mine = (await pass.records()).filter((r) => r.owner === 'agent' && r.placement === 'cli' && agentIpOwner(r.containerID) !== undefined);
    const countUnverified = (n: number) => {
      unverifiedGauge.reset();
      unverifiedGauge.set({ network }, n);
      pass.note({ agentIpsUnverified: n });
    };
    if (!net.delegate || !mine.length) {
      countUnverified(mine.filter((r) => r.verified?.by === 'none').length);
      return 'ok';
    }
    const kept = pass.state(() => ({ next: 0 }));
    const start = kept.next % mine.length;
    const picked = [...mine.slice(start), ...mine.slice(0, start)].slice(0, MAX_PER_PASS);
    kept.next = start + picked.length;
    const deps = { conf: net.conf, ledger: net.ledger, delegate: net.delegate, run: net.run, log: net.log, fixes };
    const unverified = new Set(mine.filter((r) => r.verified?.by === 'none').map((r) => r.containerID));
    let checked = 0;
    let reallocated = 0;
    let errors = 0;
    for (const rec of picked) {
      if (pass.signal.aborted) break;
      const owner = agentIpOwner(rec.containerID)!;
      try {
        const out = await confirmAgentIp(deps, owner);
        if (!out) continue; // released since the pass listed the ledger: never allocated again here
        checked++;
        if (out.action === 'unverified') unverified.add(rec.containerID);
        else unverified.delete(rec.containerID);
        if (out.action === 'reallocated' || out.action === 'allocated') {
          reallocated++;
          pass.counter('ipam_shim_agent_ip_reallocated_total').inc({ network });
          net.log.warn(
            { step: 'agent-ips', owner, containerID: rec.containerID, before: rec.ips, after: out.ips, note: out.note },
            `agent-ips: cilium-agent's ${owner} address re-allocated (the IPAM store no longer held ${rec.ips.join(', ') || 'it'}): now ${out.ips.join(', ')}; cilium-agent must use the new one (ipam-shim agent-ip list)`,
          );
        }
      } catch (e) {
        errors++;
        pass.error();
        net.log.error({ step: 'agent-ips', owner, err: e }, 'agent-ips: could not confirm or re-allocate the address');
      }
    }
    countUnverified(unverified.size);
    pass.note({ agentIpsChecked: checked, agentIpsReallocated: reallocated });
    return errors ? 'error' : 'ok';
  },
});

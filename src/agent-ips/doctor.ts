// Agent IPs: each recorded one is complete and, where the delegate can be asked (CHECK, ≥ 0.4.0), still
// held by it.
import { delegateConf } from '../cni/config.js';
import { atLeast } from '../cni/versions.js';
import { agentReallocateFix } from '../ledger/owner.js';
import { agentPrevResult, listAgentIps } from './allocate.js';
import type { DoctorCheck, Finding } from '../fix/doctor-check.js';

export const agentCheck: DoctorCheck = {
  name: 'agent-ips',
  async run(net) {
    const records = await listAgentIps(net.ledger);
    if (!records.length) return [{ check: this.name, verdict: 'ok', summary: 'no cilium-agent IPs recorded' }];
    const version = net.delegate ? await net.delegate.versionFor(net.conf.cniVersion).catch(() => undefined) : undefined;
    const findings: Finding[] = [];
    for (const r of records) {
      const fix = agentReallocateFix(r.containerID);
      if (r.state !== 'attached' || !r.ips.length) {
        findings.push({ check: this.name, verdict: 'problem', summary: `${r.containerID}: allocation never completed`, fix });
        continue;
      }
      if (!net.delegate || !version || !atLeast(version, '0.4.0')) {
        findings.push({ check: this.name, verdict: 'ok', summary: `${r.containerID}: ${r.ips.join(', ')} (delegate cannot be asked: no CHECK)` });
        continue;
      }
      try {
        await net.delegate.check(delegateConf(net.conf, version, { prevResult: agentPrevResult(r.ips, version) }), {
          CNI_CONTAINERID: r.containerID,
          CNI_IFNAME: r.ifname,
          CNI_NETNS: r.netns,
          CNI_ARGS: '',
        });
        findings.push({ check: this.name, verdict: 'ok', summary: `${r.containerID}: ${r.ips.join(', ')} held by ${net.delegate.type}` });
      } catch (e) {
        findings.push({
          check: this.name,
          verdict: 'problem',
          summary: `${r.containerID}: ${net.delegate.type} no longer holds ${r.ips.join(', ')}: ${(e as Error).message}`,
          fix,
        });
      }
    }
    return findings;
  },
};

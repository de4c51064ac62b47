// Agent IPs: each recorded one is complete and still held by the delegate, asked as agent-ip asks (allocate.ts):
// under the record's identity, by a CHECK only where CHECK can fail (Delegate.checkProof); where it cannot, doctor
// says so and reports what agent-ip last proved (the record's `verified`): `unverified` is a problem, never "held".
import { delegateConf } from '../cni/config.js';
import { agentReallocateFix } from '../ledger/owner.js';
import { delegateEnvFor, identityOf } from '../ledger/identity.js';
import { listAgentIps } from './allocate.js';
import { checkVersionOf, hostPrevResult } from '../effects/check-proof.js';
import type { DoctorCheck, Finding } from '../contract/doctor-check.js';

export const agentCheck: DoctorCheck = {
  name: 'agent-ips',
  async run(net) {
    const records = await listAgentIps(net.ledger);
    if (!records.length) return [{ check: this.name, verdict: 'ok', summary: 'no cilium-agent IPs recorded' }];
    // agent-ip's CHECKs go in the highest version both speak (allocate.ts): so do doctor's.
    const version = net.delegate ? await net.delegate.supportedVersions().then(checkVersionOf, () => undefined) : undefined;
    const findings: Finding[] = [];
    for (const r of records) {
      const fix = agentReallocateFix(r.containerID);
      if (r.state !== 'attached' || !r.ips.length) {
        findings.push({ check: this.name, verdict: 'problem', summary: `${r.containerID}: allocation never completed`, fix });
        continue;
      }
      const id = identityOf(r);
      if (r.verified?.by === 'none') {
        findings.push({
          check: this.name,
          verdict: 'problem',
          summary: `${r.containerID}: ${r.ips.join(', ')} unverified since ${r.verified.at}: ${r.verified.why ?? 'nothing proves the delegate still holds it'}`,
          fix,
        });
        continue;
      }
      if (!net.delegate || !version || id.kind === 'unknown') {
        const why = id.kind === 'unknown' ? 'no identity recorded to ask under' : 'no delegate to ask';
        findings.push({ check: this.name, verdict: 'ok', summary: `${r.containerID}: ${r.ips.join(', ')} (${why})` });
        continue;
      }
      const confFor = (prevResult: Record<string, unknown>) => delegateConf(net.conf, version, { prevResult });
      const proof = await net.delegate.checkProof(confFor, version, r.netns || '/proc/self/ns/net').catch(() => 'unknown' as const);
      if (proof !== 'proves') {
        // A CHECK here would prove nothing; agent-ip's last repeated ADD is what is known.
        const last = r.verified
          ? `confirmed by ${r.verified.by === 'add' ? 'a repeated ADD' : 'CHECK'} since ${r.verified.at}`
          : `allocated ${r.updatedAt}, not confirmed since`;
        const why =
          proof === 'proves-nothing'
            ? `${net.delegate.type}'s CHECK proves nothing`
            : proof === 'no-check'
              ? `no CHECK at ${version}`
              : 'CHECK could not be probed';
        findings.push({
          check: this.name,
          verdict: 'ok',
          summary: `${r.containerID}: ${r.ips.join(', ')} (${why}; ${last}; the agent re-confirms it every pass)`,
        });
        continue;
      }
      try {
        await net.delegate.check(confFor(hostPrevResult(r.ips, version)), delegateEnvFor(r, id.cniArgs, r.netns));
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

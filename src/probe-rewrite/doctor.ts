// Doctor check `ipv6-probe`: where the shim hands out IPv6 addresses, Azure LB probes must reach the pods, so the
// node needs the nftables rewrite (table ip6 azureSLBProbe) or a BPF program that does the same (ACN ipv6-hp-bpf).
// The assessment is the one `ipam-shim probe-rewrite status` prints (src/probe-rewrite/assess.ts).
import { assessProbeRewrite, describeAssessment, fixFor, fmtCounter } from './assess.js';
import { PROBE_TABLE } from './ruleset.js';
import type { DoctorCheck, Finding } from '../contract/doctor-check.js';

export const probeCheck: DoctorCheck = {
  name: 'ipv6-probe',
  /**
   * No shim conflist: the shim hands out no address here, so no IPv6 pod of its needs the rewrite yet (the agent's
   * step puts it in place once one does). The node's table is described, judged against the default settings.
   */
  async withoutNetwork(node): Promise<Finding[]> {
    const a = await assessProbeRewrite(node.run, { settings: undefined, settingsFrom: null, ledger: undefined });
    return [
      {
        check: 'ipv6-probe',
        verdict: 'skipped',
        summary: `no shim conflist: no IPv6 address handed out by the shim, no probes to rewrite yet (now: ${describeAssessment(a)})`,
      },
    ];
  },
  async run(net): Promise<Finding[]> {
    const check = 'ipv6-probe';
    const { settings } = net.conf;
    if (settings.ipv6ProbeRewrite === 'off') {
      return [{ check, verdict: 'skipped', summary: 'ipv6ProbeRewrite is off: the shim leaves IPv6 probes to someone else' }];
    }
    const a = await assessProbeRewrite(net.run, { settings, settingsFrom: net.shim.path, ledger: net.ledger });
    const data = {
      verdict: a.verdict,
      mode: a.mode,
      uplink: a.uplink,
      ipv6Addresses: a.ipv6Addresses,
      counters: a.status.available ? a.status.counters : undefined,
    };
    if (!a.needed) {
      const table =
        a.status.available && a.status.tablePresent
          ? ` (table ip6 ${PROBE_TABLE} is present${a.verdict === 'drifted' ? ', not as the shim would install it' : ''})`
          : '';
      return [{ check, verdict: 'skipped', summary: `no IPv6 address in the ledger: no probes to rewrite yet${table}`, data }];
    }
    const counters =
      a.status.available && a.verdict === 'ok'
        ? `; rewritten in ${fmtCounter(a.status.counters.prerouting)}, out ${fmtCounter(a.status.counters.postrouting)}`
        : '';
    const fix = fixFor(a, net.shim.path);
    return [{ check, verdict: a.problem ? 'problem' : 'ok', summary: `${describeAssessment(a)}${counters}`, ...(fix ? { fix } : {}), data }];
  },
};

// doctor: azure-vnet residue on this node. Residue for an address the shim handed out is a problem (that pod is
// unreachable through the bridged uplink); per-pod rules whose MAC is on no local interface are a warning (they
// belong to no pod here, but may belong to a live azure-vnet pod, so only the operator may remove them).
import type { DoctorCheck, Finding } from '../contract/doctor-check.js';
import { ledgerTargets, mergeTargets, scanTargets } from './report.js';

const NAME = 'residue';

/** Per-pod-shaped rules whose MAC is on no local interface: a warning, never the shim's to remove. */
function orphanFinding(orphans: { ip: string }[], where: string): Finding | undefined {
  if (!orphans.length) return undefined;
  const ips = [...new Set(orphans.map((o) => o.ip))];
  return {
    check: NAME,
    verdict: 'warn',
    summary: `${orphans.length} per-pod ebtables rule(s) for ${ips.length} other IP(s) whose MAC is on no local interface: ${ips.slice(0, 8).join(', ')}${ips.length > 8 ? ' …' : ''} (left alone)`,
    fix: `when no azure-vnet pod uses them any more: ipam-shim residue clean --apply ${ips
      .slice(0, 8)
      .map((ip) => `--ip ${ip}`)
      .join(' ')}${where}`,
    data: orphans,
  };
}

export const residueCheck: DoctorCheck = {
  name: NAME,
  /** No shim conflist, so no ledger addresses: only the orphaned per-pod rules can be looked for. */
  async withoutNetwork(node) {
    const scan = await scanTargets(node.run, []);
    const orphans = orphanFinding(scan.orphans, '');
    return [
      orphans ?? {
        check: NAME,
        verdict: 'ok',
        summary: `no orphaned per-pod ebtables rule${scan.ebtablesAvailable ? '' : ' (no ebtables nat table)'}; ledger addresses not checked (no shim conflist)`,
      },
    ];
  },
  async run(net) {
    const ledger = await ledgerTargets(net.ledger);
    const targets = mergeTargets(ledger.ips, []);
    const scan = await scanTargets(net.run, targets, net.conf.settings.residue.ebtablesBackends);
    const where = `--conflist ${net.shim.path}`;
    const findings: Finding[] = [];

    for (const t of scan.targets) {
      const n = t.rules.length + t.neighbours.length;
      if (!n) continue;
      findings.push({
        check: NAME,
        verdict: 'problem',
        summary: `stale residue for ${t.ip} (${t.attachments.join(', ')}): ${t.rules.length} ebtables rule(s), ${t.neighbours.length} neighbour entr${t.neighbours.length === 1 ? 'y' : 'ies'}; traffic to it through the uplink is misdelivered`,
        fix: `ipam-shim residue clean --apply ${where}`,
        data: t,
      });
    }
    if (ledger.corrupt.length) {
      findings.push({
        check: NAME,
        verdict: 'warn',
        summary: `${ledger.corrupt.length} unreadable ledger record(s): their IPs were not checked for residue (${ledger.corrupt.join(', ')})`,
        fix: 'inspect the files; ipam-shim gc reports them too',
      });
    }
    const orphans = orphanFinding(scan.orphans, ` ${where}`);
    if (orphans) findings.push(orphans);
    // A backend the kernel may hold tables in but that could not be read (its program is missing here): "could
    // not look", never "no rules".
    for (const b of scan.ebtablesBackends.filter((x) => x.blind)) {
      findings.push({
        check: NAME,
        verdict: 'warn',
        summary: `ebtables ${b.name} not read: ${b.reason}`,
        fix: `install ${b.name === 'nft' ? 'ebtables-nft (iptables package)' : 'ebtables-legacy (ebtables package)'} where ipam-shim runs, or set residue.ebtablesBackends`,
        data: b,
      });
    }
    if (!findings.some((f) => f.verdict === 'problem')) {
      // Which backends were read, and why the others were not ("unavailable: <why>").
      const where = scan.ebtablesBackends.map((b) => (b.available ? `${b.name}: read` : `${b.name}: unavailable: ${b.reason}`)).join('; ');
      findings.unshift({
        check: NAME,
        verdict: 'ok',
        summary: `no residue for ${targets.length} ledger IP(s)${scan.ebtablesAvailable ? '' : ' (no ebtables nat table in any backend: only neighbour entries can exist)'} [ebtables ${where || 'off'}]`,
        data: { ebtablesBackends: scan.ebtablesBackends },
      });
    }
    return findings;
  },
};

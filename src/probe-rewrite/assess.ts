// The node's probe rewrite compared with what the shim's settings call for: shared by doctor's `ipv6-probe` check
// and `ipam-shim probe-rewrite status`, so both say the same thing; the verdict is decide()'s, as on ADD.
import { DEFAULT_CONF_DIR } from '../conflist.js';
import type { ShimSettings } from '../cni/config.js';
import type { Run } from '../effects/exec.js';
import type { LedgerStore } from '../ledger/store.js';
import { decide, probeRewriteNeeded, type ProbeVerdict } from './decide.js';
import { probeFacts, readProbeNode, type ProbeRewriteStatus } from './node.js';
import { DEFAULT_PROBE_GLOBAL, DEFAULT_PROBE_SOURCE, PROBE_TABLE, type PacketCounter } from './ruleset.js';
import { familyOf } from '../net/ip.js';

export interface ProbeAssessment {
  mode: ShimSettings['ipv6ProbeRewrite'];
  /** The conflist the settings came from; null = built-in defaults (no shim conflist found). */
  settingsFrom: string | null;
  /** IPv6 addresses in the shim's ledger; null when no ledger is known. */
  ipv6Addresses: number | null;
  /** Whether probes must be rewritten here: mode on, or auto with IPv6 addresses (assumed without a conflist). */
  needed: boolean;
  uplink: string | null;
  probeSource: string;
  probeGlobal: string;
  status: ProbeRewriteStatus;
  verdict: ProbeVerdict;
  /** The verdict is something to fix (status exits 1, doctor reports a problem). */
  problem: boolean;
}

export interface AssessInput {
  /** Settings from the shim's conflist, or undefined for the built-in defaults. */
  settings?: Pick<ShimSettings, 'ipv6ProbeRewrite' | 'uplink' | 'probeSource' | 'probeGlobal'> | undefined;
  settingsFrom?: string | null;
  ledger?: Pick<LedgerStore, 'list'> | undefined;
  /** Operator overrides (CLI flags): win over the settings. */
  uplink?: string | undefined;
  probeSource?: string | undefined;
  probeGlobal?: string | undefined;
}

/** Read-only: the node's probe rewrite compared with what the shim's settings call for. */
export async function assessProbeRewrite(run: Run, input: AssessInput): Promise<ProbeAssessment> {
  const mode = input.settings?.ipv6ProbeRewrite ?? 'auto';
  const probeSource = input.probeSource ?? input.settings?.probeSource ?? DEFAULT_PROBE_SOURCE;
  const probeGlobal = input.probeGlobal ?? input.settings?.probeGlobal ?? DEFAULT_PROBE_GLOBAL;
  const uplinkWanted = input.uplink ?? input.settings?.uplink;
  let ipv6Addresses: number | null = null;
  if (input.ledger) {
    const { records } = await input.ledger.list();
    ipv6Addresses = records.reduce((n, r) => n + r.ips.filter((ip) => familyOf(ip) === 6).length, 0);
  }
  const ipv6 = ipv6Addresses === null || ipv6Addresses > 0; // no ledger known: assume IPv6 is in play
  const { status, read } = await readProbeNode(run, { ...(uplinkWanted ? { uplink: uplinkWanted } : {}), probeSource, probeGlobal });
  const { verdict, problem } = decide(probeFacts(read, mode, ipv6));
  return {
    mode,
    settingsFrom: input.settingsFrom ?? null,
    ipv6Addresses,
    needed: probeRewriteNeeded(mode, ipv6),
    uplink: status.available ? status.uplink : (uplinkWanted ?? null),
    probeSource,
    probeGlobal,
    status,
    verdict,
    problem,
  };
}

export const fmtCounter = (c: PacketCounter): string => `${c.packets} packets / ${c.bytes} bytes`;

/** One line saying what the verdict means for this node. PURE. */
export function describeAssessment(a: ProbeAssessment): string {
  const s = a.status;
  const bpfToo = a.verdict !== 'handled-by-bpf' && s.available && s.state === 'handled-by-bpf';
  const line = describeVerdict(a);
  return bpfToo ? `${line} (a BPF program on the uplink handles probes too; ipv6ProbeRewrite=${a.mode} keeps the table regardless)` : line;
}

function describeVerdict(a: ProbeAssessment): string {
  const s = a.status;
  const on = a.uplink ? ` on ${a.uplink}` : '';
  switch (a.verdict) {
    case 'ok':
      return `table ip6 ${PROBE_TABLE} present${on} and as expected (${a.probeSource} → ${a.probeGlobal})`;
    case 'handled-by-bpf':
      return `IPv6 probes are handled by a BPF program on ${a.uplink} (clsact ingress, e.g. ACN ipv6-hp-bpf): the nftables rewrite is not needed${s.available && s.tablePresent ? ` (table ip6 ${PROBE_TABLE} is still there; ipv6-hp-bpf removes it)` : ''}`;
    case 'absent':
      return `table ip6 ${PROBE_TABLE} is missing${on}: Azure LB probes (from ${a.probeSource}) cannot reach IPv6 pods`;
    case 'drifted':
      return `table ip6 ${PROBE_TABLE}${on} differs from the expected ruleset (other uplink, addresses, chains or rules)`;
    case 'nft-unavailable':
      return `nftables is not usable here (${s.available ? '' : s.reason}): the probe rewrite cannot be installed`;
    case 'no-uplink':
      return 'no uplink: the node has no default route and no "uplink" is configured';
    case 'not-needed':
      return a.mode === 'off' ? 'ipv6ProbeRewrite is off' : 'not needed: no IPv6 address handed out by the shim';
  }
}

/** The command that repairs a problem verdict. */
export function fixFor(a: ProbeAssessment, conflist?: string): string | undefined {
  const where = conflist && !conflist.startsWith(`${DEFAULT_CONF_DIR}/`) ? ` --conflist ${conflist}` : '';
  switch (a.verdict) {
    case 'absent':
    case 'drifted':
      return `ipam-shim probe-rewrite ensure${where}`;
    case 'no-uplink':
      return `set "uplink" in the shim's config, or run ipam-shim probe-rewrite ensure --uplink DEV${where}`;
    case 'nft-unavailable':
      return 'install nftables (the nft tool) and a kernel with nf_tables, then ipam-shim probe-rewrite ensure';
    default:
      return undefined;
  }
}

// The probe rewrite on this node: the effects (effects/probe-rewrite.ts, effects/uplink.ts) read through the
// pure ruleset (ruleset.ts). What to do with what these return is decide.ts's call.
import type { Run } from '../effects/exec.js';
import { applyNftScript, deleteNftTable, listIngressFilters, listNftTable, type NftUnavailable } from '../effects/probe-rewrite.js';
import { readDefaultUplink } from '../effects/uplink.js';
import type { ProbeFacts, ProbeMode, TableState } from './decide.js';
import {
  parseBpfProbeHandler,
  parseProbeTable,
  PROBE_TABLE,
  probeCounters,
  probeRewriteRuleset,
  probeTableMatches,
  resolveOptions,
  type PacketCounter,
  type ProbeRewriteOptions,
  type ProbeTable,
} from './ruleset.js';

export type ProbeListing = NftUnavailable | { available: true; table: ProbeTable | null };

export type ProbeRewriteStatus =
  | NftUnavailable
  | {
      available: true;
      /** handled-by-bpf wins over present: a BPF program on the uplink is there (whether it wins is decide's call). */
      state: 'present' | 'absent' | 'handled-by-bpf';
      uplink: string | null;
      tablePresent: boolean;
      /** Counters of the rewrite rules only (the ND accept rule's counter is not probe traffic). */
      counters: { prerouting: PacketCounter; postrouting: PacketCounter };
      /** The table is exactly what ensureProbeRewrite(opts) installs (chains, hooks, rules; counters ignored). */
      matchesExpected: boolean;
    };

/** One `nft -j list table ip6 azureSLBProbe`, parsed. null table = absent. Other nft failures throw ToolError. */
export async function listProbeTable(run: Run): Promise<ProbeListing> {
  const listed = await listNftTable(run, 'ip6', PROBE_TABLE);
  if (!listed.available) return listed;
  return { available: true, table: listed.json === null ? null : parseProbeTable(listed.json) };
}

/** PURE. The listing judged against what ensureProbeRewrite(opts) installs; no options (no uplink) = a present table cannot match. */
export function tableState(listed: ProbeListing, opts: ProbeRewriteOptions | null): TableState {
  if (!listed.available) return 'nft-unavailable';
  if (listed.table === null) return 'absent';
  return opts !== null && probeTableMatches(listed.table, opts) ? 'matching' : 'drifted';
}

/** What was read of the node: the table's listing, the options it is judged against (null: no uplink), a BPF handler when looked for. */
export interface ProbeRead {
  listed: ProbeListing;
  opts: ProbeRewriteOptions | null;
  bpf?: boolean | undefined;
}

/**
 * THE node facts decide() judges, assembled from what was read: ADD and the agent (ensure.ts: BPF looked for only
 * when decide asks) and doctor and `probe-rewrite status` (assess.ts: always looked) alike. PURE.
 */
export function probeFacts(read: ProbeRead, mode: ProbeMode, ipv6: boolean): ProbeFacts {
  return { table: tableState(read.listed, read.opts), uplink: read.opts !== null, bpf: read.bpf, mode, ipv6 };
}

/**
 * Installs (or repairs) the probe rewrite on `opts.uplink`: the whole `ip6 azureSLBProbe` table in one atomic
 * `nft -f -` transaction. Idempotent and safe to run concurrently (each run replaces the table wholesale, so
 * any number of callers leave one table with one copy of each rule); it resets the table's counters.
 * Owns: only table `ip6 azureSLBProbe` (an AgentBaker-made one is taken over). Tolerates: the table present in
 * any shape; nft missing → `{available: false}`. Does not look for BPF handlers: whether to call it is decide's
 * call. Throws CniError(7) on bad options, ToolError when nft rejects the script.
 */
export async function ensureProbeRewrite(run: Run, opts: ProbeRewriteOptions): Promise<NftUnavailable | { available: true }> {
  return applyNftScript(run, probeRewriteRuleset(opts));
}

/**
 * Deletes table `ip6 azureSLBProbe` and nothing else. Idempotent: absent = success.
 * Tolerates: nft missing → `{available: false}` (there is then nothing we could have installed).
 */
export async function removeProbeRewrite(run: Run): Promise<NftUnavailable | { available: true }> {
  return deleteNftTable(run, 'ip6', PROBE_TABLE);
}

/**
 * What the node has for IPv6 probes: our table (state, rewrite counters, exact match) and whether a BPF handler
 * (ACN's ipv6-hp-bpf) sits on the uplink. Read-only. The uplink defaults to the default route's (IPv6 first); the
 * probe addresses to AgentBaker's. Tolerates: no table, no uplink (uplink null, matchesExpected false), tc missing
 * (treated as no BPF handler), nft missing → `{available: false}`.
 */
export async function probeRewriteStatus(run: Run, opts: Partial<ProbeRewriteOptions> = {}): Promise<ProbeRewriteStatus> {
  return (await readProbeNode(run, opts)).status;
}

/** probeRewriteStatus, with what it read (for probeFacts). */
export async function readProbeNode(run: Run, opts: Partial<ProbeRewriteOptions> = {}): Promise<{ status: ProbeRewriteStatus; read: ProbeRead }> {
  const uplink = opts.uplink ?? (await readDefaultUplink(run));
  const full = uplink === null ? null : { ...opts, uplink };
  if (full) resolveOptions(full);
  const listed = await listProbeTable(run);
  if (!listed.available) return { status: listed, read: { listed, opts: full } };
  const bpf = full !== null && (await isProbeHandledByBpf(run, full.uplink));
  const table = listed.table;
  const status: ProbeRewriteStatus = {
    available: true,
    state: bpf ? 'handled-by-bpf' : table ? 'present' : 'absent',
    uplink,
    tablePresent: table !== null,
    counters: probeCounters(table),
    matchesExpected: tableState(listed, full) === 'matching',
  };
  return { status, read: { listed, opts: full, bpf } };
}

/**
 * True when `uplink` has a clsact qdisc with a (non-Cilium) BPF filter on ingress, the way ACN's ipv6-hp-bpf
 * attaches. Read-only (one or two `tc -j` calls). Tolerates: tc missing, uplink missing, no clsact → false.
 */
export async function isProbeHandledByBpf(run: Run, uplink: string): Promise<boolean> {
  const listed = await listIngressFilters(run, uplink);
  return listed !== null && parseBpfProbeHandler(listed.qdiscs, listed.ingress);
}

// THE probe-rewrite decision: what to do about table ip6 azureSLBProbe on this node, and what to call its state.
// ADD (ensure.ts, through the fix), doctor and `probe-rewrite status` (assess.ts) and the node agent all ask here,
// so they cannot disagree. PURE.
//
// The rule that used to differ (docs/probe-rewrite.md): ACN's ipv6-hp-bpf replaces the table with TC BPF programs on the
// uplink and deletes azureSLBProbe. Installing or repairing the table there is useless and races with it, so in
// `auto` (and `off`) a BPF handler wins whatever state the table is in: nothing is done and the verdict says so.
// `on` is the operator's "keep the table regardless": BPF is then not looked at.

export type ProbeMode = 'auto' | 'on' | 'off';

/** The table as listed, judged against what ensure installs (see tableState in node.ts). */
export type TableState = 'absent' | 'matching' | 'drifted' | 'nft-unavailable';

/**
 * ok: our table, exactly as ensure installs it · handled-by-bpf: a BPF program on the uplink does it ·
 * absent: needed but missing · drifted: present but not what ensure installs · not-needed: nothing to do ·
 * nft-unavailable / no-uplink: needed but cannot be checked or installed.
 */
export type ProbeVerdict = 'ok' | 'handled-by-bpf' | 'absent' | 'drifted' | 'not-needed' | 'nft-unavailable' | 'no-uplink';

/**
 * none: leave the node as it is · install / reinstall: apply the table (absent / drifted) · look-for-bpf: the
 * answer depends on a BPF handler the caller has not looked for yet: look, then ask again · fail: needed but
 * cannot be done (nft unavailable, no uplink).
 */
type ProbeAction = 'none' | 'install' | 'reinstall' | 'look-for-bpf' | 'fail';

export interface ProbeFacts {
  table: TableState;
  /** An uplink is known (configured or the default route's); without one a table can be neither judged nor installed. */
  uplink: boolean;
  /** A BPF program on the uplink handles probes; undefined = not looked (cheap callers look only when told to). */
  bpf: boolean | undefined;
  mode: ProbeMode;
  /** IPv6 addresses are in play (ADD: this attachment's; doctor/status: the ledger's, or unknown = assumed). */
  ipv6: boolean;
}

export interface ProbeDecision {
  action: ProbeAction;
  /** With `bpf: undefined` and an action other than look-for-bpf, the verdict is the one without BPF. */
  verdict: ProbeVerdict;
  /** The verdict is something to fix (status exits 1, doctor reports a problem). */
  problem: boolean;
}

const PROBLEMS: ReadonlySet<ProbeVerdict> = new Set(['absent', 'drifted', 'nft-unavailable', 'no-uplink']);

const decision = (action: ProbeAction, verdict: ProbeVerdict): ProbeDecision => ({ action, verdict, problem: PROBLEMS.has(verdict) });

/** Whether probes must be rewritten here: mode on, or auto with IPv6 addresses. */
export const probeRewriteNeeded = (mode: ProbeMode, ipv6: boolean): boolean => mode === 'on' || (mode === 'auto' && ipv6);

export function decide(f: ProbeFacts): ProbeDecision {
  const needed = probeRewriteNeeded(f.mode, f.ipv6);
  if (f.table === 'nft-unavailable') return needed ? decision('fail', 'nft-unavailable') : decision('none', 'not-needed');
  const withoutBpf = decideWithoutBpf(f.table, f.uplink, needed);
  if (f.mode === 'on' || !f.uplink) return withoutBpf;
  if (f.bpf === true) return decision('none', 'handled-by-bpf');
  if (f.bpf === undefined && (withoutBpf.action === 'install' || withoutBpf.action === 'reinstall')) return { ...withoutBpf, action: 'look-for-bpf' };
  return withoutBpf;
}

function decideWithoutBpf(table: Exclude<TableState, 'nft-unavailable'>, uplink: boolean, needed: boolean): ProbeDecision {
  if (table === 'matching') return decision('none', 'ok');
  if (!uplink) {
    if (table === 'absent' && !needed) return decision('none', 'not-needed');
    return decision(needed ? 'fail' : 'none', 'no-uplink'); // a present table cannot be judged without an uplink
  }
  if (table === 'drifted') return decision(needed ? 'reinstall' : 'none', 'drifted');
  return needed ? decision('install', 'absent') : decision('none', 'not-needed');
}

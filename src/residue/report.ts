// The residue report of `ipam-shim residue scan | clean` and doctor's residue check: which addresses to look at
// (ledger and named), what residue each has (or had removed, or still has), orphaned per-pod rules, counts and a
// verdict. The CLI (residue/cli.ts) parses flags and renders it; doctor (residue/doctor.ts) reads it.
import { attachmentName } from '../cni/config.js';
import type { LedgerStore } from '../ledger/store.js';
import type { Run } from '../effects/exec.js';
import { listNeighbours } from '../effects/neigh.js';
import type { Neighbour } from '../net/neighbour.js';
import { localMacs } from '../effects/links.js';
import { addressOf } from '../net/ip.js';
import { cleanResidue, type CleanFailure } from './clean.js';
import {
  findOrphans,
  findResidueOnNode,
  listPreroutingResidue,
  nodeBackends,
  type BackendStatus,
  type ResidueSnapshot,
  type Spared,
} from './find.js';
import type { NodeFacts } from './cleanable.js';
import type { BackendName, BackendSetting } from './backends.js';
import type { ResidueRule } from './parse.js';

// ---------------------------------------------------------------------------------------------------------------
// the report (pure data)

/** One address the command looks at, and why. */
export interface Target {
  ip: string;
  /** `ledger`: the shim handed it out; `named`: given with --ip. Both when both. */
  sources: Array<'ledger' | 'named'>;
  /** Ledger attachments holding it, as `containerID/ifname` (`(intent)` appended for unfinished ADDs). */
  attachments: string[];
}

export interface RuleView {
  kind: ResidueRule['kind'];
  ip: string;
  mac: string;
  text: string;
  /** The ebtables backend holding it (nft, legacy, or the node's unclassified `ebtables`). */
  backend?: BackendName;
}

export interface NeighbourView {
  ip: string;
  dev: string;
  mac?: string;
  state: string[];
}

export interface TargetReport extends Target {
  /** scan / dry run: present now. --apply: what was removed. */
  rules: RuleView[];
  neighbours: NeighbourView[];
  /** --apply only: still present after the removal (listed again). */
  left?: { rules: RuleView[]; neighbours: NeighbourView[] };
}

/** What `ipam-shim residue scan|clean` reports (its --json document): the targets, what was found or removed, counts. */
export interface ResidueCommandReport {
  mode: 'scan' | 'clean';
  /** clean: whether anything was (meant to be) deleted. */
  apply: boolean;
  network: string | null;
  conflist: string | null;
  /** Why ledger IPs were not looked at, when they were not. */
  ledgerNote?: string;
  /** Ledger files that did not parse (their IPs are unknown). */
  corruptLedgerFiles: string[];
  /** false: no ebtables backend could be read (see ebtablesBackends), so no rule was seen (neighbours still were). */
  ebtablesAvailable: boolean;
  /** Each backend: read (with its rule count) or unavailable and why; never "no rules" for one not read. */
  ebtablesBackends: BackendStatus[];
  targets: TargetReport[];
  /** Per-pod-shaped rules for other addresses whose MAC is on no local interface. Never touched. */
  orphans: RuleView[];
  /** clean --apply: deletions that failed. */
  errors: CleanFailure[];
  /** Ledger addresses that are the node's own (an address it holds, a next hop): never looked at as residue. */
  refused?: Array<{ ip: string; attachments: string[]; why: string }>;
  /** Residue-shaped rules and entries for a target that are the node's own (a rule to a local MAC): left alone. */
  spared?: Spared[];
  counts: { rules: number; neighbours: number; ipsWithResidue: number; orphans: number; leftRules: number; leftNeighbours: number; errors: number };
  /** No residue (left) for any target and no failure. Orphans do not count: clean cannot remove them. */
  ok: boolean;
}

const ruleView = (r: ResidueRule): RuleView => ({ kind: r.kind, ip: r.ip, mac: r.mac, text: r.text, ...(r.backend ? { backend: r.backend } : {}) });
const neighView = (n: Neighbour): NeighbourView => ({ ip: n.ip, dev: n.dev, ...(n.mac ? { mac: n.mac } : {}), state: n.state });

/**
 * PURE. Merges ledger addresses (CNI notation allowed: `10.240.0.32/16`) and named addresses into targets,
 * normalised and de-duplicated, in order of first appearance (ledger first).
 */
export function mergeTargets(ledger: Array<{ ip: string; attachment: string }>, named: readonly string[]): Target[] {
  const byIp = new Map<string, Target>();
  const get = (raw: string): Target => {
    const ip = addressOf(raw);
    if (!ip) throw new TypeError(`not an IP address: ${JSON.stringify(raw)}`);
    let t = byIp.get(ip);
    if (!t) byIp.set(ip, (t = { ip, sources: [], attachments: [] }));
    return t;
  };
  for (const l of ledger) {
    const t = get(l.ip);
    if (!t.sources.includes('ledger')) t.sources.push('ledger');
    if (!t.attachments.includes(l.attachment)) t.attachments.push(l.attachment);
  }
  for (const n of named) {
    const t = get(n);
    if (!t.sources.includes('named')) t.sources.push('named');
  }
  return [...byIp.values()];
}

/** PURE. Splits a snapshot of residue per target; orphans exclude rules already reported under a target. */
export function assemble(
  targets: readonly Target[],
  found: ResidueSnapshot,
  orphans: readonly ResidueRule[],
): { targets: TargetReport[]; orphans: RuleView[] } {
  const ips = new Set(targets.map((t) => t.ip));
  return {
    targets: targets.map((t) => ({
      ...t,
      rules: found.rules.filter((r) => r.ip === t.ip).map(ruleView),
      neighbours: found.neighbours.filter((n) => n.ip === t.ip).map(neighView),
    })),
    orphans: orphans.filter((r) => !ips.has(r.ip)).map(ruleView),
  };
}

/** PURE. Counts and the verdict. */
export function summarise(r: Omit<ResidueCommandReport, 'counts' | 'ok'>): ResidueCommandReport {
  const sum = (f: (t: TargetReport) => number) => r.targets.reduce((a, t) => a + f(t), 0);
  const counts = {
    rules: sum((t) => t.rules.length),
    neighbours: sum((t) => t.neighbours.length),
    ipsWithResidue: r.targets.filter(
      (t) => (r.apply && t.left ? t.left.rules.length + t.left.neighbours.length : t.rules.length + t.neighbours.length) > 0,
    ).length,
    orphans: r.orphans.length,
    leftRules: sum((t) => t.left?.rules.length ?? 0),
    leftNeighbours: sum((t) => t.left?.neighbours.length ?? 0),
    errors: r.errors.length,
  };
  const remaining = r.mode === 'clean' && r.apply ? counts.leftRules + counts.leftNeighbours : counts.rules + counts.neighbours;
  return { ...r, counts, ok: remaining === 0 && counts.errors === 0 };
}

// ---------------------------------------------------------------------------------------------------------------
// effects

interface Backends {
  ebtablesAvailable: boolean;
  ebtablesBackends: BackendStatus[];
}

/** One read-only look: ebtables nat PREROUTING (every chosen backend), neighbours and local MACs, concurrently. */
async function snapshotResidue(run: Run, backends: BackendSetting): Promise<Backends & { snapshot: ResidueSnapshot; macs: Set<string> }> {
  const [eb, neighbours, macs] = await Promise.all([
    listPreroutingResidue(run, undefined, nodeBackends(backends)),
    listNeighbours(run),
    localMacs(run),
  ]);
  return { ebtablesAvailable: eb.available, ebtablesBackends: eb.backends, snapshot: { rules: eb.rules, neighbours }, macs };
}

/** Ledger addresses of a network, with the attachments holding them; corrupt files listed separately. */
export async function ledgerTargets(
  ledger: Pick<LedgerStore, 'list'>,
): Promise<{ ips: Array<{ ip: string; attachment: string }>; corrupt: string[] }> {
  const { records, corrupt } = await ledger.list();
  const ips = records.flatMap((r) => r.ips.map((ip) => ({ ip, attachment: `${attachmentName(r)}${r.state === 'intent' ? ' (intent)' : ''}` })));
  return { ips, corrupt };
}

/** scan, or clean's dry run: what is there now for `targets`. `backends`: residue.ebtablesBackends (default auto). */
export async function scanTargets(
  run: Run,
  targets: readonly Target[],
  backends: BackendSetting = 'auto',
  node?: NodeFacts,
): Promise<Backends & { targets: TargetReport[]; orphans: RuleView[]; spared: Spared[] }> {
  const { ebtablesAvailable, ebtablesBackends, snapshot, macs } = await snapshotResidue(run, backends);
  const found = await findResidueOnNode(
    run,
    targets.map((t) => t.ip),
    snapshot,
    node ? { node } : {},
  );
  return { ebtablesAvailable, ebtablesBackends, spared: found.spared, ...assemble(targets, found, findOrphans(snapshot.rules, macs)) };
}

/** clean --apply: remove, keep going past failures, then look again to report what is left. */
export async function cleanTargets(
  run: Run,
  targets: readonly Target[],
  backends: BackendSetting = 'auto',
  node?: NodeFacts,
): Promise<Backends & { targets: TargetReport[]; orphans: RuleView[]; errors: CleanFailure[]; spared: Spared[] }> {
  const ips = targets.map((t) => t.ip);
  const cleaned = ips.length
    ? await cleanResidue(run, ips, { keepGoing: true, backends, ...(node ? { node } : {}) })
    : { removed: { rules: [], neighbours: [] }, errors: [], spared: [] };
  const after = await scanTargets(run, targets, backends, node);
  const removed = assemble(targets, cleaned.removed, []).targets;
  return {
    ebtablesAvailable: after.ebtablesAvailable,
    ebtablesBackends: after.ebtablesBackends,
    targets: removed.map((t, i) => ({ ...t, left: { rules: after.targets[i]!.rules, neighbours: after.targets[i]!.neighbours } })),
    orphans: after.orphans,
    errors: cleaned.errors,
    spared: cleaned.spared,
  };
}

// `ipam-shim residue scan | clean`: azure-vnet residue (ebtables nat PREROUTING per-pod rules, PERMANENT
// neighbour entries) for the addresses the shim handed out (the ledger) and for addresses the operator names.
// scan is read-only; clean is a dry run unless --apply and only ever removes residue for those addresses.
// Per-pod-shaped rules whose MAC is on no local interface ("orphans") are reported, never touched.
import { listPreroutingResidue } from '../effects/ebtables.js';
import type { Run } from '../effects/exec.js';
import { listNeighbours, type Neighbour } from '../effects/neigh.js';
import { cleanResidue, findOrphans, findResidueOnNode, localMacs, type CleanFailure, type ResidueSnapshot } from '../residue/clean.js';
import { type ResidueRule } from '../residue/parse.js';
import { exactIp } from '../net/ip.js';
import { confDirProblem, DEFAULT_CONF_DIR } from '../conflist.js';
import { NETWORK_FLAGS, openNetwork, type NetworkFlags, type OpenNetwork } from './network.js';
import { parseArgv, UsageError, type Command, type CommandOutput } from './command.js';

const USAGE = [
  'ipam-shim residue scan  [--ip IP …] [--conflist PATH | --conf-dir DIR] [--network NAME] [--json]',
  'ipam-shim residue clean [--ip IP …] [--apply] [--conflist PATH | --conf-dir DIR] [--network NAME] [--json]',
  '',
  '  scan    list the residue for every ledger IP and every --ip IP, and orphaned per-pod rules',
  '  clean   remove the residue for those IPs (dry run unless --apply); orphans are never touched',
  '',
  'Without a shim conflist, only the --ip IPs are looked at; a --conf-dir that does not exist is an error (exit 1).',
].join('\n');

// ---------------------------------------------------------------------------------------------------------------
// the report (pure data; the CLI renders it, the doctor check reads it)

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

export interface ResidueReport {
  mode: 'scan' | 'clean';
  /** clean: whether anything was (meant to be) deleted. */
  apply: boolean;
  network: string | null;
  conflist: string | null;
  /** Why ledger IPs were not looked at, when they were not. */
  ledgerNote?: string;
  /** Ledger files that did not parse (their IPs are unknown). */
  corruptLedgerFiles: string[];
  /** false: ebtables or its nat table is absent, so no rule can exist (neighbours were still looked at). */
  ebtablesAvailable: boolean;
  targets: TargetReport[];
  /** Per-pod-shaped rules for other addresses whose MAC is on no local interface. Never touched. */
  orphans: RuleView[];
  /** clean --apply: deletions that failed. */
  errors: CleanFailure[];
  counts: { rules: number; neighbours: number; ipsWithResidue: number; orphans: number; leftRules: number; leftNeighbours: number; errors: number };
  /** No residue (left) for any target and no failure. Orphans do not count: clean cannot remove them. */
  ok: boolean;
}

const ruleView = (r: ResidueRule): RuleView => ({ kind: r.kind, ip: r.ip, mac: r.mac, text: r.text });
const neighView = (n: Neighbour): NeighbourView => ({ ip: n.ip, dev: n.dev, ...(n.mac ? { mac: n.mac } : {}), state: n.state });

/**
 * PURE. Merges ledger addresses (CNI notation allowed: `10.240.0.32/16`) and named addresses into targets,
 * normalised and de-duplicated, in order of first appearance (ledger first).
 */
export function mergeTargets(ledger: Array<{ ip: string; attachment: string }>, named: readonly string[]): Target[] {
  const byIp = new Map<string, Target>();
  const get = (raw: string): Target => {
    const ip = exactIp(raw.split('/')[0] ?? '');
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
export function summarise(r: Omit<ResidueReport, 'counts' | 'ok'>): ResidueReport {
  const sum = (f: (t: TargetReport) => number) => r.targets.reduce((a, t) => a + f(t), 0);
  const counts = {
    rules: sum((t) => t.rules.length),
    neighbours: sum((t) => t.neighbours.length),
    ipsWithResidue: r.targets.filter((t) => (r.apply && t.left ? t.left.rules.length + t.left.neighbours.length : t.rules.length + t.neighbours.length) > 0).length,
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

/** One read-only look: ebtables nat PREROUTING, neighbours and local MACs, concurrently. */
export async function snapshotResidue(run: Run): Promise<{ ebtablesAvailable: boolean; snapshot: ResidueSnapshot; macs: Set<string> }> {
  const [eb, neighbours, macs] = await Promise.all([listPreroutingResidue(run), listNeighbours(run), localMacs(run)]);
  return { ebtablesAvailable: eb.available, snapshot: { rules: eb.rules, neighbours }, macs };
}

/** Ledger addresses of a network, with the attachments holding them; corrupt files listed separately. */
export async function ledgerTargets(net: OpenNetwork): Promise<{ ips: Array<{ ip: string; attachment: string }>; corrupt: string[] }> {
  const { records, corrupt } = await net.ledger.list();
  const ips = records.flatMap((r) => r.ips.map((ip) => ({ ip, attachment: `${r.containerID}/${r.ifname}${r.state === 'intent' ? ' (intent)' : ''}` })));
  return { ips, corrupt };
}

/** scan, or clean's dry run: what is there now for `targets`. */
export async function scanTargets(run: Run, targets: readonly Target[]): Promise<{ ebtablesAvailable: boolean; targets: TargetReport[]; orphans: RuleView[] }> {
  const { ebtablesAvailable, snapshot, macs } = await snapshotResidue(run);
  const found = await findResidueOnNode(
    run,
    targets.map((t) => t.ip),
    snapshot,
  );
  return { ebtablesAvailable, ...assemble(targets, found, findOrphans(snapshot.rules, macs)) };
}

/** clean --apply: remove, keep going past failures, then look again to report what is left. */
export async function cleanTargets(
  run: Run,
  targets: readonly Target[],
): Promise<{ ebtablesAvailable: boolean; targets: TargetReport[]; orphans: RuleView[]; errors: CleanFailure[] }> {
  const ips = targets.map((t) => t.ip);
  const cleaned = ips.length ? await cleanResidue(run, ips, { keepGoing: true }) : { removed: { rules: [], neighbours: [] }, errors: [] };
  const after = await scanTargets(run, targets);
  const removed = assemble(targets, cleaned.removed, []).targets;
  return {
    ebtablesAvailable: after.ebtablesAvailable,
    targets: removed.map((t, i) => ({ ...t, left: { rules: after.targets[i]!.rules, neighbours: after.targets[i]!.neighbours } })),
    orphans: after.orphans,
    errors: cleaned.errors,
  };
}

// ---------------------------------------------------------------------------------------------------------------
// the command

interface Flags extends NetworkFlags {
  ip?: string[] | undefined;
  apply?: boolean | undefined;
}

function parseFlags(argv: string[]): { mode: 'scan' | 'clean'; flags: Flags; named: string[] } {
  const parsed = parseArgv({
    args: argv,
    options: { ...NETWORK_FLAGS, ip: { type: 'string', multiple: true }, apply: { type: 'boolean' } },
    allowPositionals: true,
    strict: true,
  });
  const [mode, ...extra] = parsed.positionals;
  if (mode !== 'scan' && mode !== 'clean') throw new UsageError(mode ? `unknown subcommand "${mode}"` : 'expected "scan" or "clean"');
  if (extra.length) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const flags = parsed.values as Flags;
  if (mode === 'scan' && flags.apply) throw new UsageError('--apply belongs to "clean"');
  const named = (flags.ip ?? []).flatMap((v) => v.split(',')).map((s) => s.trim()).filter(Boolean);
  for (const ip of named) {
    if (!exactIp(ip)) throw new UsageError(`--ip ${ip}: expected a single IPv4 or IPv6 address`);
  }
  return { mode, flags, named };
}

export const residueCommand: Command = {
  name: 'residue',
  summary: 'find (scan) and remove (clean --apply) azure-vnet ebtables rules and neighbour entries for ledger IPs and --ip IPs',
  usage: USAGE,
  exitStatus: '0 no residue (left) for those IPs; 1 residue found / would be removed / left or failed; 2 usage',
  async run(argv, ctx): Promise<CommandOutput> {
    const { mode, flags, named } = parseFlags(argv);
    const apply = mode === 'clean' && !!flags.apply;

    // The ledger says which addresses are the shim's. Without a conflist, only named addresses are looked at —
    // unless the operator pointed at a conflist or network explicitly: then not finding it is the error. A conf
    // dir given explicitly must at least exist (a typo must not look like "no residue").
    const confDirGiven = flags['conf-dir'];
    const dirProblem = confDirGiven === undefined ? undefined : await confDirProblem(confDirGiven);
    if (dirProblem) throw new Error(dirProblem);
    let net: OpenNetwork | undefined;
    let ledgerNote: string | undefined;
    try {
      net = await openNetwork(flags, ctx.run, ctx.env);
    } catch (e) {
      if (flags.conflist || flags.network) throw e;
      ledgerNote = `no ipam-shim conflist in ${flags['conf-dir'] ?? DEFAULT_CONF_DIR}: ledger IPs not looked at (${(e as Error).message})`;
    }
    const ledger = net ? await ledgerTargets(net) : { ips: [], corrupt: [] };
    const targets = mergeTargets(ledger.ips, named);

    const base = {
      mode,
      apply,
      network: net?.conf.name ?? null,
      conflist: net?.shim.path ?? null,
      ...(ledgerNote ? { ledgerNote } : {}),
      corruptLedgerFiles: ledger.corrupt,
    };
    let report: ResidueReport;
    if (apply) {
      const r = await cleanTargets(ctx.run, targets);
      report = summarise({ ...base, ...r });
      net?.log.warn({ removed: report.targets.filter((t) => t.rules.length + t.neighbours.length).map((t) => t.ip), errors: r.errors }, 'residue clean --apply');
    } else {
      report = summarise({ ...base, ...(await scanTargets(ctx.run, targets)), errors: [] });
    }
    return { data: report, text: renderResidue(report), exitCode: report.ok ? 0 : 1 };
  },
};

// ---------------------------------------------------------------------------------------------------------------
// rendering (pure)

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
const neighText = (n: NeighbourView) => `${n.ip} dev ${n.dev}${n.mac ? ` lladdr ${n.mac}` : ''} ${n.state.join(',')}`.trimEnd();

/** The human rendering of a report. */
export function renderResidue(r: ResidueReport): string {
  const lines: string[] = [];
  lines.push(r.network ? `network ${r.network} (${r.conflist})` : 'no ipam-shim network');
  if (r.ledgerNote) lines.push(`note: ${r.ledgerNote}`);
  for (const f of r.corruptLedgerFiles) lines.push(`warning: unreadable ledger record ${f}: its IPs were not looked at`);
  if (!r.ebtablesAvailable) lines.push('ebtables: no bridge nat table (or no ebtables): no rules can exist; neighbour entries were looked at');
  if (r.mode === 'clean' && !r.apply) lines.push('dry run: nothing is changed; add --apply to remove what is listed');
  lines.push('');

  const verb = r.mode === 'scan' ? 'found' : r.apply ? 'removed' : 'would remove';
  if (!r.targets.length) lines.push('no IPs to look at (the ledger is empty and no --ip was given)');
  const width = Math.max(...r.targets.map((t) => t.ip.length), 2);
  for (const t of r.targets) {
    const origin = [t.sources.includes('ledger') ? `ledger ${t.attachments.join(', ')}` : '', t.sources.includes('named') ? '--ip' : ''].filter(Boolean).join('; ');
    const had = t.rules.length + t.neighbours.length;
    const left = t.left ? t.left.rules.length + t.left.neighbours.length : 0;
    const state = had === 0 && left === 0 ? 'clean' : left ? `${had ? `${verb} ${had}, ` : ''}${left} LEFT` : `${verb} ${had}`;
    lines.push(`${t.ip.padEnd(width)}  ${state.padEnd(14)}  (${origin})`);
    for (const x of t.rules) lines.push(`    ${verb.padEnd(12)}  ebtables -t nat PREROUTING ${x.text}`);
    for (const n of t.neighbours) lines.push(`    ${verb.padEnd(12)}  neigh ${neighText(n)}`);
    for (const x of t.left?.rules ?? []) lines.push(`    ${'LEFT'.padEnd(12)}  ebtables -t nat PREROUTING ${x.text}`);
    for (const n of t.left?.neighbours ?? []) lines.push(`    ${'LEFT'.padEnd(12)}  neigh ${neighText(n)}`);
  }
  for (const e of r.errors) lines.push(`FAILED  ${e.target}: ${e.message}`);

  if (r.orphans.length) {
    lines.push('', `orphans: ${plural(r.orphans.length, 'per-pod rule')} whose MAC is on no local interface (reported, never touched; remove with --ip IP --apply once no pod uses the IP):`);
    const ow = Math.max(...r.orphans.map((o) => o.ip.length));
    for (const o of r.orphans) lines.push(`  ${o.ip.padEnd(ow)}  ${o.text}`);
  }

  lines.push('');
  const c = r.counts;
  const total = c.rules + c.neighbours;
  if (r.mode === 'clean' && r.apply) {
    lines.push(
      `removed ${plural(c.rules, 'rule')} and ${plural(c.neighbours, 'neighbour entry', 'neighbour entries')}` +
        (c.leftRules + c.leftNeighbours ? `; ${plural(c.leftRules + c.leftNeighbours, 'entry', 'entries')} LEFT` : '; nothing left') +
        (c.errors ? `; ${plural(c.errors, 'failure')}` : ''),
    );
  } else if (total) {
    lines.push(`${verb} ${plural(c.rules, 'rule')} and ${plural(c.neighbours, 'neighbour entry', 'neighbour entries')} for ${plural(c.ipsWithResidue, 'IP')} of ${r.targets.length}`);
    if (!(r.mode === 'clean' && r.apply)) lines.push('fix: run "ipam-shim residue clean" with the same flags plus --apply');
  } else lines.push(`no residue for ${plural(r.targets.length, 'IP')}`);
  return lines.join('\n') + '\n';
}

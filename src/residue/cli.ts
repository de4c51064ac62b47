// `ipam-shim residue scan | clean`: azure-vnet residue (ebtables nat PREROUTING per-pod rules, PERMANENT
// neighbour entries) for the addresses the shim handed out (the ledger) and for addresses the operator names.
// scan is read-only; clean is a dry run unless --apply and only ever removes residue for those addresses.
// Per-pod-shaped rules whose MAC is on no local interface ("orphans") are reported, never touched.
// The report itself is built in src/residue/report.ts; this file parses the flags and renders it.
import {
  cleanTargets,
  ledgerTargets,
  mergeTargets,
  scanTargets,
  summarise,
  type NeighbourView,
  type ResidueCommandReport,
  type RuleView,
} from './report.js';
import type { BackendSetting } from './backends.js';
import { EbtablesBackends } from '../cni/config.js';
import { formatIssues } from '../cni/errors.js';
import { addressProblem, exactIp } from '../net/ip.js';
import { confDirProblem, DEFAULT_CONF_DIR } from '../conflist.js';
import { NETWORK_FLAG_HELP, NETWORK_FLAGS, openNetwork, type NetworkFlags } from '../contract/network-flags.js';
import type { OpenNetwork } from '../network/open.js';
import { parseArgv, UsageError, type Command, type CommandOutput } from '../contract/command.js';
import { readNodeFacts } from './find.js';
import { refusal } from './cleanable.js';
import { shown } from '../terminal.js';

const USAGE = [
  'ipam-shim residue scan  [--ip IP …] [--ebtables-backend LIST] [--conflist PATH | --conf-dir DIR] [--network NAME] [--json]',
  'ipam-shim residue clean [--ip IP …] [--apply] [--ebtables-backend LIST] [--conflist PATH | --conf-dir DIR] [--network NAME] [--json]',
  '',
  '  scan    list the residue for every ledger IP and every --ip IP, and orphaned per-pod rules',
  '  clean   remove the residue for those IPs (dry run unless --apply); orphans are never touched',
  '',
  'Without a shim conflist, only the --ip IPs are looked at; a --conf-dir that does not exist is an error (exit 3).',
  "The node's own addresses and next hops are never residue: such an --ip is refused (exit 2).",
].join('\n');

// ---------------------------------------------------------------------------------------------------------------
// the command

interface Flags extends NetworkFlags {
  ip?: string[] | undefined;
  apply?: boolean | undefined;
  'ebtables-backend'?: string | undefined;
}

const OPTIONS = {
  ...NETWORK_FLAGS,
  ip: { type: 'string', multiple: true },
  apply: { type: 'boolean' },
  'ebtables-backend': { type: 'string' },
} as const;

/** --ebtables-backend: `auto` or a comma list, validated as the config key is. */
function parseBackendFlag(v: string | undefined): BackendSetting | undefined {
  if (v === undefined) return undefined;
  const value = v.trim() === 'auto' ? 'auto' : v.split(',').map((s) => s.trim());
  const parsed = EbtablesBackends.safeParse(value);
  if (!parsed.success)
    throw new UsageError(`--ebtables-backend ${v}: ${formatIssues(parsed.error.issues)} (expected auto, or a comma list of nft, legacy, ebtables)`);
  return parsed.data;
}

function parseFlags(argv: string[]): { mode: 'scan' | 'clean'; flags: Flags; named: string[]; backends: BackendSetting | undefined } {
  const parsed = parseArgv({
    args: argv,
    options: OPTIONS,
    allowPositionals: true,
    strict: true,
  });
  const [mode, ...extra] = parsed.positionals;
  if (mode !== 'scan' && mode !== 'clean') throw new UsageError(mode ? `unknown subcommand "${mode}"` : 'expected "scan" or "clean"');
  if (extra.length) throw new UsageError(`unexpected argument "${extra[0]}"`);
  const flags = parsed.values as Flags;
  if (mode === 'scan' && flags.apply) throw new UsageError('--apply belongs to "clean"');
  const named = (flags.ip ?? [])
    .flatMap((v) => v.split(','))
    .map((s) => s.trim())
    .filter(Boolean);
  for (const ip of named) {
    if (exactIp(ip)) continue;
    const problem = addressProblem(ip);
    // An IPv4-mapped address is refused as everywhere (src/net/ip.ts), with the IPv4 address to name instead.
    throw new UsageError(`--ip ${ip}: ${problem?.kind === 'mapped' ? problem.message : 'expected a single IPv4 or IPv6 address'}`);
  }
  return { mode, flags, named, backends: parseBackendFlag(flags['ebtables-backend']) };
}

export const residueCommand: Command = {
  name: 'residue',
  summary: 'find (scan) and remove (clean --apply) azure-vnet ebtables rules and neighbour entries for ledger IPs and --ip IPs',
  usage: USAGE,
  options: OPTIONS,
  flagHelp: {
    ...NETWORK_FLAG_HELP,
    ip: { value: 'IP', text: 'also look at this address (repeatable, or comma-separated), e.g. --ip 10.224.1.7 --ip fd00::7' },
    apply: { text: 'clean: remove what it lists (default: a dry run)' },
    'ebtables-backend': {
      value: 'LIST',
      text: "auto (default: every ebtables backend that can hold tables here) or a comma list of nft, legacy, ebtables (the node's own); overrides the conflist's residue.ebtablesBackends, e.g. nft,legacy",
    },
  },
  examples: ['ipam-shim residue scan', 'ipam-shim residue scan --ip 10.224.1.7 --json', 'ipam-shim residue clean --apply'],
  exitStatus:
    "0 no residue (left) for those IPs; 1 residue found / would be removed / left or failed; 2 usage (an --ip the node holds or routes through is refused); 3 could not run (a --conf-dir that does not exist, ebtables or ip missing, the node's addresses unreadable)",
  async run(argv, ctx): Promise<CommandOutput> {
    const { mode, flags, named, backends: flagBackends } = parseFlags(argv);
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
    const ledger = net ? await ledgerTargets(net.ledger) : { ips: [], corrupt: [] };
    const all = mergeTargets(ledger.ips, named);
    // THE rule (src/residue/cleanable.ts): the node's own addresses and next hops are never residue. A named one is
    // refused (exit 2); a ledger one (a delegate that handed out the node's address) is reported, not looked at.
    // The node's addresses that cannot be read fail the command (exit 3): nothing is judged without them.
    const node = all.length ? await readNodeFacts(ctx.run) : undefined;
    const refused = node ? all.flatMap((t) => refusal(t.ip, node) ?? []) : [];
    const namedOwn = refused.find((r) => all.find((t) => t.ip === r.ip)!.sources.includes('named'));
    if (namedOwn) throw new UsageError(`--ip ${namedOwn.ip}: ${namedOwn.why}, never residue: refused`);
    const targets = all.filter((t) => !refused.some((r) => r.ip === t.ip));

    const base = {
      mode,
      apply,
      network: net?.conf.name ?? null,
      conflist: net?.shim.path ?? null,
      ...(ledgerNote ? { ledgerNote } : {}),
      corruptLedgerFiles: ledger.corrupt,
      refused: refused.map((r) => ({ ip: r.ip, attachments: all.find((t) => t.ip === r.ip)!.attachments, why: r.why })),
    };
    // The flag, else the network's setting, else auto.
    const backends = flagBackends ?? net?.conf.settings.residue.ebtablesBackends ?? 'auto';
    let report: ResidueCommandReport;
    if (apply) {
      const r = await cleanTargets(ctx.run, targets, backends, node);
      report = summarise({ ...base, ...r });
      net?.log.warn(
        { removed: report.targets.filter((t) => t.rules.length + t.neighbours.length).map((t) => t.ip), errors: r.errors },
        'residue clean --apply',
      );
    } else {
      report = summarise({ ...base, ...(await scanTargets(ctx.run, targets, backends, node)), errors: [] });
    }
    return { data: report, text: renderResidue(report), exitCode: report.ok ? 0 : 1 };
  },
};

// ---------------------------------------------------------------------------------------------------------------
// rendering (pure)

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
// The program that lists/deletes the rule, so the line reads as the command that shows it.
const ruleCmd = (x: RuleView) =>
  `${x.backend === 'nft' ? 'ebtables-nft' : x.backend === 'legacy' ? 'ebtables-legacy' : 'ebtables'} -t nat PREROUTING ${shown(x.text)}`;
const neighText = (n: NeighbourView) => `${n.ip} dev ${shown(n.dev)}${n.mac ? ` lladdr ${n.mac}` : ''} ${shown(n.state.join(','))}`.trimEnd();

/** The human rendering of a report. */
export function renderResidue(r: ResidueCommandReport): string {
  const lines: string[] = [];
  lines.push(r.network ? `network ${shown(r.network)} (${shown(r.conflist ?? '')})` : 'no ipam-shim network');
  if (r.ledgerNote) lines.push(`note: ${shown(r.ledgerNote)}`);
  for (const f of r.corruptLedgerFiles) lines.push(`warning: unreadable ledger record ${shown(f)}: its IPs were not looked at`);
  for (const b of r.ebtablesBackends) {
    const what = `ebtables ${b.name}${b.program ? ` (${b.program})` : ''}`;
    lines.push(
      b.available
        ? `${what}: read, ${plural(b.rules ?? 0, 'per-pod rule')}`
        : `${what}: ${b.blind ? 'NOT READ' : 'unavailable'}: ${shown(b.reason ?? 'unknown')}`,
    );
  }
  if (!r.ebtablesAvailable)
    lines.push('ebtables: no bridge nat table (or no ebtables) in any backend: no rules seen; neighbour entries were looked at');
  if (r.mode === 'clean' && !r.apply) lines.push('dry run: nothing is changed; add --apply to remove what is listed');
  lines.push('');

  const verb = r.mode === 'scan' ? 'found' : r.apply ? 'removed' : 'would remove';
  if (!r.targets.length) lines.push('no IPs to look at (the ledger is empty and no --ip was given)');
  const width = Math.max(...r.targets.map((t) => t.ip.length), 2);
  for (const t of r.targets) {
    const origin = [t.sources.includes('ledger') ? `ledger ${t.attachments.map(shown).join(', ')}` : '', t.sources.includes('named') ? '--ip' : '']
      .filter(Boolean)
      .join('; ');
    const had = t.rules.length + t.neighbours.length;
    const left = t.left ? t.left.rules.length + t.left.neighbours.length : 0;
    const state = had === 0 && left === 0 ? 'clean' : left ? `${had ? `${verb} ${had}, ` : ''}${left} LEFT` : `${verb} ${had}`;
    lines.push(`${t.ip.padEnd(width)}  ${state.padEnd(14)}  (${origin})`);
    for (const x of t.rules) lines.push(`    ${verb.padEnd(12)}  ${ruleCmd(x)}`);
    for (const n of t.neighbours) lines.push(`    ${verb.padEnd(12)}  neigh ${neighText(n)}`);
    for (const x of t.left?.rules ?? []) lines.push(`    ${'LEFT'.padEnd(12)}  ${ruleCmd(x)}`);
    for (const n of t.left?.neighbours ?? []) lines.push(`    ${'LEFT'.padEnd(12)}  neigh ${neighText(n)}`);
  }
  for (const e of r.errors) lines.push(`FAILED  ${shown(e.target)}: ${shown(e.message)}`);
  for (const x of r.refused ?? []) lines.push(`not looked at: ${x.ip} (ledger ${x.attachments.map(shown).join(', ')}): ${shown(x.why)}`);
  for (const x of r.spared ?? []) lines.push(`left alone (the node's own): ${shown(x.target)}: ${shown(x.why)}`);

  if (r.orphans.length) {
    lines.push(
      '',
      `orphans: ${plural(r.orphans.length, 'per-pod rule')} whose MAC is on no local interface (reported, never touched; remove with --ip IP --apply once no pod uses the IP):`,
    );
    const ow = Math.max(...r.orphans.map((o) => o.ip.length));
    for (const o of r.orphans) lines.push(`  ${o.ip.padEnd(ow)}  ${o.backend && o.backend !== 'ebtables' ? `[${o.backend}] ` : ''}${shown(o.text)}`);
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
    lines.push(
      `${verb} ${plural(c.rules, 'rule')} and ${plural(c.neighbours, 'neighbour entry', 'neighbour entries')} for ${plural(c.ipsWithResidue, 'IP')} of ${r.targets.length}`,
    );
    if (!(r.mode === 'clean' && r.apply)) lines.push('fix: run "ipam-shim residue clean" with the same flags plus --apply');
  } else lines.push(`no residue for ${plural(r.targets.length, 'IP')}`);
  return lines.join('\n') + '\n';
}

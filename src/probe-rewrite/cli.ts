// `ipam-shim probe-rewrite ensure | remove | status`: the IPv6 LB probe rewrite (table ip6 azureSLBProbe) by hand.
// Settings (uplink, probe addresses, mode) come from the shim's conflist when there is one, else the defaults;
// flags win over both. status exits 1 when the rewrite is needed and missing, or drifted.
import { ShimConflistMissing } from '../conflist.js';
import type { Run } from '../effects/exec.js';
import { readDefaultUplink } from '../effects/uplink.js';
import { linkExists } from '../effects/links.js';
import { assessProbeRewrite, describeAssessment, fixFor, fmtCounter, type ProbeAssessment } from './assess.js';
import { ensureProbeRewrite, removeProbeRewrite } from './node.js';
import { PROBE_TABLE, plainIPv6, safeUplinkName } from './ruleset.js';
import { parseArgv, UsageError, type Command, type CommandOutput } from '../contract/command.js';
import { NETWORK_FLAG_HELP, NETWORK_FLAGS, openNetwork, type NetworkFlags } from '../contract/network-flags.js';
import type { OpenNetwork } from '../network/open.js';
import { shown } from '../terminal.js';

const USAGE = [
  'ipam-shim probe-rewrite ensure | remove | status [--uplink DEV] [--probe-source IP] [--probe-global IP]',
  '                        [--conflist PATH | --conf-dir DIR] [--network NAME] [--json]',
  '',
  '  status   present / absent / handled-by-bpf, whether it matches, rule counters (exit 1: needed and missing, or drifted)',
  '  ensure   install or repair the table in one atomic nft transaction',
  `  remove   delete table ip6 ${PROBE_TABLE} (and nothing else)`,
  '',
  '  --uplink defaults to the shim\'s "uplink", else the interface of the default IPv6 route;',
  '  the probe addresses to the shim\'s "probeSource"/"probeGlobal", else Azure\'s.',
].join('\n');

const ACTIONS = ['ensure', 'remove', 'status'] as const;
type Action = (typeof ACTIONS)[number];

interface Flags extends NetworkFlags {
  action: Action;
  uplink?: string | undefined;
  probeSource?: string | undefined;
  probeGlobal?: string | undefined;
}

const OPTIONS = { ...NETWORK_FLAGS, uplink: { type: 'string' }, 'probe-source': { type: 'string' }, 'probe-global': { type: 'string' } } as const;

export const probeRewriteCommand: Command = {
  name: 'probe-rewrite',
  summary: `ensure, remove or inspect the IPv6 load-balancer probe rewrite (nftables table ip6 ${PROBE_TABLE})`,
  usage: USAGE,
  options: OPTIONS,
  flagHelp: {
    ...NETWORK_FLAG_HELP,
    uplink: { value: 'DEV', text: 'the interface probes arrive on (default: the shim\'s "uplink", else the default IPv6 route\'s), e.g. eth0' },
    'probe-source': {
      value: 'IP',
      text: "the probes' link-local source (default: the shim's \"probeSource\", else Azure's), e.g. fe80::1234:5678:9abc",
    },
    'probe-global': {
      value: 'IP',
      text: 'the global address it is rewritten to (default: the shim\'s "probeGlobal", else Azure\'s), e.g. 2603:1062:0:1:fe80:1234:5678:9abc',
    },
  },
  examples: ['ipam-shim probe-rewrite status', 'ipam-shim probe-rewrite ensure --uplink eth0', 'ipam-shim probe-rewrite remove --json'],
  exitStatus:
    'status: 0 fine, 1 needed and missing or drifted; ensure: 0 in place and matching, 1 not; remove: 0; all: 2 usage (an --uplink that is no interface here included), 3 could not run (nft missing, no uplink)',
  async run(argv, ctx): Promise<CommandOutput> {
    const flags = parseFlags(argv);
    // nft matches interface names as strings: status of a device that is not here would judge a rule that never
    // matches, and ensure would install one. An --uplink that is no interface is a usage error, for every action.
    if (flags.uplink !== undefined && !(await linkExists(ctx.run, flags.uplink)))
      throw new UsageError(`--uplink: uplink ${JSON.stringify(flags.uplink)} is no interface here`);
    const net = await settingsSource(flags, ctx.run, ctx.env);
    const input = {
      settings: net?.conf.settings,
      settingsFrom: net?.shim.path ?? null,
      ledger: net?.ledger,
      uplink: flags.uplink,
      probeSource: flags.probeSource,
      probeGlobal: flags.probeGlobal,
    };
    if (flags.action === 'status') {
      const a = await assessProbeRewrite(ctx.run, input);
      return { data: toJson('status', a), text: render('status', a, net?.shim.path), exitCode: a.problem ? 1 : 0 };
    }
    if (flags.action === 'remove') {
      const before = await assessProbeRewrite(ctx.run, input);
      const wasPresent = before.status.available && before.status.tablePresent;
      const removed = await removeProbeRewrite(ctx.run);
      net?.log.info({ wasPresent }, 'probe-rewrite remove (CLI)');
      const a = await assessProbeRewrite(ctx.run, input);
      const note = !removed.available
        ? `nftables not usable (${shown(removed.reason)}): nothing to remove`
        : wasPresent
          ? `removed table ip6 ${PROBE_TABLE}; nothing else was touched`
          : `table ip6 ${PROBE_TABLE} was not there; nothing to remove`;
      return { data: { ...toJson('remove', a), removed: wasPresent }, text: `${note}\n${render('remove', a, net?.shim.path)}`, exitCode: 0 };
    }
    const uplink = flags.uplink ?? net?.conf.settings.uplink ?? (await readDefaultUplink(ctx.run));
    if (!uplink) throw new Error('no uplink: the node has no default route; pass --uplink DEV');
    // A bad "uplink" in the conflist (an --uplink was checked above) is a failure: ensure would install a rule
    // that never matches.
    if (!flags.uplink && !(await linkExists(ctx.run, uplink)))
      throw new Error(
        `uplink ${JSON.stringify(uplink)} is no interface here (from ${net?.conf.settings.uplink ? `"uplink" in ${net.shim.path}` : 'the default route'})`,
      );
    const before = await assessProbeRewrite(ctx.run, { ...input, uplink });
    const ensured = await ensureProbeRewrite(ctx.run, { uplink, probeSource: before.probeSource, probeGlobal: before.probeGlobal });
    if (!ensured.available) throw new Error(`nftables is not usable here: ${ensured.reason}`);
    net?.log.info({ uplink, before: before.verdict }, 'probe-rewrite ensure (CLI)');
    const a = await assessProbeRewrite(ctx.run, { ...input, uplink });
    const notes = [
      before.verdict === 'ok'
        ? `table ip6 ${PROBE_TABLE} was already as expected; reinstalled (counters reset)`
        : `installed table ip6 ${PROBE_TABLE} on ${shown(uplink)}`,
      ...(a.verdict === 'handled-by-bpf'
        ? ['note: a BPF program on the uplink handles probes already; ipv6-hp-bpf deletes this table when it (re)starts']
        : []),
      ...(a.mode === 'off' ? [`note: ipv6ProbeRewrite is off in ${shown(a.settingsFrom ?? '')}: the shim itself will not keep it in place`] : []),
    ];
    const matches = a.status.available && a.status.tablePresent && a.status.matchesExpected;
    return {
      data: { ...toJson('ensure', a), ensured: true },
      text: `${notes.join('\n')}\n${render('ensure', a, net?.shim.path)}`,
      exitCode: matches ? 0 : 1,
    };
  },
};

function parseFlags(argv: string[]): Flags {
  const parsed = parseArgv({
    args: argv,
    options: OPTIONS,
    allowPositionals: true,
    strict: true,
  });
  const { values, positionals } = parsed;
  const [action, ...extra] = positionals;
  if (!action) throw new UsageError('which action: ensure, remove or status?');
  if (!(ACTIONS as readonly string[]).includes(action)) throw new UsageError(`unknown action "${action}" (ensure, remove or status)`);
  if (extra.length) throw new UsageError(`unexpected argument "${extra[0]}"`);
  if (values.uplink !== undefined && !safeUplinkName(values.uplink)) {
    throw new UsageError(`--uplink: not an interface name: ${JSON.stringify(values.uplink)}`);
  }
  for (const key of ['probe-source', 'probe-global'] as const) {
    const v = values[key];
    if (v !== undefined && plainIPv6(v) === undefined) throw new UsageError(`--${key}: not an IPv6 address: ${JSON.stringify(v)}`);
  }
  return {
    action: action as Action,
    conflist: values.conflist,
    'conf-dir': values['conf-dir'],
    network: values.network,
    'cni-path': values['cni-path'],
    uplink: values.uplink,
    probeSource: values['probe-source'],
    probeGlobal: values['probe-global'],
  };
}

/**
 * The shim's network when a conflist is found. Without any network flag a node with no shim conflist is fine
 * (built-in defaults); with one, not finding it is an error.
 */
async function settingsSource(flags: Flags, run: Run, env: NodeJS.ProcessEnv): Promise<OpenNetwork | undefined> {
  const explicit = Boolean(flags.conflist || flags['conf-dir'] || flags.network);
  try {
    return await openNetwork(flags, run, env);
  } catch (e) {
    if (!explicit && e instanceof ShimConflistMissing) return undefined;
    throw e;
  }
}

function toJson(action: Action, a: ProbeAssessment) {
  const s = a.status;
  return {
    action,
    table: `ip6 ${PROBE_TABLE}`,
    state: s.available ? s.state : 'nft-unavailable',
    verdict: a.verdict,
    problem: a.problem,
    uplink: a.uplink,
    tablePresent: s.available ? s.tablePresent : false,
    matchesExpected: s.available ? s.matchesExpected : false,
    counters: s.available ? s.counters : null,
    probeSource: a.probeSource,
    probeGlobal: a.probeGlobal,
    mode: a.mode,
    needed: a.needed,
    ipv6Addresses: a.ipv6Addresses,
    settingsFrom: a.settingsFrom,
    ...(s.available ? {} : { reason: s.reason }),
  };
}

function render(action: Action, a: ProbeAssessment, conflist: string | undefined): string {
  const s = a.status;
  const state = !s.available
    ? `nftables unavailable (${shown(s.reason)})`
    : s.state === 'handled-by-bpf'
      ? `handled by BPF on the uplink${s.tablePresent ? ` (table present too, ${s.matchesExpected ? 'matching' : 'not matching'})` : ''}`
      : s.state === 'present'
        ? `present, ${s.matchesExpected ? 'matches the expected ruleset' : 'DRIFTED from the expected ruleset'}`
        : 'absent';
  const lines = [
    // The uplink's name is the node's, the settings' file name the operator's: each shown on its line, escaped.
    `IPv6 probe rewrite: table ip6 ${PROBE_TABLE}${a.uplink ? ` on uplink ${shown(a.uplink)}` : ' (no uplink found)'}`,
    `  state:     ${state}`,
    `  rewrite:   ${a.probeSource} → ${a.probeGlobal} (in), back (out)`,
  ];
  if (s.available && s.tablePresent)
    lines.push(`  counters:  prerouting ${fmtCounter(s.counters.prerouting)}, postrouting ${fmtCounter(s.counters.postrouting)}`);
  const source = a.settingsFrom ? `from ${shown(a.settingsFrom)}` : 'built-in defaults (no shim conflist found)';
  const addrs = a.ipv6Addresses === null ? '' : `, ${a.ipv6Addresses} IPv6 address(es) in the ledger`;
  lines.push(`  settings:  ipv6ProbeRewrite=${a.mode}, ${source}${addrs}`);
  if (action === 'status') {
    lines.push(`  verdict:   ${a.problem ? 'PROBLEM: ' : ''}${shown(describeAssessment(a))}`);
    const fix = fixFor(a, conflist);
    if (a.problem && fix) lines.push(`  fix:       ${shown(fix)}`);
  }
  return lines.join('\n');
}

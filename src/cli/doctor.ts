// `ipam-shim doctor`: the one command an operator runs on a node. Runs every check, prints a verdict per
// finding with its fix; exit 1 on any problem or warning. Without a shim conflist it still runs every check that
// can look without one (the conflist's own finding says why there is none, the main plugin and the shim on the
// CNI path, the IPv6 probe table, orphaned residue), and says `skipped` for the rest.
import { dirname } from 'node:path';
import { doctorChecks } from '../doctor/index.js';
import { doctorSummary } from '../fix-list/about.js';
import { DEFAULT_CACHE_DIR } from '../gc/from-cache.js';
import { failedCheck, type Finding, type NodeView } from '../contract/doctor-check.js';
import { DEFAULT_CONF_DIR } from '../conflist.js';
import { CniError } from '../cni/errors.js';
import { selectedCniPath, type OpenNetwork } from '../network/open.js';
import { shown } from '../terminal.js';
import { NETWORK_FLAG_HELP, NETWORK_FLAGS, openNetwork } from '../contract/network-flags.js';
import { Exit, parseArgv, type Command } from '../contract/command.js';

const USAGE = 'ipam-shim doctor [--conflist PATH | --conf-dir DIR] [--network NAME] [--cni-path DIRS] [--cache-dir DIR] [--json]';
const DOCTOR_FLAGS = { ...NETWORK_FLAGS, 'cache-dir': { type: 'string', default: DEFAULT_CACHE_DIR } } as const;

export const doctorCommand: Command = {
  name: 'doctor',
  summary: doctorSummary(),
  usage: USAGE,
  options: DOCTOR_FLAGS,
  flagHelp: {
    ...NETWORK_FLAG_HELP,
    'cache-dir': {
      value: 'DIR',
      text: `the runtime's CNI cache, for pods the shim never saw (default ${DEFAULT_CACHE_DIR}), e.g. /host/var/lib/cni`,
    },
  },
  examples: ['ipam-shim doctor', 'ipam-shim doctor --conf-dir /host/etc/cni/net.d --cni-path /host/opt/cni/bin --json'],
  exitStatus: '0 every check is ok or skipped; 1 at least one WARN or PROBLEM (no shim conflist included); 2 usage; 3 could not run',
  async run(argv, ctx) {
    const { values } = parseArgv({ args: argv, options: DOCTOR_FLAGS, strict: true });
    let net: OpenNetwork | undefined;
    let node: NodeView | undefined;
    try {
      net = await openNetwork(values, ctx.run, ctx.env);
    } catch (e) {
      // The network cannot be opened (no conflist holds the shim, or it does not parse): doctor goes on without it.
      if (!(e instanceof CniError)) throw e;
      const cniPath = selectedCniPath({ cniPath: values['cni-path'] }, ctx.env);
      const confDir = values['conf-dir'] ?? (values.conflist ? dirname(values.conflist) : DEFAULT_CONF_DIR);
      node = { confDir, conflist: values.conflist, cniPath, run: ctx.run, why: e };
    }
    const findings: Finding[] = [];
    for (const check of await doctorChecks()) {
      try {
        if (net) findings.push(...(await check.run(net, { cacheDir: values['cache-dir'] })));
        else if (check.withoutNetwork) findings.push(...(await check.withoutNetwork(node!)));
        else findings.push({ check: check.name, verdict: 'skipped', summary: "needs the shim's conflist (see the conflist check)" });
      } catch (e) {
        findings.push(
          net ? failedCheck(check.name, e, net) : { check: check.name, verdict: 'problem', summary: `check failed: ${(e as Error).message}` },
        );
      }
    }
    const bad = findings.filter((f) => f.verdict === 'problem' || f.verdict === 'warn');
    const network = net?.conf.name ?? null;
    const conflist = net?.shim.path ?? null;
    return {
      data: { network, conflist, findings, ok: bad.length === 0 },
      text: render(network, conflist ?? node!.confDir, findings),
      exitCode: bad.length ? Exit.FOUND : Exit.OK,
    };
  },
};

const MARK: Record<Finding['verdict'], string> = { ok: 'ok     ', warn: 'WARN   ', problem: 'PROBLEM', skipped: 'skipped' };

/** The findings as text: a finding's summary and fix are one line each, whatever pod or file name they quote. */
function render(network: string | null, path: string, findings: Finding[]): string {
  const lines = [network ? `network ${shown(network)} (${shown(path)})` : `no shim network (looked in ${shown(path)})`, ''];
  const width = Math.max(5, ...findings.map((f) => f.check.length));
  for (const f of findings) {
    lines.push(`${MARK[f.verdict]}  ${f.check.padEnd(width)}  ${shown(f.summary)}`);
    if (f.fix && f.verdict !== 'ok') lines.push(`${' '.repeat(9 + width)}  fix: ${shown(f.fix)}`);
  }
  const bad = findings.filter((f) => f.verdict === 'problem' || f.verdict === 'warn').length;
  lines.push('', bad ? `${bad} finding(s) need attention` : 'all checks passed');
  return lines.join('\n');
}

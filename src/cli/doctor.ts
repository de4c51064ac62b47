// `ipam-shim doctor`: the one command an operator runs on a node. Runs every check, prints a verdict per
// finding with its fix; exit 1 on any problem or warning.
import { CHECKS } from '../doctor/index.js';
import { DEFAULT_CACHE_DIR } from '../gc/from-cache.js';
import { failedCheck, type Finding } from '../doctor/check.js';
import { NETWORK_FLAGS, openNetwork } from './network.js';
import { parseArgv, type Command } from './command.js';

const USAGE = 'ipam-shim doctor [--conflist PATH | --conf-dir DIR] [--network NAME] [--cni-path DIRS] [--cache-dir /var/lib/cni] [--json]';

export const doctorCommand: Command = {
  name: 'doctor',
  summary: 'check this node: conflist (and whether the runtime uses it), delegate, ledger, residue, pods the shim never saw, agent IPs, reserved-subnet routes, IPv6 probes',
  usage: USAGE,
  exitStatus: '0 every check is ok or skipped; 1 at least one WARN or PROBLEM, or the conflist cannot be read; 2 usage',
  async run(argv, ctx) {
    const { values } = parseArgv({ args: argv, options: { ...NETWORK_FLAGS, 'cache-dir': { type: 'string', default: DEFAULT_CACHE_DIR } }, strict: true });
    const net = await openNetwork(values, ctx.run, ctx.env);
    const findings: Finding[] = [];
    for (const check of CHECKS) {
      try {
        findings.push(...(await check.run(net, { cacheDir: values['cache-dir'] })));
      } catch (e) {
        findings.push(failedCheck(check.name, e, net));
      }
    }
    const bad = findings.filter((f) => f.verdict === 'problem' || f.verdict === 'warn');
    return { data: { network: net.conf.name, conflist: net.shim.path, findings, ok: bad.length === 0 }, text: render(net.conf.name, net.shim.path, findings), exitCode: bad.length ? 1 : 0 };
  },
};

const MARK: Record<Finding['verdict'], string> = { ok: 'ok     ', warn: 'WARN   ', problem: 'PROBLEM', skipped: 'skipped' };

function render(network: string, path: string, findings: Finding[]): string {
  const lines = [`network ${network} (${path})`, ''];
  const width = Math.max(5, ...findings.map((f) => f.check.length));
  for (const f of findings) {
    lines.push(`${MARK[f.verdict]}  ${f.check.padEnd(width)}  ${f.summary}`);
    if (f.fix && f.verdict !== 'ok') lines.push(`${' '.repeat(9 + width)}  fix: ${f.fix}`);
  }
  const bad = findings.filter((f) => f.verdict === 'problem' || f.verdict === 'warn').length;
  lines.push('', bad ? `${bad} finding(s) need attention` : 'all checks passed');
  return lines.join('\n');
}

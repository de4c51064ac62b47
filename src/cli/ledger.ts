// `ipam-shim ledger`: what the shim has recorded on this node, one line per attachment: the pod (from the
// runtime's CNI_ARGS at ADD), its addresses, owner, placement, state and age. Read-only.
import type { LedgerRecord } from '../ledger/record.js';
import { shown } from '../terminal.js';
import { NETWORK_FLAG_HELP, NETWORK_FLAGS, openNetwork } from '../contract/network-flags.js';
import { Exit, parseArgv, type Command } from '../contract/command.js';

const USAGE = 'ipam-shim ledger [--conflist PATH | --conf-dir DIR] [--network NAME] [--cni-path DIRS] [--json]';

/** "3d4h", "2h13m", "5m2s", "42s": the two largest units. */
function age(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const [d, h, m, sec] = [Math.floor(s / 86_400), Math.floor((s % 86_400) / 3_600), Math.floor((s % 3_600) / 60), s % 60];
  return d ? `${d}d${h}h` : h ? `${h}h${m}m` : m ? `${m}m${sec}s` : `${sec}s`;
}

/** A runtime's 64-hex container ID cut to 12 characters, as crictl and docker print it; any other ID (cilium-agent-health) whole. */
const shortId = (id: string): string => (/^[0-9a-f]{16,}$/.test(id) ? `${id.slice(0, 12)}…` : id);

/** The pod a record names (namespace/name, from CNI_ARGS at ADD), as `ledger` and `gc` print it; raw: show it through shown(). */
export const podName = (r: Pick<LedgerRecord, 'pod' | 'owner'>): string =>
  r.pod?.name ? `${r.pod.namespace ?? '?'}/${r.pod.name}` : r.owner === 'agent' ? '(cilium-agent)' : '-';

export const ledgerCommand: Command = {
  name: 'ledger',
  summary: 'list the attachments the shim recorded on this node: pod, addresses, owner, placement, state, age',
  usage: USAGE,
  options: NETWORK_FLAGS,
  flagHelp: NETWORK_FLAG_HELP,
  examples: ['ipam-shim ledger', 'ipam-shim ledger --json | jq -r \'.attachments[] | select(.pod.name == "web-0") | .ips[]\''],
  exitStatus:
    '0 listed; 1 some records cannot be read (listed as unreadable: GC releases nothing meanwhile); 2 usage; 3 could not run (no shim conflist, the ledger directory unsafe)',
  async run(argv, ctx) {
    const { values } = parseArgv({ args: argv, options: NETWORK_FLAGS, strict: true });
    const net = await openNetwork(values, ctx.run, ctx.env);
    const { records, corrupt } = await net.ledger.list();
    const now = Date.now();
    const attachments = records.map((r) => ({
      containerID: r.containerID,
      ifname: r.ifname,
      pod: r.pod ?? null,
      ips: r.ips,
      owner: r.owner,
      placement: r.placement,
      state: r.state,
      createdAt: r.createdAt,
      updatedAt: r.updatedAt,
      ageSeconds: Math.max(0, Math.round((now - Date.parse(r.createdAt)) / 1000)),
    }));
    const head = `network ${shown(net.conf.name)} (${shown(net.shim.path)}): ${records.length} attachment(s) in ${shown(net.ledger.dir)}`;
    // Every cell came from outside (CNI_ARGS, the runtime's container ID, the record file): one line each, escaped.
    const rows = attachments.map((a, i) =>
      [shortId(a.containerID), a.ifname, podName(records[i]!), a.ips.join(',') || '-', a.owner, a.placement, a.state, age(a.ageSeconds)].map(shown),
    );
    const header = ['CONTAINER', 'IFNAME', 'POD', 'ADDRESSES', 'OWNER', 'PLACEMENT', 'STATE', 'AGE'];
    const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => r[c]!.length)));
    const table = [header, ...rows].map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell.padEnd(widths[c]!))).join('  '));
    const text = [
      head,
      ...(rows.length ? ['', ...table] : []),
      ...corrupt.map((p) => `UNREADABLE ${shown(p)} (GC releases nothing while it is there; doctor's state-dir check says why)`),
    ].join('\n');
    return {
      data: { network: net.conf.name, conflist: net.shim.path, dir: net.ledger.dir, attachments, unreadable: corrupt },
      text,
      exitCode: corrupt.length ? Exit.FOUND : Exit.OK,
    };
  },
};

// `ipam-shim agent-ip allocate | release | list`: cilium-agent's own IPs through the delegate (CFP #13).
import { CniError, ErrorCode } from '../cni/errors.js';
import { agentIpOwner } from '../ledger/owner.js';
import { identityOf } from '../ledger/identity.js';
import type { LedgerRecord } from '../ledger/record.js';
import { allocateAgentIp, listAgentIps, releaseAgentIp, validateOwner, type Family } from './allocate.js';
import { NETWORK_FLAG_HELP, NETWORK_FLAGS, openNetwork } from '../contract/network-flags.js';
import { parseArgv, UsageError, type Command } from '../contract/command.js';
import { shown } from '../terminal.js';
import type { Fix } from '../contract/fix.js';

const USAGE = `ipam-shim agent-ip allocate --owner NAME [--family 4|6|dual (default: whatever the delegate hands out)] [--wait SECONDS]
ipam-shim agent-ip release  --owner NAME
ipam-shim agent-ip list
  common: [--conflist PATH | --conf-dir DIR] [--network NAME] [--cni-path DIRS] [--json]`;

const OPTIONS = { ...NETWORK_FLAGS, owner: { type: 'string' }, family: { type: 'string' }, wait: { type: 'string', default: '30' } } as const;

/** The CNI_ARGS a record's delegate calls carry; null when none is known. */
function identityText(r: LedgerRecord): string | null {
  const id = identityOf(r);
  return id.kind === 'unknown' ? null : id.cniArgs;
}

/** The command, over the list of fixes whose cures `allocate` runs (the registry's: src/cli/index.ts hands it). */
export const agentIpCommand = (fixes: readonly Fix[]): Command => ({
  name: 'agent-ip',
  summary: "allocate, release or list cilium-agent's own IPs through the delegated IPAM plugin (never released by GC)",
  usage: USAGE,
  options: OPTIONS,
  flagHelp: {
    ...NETWORK_FLAG_HELP,
    owner: { value: 'NAME', text: 'whose addresses (allocate, release): the container ID is cilium-agent-NAME, e.g. health' },
    family: { value: '4|6|dual', text: 'allocate: insist on this address family (default: whatever the delegate hands out), e.g. dual' },
    wait: { value: 'SECONDS', text: 'allocate: wait this long for the conflist to appear (default 30), e.g. 120' },
  },
  examples: ['ipam-shim agent-ip allocate --owner health --json', 'ipam-shim agent-ip list', 'ipam-shim agent-ip release --owner health'],
  exitStatus:
    '0 done; 1 never (nothing here is a finding); 2 usage (an invalid --owner included); 3 could not run: the delegate or the ledger failed, or allocate refused the address (code 100: inside reservedCIDRs) or could not cure it (102: residue stays), and released it',
  async run(argv, ctx) {
    const parsed = parseArgv({
      args: argv,
      allowPositionals: true,
      strict: true,
      options: OPTIONS,
    });
    const { values, positionals } = parsed;
    const [action, ...extra] = positionals;
    if (!action || !['allocate', 'release', 'list'].includes(action) || extra.length)
      throw new UsageError('expected one of: allocate, release, list');
    if (action !== 'list' && !values.owner) throw new UsageError('--owner is required');
    if (values.owner !== undefined) {
      // The same rule allocate/release apply, checked before anything is opened: a bad name is a usage error.
      try {
        validateOwner(values.owner);
      } catch (e) {
        throw new UsageError(`--owner: ${(e as Error).message}`);
      }
    }
    const family = values.family as Family | undefined;
    if (family !== undefined && !['4', '6', 'dual'].includes(family)) throw new UsageError('--family must be 4, 6 or dual');
    const waitSeconds = Number(values.wait);
    if (!Number.isFinite(waitSeconds) || waitSeconds < 0) throw new UsageError('--wait takes seconds');

    const net = await openNetwork(values, ctx.run, ctx.env, action === 'allocate' ? waitSeconds * 1000 : 0);
    if (action === 'list') {
      const records = await listAgentIps(net.ledger);
      const rows = records.map((r) => ({
        owner: agentIpOwner(r.containerID) ?? null, // null: cilium-agent allocated it itself (cilium-ingress-<node>)
        containerID: r.containerID,
        ips: r.ips,
        state: r.state,
        // The CNI_ARGS its delegate calls carry (src/ledger/identity.ts); null: none known (an older record cilium-agent allocated itself).
        identity: identityText(r),
        // How agent-ip last confirmed the delegate holds it: check, add, none (unverified); null: not since allocated.
        verified: r.verified?.by ?? null,
        updatedAt: r.updatedAt,
        note: r.note,
      }));
      const text = rows.length
        ? [
            'OWNER\tIPS\tSTATE\tVERIFIED\tIDENTITY\tUPDATED',
            ...rows.map((r) =>
              [
                r.owner ?? `(${r.containerID})`,
                r.ips.join(',') || '-',
                r.state,
                r.verified === 'none' ? 'UNVERIFIED' : (r.verified ?? '-'),
                r.identity === null ? '(unknown)' : r.identity === '' ? "'' (older shim)" : r.identity,
                r.updatedAt,
              ]
                .map(shown)
                .join('\t'),
            ),
          ].join('\n')
        : `no agent IPs in network ${shown(net.conf.name)}`;
      return { data: { network: net.conf.name, agentIPs: rows }, text, exitCode: 0 };
    }
    if (!net.delegate) {
      throw new CniError(
        ErrorCode.InvalidNetworkConfig,
        `the shim's entry in ${net.shim.path} has no "delegate": agent IPs need the IPAM plugin to allocate from`,
      );
    }
    const deps = { conf: net.conf, ledger: net.ledger, delegate: net.delegate, run: net.run, log: net.log, fixes };
    if (action === 'release') {
      const out = await releaseAgentIp(deps, values.owner!);
      return {
        data: out,
        text: out.released.length
          ? `released ${out.released.join(', ')}`
          : `nothing recorded for owner ${shown(out.owner)}; delegate DEL sent anyway`,
        exitCode: 0,
      };
    }
    const out = await allocateAgentIp(deps, values.owner!, family);
    const text = `${out.ips.join(' ')}\n${out.action}${out.note ? `: ${shown(out.note)}` : ''} (container ID ${shown(out.containerID)}, network ${shown(out.network)})`;
    return { data: out, text, exitCode: 0 };
  },
});

// A node with the shim chained the way cilium's conflist has it, and the argv of `ipam-shim agent-ip` run inside that
// node's netns: what the agent-ip and GC e2e files share. In cilium-cni's place: the ptp-1.1 fixture, or the
// cilium-cni stand-in (./cilium.ts) of the newer line, the one that takes this 1.1.0 list.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SHIM } from './cni.js';
import type { Scratch } from '../net/scratch-net.js';
import { shimKeys } from './conf.js';
import { ciliumCni } from './cilium.js';

/** host-local's one range (subnet, first and last address handed out). */
export interface HostLocalRange {
  subnet: string;
  rangeStart: string;
  rangeEnd: string;
}

/**
 * A 1.1.0 list: `main` (default the ptp-1.1 fixture; 'cilium-cni' needs ciliumCniDir('newer') on the CNI path, the
 * 1.9 host-local, which gets cilium-cni's 1.1.0 stdin as is, and a cilium-agent stand-in's env()), then the shim
 * chained with host-local over `range` as its delegate (no residue cleanup: there are no azure-vnet rules here),
 * written to <dir>/net.d/10-cilium.conflist.
 */
export async function writeChainedList(
  s: Pick<Scratch, 'dir' | 'dataDir' | 'stateDir' | 'logFile'>,
  network: string,
  range: HostLocalRange,
  main: 'ptp-1.1' | 'cilium-cni' = 'ptp-1.1',
) {
  const ipam = { type: 'host-local', dataDir: s.dataDir, ranges: [[range]] };
  const first = main === 'cilium-cni' ? ciliumCni(ipam) : { type: 'ptp-1.1', ipMasq: false, ipam };
  const confList = {
    cniVersion: '1.1.0',
    name: network,
    plugins: [first, shimKeys({ dirs: s, keys: { residue: { ebtables: false, neigh: false } }, delegate: ipam })],
  };
  await mkdir(join(s.dir, 'net.d'));
  const conflistPath = join(s.dir, 'net.d', '10-cilium.conflist');
  await writeFile(conflistPath, JSON.stringify(confList, null, 2));
  return { confList, conflistPath };
}

/** `ip` arguments running `ipam-shim agent-ip <action> --owner … --conflist … --cni-path … --json [extra]` in `node`. */
export function agentIpArgv(o: { node: string; action: string; owner: string; conflist: string; cniPath: string; extra?: string[] }): string[] {
  return [
    'netns',
    'exec',
    o.node,
    SHIM,
    'agent-ip',
    o.action,
    '--owner',
    o.owner,
    '--conflist',
    o.conflist,
    '--cni-path',
    o.cniPath,
    '--json',
    ...(o.extra ?? []),
  ];
}

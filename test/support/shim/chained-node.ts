// A node with the shim chained the way cilium's conflist has it (ptp standing for cilium-cni), and the argv of
// `ipam-shim agent-ip` run inside that node's netns: what the agent-ip and GC e2e files share.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SHIM } from './cni.js';
import type { Scratch } from '../net/scratch-net.js';
import { shimKeys } from './conf.js';

/** host-local's one range (subnet, first and last address handed out). */
export interface HostLocalRange {
  subnet: string;
  rangeStart: string;
  rangeEnd: string;
}

/**
 * A 1.1.0 list: ptp (the 1.1.0 build), then the shim chained with host-local over `range` as its delegate (no
 * residue cleanup: there are no azure-vnet rules here), written to <dir>/net.d/10-cilium.conflist.
 */
export async function writeChainedList(s: Pick<Scratch, 'dir' | 'dataDir' | 'stateDir' | 'logFile'>, network: string, range: HostLocalRange) {
  const ipam = { type: 'host-local', dataDir: s.dataDir, ranges: [[range]] };
  const confList = {
    cniVersion: '1.1.0',
    name: network,
    plugins: [{ type: 'ptp-1.1', ipMasq: false, ipam }, shimKeys({ dirs: s, keys: { residue: { ebtables: false, neigh: false } }, delegate: ipam })],
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

// A node with the shim chained the way cilium's conflist has it (the cilium-cni stand-in of the newer line, since
// the list is 1.1.0: test/support/shim/cilium.ts), and the argv of `ipam-shim agent-ip` run inside that node's
// netns: what the agent-ip and GC e2e files share.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { SHIM } from './cni.js';
import type { Scratch } from '../net/scratch-net.js';
import { shimKeys } from './conf.js';
import { ciliumCni, ciliumCniDir } from './cilium.js';
import { PLUGINS_110 } from '../runtimes/runtimes.js';
import { FIXTURE_BIN } from '../paths.js';

/** host-local's one range (subnet, first and last address handed out). */
export interface HostLocalRange {
  subnet: string;
  rangeStart: string;
  rangeEnd: string;
}

/**
 * CNI_PATH for that list: the newer cilium-cni stand-in, the shim's bin dir, the fixtures, then the 1.9 plugins
 * (cilium-cni hands its delegate its own 1.1.0 stdin: Debian's host-local 1.1.1 would refuse it).
 */
export function chainedCniPath(shimBin: string): string[] {
  return [ciliumCniDir('newer'), shimBin, FIXTURE_BIN, PLUGINS_110];
}

/**
 * A 1.1.0 list: cilium-cni (the newer stand-in: run a cilium-agent stand-in beside it), then the shim chained with host-local over `range` as its delegate (no
 * residue cleanup: there are no azure-vnet rules here), written to <dir>/net.d/10-cilium.conflist.
 */
export async function writeChainedList(s: Pick<Scratch, 'dir' | 'dataDir' | 'stateDir' | 'logFile'>, network: string, range: HostLocalRange) {
  const ipam = { type: 'host-local', dataDir: s.dataDir, ranges: [[range]] };
  const confList = {
    cniVersion: '1.1.0',
    name: network,
    plugins: [ciliumCni(ipam), shimKeys({ dirs: s, keys: { residue: { ebtables: false, neigh: false } }, delegate: ipam })],
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

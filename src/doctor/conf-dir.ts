// What doctor sees in a conf dir when no conflist holds the shim: every network config the runtime's reader
// accepts (src/conflist.ts readNetworkConfig), the files it refuses and why, and the one holding cilium-cni (the
// conflist the shim is chained into). One scan, so the conflist and main-plugin checks name the same file.
import { holdsShim } from '../cni/config.js';
import { CniError } from '../cni/errors.js';
import { ANCHOR_TYPE, conflistFiles, type NetworkConfigFile, readNetworkConfig } from '../conflist.js';
import { typeOf } from './ipam-config.js';

export interface ConfDirScan {
  /** The configs that parse, in the order the runtime reads them. */
  configs: NetworkConfigFile[];
  /** The files that do not (one of them may be cilium's: "no cilium-cni conflist" names them). */
  unreadable: { path: string; why: string }[];
}

export async function scanConfDir(dir: string): Promise<ConfDirScan> {
  const out: ConfDirScan = { configs: [], unreadable: [] };
  for (const path of await conflistFiles(dir)) {
    try {
      out.configs.push(readNetworkConfig(path));
    } catch (e) {
      out.unreadable.push({ path, why: e instanceof CniError && e.details ? e.details : (e as Error).message });
    }
  }
  return out;
}

/** The first config that runs cilium-cni: where `ipam-shim install` (and the agent) chain the shim. */
export const ciliumConfig = (scan: ConfDirScan): NetworkConfigFile | undefined =>
  scan.configs.find((c) => c.list.plugins.some((p) => typeOf(p) === ANCHOR_TYPE));

/** Whether some config that parses holds the shim (then "no shim conflist" has another cause: --network, its settings). */
export const anyShim = (scan: ConfDirScan): boolean => scan.configs.some((c) => c.list.plugins.some(holdsShim));

/** A config as a line: its path and its plugins in order. */
export const describeConfig = (c: NetworkConfigFile): string => `${c.path} (${c.list.plugins.map((p) => typeOf(p) ?? '?').join(' → ')})`;

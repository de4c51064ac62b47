// Reading the node's conflists: find the one that holds the shim (chained or in an IPAM slot) and turn the
// shim's part of it into the NetConf the verbs use, so operator commands decide exactly as the plugin does.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CniError, ErrorCode } from './cni/errors.js';
import { parseNetConf, PLUGIN_TYPE, type NetConf } from './cni/config.js';
import { compareVersions, isSupported } from './cni/versions.js';

export const DEFAULT_CONF_DIR = '/etc/cni/net.d';

export interface ShimConflist {
  path: string;
  list: Record<string, unknown>;
  /** Index of the plugin entry that holds the shim. */
  index: number;
  conf: NetConf;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export function holdsShim(entry: unknown): boolean {
  return isObject(entry) && (entry.type === PLUGIN_TYPE || (isObject(entry.ipam) && entry.ipam.type === PLUGIN_TYPE));
}

/** The version a runtime would pick: the highest of cniVersion ∪ cniVersions that we speak. */
export function listVersion(list: Record<string, unknown>): string {
  const all = [list.cniVersion, ...(Array.isArray(list.cniVersions) ? list.cniVersions : [])].filter((v): v is string => typeof v === 'string' && isSupported(v));
  const best = all.sort(compareVersions).at(-1);
  if (!best) throw new CniError(ErrorCode.IncompatibleVersion, `conflist versions ${JSON.stringify(all)} are not supported`);
  return best;
}

/** Parses one conflist file and the shim's entry in it; undefined when the shim is not in it. */
export async function readShimConflist(path: string): Promise<ShimConflist | undefined> {
  let list: unknown;
  try {
    list = JSON.parse(await readFile(path, 'utf8'));
  } catch (e) {
    throw new CniError(ErrorCode.DecodingFailure, `cannot read conflist ${path}`, { details: (e as Error).message });
  }
  if (!isObject(list) || !Array.isArray(list.plugins)) return undefined;
  const index = list.plugins.findIndex(holdsShim);
  if (index < 0) return undefined;
  const entry = list.plugins[index] as Record<string, unknown>;
  const conf = parseNetConf({ ...entry, name: list.name, cniVersion: listVersion(list) });
  return { path, list, index, conf };
}

/** Conflist files in a directory, in the order runtimes read them (lexical). */
export async function conflistFiles(dir: string): Promise<string[]> {
  const names = await readdir(dir).catch(() => [] as string[]);
  return names.filter((n) => /\.(conflist|conf|json)$/.test(n)).sort().map((n) => join(dir, n));
}

/** The first conflist that holds the shim (optionally for `network`). */
export async function findShimConflist(dir: string, network?: string): Promise<ShimConflist | undefined> {
  for (const path of await conflistFiles(dir)) {
    const found = await readShimConflist(path).catch(() => undefined);
    if (found && (!network || found.conf.name === network)) return found;
  }
  return undefined;
}

/**
 * Waits up to `waitMs` for the shim's conflist: cilium-agent may start before its conflist is written.
 * An explicit path must exist and hold the shim.
 */
export async function loadShimConflist(o: { conflist?: string; confDir?: string; network?: string; waitMs?: number }): Promise<ShimConflist> {
  const deadline = Date.now() + (o.waitMs ?? 0);
  for (;;) {
    const found = o.conflist
      ? await readShimConflist(o.conflist).catch((e) => (e instanceof CniError && /cannot read/.test(e.msg) && Date.now() < deadline ? undefined : Promise.reject(e)))
      : await findShimConflist(o.confDir ?? DEFAULT_CONF_DIR, o.network);
    if (found) return found;
    if (Date.now() >= deadline) {
      const where = o.conflist ?? `${o.confDir ?? DEFAULT_CONF_DIR}${o.network ? ` (network ${o.network})` : ''}`;
      throw new CniError(ErrorCode.InvalidNetworkConfig, `no conflist with ipam-shim found in ${where}`);
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

// Reading the node's conflists: find the one that holds the shim (chained or in an IPAM slot) and turn the
// shim's part of it into the NetConf the verbs use, so operator commands decide exactly as the plugin does.
// Synchronous reads of small local files: no thread-pool round trips, and no node:fs/promises loaded into the
// plugin's startup snapshot (the verbs reach this module through network/open.ts).
import { type Dirent, readdirSync, readFileSync, statSync } from 'node:fs';
import { extname, join } from 'node:path';
import { CniError, ErrorCode } from './cni/errors.js';
import { isObject } from './cni/json.js';
import { holdsShim, parseNetConf, type NetConf } from './cni/config.js';
import { compareVersions, isSupported } from './cni/versions.js';

export const DEFAULT_CONF_DIR = '/etc/cni/net.d';

/** The main plugin the shim chains after (install puts it there; doctor and STATUS look for it): Cilium's. */
export const ANCHOR_TYPE = 'cilium-cni';

/**
 * THE rule for which plugin of a list allocates the addresses the chained shim (at `shimIndex`) sees: the anchor
 * (cilium-cni) when listed, else the plugin right before the shim; undefined when there is none. Doctor mirrors its
 * IPAM config; install (which puts the shim right after the anchor) copies it into the entry's `delegate`.
 */
export function allocatorOf(plugins: readonly unknown[], shimIndex: number): Record<string, unknown> | undefined {
  const anchor = plugins.find((p) => isObject(p) && p.type === ANCHOR_TYPE);
  if (anchor) return anchor as Record<string, unknown>;
  const prev = plugins[shimIndex - 1];
  return isObject(prev) ? prev : undefined;
}

/** An IPAM config of the shim's conflist that hands out the network's addresses, and where it was found. */
export interface IpamSource {
  /** e.g. `delegate`, `plugins[0].ipam`. */
  where: string;
  ipam: unknown;
}

/**
 * THE rule for which IPAM configs hand out the network's addresses (its pod ranges: the residue guard, doctor's
 * reserved-ranges look): the shim's `delegate`, and chained, the `ipam` of the plugin that allocates for it
 * (allocatorOf), each once. No other plugin's `ipam`: a second interface's plugin hands out another network's.
 */
export function podIpamSources(net: { conf: NetConf; shim: Pick<ShimConflist, 'list' | 'index'> }): IpamSource[] {
  const out: IpamSource[] = [];
  if (net.conf.settings.delegate) out.push({ where: 'delegate', ipam: net.conf.settings.delegate });
  if (net.conf.placement !== 'chained') return out;
  const plugins = Array.isArray(net.shim.list.plugins) ? (net.shim.list.plugins as unknown[]) : [];
  const alloc = allocatorOf(plugins, net.shim.index);
  const ipam = alloc?.ipam;
  if (isObject(ipam) && !out.some((o) => JSON.stringify(o.ipam) === JSON.stringify(ipam)))
    out.push({ where: `plugins[${plugins.indexOf(alloc)}].ipam`, ipam });
  return out;
}

export interface ShimConflist {
  path: string;
  list: Record<string, unknown>;
  /** Index of the plugin entry that holds the shim. */
  index: number;
  conf: NetConf;
}

/** The version a runtime would pick: the highest of cniVersion ∪ cniVersions that we speak. */
export function listVersion(list: Record<string, unknown>): string {
  const all = [list.cniVersion, ...(Array.isArray(list.cniVersions) ? list.cniVersions : [])].filter(
    (v): v is string => typeof v === 'string' && isSupported(v),
  );
  const best = all.sort(compareVersions).at(-1);
  if (!best) throw new CniError(ErrorCode.IncompatibleVersion, `conflist versions ${JSON.stringify(all)} are not supported`);
  return best;
}

/** A conflist file that cannot be read or parsed (code 6). Its own kind: a caller waiting for the file tests for it. */
class ConflistUnreadable extends CniError {}
/** No conflist holds the shim (code 7). Its own kind: a caller that can go on without one tests for it. */
export class ShimConflistMissing extends CniError {}

/** One network config file as a runtime reads it: a `.conflist`, or a single-plugin `.conf`/`.json` as a list of one. */
export interface NetworkConfigFile {
  path: string;
  /** The file's bytes (install edits them in place). */
  text: string;
  /** The list the runtime runs: the file itself, or for a single-plugin file `{cniVersion, name, plugins: [it]}`. */
  list: Record<string, unknown> & { plugins: unknown[] };
  /** A single-plugin `.conf`/`.json` file (nothing can be chained into it). */
  single: boolean;
}

/** libcni's single-plugin extensions; every other name (`.conflist`, an explicit path) is read as a list. */
const isSingleConf = (path: string): boolean => ['.conf', '.json'].includes(extname(path));

/**
 * THE reader of a network config file, as containerd's go-cni and CRI-O read the conf dir through libcni: a
 * `.conflist` must hold a non-empty `plugins` list of objects with a `type` (libcni: "no plugins in list",
 * "missing 'type'"); a `.conf`/`.json` is one plugin config and must have a `type` (go-cni: "network type not
 * found": a conflist saved as `.conf` is refused, not read as a list). Every reader of the conf dir (the plugin's
 * CLI and agent, doctor, install) goes through it, so none calls a file usable that the runtime refuses.
 * Throws ConflistUnreadable (code 6) with the reason in `details`.
 */
export function readNetworkConfig(path: string): NetworkConfigFile {
  const refuse = (why: string) => new ConflistUnreadable(ErrorCode.DecodingFailure, `cannot read conflist ${path}`, { details: why });
  let text: string;
  let v: unknown;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw refuse((e as Error).message);
  }
  try {
    v = JSON.parse(text);
  } catch (e) {
    throw refuse(`not valid JSON: ${(e as Error).message}`);
  }
  if (!isObject(v)) throw refuse('not a JSON object');
  const typed = (p: unknown) => isObject(p) && typeof p.type === 'string' && p.type !== '';
  if (isSingleConf(path)) {
    if (!typed(v))
      throw refuse(
        `no "type": not a single-plugin network config${Array.isArray(v.plugins) ? ' (a list of plugins belongs in a .conflist file)' : ''}`,
      );
    return { path, text, list: { cniVersion: v.cniVersion, name: v.name, plugins: [v] }, single: true };
  }
  if (!(Array.isArray(v.plugins) && v.plugins.length && v.plugins.every(typed)))
    throw refuse('"plugins" must be a non-empty list of objects with a "type"');
  return { path, text, list: v as NetworkConfigFile['list'], single: false };
}

/** Parses one network config file and the shim's entry in it; undefined when the shim is not in it. */
export async function readShimConflist(path: string): Promise<ShimConflist | undefined> {
  const { list } = readNetworkConfig(path);
  const index = list.plugins.findIndex(holdsShim);
  if (index < 0) return undefined;
  const entry = list.plugins[index] as Record<string, unknown>;
  const conf = parseNetConf({ ...entry, name: list.name, cniVersion: listVersion(list) });
  return { path, list, index, conf };
}

/**
 * The network config files of a conf dir, in the order runtimes read them: libcni's ConfFiles (entries named
 * `*.conflist`, `*.conf`, `*.json` that are not directories: `05-cilium.conflist.cilium_bak`, the name Cilium
 * gives the configs it disables, is none) in lexical order. An unreadable or missing dir gives [] (confDirProblem says why).
 */
export async function conflistFiles(dir: string): Promise<string[]> {
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    entries = [];
  }
  return entries
    .filter((e) => !e.isDirectory() && /\.(conflist|conf|json)$/.test(e.name))
    .map((e) => e.name)
    .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))) // Go's sort.Strings: byte order
    .map((n) => join(dir, n));
}

/** A conflist that could not be read, or whose shim entry the plugin would refuse, and why. */
interface ConflistFailure {
  path: string;
  error: string;
}

/**
 * The first conflist that holds the shim (optionally for `network`), and the files passed over because they
 * could not be read: when none is found, those are the likely reason, and the operator needs their names.
 */
async function findShimConflist(dir: string, network?: string): Promise<{ found?: ShimConflist; failures: ConflistFailure[] }> {
  const failures: ConflistFailure[] = [];
  for (const path of await conflistFiles(dir)) {
    try {
      const found = await readShimConflist(path);
      if (found && (!network || found.conf.name === network)) return { found, failures };
    } catch (e) {
      const msg = e instanceof CniError ? e.msg.replace(` ${path}`, '') : (e as Error).message;
      failures.push({ path, error: e instanceof CniError && e.details ? `${msg}: ${e.details}` : msg });
    }
  }
  return { failures };
}

/** Why a conf dir holds nothing to look at, or undefined when it is a readable directory. */
export async function confDirProblem(dir: string): Promise<string | undefined> {
  try {
    if (!statSync(dir).isDirectory()) return `${dir} is not a directory`;
    readdirSync(dir);
    return undefined;
  } catch (e) {
    const code = (e as { code?: string }).code;
    return code === 'ENOENT' ? `conf dir ${dir} does not exist` : `conf dir ${dir} cannot be read: ${(e as Error).message}`;
  }
}

/**
 * Waits up to `waitMs` for the shim's conflist: cilium-agent may start before its conflist is written.
 * An explicit path must exist and hold the shim.
 */
export async function loadShimConflist(o: { conflist?: string; confDir?: string; network?: string; waitMs?: number }): Promise<ShimConflist> {
  const deadline = Date.now() + (o.waitMs ?? 0);
  const dir = o.confDir ?? DEFAULT_CONF_DIR;
  for (;;) {
    let failures: ConflistFailure[] = [];
    let found: ShimConflist | undefined;
    if (o.conflist) {
      found = await readShimConflist(o.conflist).catch((e) =>
        e instanceof ConflistUnreadable && Date.now() < deadline ? undefined : Promise.reject(e),
      );
    } else {
      ({ found, failures } = await findShimConflist(dir, o.network));
    }
    if (found) return found;
    if (Date.now() >= deadline) {
      const where = o.conflist ?? `${dir}${o.network ? ` (network ${o.network})` : ''}`;
      const dirProblem = o.conflist ? undefined : await confDirProblem(dir);
      // Name what could not be read: a conflist with a `//` comment or a BOM is the usual reason nothing is found.
      const details = [dirProblem, ...failures.map((f) => `${f.path}: ${f.error}`)].filter(Boolean).join('; ');
      throw new ShimConflistMissing(ErrorCode.InvalidNetworkConfig, `no conflist with ipam-shim found in ${where}`, details ? { details } : {});
    }
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Whether pods get the shim now: its entry is in the network config the runtime uses, or why not. */
export type EntryInUse = { inUse: true; path: string } | { inUse: false; path?: string; reason: string };

/**
 * The fact readiness, doctor and the agent's metric share: the shim's entry is in the network config the runtime
 * uses now. That is the lexically first config file in the conf dir (libcni's ConfFiles order; containerd's go-cni
 * and CRI-O load that one first and stop at a file they cannot parse), or, given `conflist`, that file (an agent
 * with installing disabled verifies the list it was pointed at). Reads a few small files, synchronously.
 */
export async function shimEntryInUse(where: { conflist: string } | { confDir: string }): Promise<EntryInUse> {
  let path: string;
  if ('conflist' in where) path = where.conflist;
  else {
    const problem = await confDirProblem(where.confDir);
    if (problem) return { inUse: false, reason: `${problem}: the runtime has no network config` };
    const first = (await conflistFiles(where.confDir))[0];
    if (!first)
      return { inUse: false, reason: `no network config in ${where.confDir} yet: the runtime has none (cilium-agent writes it once it is up)` };
    path = first;
  }
  try {
    if (await readShimConflist(path)) return { inUse: true, path };
    return { inUse: false, path, reason: `${path}, the network config the runtime uses, holds no ipam-shim entry: pods start without the shim` };
  } catch (e) {
    const why = e instanceof CniError ? `${e.msg}${e.details ? `: ${e.details}` : ''}` : (e as Error).message;
    return { inUse: false, path, reason: `${path}, the network config the runtime uses, cannot be used: ${why}` };
  }
}

// Putting the shim on a node: the executable into the CNI bin dir (temp file in the same directory, fsync,
// rename: a runtime never finds a half-written binary, and a running copy keeps its old inode), and its
// chained entry into the conflist that holds cilium-cni (text splice, atomic replace). `watchInstall` keeps
// both in place while cilium-agent rewrites its conflist.
import { constants, createReadStream, watch, type FSWatcher } from 'node:fs';
import { chmod, copyFile, lstat, mkdir, open, readdir, readFile, realpath, rename, stat, unlink } from 'node:fs/promises';
import { createHash, randomBytes } from 'node:crypto';
import { basename, dirname, join } from 'node:path';
import { isSea } from 'node:sea';
import { parseShimSettings, PLUGIN_TYPE, type ShimSettings } from '../cni/config.js';
import { CniError, ErrorCode } from '../cni/errors.js';
import { isObject } from '../cni/json.js';
import { ABOUT } from '../cni/skel.js';
import { run } from '../effects/exec.js';
import { parseCidrs } from '../net/cidr.js';
import { checkProbeSettings } from '../effects/probe-rewrite.js';
import { conflistFiles, holdsShim } from '../conflist.js';
import { isErrno, syncDir, writeFileAtomic } from '../effects/fs-atomic.js';
import type { Logger } from '../log.js';
import { ConflistEditError, DEFAULT_ANCHOR, inspectConflist, removeShimEntry, upsertShimEntry, type ConflistShape, type UpsertAction } from './conflist-edit.js';

export const BINARY_NAME = PLUGIN_TYPE;
const STALE_TEMP_MS = 10 * 60_000;

/** The executable to install by default: the single executable itself, or the bundled script under node. */
export function defaultSource(): string {
  if (isSea()) return process.execPath;
  const script = process.argv[1];
  if (!script || /\.[cm]?ts$/.test(script)) throw new Error('running from sources: pass --source (e.g. dist/ipam-shim)');
  return script;
}

async function sha256(path: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(path)) h.update(chunk as Buffer);
  return h.digest('hex');
}

// ---------------------------------------------------------------------------------------------------------------
// the shim's settings

/**
 * The shim's keys checked as the plugin checks them: its config schema (unknown key → 2, bad value → 7), the
 * reservedCIDRs list every ADD parses, and the probe-rewrite addresses and uplink name every IPv6 ADD checks
 * (7). A config that passes here is one ADD accepts.
 */
export function validateShimKeys(keys: Record<string, unknown>): ShimSettings {
  const settings = parseShimSettings(keys, '');
  try {
    parseCidrs(settings.reservedCIDRs);
  } catch (e) {
    throw new CniError(ErrorCode.InvalidNetworkConfig, 'invalid reservedCIDRs', { details: (e as Error).message });
  }
  const { uplink, probeSource, probeGlobal } = settings;
  checkProbeSettings({ ...(uplink ? { uplink } : {}), ...(probeSource ? { probeSource } : {}), ...(probeGlobal ? { probeGlobal } : {}) });
  return settings;
}

// ---------------------------------------------------------------------------------------------------------------
// the executable

/** What an ipam-shim executable prints when run with neither CNI_COMMAND nor arguments (its about line). */
const ABOUT_PREFIX = ABOUT.slice(0, ABOUT.indexOf(':'));

/**
 * Refuses a source that is not an ipam-shim executable (`/bin/true`, a truncated download): it must answer
 * with the about line, as the installed copy will when a runtime or an operator runs it.
 */
export async function checkSource(source: string): Promise<void> {
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('CNI_')));
  const r = await run(source, [], { env, extendEnv: false, timeoutMs: 15_000, check: false });
  if (r.notFound) throw new Error(`source ${source} cannot be executed`);
  if (r.exitCode !== 0 || !r.stderr.startsWith(ABOUT_PREFIX)) {
    const said = (r.stderr || r.stdout).trim().split('\n')[0]?.slice(0, 120);
    throw new Error(`source ${source} is not an ipam-shim executable (run without arguments it ${said ? `says ${JSON.stringify(said)}` : 'says nothing'}, exit ${r.exitCode ?? (r.timedOut ? 'timeout' : '?')}; expected "${ABOUT_PREFIX} …")`);
  }
}

export interface BinaryOutcome {
  path: string;
  action: 'installed' | 'updated' | 'unchanged';
  bytes: number;
  sha256: string;
}

/** Temp files of an installer that died mid-copy (older than 10 minutes: a concurrent installer's are younger). */
async function removeStaleTemps(binDir: string): Promise<void> {
  const names = await readdir(binDir).catch(() => [] as string[]);
  for (const n of names.filter((n) => n.startsWith(`.${BINARY_NAME}.`) && n.endsWith('.tmp'))) {
    const st = await lstat(join(binDir, n)).catch(() => undefined);
    if (st?.isFile() && Date.now() - st.mtimeMs > STALE_TEMP_MS) await unlink(join(binDir, n)).catch(() => undefined);
  }
}

/** Copies `source` to `<binDir>/ipam-shim` (0755) atomically; nothing is written when the bytes already match. */
export async function installBinary(source: string, binDir: string): Promise<BinaryOutcome> {
  const dest = join(binDir, BINARY_NAME);
  const src = await realpath(source);
  const st = await stat(src);
  if (!st.isFile()) throw new Error(`source ${source} is not a file`);
  await mkdir(binDir, { recursive: true, mode: 0o755 });
  await removeStaleTemps(binDir);
  const hash = await sha256(src);
  const existing = await lstat(dest).catch((e) => (isErrno(e, 'ENOENT') ? undefined : Promise.reject(e)));
  if (existing?.isFile() && existing.size === st.size && (existing.mode & 0o777) === 0o755 && (await sha256(dest)) === hash) {
    return { path: dest, action: 'unchanged', bytes: st.size, sha256: hash };
  }
  const tmp = join(binDir, `.${BINARY_NAME}.${randomBytes(6).toString('hex')}.tmp`);
  try {
    await copyFile(src, tmp, constants.COPYFILE_EXCL);
    await chmod(tmp, 0o755);
    const fh = await open(tmp, constants.O_RDONLY | constants.O_NOFOLLOW);
    try {
      await fh.sync();
    } finally {
      await fh.close();
    }
    // The source may have been replaced while we copied (a rebuild): never publish a mixture.
    if ((await sha256(tmp)) !== hash) throw new Error(`source ${source} changed while it was copied; run install again`);
    await rename(tmp, dest);
  } catch (e) {
    await unlink(tmp).catch(() => undefined);
    throw e;
  }
  await syncDir(binDir);
  return { path: dest, action: existing ? 'updated' : 'installed', bytes: st.size, sha256: hash };
}

// ---------------------------------------------------------------------------------------------------------------
// the conflist

export interface ConflistOutcome {
  /** The file edited (or that would be), absent when none holds cilium-cni. */
  path?: string;
  action: UpsertAction | 'missing';
  entry?: Record<string, unknown>;
  /** Files skipped because they did not parse (cilium-agent may be writing one in place, or a typo), with why. */
  unreadable?: Unreadable[];
  /** Things that will make the entry useless or surprising, though it is in place. */
  warnings?: string[];
}

export interface Unreadable {
  path: string;
  error: string;
}

interface Target {
  path: string;
  text: string;
  shape: ConflistShape;
}

/**
 * The first conflist (lexical order, as runtimes read them) that holds cilium-cni or the shim; `before` lists
 * the network configs that sort ahead of it (a runtime that uses only the first one never reads the target).
 */
export async function findTargetConflist(
  confDir: string,
  anchorType = DEFAULT_ANCHOR,
): Promise<{ target?: Target; unreadable: Unreadable[]; before: string[] }> {
  const unreadable: Unreadable[] = [];
  const before: string[] = [];
  for (const path of await conflistFiles(confDir)) {
    let text: string;
    let shape: ConflistShape;
    try {
      text = await readFile(path, 'utf8');
      shape = inspectConflist(text, anchorType);
    } catch (e) {
      if (e instanceof ConflistEditError && /single-plugin/.test(e.message)) before.push(path);
      else if (!(e instanceof ConflistEditError) || !/not a JSON object/.test(e.message)) unreadable.push({ path, error: (e as Error).message });
      continue;
    }
    if (shape.anchor >= 0 || shape.chained.length || shape.ipamSlot >= 0) return { target: { path, text, shape }, unreadable, before };
    before.push(path);
  }
  return { unreadable, before };
}

/** The keys of the chained shim entry already in the list (without `type`), or undefined when there is none. */
function existingKeys(shape: ConflistShape): Record<string, unknown> | undefined {
  const i = shape.chained[0];
  const value = i === undefined ? undefined : shape.plugins[i]!.value;
  if (!isObject(value)) return undefined;
  const { type: _type, ...keys } = value;
  return keys;
}

function warningsFor(target: Target, before: string[], entry: Record<string, unknown>): string[] {
  const out: string[] = [];
  if (before.length) {
    out.push(`${before[0]} sorts before ${target.path}: runtimes (libcni) use the first network config, so the shim's entry is not used until that file is moved away`);
  }
  const anchor = target.shape.plugins[target.shape.anchor]?.value;
  if (isObject(anchor) && !isObject(anchor.ipam) && entry.delegate === undefined) {
    out.push(`${DEFAULT_ANCHOR} in ${target.path} has no "ipam": the shim's entry has no delegate, so GC, STATUS and agent IPs cannot reach the IPAM plugin (give "delegate" in --shim-config)`);
  }
  return out;
}

/**
 * The chained entry: `type` first, then the operator's keys. Without a `delegate` the entry takes the IPAM
 * config cilium-cni uses, so GC, STATUS and agent IPs talk to the same IPAM plugin. Validated with the
 * schema the plugin uses (throws CniError 2/7).
 */
export function buildEntry(shimKeys: Record<string, unknown>, shape: ConflistShape): Record<string, unknown> {
  const keys = { ...shimKeys };
  const anchor = shape.anchor >= 0 ? shape.plugins[shape.anchor]!.value : undefined;
  if (keys.delegate === undefined && isObject(anchor) && isObject(anchor.ipam) && typeof anchor.ipam.type === 'string' && anchor.ipam.type !== PLUGIN_TYPE) {
    keys.delegate = anchor.ipam;
  }
  validateShimKeys(keys);
  const { delegate, ...rest } = keys;
  return { type: PLUGIN_TYPE, ...(delegate === undefined ? {} : { delegate }), ...rest };
}

/**
 * Replaces `path` with `text` unless someone changed it since we read `before` (then false: read again). A
 * symlinked conflist stays a symlink: the new text replaces its target (atomically, in the target's directory),
 * as an operator who linked it there expects.
 */
async function replaceIfUnchanged(link: string, before: string, text: string): Promise<boolean> {
  const path = await realpath(link);
  const st = await stat(path);
  if ((await readFile(path, 'utf8')) !== before) return false;
  const mode = st.mode & 0o777;
  await writeFileAtomic(path, text, mode);
  if (((await stat(path)).mode & 0o777) !== mode) await chmod(path, mode);
  if (dirname(path) !== dirname(link)) await syncDir(dirname(link));
  return true;
}

/**
 * Inserts or updates the shim's entry after cilium-cni; `missing` when no conflist holds cilium-cni yet.
 * `shimKeys` undefined keeps the keys of the entry already there (a second run changes nothing).
 */
export async function installConflist(confDir: string, shimKeys: Record<string, unknown> | undefined): Promise<ConflistOutcome> {
  for (let attempt = 0; ; attempt++) {
    const { target, unreadable, before } = await findTargetConflist(confDir);
    const extra = unreadable.length ? { unreadable } : {};
    if (!target) return { action: 'missing', ...extra };
    if (target.shape.ipamSlot >= 0) return { path: target.path, action: 'ipam-slot', ...extra };
    if (target.shape.anchor < 0) {
      // Only a chained shim is left (cilium-cni gone from the list): nothing to anchor to.
      return { path: target.path, action: 'missing', ...extra };
    }
    const entry = buildEntry(shimKeys ?? existingKeys(target.shape) ?? {}, target.shape);
    const r = upsertShimEntry(target.text, entry);
    const warnings = warningsFor(target, before, entry);
    if (!r.changed || (await replaceIfUnchanged(target.path, target.text, r.text))) {
      return { path: target.path, action: r.action, entry, ...extra, ...(warnings.length ? { warnings } : {}) };
    }
    if (attempt >= 5) throw new Error(`${target.path} keeps changing while it is edited; try again`);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// uninstall

export interface UninstallOutcome {
  conflists: Array<{ path: string; removed: number }>;
  binary: { path: string; action: 'removed' | 'absent' | 'kept' };
  /** Conflists that still name the shim (an IPAM slot, or a list without cilium-cni): the binary stays for them. */
  stillReferenced: string[];
}

/** Removes the chained entries install put in (lists holding cilium-cni), then the binary unless still used. */
export async function uninstall(o: { binDir: string; confDir: string; keepBinary?: boolean }): Promise<UninstallOutcome> {
  const out: UninstallOutcome = { conflists: [], binary: { path: join(o.binDir, BINARY_NAME), action: 'kept' }, stillReferenced: [] };
  for (const path of await conflistFiles(o.confDir)) {
    for (let attempt = 0; attempt < 5; attempt++) {
      const text = await readFile(path, 'utf8').catch(() => undefined);
      if (text === undefined) break;
      let shape: ConflistShape;
      try {
        shape = inspectConflist(text);
      } catch {
        break;
      }
      if (shape.anchor < 0 || shape.chained.length === 0) break;
      const r = removeShimEntry(text);
      if (await replaceIfUnchanged(path, text, r.text)) {
        out.conflists.push({ path, removed: r.removed });
        break;
      }
    }
  }
  for (const path of await conflistFiles(o.confDir)) {
    const list = await readFile(path, 'utf8').then((t) => JSON.parse(t) as unknown).catch(() => undefined);
    if (isObject(list) && Array.isArray(list.plugins) ? list.plugins.some(holdsShim) : holdsShim(list)) out.stillReferenced.push(path);
  }
  if (!o.keepBinary && out.stillReferenced.length === 0) {
    try {
      await unlink(out.binary.path);
      await syncDir(o.binDir);
      out.binary.action = 'removed';
    } catch (e) {
      if (!isErrno(e, 'ENOENT')) throw e;
      out.binary.action = 'absent';
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// --watch

export interface WatchOptions {
  source: string;
  binDir: string;
  confDir: string;
  /** undefined: the keys of the entry found first (cilium-agent's rewrite drops them; the loop puts them back). */
  shimKeys: Record<string, unknown> | undefined;
  /** Periodic re-check, whatever the watcher says (it can miss events on some filesystems). */
  intervalMs: number;
  signal: AbortSignal;
  log: Logger;
  /** Wait this long after a change event before looking (a writer may not be done). */
  debounceMs?: number;
  /** At most this many restores per minute; beyond that the loop only re-checks on the interval. */
  maxRestoresPerMinute?: number;
}

export interface WatchSummary {
  checks: number;
  restores: number;
  binaryReinstalls: number;
  errors: number;
  last: ConflistOutcome | undefined;
}

const RESTORING: ReadonlySet<string> = new Set(['inserted', 'updated', 'moved']);

/** Keeps the binary and the conflist entry in place until `signal` aborts (SIGTERM). */
export async function watchInstall(o: WatchOptions): Promise<WatchSummary> {
  const summary: WatchSummary = { checks: 0, restores: 0, binaryReinstalls: 0, errors: 0, last: undefined };
  const debounceMs = o.debounceMs ?? 200;
  const maxPerMinute = o.maxRestoresPerMinute ?? 12;
  const restoreTimes: number[] = [];
  let shimKeys = o.shimKeys;
  let installed = await installBinary(o.source, o.binDir);
  o.log.info({ binary: installed.path, action: installed.action }, 'binary in place');
  let installedStat = await stat(installed.path);

  let watcher: FSWatcher | undefined;
  let pending = true; // look once right away
  let wake: () => void = () => undefined;
  const startWatcher = () => {
    if (watcher) return;
    try {
      watcher = watch(o.confDir, { persistent: false }, (_event, file) => {
        if (file && basename(String(file)).startsWith('.')) return; // our own (and others') temp files
        pending = true;
        wake();
      });
      watcher.on('error', (e) => {
        o.log.warn({ err: e }, 'watcher failed; relying on the periodic check');
        watcher?.close();
        watcher = undefined;
      });
    } catch (e) {
      if (!isErrno(e, 'ENOENT')) o.log.warn({ err: e }, 'cannot watch the conf dir; relying on the periodic check');
    }
  };
  const sleep = (ms: number) =>
    new Promise<void>((res) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        o.signal.removeEventListener('abort', done);
        wake = () => undefined;
        res();
      }
      wake = done;
      o.signal.addEventListener('abort', done, { once: true });
    });

  try {
    while (!o.signal.aborted) {
      startWatcher();
      if (!pending) await sleep(o.intervalMs);
      if (o.signal.aborted) break;
      if (pending) await sleep(debounceMs);
      if (o.signal.aborted) break;
      const fromEvent = pending;
      pending = false;
      const now = Date.now();
      while (restoreTimes.length && now - restoreTimes[0]! > 60_000) restoreTimes.shift();
      if (fromEvent && restoreTimes.length >= maxPerMinute) {
        o.log.warn({ restoresLastMinute: restoreTimes.length }, 'something keeps removing the entry; slowing down to the periodic check');
        continue;
      }
      summary.checks++;
      try {
        const cur = await stat(installed.path).catch(() => undefined);
        if (!cur || cur.ino !== installedStat.ino || cur.size !== installedStat.size || cur.mtimeMs !== installedStat.mtimeMs) {
          installed = await installBinary(o.source, o.binDir);
          installedStat = await stat(installed.path);
          if (installed.action !== 'unchanged') {
            summary.binaryReinstalls++;
            o.log.warn({ binary: installed.path }, 'binary was missing or changed: installed again');
          }
        }
        const r = await installConflist(o.confDir, shimKeys);
        if (shimKeys === undefined && r.entry) shimKeys = withoutType(r.entry);
        if (r.action !== summary.last?.action || r.path !== summary.last?.path) o.log.info({ conflist: r.path, action: r.action, unreadable: r.unreadable }, 'conflist checked');
        summary.last = r;
        if (RESTORING.has(r.action) && summary.checks > 1) {
          summary.restores++;
          restoreTimes.push(Date.now());
          o.log.warn({ conflist: r.path, action: r.action }, 'shim entry was missing or different: put back');
        }
      } catch (e) {
        summary.errors++;
        o.log.error({ err: e }, 'check failed; will retry');
      }
    }
  } finally {
    watcher?.close();
  }
  return summary;
}

function withoutType(entry: Record<string, unknown>): Record<string, unknown> {
  const { type: _type, ...keys } = entry;
  return keys;
}

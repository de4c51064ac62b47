// Putting the shim on a node and taking it off: `watchInstall` keeps the executable (binary.ts) and the conflist
// entry (conflist.ts) in place while cilium-agent rewrites its conflist; `uninstall` removes both (on Cilium's
// route it leaves the list to cilium-agent and waits until no list names the shim: uninstallWhenUnreferenced).
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { stat, unlink } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { holdsShim } from '../cni/config.js';
import { isObject } from '../cni/json.js';
import { confDirProblem, conflistFiles, readNetworkConfig } from '../conflist.js';
import { isErrno, syncDir } from '../effects/fs-atomic.js';
import type { Logger } from '../log.js';
import { inspectConflist, removeShimEntry, type ConflistShape } from './conflist-edit.js';
import { BINARY_NAME, installBinary } from './binary.js';
import { installConflist, replaceIfUnchanged, type ConflistOutcome } from './conflist.js';

// ---------------------------------------------------------------------------------------------------------------
// uninstall

export interface UninstallOutcome {
  conflists: Array<{ path: string; removed: number }>;
  binary: { path: string; action: 'removed' | 'absent' | 'kept' };
  /**
   * Lists that still name the shim (an IPAM slot, a list without cilium-cni, a list left as it is with keepLists,
   * or a source list cilium-agent will write at its next start): the binary stays for them.
   */
  stillReferenced: string[];
}

export interface UninstallOptions {
  binDir: string;
  confDir: string;
  keepBinary?: boolean;
  /**
   * Leave every conflist as it is (Cilium's route: cilium-agent writes the list from its ConfigMap, and would
   * write the entry back at its next start): the binary goes only once no list names the shim.
   */
  keepLists?: boolean;
  /**
   * Lists that are not on the node yet but will be written to it (Cilium's cni.configMap as the kubelet mounts it:
   * cilium-agent writes it at every start): the binary stays while one names the shim. A file that is not there
   * names nothing (the ConfigMap is gone or not mounted); one that cannot be read or parsed keeps the binary.
   */
  sourceLists?: string[];
}

/** Whether a source list names the shim: yes, no, or why it cannot be told (the binary then stays). */
function sourceListNamesShim(path: string): boolean {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if (isErrno(e, 'ENOENT')) return false;
    return true; // could not look: never taken for "names nothing"
  }
  try {
    const v = JSON.parse(text) as unknown;
    const plugins = isObject(v) && Array.isArray(v.plugins) ? v.plugins : isObject(v) ? [v] : undefined;
    return plugins === undefined || plugins.some(holdsShim);
  } catch {
    return true;
  }
}

/** Removes the chained entries install put in (lists holding cilium-cni), then the binary unless still used. */
export async function uninstall(o: UninstallOptions): Promise<UninstallOutcome> {
  // A conf dir that is not there (a typo) holds no entry to remove, and would let the binary go while the real
  // conflist still names it: every pod's ADD would fail. Could not run, nothing touched.
  const problem = await confDirProblem(o.confDir);
  if (problem) throw new Error(`${problem}: nothing uninstalled (the executable stays: a conflist elsewhere may still name it)`);
  const out: UninstallOutcome = { conflists: [], binary: { path: join(o.binDir, BINARY_NAME), action: 'kept' }, stillReferenced: [] };
  for (const path of o.keepLists ? [] : await conflistFiles(o.confDir)) {
    for (let attempt = 0; attempt < 5; attempt++) {
      let shape: ConflistShape;
      let text: string;
      try {
        const file = readNetworkConfig(path);
        if (file.single) break;
        text = file.text;
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
    let plugins: unknown[] = [];
    try {
      plugins = readNetworkConfig(path).list.plugins;
    } catch {
      // a file the runtime cannot read runs nothing
    }
    if (plugins.some(holdsShim)) out.stillReferenced.push(path);
  }
  for (const path of o.sourceLists ?? []) if (sourceListNamesShim(path)) out.stillReferenced.push(path);
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

/**
 * uninstall, again every `pollMs` until the binary could go (no list names the shim any more) or `signal` aborts:
 * Cilium's route, where the list changes only when cilium-agent restarts with a ConfigMap without the entry. The
 * removal pod's init container waits here, so its rollout finishes only once every node is done.
 * `onWaiting` is called when the set of lists that hold it changes (once per change, not per poll).
 */
export async function uninstallWhenUnreferenced(
  o: UninstallOptions & { signal: AbortSignal; pollMs?: number; onWaiting?: (lists: string[]) => void },
): Promise<UninstallOutcome & { waitedMs: number }> {
  const t0 = Date.now();
  let last = '';
  for (;;) {
    const r = await uninstall(o);
    // Stopped (SIGTERM) while waiting: the binary stays, as it must while a list names it.
    if (r.binary.action !== 'kept' || o.keepBinary || o.signal.aborted) return { ...r, waitedMs: Date.now() - t0 };
    const key = r.stillReferenced.join('\n');
    if (key !== last) o.onWaiting?.(r.stillReferenced);
    last = key;
    await new Promise<void>((res) => {
      const done = () => {
        clearTimeout(t);
        o.signal.removeEventListener('abort', done);
        res();
      };
      const t = setTimeout(done, o.pollMs ?? 1_000);
      o.signal.addEventListener('abort', done, { once: true });
    });
  }
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
  /**
   * At most this many restores per minute (default 120): restores are spaced 60 s / this apart, so two writers
   * fighting over the file cannot spin; a writer that rewrites the list once a second is answered every time.
   */
  maxRestoresPerMinute?: number;
  /** Called after every check that ran (the agent re-runs a failed pass at once when the entry is back). */
  onCheck?: (outcome: ConflistOutcome) => void;
}

export interface WatchSummary {
  checks: number;
  restores: number;
  binaryReinstalls: number;
  errors: number;
  last: ConflistOutcome | undefined;
}

const RESTORING: ReadonlySet<string> = new Set(['inserted', 'updated', 'moved']);

/** Restores in a minute from which the loop says that something keeps removing the entry (once a minute). */
const FIGHT_WARN_PER_MINUTE = 12;

/** Keeps the binary and the conflist entry in place until `signal` aborts (SIGTERM). */
export async function watchInstall(o: WatchOptions): Promise<WatchSummary> {
  const summary: WatchSummary = { checks: 0, restores: 0, binaryReinstalls: 0, errors: 0, last: undefined };
  const debounceMs = o.debounceMs ?? 200;
  const spacingMs = 60_000 / (o.maxRestoresPerMinute ?? 120);
  const restoreTimes: number[] = [];
  let warnedAt = 0;
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
      if (restoreTimes.length >= FIGHT_WARN_PER_MINUTE && now - warnedAt > 60_000) {
        warnedAt = now;
        o.log.warn({ restoresLastMinute: restoreTimes.length }, 'something keeps removing the entry; it is put back each time');
      }
      // Restores are spaced: a writer that removes the entry as soon as it is back gets an answer every spacingMs.
      const until = (restoreTimes.at(-1) ?? 0) + spacingMs;
      while (fromEvent && Date.now() < until && !o.signal.aborted) await sleep(until - Date.now());
      if (o.signal.aborted) break;
      pending = false;
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
        // The plugins are asked on every check: cilium-agent replaces cilium-cni with each Cilium upgrade.
        const r = await installConflist(o.confDir, shimKeys, { cniPath: [o.binDir] });
        if (shimKeys === undefined && r.entry) shimKeys = withoutType(r.entry);
        if (r.action !== summary.last?.action || r.path !== summary.last?.path)
          o.log.info({ conflist: r.path, action: r.action, unreadable: r.unreadable }, 'conflist checked');
        if (r.versions && r.versions.state !== 'taken' && r.versions.message !== summary.last?.versions?.message)
          o.log.warn(
            { conflist: r.path, versions: r.versions.state, use: r.versions.use },
            r.action === 'refused' ? `entry not put in: ${r.versions.message}` : r.versions.message,
          );
        summary.last = r;
        if (RESTORING.has(r.action) && summary.checks > 1) {
          summary.restores++;
          restoreTimes.push(Date.now());
          o.log.warn({ conflist: r.path, action: r.action }, 'shim entry was missing or different: put back');
        }
        o.onCheck?.(r);
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

// Watching where a network config list is written, for a process that only reads it: the agent with
// `--no-install` (Cilium's route) runs its pass as soon as cilium-agent writes the list, not at its next retry.
// An inotify watch on the directory (a writer's temp file + rename is an event on the list's name); a directory
// that is not there yet is looked for again on every `ensure()`, and a watch that fails is dropped and started
// again there. The caller's periodic pass stays the backstop: a missed event costs an interval, never correctness.
import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import type { Logger } from '../log.js';

export interface ListWatch {
  /** Starts the watch when it is not running (the directory appeared, or the last watch failed). */
  ensure(): void;
  close(): void;
}

/**
 * Calls `onChange` (at most once per `debounceMs`, after the writer is done) whenever `where`'s list may have
 * changed: `{ conflist }` that file's name in its directory, `{ confDir }` any file there that is not a dot file.
 */
export function watchList(where: { conflist: string } | { confDir: string }, onChange: () => void, log: Logger, debounceMs = 100): ListWatch {
  const dir = 'conflist' in where ? dirname(where.conflist) : where.confDir;
  const only = 'conflist' in where ? basename(where.conflist) : undefined;
  let watcher: FSWatcher | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let started = false;
  const fire = () => {
    if (timer || closed) return;
    timer = setTimeout(() => {
      timer = undefined;
      if (!closed) onChange();
    }, debounceMs);
  };
  const ensure = () => {
    if (watcher || closed) return;
    try {
      watcher = watch(dir, { persistent: false }, (_event, file) => {
        const name = file ? basename(String(file)) : undefined;
        // No name (some filesystems): it may be the list.
        if (name !== undefined && (only ? name !== only : name.startsWith('.'))) return;
        fire();
      });
      watcher.on('error', (e) => {
        log.warn({ err: e, dir }, 'the watch on the conf dir failed; started again at the next pass');
        watcher?.close();
        watcher = undefined;
      });
      // Started again (the directory came, or a watch failed): the list may have been written meanwhile.
      if (started) fire();
      started = true;
    } catch {
      // The directory is not there yet (or cannot be watched): the next ensure() tries again.
      watcher = undefined;
    }
  };
  return {
    ensure,
    close() {
      closed = true;
      if (timer) clearTimeout(timer);
      watcher?.close();
      watcher = undefined;
    },
  };
}

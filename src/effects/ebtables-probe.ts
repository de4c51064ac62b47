// File probes for "which ebtables backends can hold tables on this node" (src/residue/backends.ts decides):
// which ebtables programs are on PATH and what they resolve to, and whether the kernel has each backend's nat
// table. Files only (a few stat calls; on a kernel without module support one read of /proc/config.gz), so ADD
// can skip a backend without starting its program. Read-only; owns nothing.
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { release } from 'node:os';
import { join } from 'node:path';
import { gunzipSync } from 'node:zlib';

/** The file operations the probes use; tests pass a fake node layout. */
export interface ProbeFiles {
  exists(path: string): boolean;
  /** The resolved path (symlinks followed), or undefined when it does not exist. */
  realpath(path: string): string | undefined;
  /** The text (gunzipped for `.gz`), or undefined when unreadable. */
  read(path: string): string | undefined;
  /** `uname -r`. */
  release(): string;
}

export const nodeFiles: ProbeFiles = {
  exists: (p) => existsSync(p),
  realpath: (p) => {
    try {
      return realpathSync(p);
    } catch {
      return undefined;
    }
  },
  read: (p) => {
    try {
      const b = readFileSync(p);
      return (p.endsWith('.gz') ? gunzipSync(b) : b).toString('latin1');
    } catch {
      return undefined;
    }
  },
  release: () => release(),
};

/** yes: the kernel has it now; no: it cannot (until a module is loaded / another kernel); unknown: could not tell. */
export interface KernelFact {
  has: 'yes' | 'no' | 'unknown';
  /** The file evidence, for logs and reports. */
  evidence: string;
}

/** What a backend needs in the kernel: the module (modular kernels) or the config symbol (monolithic ones). */
export interface KernelNeed {
  module: string;
  config: string;
}

export interface BackendProbe {
  /** The resolved path of `name` found on PATH, or undefined when it is not installed. */
  program(name: string): string | undefined;
  kernel(need: KernelNeed): KernelFact;
}

/**
 * Probes over `files` for a process whose PATH is `path` (the runtime's, as the programs will be run). Lazy and
 * memoised: only what the decision asks for is read, each file once.
 */
export function probeBackends(path: string | undefined, files: ProbeFiles = nodeFiles): BackendProbe {
  const dirs = (path ?? '').split(':').filter((d) => d.startsWith('/'));
  const memo = new Map<string, string | undefined>();
  const read = (p: string) => {
    if (!memo.has(p)) memo.set(p, files.read(p));
    return memo.get(p);
  };
  return {
    program(name) {
      for (const d of dirs) {
        const found = files.realpath(join(d, name));
        if (found) return found;
      }
      return undefined;
    },
    kernel({ module, config }) {
      // A loaded module (or a built-in one with parameters) has a /sys/module entry.
      if (files.exists(`/sys/module/${module}`)) return { has: 'yes', evidence: `/sys/module/${module} present` };
      if (files.exists('/proc/modules')) {
        // A modular kernel: the module is not loaded. Built in without a /sys/module entry is the one other way.
        const builtin = read(`/lib/modules/${files.release()}/modules.builtin`);
        if (builtin === undefined) return { has: 'unknown', evidence: `${module} not loaded; /lib/modules/${files.release()}/modules.builtin unreadable, so built in or not is unknown` };
        if (builtin.split('\n').some((l) => l.endsWith(`/${module}.ko`))) return { has: 'yes', evidence: `${module} built in (modules.builtin)` };
        return { has: 'no', evidence: `kernel module ${module} not loaded (/sys/module/${module} absent) and not built in` };
      }
      // No module support: what is built in is all there is until a reboot.
      for (const p of ['/proc/config.gz', `/boot/config-${files.release()}`]) {
        const cfg = read(p);
        if (cfg === undefined) continue;
        return new RegExp(`^${config}=y$`, 'm').test(cfg)
          ? { has: 'yes', evidence: `${config}=y (${p})` }
          : { has: 'no', evidence: `kernel built without ${config} and without module support (${p})` };
      }
      return { has: 'unknown', evidence: `no /sys/module/${module}, no module support, no readable kernel config` };
    },
  };
}

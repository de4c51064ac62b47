// File probes for "which ebtables backends can hold tables on this node" (src/residue/backends.ts decides):
// which ebtables programs are on PATH and what they resolve to, and whether the kernel has each backend's nat
// table. Files only (a few stat calls), so ADD can skip a backend without starting its program. Read-only, except
// one cache file: on a kernel without module support the answer is in /proc/config.gz, whose decompression (zlib
// loaded, ~3 ms) is paid once per boot; its relevant lines are kept in KERNEL_CONFIG_CACHE (tmpfs, keyed by boot_id).
import { existsSync, mkdirSync, readFileSync, realpathSync, renameSync, writeFileSync } from 'node:fs';
import { release } from 'node:os';
import { dirname } from 'node:path';
import type { BackendProbe } from '../net/backend-probe.js';

/** The file operations the probes use; tests pass a fake node layout. */
export interface ProbeFiles {
  exists(path: string): boolean;
  /** The resolved path (symlinks followed), or undefined when it does not exist. */
  realpath(path: string): string | undefined;
  /** The text, or undefined when unreadable. */
  read(path: string): string | undefined;
  /** The kernel's config lines (CONFIG_NF_TABLES*, CONFIG_BRIDGE*) and where they came from, or undefined. */
  kernelConfig(): { text: string; source: string } | undefined;
  /** `uname -r`. */
  release(): string;
}

/** Where the kernel-config lines are kept for the boot (/run is a tmpfs: a reboot, a new kernel, empties it). */
const KERNEL_CONFIG_CACHE = '/run/ipam-shim/kernel-config.json';

const readText = (p: string): string | undefined => {
  try {
    return readFileSync(p, 'latin1');
  } catch {
    return undefined;
  }
};

function kernelConfig(): { text: string; source: string } | undefined {
  const bootId = readText('/proc/sys/kernel/random/boot_id')?.trim();
  if (bootId) {
    try {
      const c = JSON.parse(readText(KERNEL_CONFIG_CACHE) ?? '') as { bootId?: unknown; source?: unknown; text?: unknown };
      if (c.bootId === bootId && typeof c.text === 'string' && typeof c.source === 'string') return { text: c.text, source: c.source };
    } catch {
      // no cache, or not ours: read the config
    }
  }
  for (const source of ['/proc/config.gz', `/boot/config-${release()}`]) {
    let raw: Buffer;
    try {
      raw = readFileSync(source);
    } catch {
      continue;
    }
    // zlib only here (once per boot): loading it costs more than the rest of the probes together.
    const full = source.endsWith('.gz') ? process.getBuiltinModule('node:zlib').gunzipSync(raw).toString('latin1') : raw.toString('latin1');
    // Only the lines the probes ask about (src/residue/backends.ts NEEDS): every later call reads this small file.
    const text = full
      .split('\n')
      .filter((l) => /^(# )?CONFIG_(NF_TABLES_BRIDGE|BRIDGE_EBT_T_NAT)[= ]/.test(l))
      .join('\n');
    if (bootId) {
      try {
        mkdirSync(dirname(KERNEL_CONFIG_CACHE), { recursive: true, mode: 0o755 });
        const tmp = `${KERNEL_CONFIG_CACHE}.${process.pid}.tmp`;
        writeFileSync(tmp, JSON.stringify({ bootId, source, text }), { mode: 0o644 });
        renameSync(tmp, KERNEL_CONFIG_CACHE);
      } catch {
        // a read-only /run: the next call reads the config again, nothing worse
      }
    }
    return { text, source };
  }
  return undefined;
}

const nodeFiles: ProbeFiles = {
  exists: (p) => existsSync(p),
  // existsSync first: a miss (most PATH entries) costs no exception; realpath(3) itself (.native), not the JS walk.
  realpath: (p) => {
    if (!existsSync(p)) return undefined;
    try {
      return realpathSync.native(p);
    } catch {
      return undefined;
    }
  },
  read: readText,
  kernelConfig,
  release: () => release(),
};

/**
 * Probes over `files` for a process whose PATH is `path` (the runtime's, as the programs will be run). Lazy and
 * memoised: only what the decision asks for is read, each file once.
 */
export function probeBackends(path: string | undefined, files: ProbeFiles = nodeFiles): BackendProbe {
  const dirs = (path ?? '').split(':').filter(Boolean);
  const memo = new Map<string, string | undefined>();
  let cfg: { value: { text: string; source: string } | undefined } | undefined;
  const read = (p: string) => {
    if (!memo.has(p)) memo.set(p, files.read(p));
    return memo.get(p);
  };
  return {
    program(name) {
      // Plain concatenation, not path.join: its normalising character loop, run for every PATH entry, got hot
      // enough to set off an optimising compile whose cost showed in every ADD (docs/performance.md).
      for (const d of dirs) {
        const found = files.realpath(`${d}/${name}`);
        if (found) return found;
      }
      return undefined;
    },
    kernel({ module, config }) {
      // A loaded module (or a built-in one with parameters) has a /sys/module entry.
      if (files.exists(`/sys/module/${module}`)) return { has: 'yes', evidence: `/sys/module/${module} present` };
      if (files.exists('/proc/modules')) {
        // A modular kernel: the module is not loaded. Built in without a /sys/module entry is the one other way.
        // Without modules.builtin (an image without /lib/modules: the agent's) it is taken as not built in:
        // distribution kernels build both as modules, and listing to find out would load the module (the kernel
        // autoloads a table on first use), after which every ADD would pay for a second backend.
        const builtin = read(`/lib/modules/${files.release()}/modules.builtin`);
        if (builtin === undefined)
          return {
            has: 'no',
            evidence: `kernel module ${module} not loaded (/sys/module/${module} absent; modules.builtin unreadable, taken as not built in)`,
          };
        if (builtin.split('\n').some((l) => l.endsWith(`/${module}.ko`))) return { has: 'yes', evidence: `${module} built in (modules.builtin)` };
        return { has: 'no', evidence: `kernel module ${module} not loaded (/sys/module/${module} absent) and not built in` };
      }
      // No module support: what is built in is all there is until a reboot.
      cfg ??= { value: files.kernelConfig() };
      const c = cfg.value;
      if (!c) return { has: 'unknown', evidence: `no /sys/module/${module}, no module support, no readable kernel config` };
      return `\n${c.text}\n`.includes(`\n${config}=y\n`)
        ? { has: 'yes', evidence: `${config}=y (${c.source})` }
        : { has: 'no', evidence: `kernel built without ${config} and without module support (${c.source})` };
    },
  };
}

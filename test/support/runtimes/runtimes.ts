// Two CNI runtimes for the verb suites: the TypeScript runner (test/support/runtimes/runner.ts, a re-implementation of
// libcni's behaviour) and the real libcni through the cnitool harness (test/support/runtimes/cnitool.ts). A suite that
// runs through both finds where the imitation drifts from the library; libcni is the one that is right.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from '../shim/cni.js';
import { CniRunner, type CniRunnerOptions } from './runner.js';
import { CnitoolRuntime, harnessMissing } from './cnitool.js';

export type RuntimeKind = 'runner' | 'libcni';
export const RUNTIMES: readonly RuntimeKind[] = ['runner', 'libcni'];

/** What the suites call on a runtime; CniRunner and CnitoolRuntime both provide it. */
export type CniRuntime = Pick<
  CniRunner,
  'name' | 'cniVersion' | 'add' | 'check' | 'del' | 'gc' | 'status' | 'version' | 'cacheFilePath' | 'cachedAttachments' | 'cacheEntry' | 'invocations'
>;

export function newRuntime(kind: RuntimeKind, opts: CniRunnerOptions): CniRuntime {
  return kind === 'runner' ? new CniRunner(opts) : new CnitoolRuntime(opts);
}

/**
 * Whether to skip the suites of `kind` here: only the harness can be missing, and only outside CI (CI=true makes
 * newRuntime throw, so the suite fails and says how to build the harness).
 */
export function skipRuntime(kind: RuntimeKind): boolean {
  return kind === 'libcni' && harnessMissing() !== undefined && process.env.CI !== 'true';
}

/**
 * The reference plugins 1.9 (spec 1.1.0: GC, STATUS) from Debian unstable, linked by scripts/install-deps.sh;
 * Debian 12's own (PLUGIN_DIR, 1.1.1) refuse 1.1.0 lists.
 */
export const PLUGINS_110 = process.env.CNI_PLUGIN_DIR_110 ?? path.join(ROOT, '.deps/cni-plugins-1.9');

/** Whether to skip suites that need PLUGINS_110: only outside CI (under CI=true the suite fails on the missing dir). */
export function skipPlugins110(): boolean {
  return !existsSync(path.join(PLUGINS_110, 'ptp')) && process.env.CI !== 'true';
}

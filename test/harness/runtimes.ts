// Two CNI runtimes for the verb suites: the TypeScript runner (test/runner/runner.ts, a re-implementation of
// libcni's behaviour) and the real libcni through the cnitool harness (test/harness/cnitool.ts). A suite that
// runs through both finds where the imitation drifts from the library; libcni is the one that is right.
import { CniRunner, type CniRunnerOptions } from '../runner/runner.js';
import { CnitoolRuntime, harnessMissing } from './cnitool.js';

export type RuntimeKind = 'runner' | 'libcni';
export const RUNTIMES: readonly RuntimeKind[] = ['runner', 'libcni'];

/** What the suites call on a runtime; CniRunner and CnitoolRuntime both provide it. */
export type CniRuntime = Pick<CniRunner, 'name' | 'cniVersion' | 'add' | 'check' | 'del' | 'gc' | 'status' | 'version' | 'cacheFilePath' | 'cachedAttachments' | 'cacheEntry' | 'invocations'>;

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

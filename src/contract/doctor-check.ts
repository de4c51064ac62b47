// The shape of a doctor check: it looks at one thing and returns findings; it never prints or repairs.
import type { OpenNetwork } from '../network/open.js';
import type { Run } from '../effects/exec.js';
import { CniError, ErrorCode } from '../cni/errors.js';

type Verdict = 'ok' | 'warn' | 'problem' | 'skipped';

export interface Finding {
  check: string;
  verdict: Verdict;
  summary: string;
  /** What the operator should do about it (problems and warnings). */
  fix?: string;
  data?: unknown;
}

/** What doctor was told beyond the network (flags some checks need). */
interface DoctorOptions {
  /** libcni's cache root: the runtime-pods check reads results/ below it. */
  cacheDir?: string;
}

/** What doctor has when no shim conflist could be opened: where it looked, the CNI path, and why it failed. */
export interface NodeView {
  confDir: string;
  /** The --conflist the operator named (its failure is its own, whatever else the conf dir holds). */
  conflist?: string | undefined;
  cniPath: string[];
  run: Run;
  /** Why the shim's network could not be opened (no conflist holds the shim, one does not parse, its settings are invalid). */
  why: Error;
}

export interface DoctorCheck {
  name: string;
  run(net: OpenNetwork, opts?: DoctorOptions): Promise<Finding[]>;
  /** The check without a shim conflist, for the checks that can look anyway; absent: `skipped`. */
  withoutNetwork?(node: NodeView): Promise<Finding[]>;
}

/**
 * The finding for a check that threw. A ledger that cannot be read is one cause with one finding (the state-dir
 * check names it and its fix): every check that needs the ledger is then `skipped`, pointing there. Anything
 * else is that check's problem, logged with its stack so "see the log file" is true.
 */
export function failedCheck(check: string, e: unknown, net: Pick<OpenNetwork, 'log' | 'conf'>): Finding {
  if (e instanceof CniError && e.code === ErrorCode.LedgerCorrupt) {
    return { check, verdict: 'skipped', summary: `needs the ledger, which cannot be read (see the state-dir check): ${e.msg}` };
  }
  net.log.error({ err: e, check }, 'doctor check failed');
  return {
    check,
    verdict: 'problem',
    summary: `check failed: ${(e as Error).message}`,
    fix: `the error and its stack are in ${net.conf.settings.logFile}; run doctor again`,
  };
}

/** The first few items of a list for a finding's summary, and how many more there are. */
export const list = (items: string[], max = 5): string =>
  items.slice(0, max).join(', ') + (items.length > max ? ` (+${items.length - max} more)` : '');

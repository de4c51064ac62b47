// A problem that persists across the agent's passes (the conflist missing, a tool absent) is logged when it starts
// and when it ends, not on every pass: a pass every 30 s would otherwise repeat the same error line (with the
// minified bundle's stack) all day. The counters (ipam_shim_agent_errors_total) still count every pass.
import { CniError } from '../cni/errors.js';
import type { Logger } from '../log.js';

interface Open {
  /** What tells this problem from another of the same step (the log is deduplicated on it; nothing else decides on it). */
  key: string;
  since: string;
  passes: number;
}

/** The error as a log field: a CniError's code, msg and details (its stack is the bundle's, of no use to an operator); anything else whole. */
const errorFields = (e: unknown): Record<string, unknown> =>
  e instanceof CniError ? { error: { code: e.code, msg: e.msg, ...(e.details && { details: e.details }) } } : { err: e };

const keyOf = (e: unknown): string => (e instanceof CniError ? `${e.code} ${e.msg}` : e instanceof Error ? `${e.name} ${e.message}` : String(e));

export class PersistingProblems {
  private readonly open = new Map<string, Open>();

  /** A step failed: logged at error level when this problem is new for the step (or differs from the last one), else at debug. */
  failed(step: string, e: unknown, log: Logger): void {
    const key = keyOf(e);
    const known = this.open.get(step);
    if (known?.key === key) {
      known.passes++;
      log.debug({ step, since: known.since, passes: known.passes, ...errorFields(e) }, `${step}: still failing`);
      return;
    }
    this.open.set(step, { key, since: new Date().toISOString(), passes: 1 });
    log.error({ step, ...errorFields(e) }, `${step}: failed (logged again when it changes or clears)`);
  }

  /** A step ran through: a problem it had is logged as over. */
  succeeded(step: string, log: Logger): void {
    const known = this.open.get(step);
    if (!known) return;
    this.open.delete(step);
    log.info({ step, since: known.since, passes: known.passes }, `${step}: recovered`);
  }

  /** The problems still open (the agent's last line names them). */
  current(): { step: string; since: string; passes: number; problem: string }[] {
    return [...this.open].map(([step, o]) => ({ step, since: o.since, passes: o.passes, problem: o.key }));
  }
}

// What every verb works with, built once per invocation from the request (src/network/open.ts opens the
// network's ledger and delegate, as for the CLI and doctor).
import type { Request } from '../cni/skel.js';
import type { Attachment } from '../cni/config.js';
import { run as defaultRun, KILL_GRACE_MS, type Run } from '../effects/exec.js';
import type { Logger } from '../log.js';
import type { AddressCall } from '../contract/fix.js';
import { networkDeps, type NetworkDeps } from '../network/open.js';
import { span } from '../spans.js';

/**
 * What the verb did that the metrics file counts, by tally: the core's (gcReleased: attachments GC released;
 * staleTaken: ADD took a provably dead pod's address, src/gc/stale.ts; delRecordsKept: DEL released but could not
 * forget the record) and each fix's own (Fix.metrics.tallies). The verb adds to its context's, plugin.ts hands them
 * to src/metrics.ts. Declared here, not there: the verbs must not reach the metrics module (and its fs/promises).
 */
export type InvocationCounters = Record<string, number>;

/** Adds `by` to tally `name`. */
export function tally(counters: InvocationCounters, name: string, by = 1): void {
  counters[name] = (counters[name] ?? 0) + by;
}

export interface VerbContext extends Request, NetworkDeps {
  procEnv: NodeJS.ProcessEnv;
  /** What the verb did that the metrics count (plugin.ts hands them to the metrics file). */
  counters: InvocationCounters;
}

export function createContext(
  req: Request,
  log: Logger,
  procEnv: NodeJS.ProcessEnv,
  run: Run = defaultRun,
  counters: InvocationCounters = {},
): VerbContext {
  return { ...req, ...networkDeps(req.conf, { cniPath: req.env.path, env: procEnv, log, run }), procEnv, counters };
}

/** What the fixes' address hooks get from this call: its addresses, and the pod's own host-side interfaces (not residue). */
export const addressCall = (ctx: VerbContext, ips: string[], ownDevs: readonly string[]): AddressCall => ({
  conf: ctx.conf,
  run: ctx.run,
  log: ctx.log,
  ips,
  ownDevs,
  tally: (name, by) => tally(ctx.counters, name, by),
});

export const attachmentOf = (ctx: VerbContext): Attachment => ({ containerID: ctx.env.containerID, ifname: ctx.env.ifname });

/** The ledger lock's own wait: ADDs of other attachments hold the attachment lock only for file writes. */
const MIN_ATTACHMENT_WAIT_MS = 30_000;

/**
 * Runs fn as the only ADD, DEL or CHECK of this attachment (Ledger.lockedAttachment). A waiter waits as long as
 * one such call can last: three delegate calls (VERSION, ADD, the undo DEL), each bounded by delegateTimeoutMs.
 * The span `ledger.lock` is the ledger's opening plus the wait for the lock (up to fn, or to the lock's failure).
 */
export function exclusively<T>(ctx: VerbContext, fn: () => Promise<T>): Promise<T> {
  const waitMs = Math.max(MIN_ATTACHMENT_WAIT_MS, 3 * (ctx.conf.settings.delegateTimeoutMs + KILL_GRACE_MS) + 5_000);
  const locked = span('ledger.lock');
  const entered = () => {
    locked.end();
    return fn();
  };
  return ctx.ledger.lockedAttachment(attachmentOf(ctx), waitMs, entered).finally(locked.end);
}

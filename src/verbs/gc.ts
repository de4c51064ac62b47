import { attachmentName } from '../cni/config.js';
import { CniError, ErrorCode } from '../cni/errors.js';
import { runGc } from '../gc/run-gc.js';
import { tally, type VerbContext } from './context.js';

/**
 * GC (1.1.0): keep = valid ∪ the agent's ∪ provably alive; forward GC to a 1.1.0 delegate with `keep`; release the
 * rest with delegate DELs. Keeps going past errors and reports them all at the end.
 */
export async function cmdGc(ctx: VerbContext): Promise<void> {
  const given = ctx.conf.validAttachments;
  // An absent key and null mean "no attachment valid", as every typed Go plugin reads them (types.NetConf's
  // ValidAttachments, omitempty): libcni sends null for CRI-O's nil slice after a reboot, upstream `cnitool gc`
  // omits the key. What keeps a live pod is the liveness guard (src/gc/plan.ts), not the list's presence.
  const validList = given === undefined ? 'absent' : given === null ? 'null' : `list of ${given.length}`;
  const valid = given ?? [];
  // The runtime runs GC exclusively for the network, so no grace period is needed here.
  const report = await runGc({
    conf: ctx.conf,
    ledger: ctx.ledger,
    delegate: ctx.delegate,
    run: ctx.run,
    log: ctx.log,
    valid,
    apply: true,
    graceMs: 0,
    forward: true,
  });
  tally(ctx.counters, 'gcReleased', report.released.length);
  ctx.log.info(
    { validList, released: report.released.length, kept: report.plan.kept.length, errors: report.errors.length, forwarded: report.forwarded },
    'GC',
  );
  if (report.errors.length) {
    throw new CniError(
      report.errors[0]!.code === ErrorCode.TryAgainLater ? ErrorCode.TryAgainLater : ErrorCode.DelegateFailed,
      `GC finished with ${report.errors.length} error(s)`,
      {
        details: report.errors.map((e) => `${e.attachment ? `${attachmentName(e.attachment)}: ` : ''}${e.error}`).join('; '),
      },
    );
  }
}

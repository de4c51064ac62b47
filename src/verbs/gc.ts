import { attachmentName } from '../cni/config.js';
import { CniError, ErrorCode } from '../cni/errors.js';
import { runGc } from '../gc/run-gc.js';
import { tally, type VerbContext } from './context.js';

/**
 * GC (1.1.0): refused (7) without a valid list; keep = valid ∪ the agent's ∪ provably alive; forward GC to a 1.1.0 delegate with `keep`;
 * release the rest with delegate DELs. Keeps going past errors and reports them all at the end.
 */
export async function cmdGc(ctx: VerbContext): Promise<void> {
  const valid = ctx.conf.validAttachments;
  if (!valid) {
    // No list is no evidence that nothing is valid: releasing on it would free every attachment not proven alive.
    throw new CniError(ErrorCode.InvalidNetworkConfig, 'GC without cni.dev/valid-attachments: nothing released', {
      details:
        "the key is absent or null; send the list of attachments still in use (libcni GCNetworkList does; an empty list means none is). Upstream `cnitool gc` omits it: use `ipam-shim gc`, which reads the runtime's result cache",
    });
  }
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
  ctx.log.info({ released: report.released.length, kept: report.plan.kept.length, errors: report.errors.length, forwarded: report.forwarded }, 'GC');
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

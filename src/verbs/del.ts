import { delegateConf } from '../cni/config.js';
import { convertResult } from '../cni/result.js';
import { atLeast } from '../cni/versions.js';
import { CniError, ErrorCode } from '../cni/errors.js';
import { AttachmentLockError } from '../effects/ledger.js';
import { attachmentOf, exclusively, tally, type VerbContext } from './context.js';
import { span } from '../spans.js';

/**
 * DEL: idempotent and tolerant (no netns, no prevResult, nothing recorded: all fine). In the IPAM slot the
 * delegate DEL runs first and its error passes through; the record is only forgotten once that succeeded,
 * so a failed release stays visible to GC. Chained, the record is marked DELed, not forgotten (markDeleted).
 *
 * A config mistake (conf.mistake) does not fail DEL: it does what the readable settings allow, logs the
 * mistake and succeeds. Never forgotten: a record whose address could not be released (no readable delegate
 * in the IPAM slot); never touched: any ledger, when stateDir is unreadable (the record stays for GC).
 *
 * A ledger that cannot be written (full, read-only, unsafe) does not fail DEL either once the address is released:
 * the record stays for GC, logged and counted (docs/failure-model.md).
 */
export async function cmdDel(ctx: VerbContext): Promise<void> {
  const mistake = ctx.conf.mistake;
  if (mistake) {
    const { code, msg, details } = mistake.error;
    ctx.log.error(
      { code, cniMsg: msg, details, unreadable: mistake.unreadable },
      'config mistake: DEL does what it can without it; fix the config (ADD, CHECK and STATUS refuse it)',
    );
  }
  if (mistake?.unreadable.includes('stateDir')) {
    // Which ledger holds the record is unknown: release what can be released, and leave every ledger alone.
    const released = await release(ctx);
    ctx.log.warn({ released }, 'DEL without a readable stateDir: any record stays for GC');
    return;
  }
  let released = false;
  try {
    await exclusively(ctx, async () => {
      if (!(await release(ctx))) {
        ctx.log.error({ delegate: ctx.conf.raw.ipam }, 'DEL cannot release the address (no readable delegate): the record stays for GC');
        return;
      }
      released = true;
      if (ctx.conf.placement === 'chained') return markDeleted(ctx);
      using removing = span('ledger.remove');
      const forgotten = await ctx.ledger.remove(attachmentOf(ctx));
      removing.end();
      ctx.log.info({ ips: forgotten?.ips ?? [], recorded: Boolean(forgotten) }, 'DEL');
    });
  } catch (e) {
    // Another call of this attachment holds its lock, or the network's (11): a retry fixes that; that call decides.
    if (!(e instanceof CniError) || e.code === ErrorCode.TryAgainLater) throw e;
    // Only a ledger failure is forgiven: the lock could not be taken (the ledger is unwritable: 5, or unsafe: 103),
    // or the release succeeded and the record could not be removed. The delegate's own error passes through.
    if (!(e instanceof AttachmentLockError) && !released) throw e;
    if (!released && !(await release(ctx))) throw e; // nothing released the address: reporting success would leak it
    // The address is released; the record stays for GC (and can never wedge the address: an ADD given it takes
    // it from a provably dead holder). Failing here would fail the chain's DEL, and StopPodSandbox, until an
    // operator fixed the disk: cilium-cni answers a DEL only with errors a retry can fix.
    tally(ctx.counters, 'delRecordsKept');
    ctx.log.error(
      { code: e.code, cniMsg: e.msg, details: e.details },
      'DEL released the address but cannot write the ledger: the record stays for GC; fix the state directory',
    );
  }
}

/**
 * Chained, our DEL runs before the main plugin's, which releases the address and may fail (cilium-cni answers 999
 * while its agent is down, its delegate not called). The record is kept, marked, as the evidence GC releases through
 * if the runtime never retries (it lost its cache entry); GC settles it once the pod is gone (src/gc/plan.ts).
 */
async function markDeleted(ctx: VerbContext): Promise<void> {
  using marking = span('ledger.mark');
  const rec = await ctx.ledger.get(attachmentOf(ctx));
  if (rec) {
    const now = new Date().toISOString();
    await ctx.ledger.put({ ...rec, deletedAt: rec.deletedAt ?? now, updatedAt: now });
  }
  marking.end();
  ctx.log.info({ ips: rec?.ips ?? [], recorded: Boolean(rec), kept: 'marked DELed until GC sees the pod gone' }, 'DEL');
}

/** IPAM slot: the delegate's DEL (its error passes through). False when there is no delegate to ask; chained: true. */
async function release(ctx: VerbContext): Promise<boolean> {
  if (ctx.conf.placement !== 'ipam') return true;
  const delegate = ctx.delegate;
  if (!delegate) return false;
  using versioning = span('delegate.version');
  const version = await delegate.versionFor(ctx.conf.cniVersion);
  versioning.end();
  const prev = ctx.conf.prevResult;
  const extra = prev && atLeast(version, '0.4.0') ? { prevResult: convertResult(prev, version) } : {};
  using releasing = span('delegate.del');
  await delegate.del(delegateConf(ctx.conf, version, extra));
  releasing.end();
  return true;
}

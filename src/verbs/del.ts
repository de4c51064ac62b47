import { delegateConf } from '../cni/config.js';
import { convertResult } from '../cni/result.js';
import { atLeast } from '../cni/versions.js';
import { attachmentOf, type VerbContext } from './context.js';

/**
 * DEL: idempotent and tolerant (no netns, no prevResult, nothing recorded: all fine). In the IPAM slot the
 * delegate DEL runs first and its error passes through; the record is only forgotten once that succeeded,
 * so a failed release stays visible to GC.
 */
export async function cmdDel(ctx: VerbContext): Promise<void> {
  if (ctx.conf.placement === 'ipam') {
    const delegate = ctx.delegate!;
    const version = await delegate.versionFor(ctx.conf.cniVersion);
    const prev = ctx.conf.prevResult;
    const extra = prev && atLeast(version, '0.4.0') ? { prevResult: convertResult(prev, version) } : {};
    await delegate.del(delegateConf(ctx.conf, version, extra));
  }
  const forgotten = await ctx.ledger.remove(attachmentOf(ctx));
  ctx.log.info({ ips: forgotten?.ips ?? [], recorded: Boolean(forgotten) }, 'DEL');
}

import { CniError, ErrorCode } from '../cni/errors.js';
import { attachmentName, delegateConf } from '../cni/config.js';
import { convertResult, resultHostDevices, resultIps } from '../cni/result.js';
import { atLeast } from '../cni/versions.js';
import { addressCall, attachmentOf, exclusively, type VerbContext } from './context.js';
import { checkAddresses } from '../fix-list/address-steps.js';
import { span } from '../spans.js';

/** CHECK: the ledger holds the attachment with the runtime's addresses, the address checks pass, the delegate agrees. */
export async function cmdCheck(ctx: VerbContext): Promise<void> {
  // Nothing recorded: answered without the lock (a read creates no ledger directory). Else under the
  // attachment's lock, so an ADD or DEL of it in flight is never seen half done.
  await requireAttached(ctx);
  await exclusively(ctx, () => checkAttached(ctx));
}

async function requireAttached(ctx: VerbContext) {
  const att = attachmentOf(ctx);
  const rec = await ctx.ledger.get(att);
  if (rec?.state !== 'attached') {
    throw new CniError(ErrorCode.UnknownContainer, `ipam-shim has no attachment ${attachmentName(att)} in network ${ctx.conf.name}`, {
      details: rec ? 'only an intent record: the ADD did not complete' : `no record in ${ctx.ledger.dir}`,
    });
  }
  return rec;
}

async function checkAttached(ctx: VerbContext): Promise<void> {
  const rec = await requireAttached(ctx);
  const prev = ctx.conf.prevResult;
  if (prev) {
    const expected = resultIps(prev, 'prevResult').sort();
    const recorded = [...rec.ips].sort();
    if (expected.join(',') !== recorded.join(',')) {
      throw new CniError(ErrorCode.InvalidNetworkConfig, 'prevResult addresses differ from the ledger', {
        details: `prevResult ${expected.join(', ')}; ledger ${recorded.join(', ')}`,
      });
    }
  }
  await checkAddresses(addressCall(ctx, rec.ips, resultHostDevices(prev)));
  const delegate = ctx.delegate;
  if (delegate) {
    using versioning = span('delegate.version');
    const version = await delegate.versionFor(ctx.conf.cniVersion);
    versioning.end();
    // CHECK exists from 0.4.0 on; an older delegate simply cannot be asked.
    if (atLeast(version, '0.4.0')) {
      const extra = prev ? { prevResult: convertResult(prev, version) } : {};
      using checking = span('delegate.check');
      await delegate.check(delegateConf(ctx.conf, version, extra));
      checking.end();
    }
  }
}

import { CniError, ErrorCode } from '../cni/errors.js';
import { attachmentName, delegateConf } from '../cni/config.js';
import { convertResult, resultHostDevices, resultIps, resultSubnets, type Result } from '../cni/result.js';
import { ownerOf } from '../ledger/owner.js';
import { AddressHeldError, type LedgerRecord } from '../ledger/record.js';
import { readNetnsIdentity } from '../effects/netns-probe.js';
import { addressCall, attachmentOf, exclusively, tally, type VerbContext } from './context.js';
import { prefetchFixes, prepareAddresses, validateFixes } from '../fix-list/address-steps.js';
import { span } from '../spans.js';

/** ADD: IPAM slot = delegate ADD then the address steps; chained = the address steps on prevResult. */
export async function cmdAdd(ctx: VerbContext): Promise<Result> {
  validateFixes(ctx.conf); // a fix's bad setting (reservedCIDRs, …) fails the ADD before the delegate allocates anything
  return ctx.conf.placement === 'ipam' ? addInIpamSlot(ctx) : addChained(ctx);
}

/**
 * `netnsId`: which namespace the path names now (readNetnsIdentity, read once per ADD), so GC and a later ADD can
 * tell a path that names another one (src/gc/stale.ts). `subnets`: what the result gave (resultSubnets).
 */
function record(
  ctx: VerbContext,
  state: LedgerRecord['state'],
  { ips, subnets }: Pick<LedgerRecord, 'ips' | 'subnets'>,
  netnsId: LedgerRecord['netnsId'],
  previous?: LedgerRecord,
): LedgerRecord {
  const now = new Date().toISOString();
  return {
    v: 1,
    ...attachmentOf(ctx),
    network: ctx.conf.name,
    owner: ownerOf(ctx.env.containerID, ctx.conf.settings.agentContainerIDs),
    state,
    placement: ctx.conf.placement,
    ips,
    ...(subnets?.length && { subnets }),
    netns: ctx.env.netns,
    createdAt: previous?.createdAt ?? now,
    updatedAt: now,
    ...(ctx.env.pod && { pod: ctx.env.pod }),
    ...(netnsId && { netnsId }),
    // What the runtime will send at DEL, and what every DEL the shim sends itself must carry (src/ledger/identity.ts).
    cniArgs: ctx.env.rawArgs ?? '',
  };
}

async function addChained(ctx: VerbContext): Promise<Result> {
  const prev = ctx.conf.prevResult;
  if (!prev) {
    throw new CniError(ErrorCode.InvalidNetworkConfig, 'chained ipam-shim got no prevResult', {
      details: 'list ipam-shim after the plugin that allocates (cilium-cni), or put it in that plugin\'s "ipam" slot',
    });
  }
  const ips = resultIps(prev, 'prevResult');
  const ownDevs = resultHostDevices(prev);
  // Chained, the shim allocates nothing and never releases: a repeated ADD re-runs the address steps and
  // records the runtime's addresses again; a failure changes nothing in the ledger.
  return exclusively(ctx, async () => {
    using addressing = span('address');
    await prepareAddresses(addressCall(ctx, ips, ownDevs));
    addressing.end();
    using writing = span('ledger.write');
    const netnsId = readNetnsIdentity(ctx.env.netns);
    const previous = await ctx.ledger.get(attachmentOf(ctx));
    await putClaiming(ctx, record(ctx, 'attached', { ips, subnets: resultSubnets(prev) }, netnsId, previous));
    writing.end();
    ctx.log.info({ ips }, 'chained ADD');
    return convertResult(prev, ctx.conf.cniVersion);
  });
}

/**
 * Records `rec`; an address the ledger holds for another attachment is taken from that holder when it is provably
 * dead (src/gc/stale.ts: GC's rule), and the write is tried again; any other holder keeps its 11.
 */
async function putClaiming(ctx: VerbContext, rec: LedgerRecord): Promise<void> {
  for (let taken = 0; ; taken++) {
    try {
      await ctx.ledger.put(rec);
      return;
    } catch (e) {
      // Each address can be taken once; a holder that is back for the same one is not dead.
      if (!(e instanceof AddressHeldError) || taken >= rec.ips.length) throw e;
      // Loaded only here: an ADD that meets no holder never evaluates GC's rule.
      const { takeFromDeadHolder } = await import('../gc/stale.js');
      const verdict = await takeFromDeadHolder(ctx, e.holder, e.ip, rec);
      if (verdict !== 'forgotten' && verdict !== 'dropped') throw e;
      tally(ctx.counters, 'staleTaken');
    }
  }
}

/**
 * A repeated ADD (no DEL in between; the spec forbids it, runtimes retry) is refused before anything is asked
 * or written: the attachment stays exactly as recorded. Not answered with the recorded result: the main plugin
 * in front of us (ptp, cilium-cni) would go on, fail on the interface that exists, and release its IPAM on that
 * failure, freeing the live address. A refused IPAM call leaves the main plugin nothing to undo.
 */
function repeatedAdd(ctx: VerbContext, previous: LedgerRecord): CniError {
  const { containerID, ifname } = attachmentOf(ctx);
  return new CniError(
    ErrorCode.InvalidEnvironment,
    `${attachmentName({ containerID, ifname })} is already attached to network ${ctx.conf.name} (${previous.ips.join(', ')})`,
    {
      details: `ADD without DEL for the same container ID and interface; nothing was changed (attached ${previous.updatedAt}). DEL it first.`,
    },
  );
}

async function addInIpamSlot(ctx: VerbContext): Promise<Result> {
  const delegate = ctx.delegate!;
  // Resolving the delegate first: a missing or mute delegate fails the ADD before anything is written.
  using versioning = span('delegate.version');
  const version = await delegate.versionFor(ctx.conf.cniVersion);
  versioning.end();
  const intentWritten = span('ledger.intent');
  return exclusively(ctx, async () => {
    const previous = await ctx.ledger.get(attachmentOf(ctx));
    if (previous?.state === 'attached') throw repeatedAdd(ctx, previous);
    // An intent record left here is a dead ADD's (no other one runs under this lock): taken over, and released
    // again by this ADD's undo if it fails.
    // The intent record comes next: if we die after the delegate allocated, GC still finds the attachment.
    // The namespace is the runtime's and held for the whole ADD: read once, kept in both records.
    const netnsId = readNetnsIdentity(ctx.env.netns);
    await ctx.ledger.put(record(ctx, 'intent', { ips: previous?.ips ?? [], subnets: previous?.subnets }, netnsId, previous));
    intentWritten.end();
    const run = prefetchFixes(ctx); // the fixes' listings run while the delegate allocates
    const conf = delegateConf(ctx.conf, version);
    let result: Result;
    try {
      using adding = span('delegate.add');
      result = await delegate.add(conf, ctx.conf.cniVersion);
      adding.end();
      const ips = resultIps(result, { delegate: delegate.type }); // Delegate.add refused a bad address already
      if (ips.length === 0) throw new CniError(ErrorCode.DelegateFailed, `delegate ${delegate.type} returned no IP addresses`);
      using addressing = span('address');
      await prepareAddresses(addressCall({ ...ctx, run }, ips, []));
      addressing.end();
      using writing = span('ledger.write');
      await putClaiming(ctx, record(ctx, 'attached', { ips, subnets: resultSubnets(result) }, netnsId, previous));
      writing.end();
      ctx.log.info({ ips, delegateVersion: version }, 'IPAM ADD');
      return result;
    } catch (e) {
      await undoAllocation(ctx, conf);
      throw e;
    }
  });
}

/**
 * Releases what this ADD's delegate call may have allocated and forgets the attachment; keeps the record if
 * that fails. Only ever reached under the attachment lock with no attached record before this call, so what it
 * releases is this call's (or a dead ADD's that never answered), never a live attachment.
 */
async function undoAllocation(ctx: VerbContext, conf: Record<string, unknown>): Promise<void> {
  try {
    using releasing = span('delegate.del');
    await ctx.delegate!.del(conf);
    releasing.end();
    await ctx.ledger.remove(attachmentOf(ctx));
  } catch (e) {
    ctx.log.error({ err: e }, 'ADD failed and the delegate DEL failed too: the intent record stays for GC');
  }
}

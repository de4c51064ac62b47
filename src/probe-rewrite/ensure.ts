// The IPv6 probe rewrite kept in place, as ADD and the node agent run it: decide() on this call's facts, then
// install, leave, or fail.
import { CniError, ErrorCode } from '../cni/errors.js';
import type { NetConf } from '../cni/config.js';
import type { Run } from '../effects/exec.js';
import { readDefaultUplink } from '../effects/uplink.js';
import type { Logger } from '../log.js';
import { span } from '../spans.js';
import { decide } from './decide.js';
import { ensureProbeRewrite, isProbeHandledByBpf, listProbeTable, probeFacts } from './node.js';
import { resolveOptions, type ProbeRewriteOptions } from './ruleset.js';

/** What ensureProbeRewriteIfDue did: nothing to do, installed/restored the table, left it to BPF, or failed. */
export type ProbeOutcome = 'off' | 'in-place' | 'ensured' | 'bpf' | 'failed';

/**
 * decide() on this call's facts (IPv6 addresses in play): `auto` leaves probes to a BPF handler on the uplink
 * whatever the table's state; `on` keeps the table regardless and its failures throw (they fail the ADD). ADD
 * calls it when it hands out an IPv6 address; the node agent when the ledger holds one.
 */
export async function ensureProbeRewriteIfDue(ctx: { conf: NetConf; run: Run; log: Logger }): Promise<ProbeOutcome> {
  const { ipv6ProbeRewrite: mode, uplink: configured, probeSource, probeGlobal } = ctx.conf.settings;
  if (mode === 'off') return 'off'; // decide() never acts when off: not even a read
  const probed = span('probe6');
  try {
    // The uplink lookup and the table listing are independent reads: one `ip` and one `nft` at once.
    const [found, listing] = await Promise.allSettled([configured ?? readDefaultUplink(ctx.run), listProbeTable(ctx.run)]);
    if (found.status === 'rejected') throw found.reason; // the uplink's failure first, as when they ran in turn
    const uplink = found.value;
    const opts: ProbeRewriteOptions | null = uplink
      ? { uplink, ...(probeSource ? { probeSource } : {}), ...(probeGlobal ? { probeGlobal } : {}) }
      : null;
    if (opts) resolveOptions(opts); // bad settings are code 7 before anything else
    if (listing.status === 'rejected') throw listing.reason;
    const read = { listed: listing.value, opts };
    const facts = probeFacts(read, mode, true);
    let d = decide(facts);
    if (d.action === 'look-for-bpf') d = decide(probeFacts({ ...read, bpf: await isProbeHandledByBpf(ctx.run, opts!.uplink) }, mode, true));
    switch (d.action) {
      case 'none':
        if (d.verdict === 'handled-by-bpf')
          ctx.log.info({ uplink, table: facts.table }, 'IPv6 probes are handled by a BPF program on the uplink; leaving the nftables rewrite alone');
        return d.verdict === 'handled-by-bpf' ? 'bpf' : 'in-place';
      case 'fail':
        throw d.verdict === 'no-uplink'
          ? new CniError(ErrorCode.InvalidNetworkConfig, 'no uplink for the IPv6 probe rewrite', { details: 'no default route; set "uplink"' })
          : new CniError(ErrorCode.InvalidNetworkConfig, 'nftables is not available for the IPv6 probe rewrite', {
              details: listing.value.available ? '' : listing.value.reason,
            });
      default: {
        const r = await ensureProbeRewrite(ctx.run, opts!);
        if (!r.available)
          throw new CniError(ErrorCode.InvalidNetworkConfig, 'nftables is not available for the IPv6 probe rewrite', { details: r.reason });
        ctx.log.info({ uplink, was: d.verdict }, 'ensured the IPv6 probe rewrite');
        return 'ensured';
      }
    }
  } catch (e) {
    if (mode === 'on') throw e;
    ctx.log.warn({ err: e }, 'IPv6 probe rewrite not ensured (ipv6ProbeRewrite=auto: continuing)');
    return 'failed';
  } finally {
    probed.end();
  }
}

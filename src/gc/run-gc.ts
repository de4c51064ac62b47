// GC end to end for one network: probe, plan, forward GC to a delegate that speaks 1.1.0, release the rest
// with delegate DELs. Shared by the GC verb and `ipam-shim gc`.
import { CniError, ErrorCode } from '../cni/errors.js';
import { delegateConf, type Attachment, type NetConf } from '../cni/config.js';
import type { IpamDelegate } from '../effects/delegate.js';
import type { LedgerStore } from '../effects/ledger.js';
import { probeAttachment } from '../effects/netns-probe.js';
import type { Run } from '../effects/exec.js';
import type { Logger } from '../log.js';
import { attachmentKey, needsProbe, planGc, type GcPlan, type Liveness } from './plan.js';

/** Delegate DELs GC runs at once. */
const RELEASE_PARALLEL = 4;

export interface GcOptions {
  conf: NetConf;
  ledger: LedgerStore;
  delegate: IpamDelegate | undefined;
  run: Run;
  log: Logger;
  valid: Attachment[];
  apply: boolean;
  graceMs: number;
  /** Forward GC to the delegate (the runtime's GC verb does; the operator command does too when it can). */
  forward: boolean;
}

export interface GcReport {
  plan: GcPlan;
  released: Attachment[];
  errors: Array<{ attachment?: Attachment; error: string; code: number }>;
  forwarded: boolean;
}

export async function runGc(o: GcOptions): Promise<GcReport> {
  const { records, corrupt } = await o.ledger.list();
  if (corrupt.length) {
    // A record we cannot read might hold a live address: release nothing until an operator fixes it.
    throw new CniError(ErrorCode.LedgerCorrupt, `ledger for network ${o.conf.name} has unreadable records; GC releases nothing`, {
      details: corrupt.join(', '),
    });
  }
  const liveness = new Map<string, Liveness>();
  await Promise.all(needsProbe(records, o.valid).map(async (r) => liveness.set(attachmentKey(r), await probeAttachment(o.run, r.netns, r.ips))));
  const plan = planGc({ records, valid: o.valid, liveness, now: Date.now(), graceMs: o.graceMs });
  for (const k of plan.kept.filter((k) => k.reason === 'alive')) {
    o.log.warn({ containerID: k.record.containerID, ifname: k.record.ifname, ips: k.record.ips }, "GC: attachment missing from the runtime's valid list is alive; kept");
  }
  const report: GcReport = { plan, released: [], errors: [], forwarded: false };
  if (!o.apply) return report;

  if (o.forward && o.delegate && (await o.delegate.speaks('1.1.0'))) {
    try {
      await o.delegate.gc(delegateConf(o.conf, '1.1.0', { 'cni.dev/valid-attachments': plan.keep, 'cni.dev/attachments': plan.keep }));
      report.forwarded = true;
    } catch (e) {
      report.errors.push(errorEntry(e));
    }
  }
  // A few releases at a time (different attachments: what a runtime's parallel DELs do anyway); the report keeps
  // the plan's order. One at a time, a large GC spent most of its time waiting for each delegate DEL in turn.
  const outcomes: Array<{ attachment: Attachment; error?: GcReport['errors'][number] }> = [];
  let next = 0;
  const releaser = async () => {
    while (next < plan.release.length) {
      const i = next++;
      const { record } = plan.release[i]!;
      const attachment = { containerID: record.containerID, ifname: record.ifname };
      try {
        if (o.delegate) {
          const version = await o.delegate.versionFor(o.conf.cniVersion);
          await o.delegate.del(delegateConf(o.conf, version), {
            CNI_CONTAINERID: record.containerID,
            CNI_IFNAME: record.ifname,
            CNI_NETNS: '',
            CNI_ARGS: '',
          });
        }
        await o.ledger.remove(attachment);
        outcomes[i] = { attachment };
        o.log.info({ containerID: record.containerID, ifname: record.ifname, ips: record.ips }, 'GC released');
      } catch (e) {
        outcomes[i] = { attachment, error: { attachment, ...errorEntry(e) } };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(RELEASE_PARALLEL, plan.release.length) }, releaser));
  for (const out of outcomes) {
    if (out.error) report.errors.push(out.error);
    else report.released.push(out.attachment);
  }
  return report;
}

function errorEntry(e: unknown): { error: string; code: number } {
  return e instanceof CniError ? { error: e.message, code: e.code } : { error: String((e as Error)?.message ?? e), code: ErrorCode.Internal };
}

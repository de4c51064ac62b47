// GC end to end for one network: probe, plan, forward GC to a delegate that speaks 1.1.0 (the GC verb only),
// release the rest with delegate DELs. Shared by the GC verb and `ipam-shim gc`.
import { CniError, ErrorCode } from '../cni/errors.js';
import { delegateConf, type Attachment, type NetConf } from '../cni/config.js';
import { attachmentKey, attachmentOfRecord } from '../ledger/key.js';
import type { IpamDelegate } from '../effects/delegate.js';
import { AttachmentBusy, exclusiveAttachment } from '../contract/attachment-lock.js';
import type { LedgerRecord, Liveness } from '../ledger/record.js';
import type { LedgerListing, LedgerStore } from '../ledger/store.js';
import { probeAttachment } from '../effects/netns-probe.js';
import type { Run } from '../effects/exec.js';
import type { Logger } from '../log.js';
import { delegateEnvFor, identityOf } from '../ledger/identity.js';
import { AZURE_IPAM, azureDelOutcome } from '../effects/azure-ipam.js';
import { needsProbe, planGc, type GcPlan } from './plan.js';

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
  /** Forward GC to the delegate: only the runtime's GC verb (libcni runs it exclusively, no ADD in flight). */
  forward: boolean;
  /** Once aborted (the node agent's SIGTERM), no further release starts; the ones under way finish. */
  signal?: AbortSignal | undefined;
  /** How long a release waits for its attachment's lock before leaving it for the next GC. */
  lockWaitMs?: number | undefined;
  /** Without `apply`: still forget the chained records planned for release (their record only; report.forgotten). */
  forgetChained?: boolean | undefined;
  /** Without `apply`: still forget the records in plan.deleted (the node agent's report mode; never a dry run). */
  forgetDeleted?: boolean | undefined;
  /**
   * The ledger as the caller has just listed it (gcFromCache, for its refusal): planned from, not listed again (a
   * listing of 5,000 records is 5,000 file reads and parses, and garbage the agent's heap carries to its peak).
   */
  listing?: LedgerListing | undefined;
}

/** A CNI call holds an attachment's lock for at most a few delegate calls; beyond that, the next GC will see. */
const DEFAULT_LOCK_WAIT_MS = 10_000;

export interface GcReport {
  plan: GcPlan;
  /** Released: the delegate's DEL for the attachment's identity succeeded (and azure-ipam did not queue it). */
  released: Attachment[];
  /**
   * The delegate answered DEL with success but only queued the release (azure-ipam with CNS down:
   * src/effects/azure-ipam.ts): the record is forgotten, the address comes back when CNS runs again.
   */
  queued: Attachment[];
  /**
   * Of `released`: azure-ipam answered success but its DEL queue could not be looked into (not mounted here), so a
   * release it only queued cannot be told from a real one. Said, never counted as proof.
   */
  queueUnseen: Attachment[];
  /** Chained records forgotten without `apply` (forgetChained): nothing was released through them. */
  forgotten: Attachment[];
  errors: Array<{ attachment?: Attachment; error: string; code: number }>;
  forwarded: boolean;
  /** Releases not started because `signal` aborted (they stay recorded for the next GC). */
  notStarted: number;
  /** Planned releases left alone: `busy` (a CNI call held the attachment's lock), `changed` (re-recorded since). */
  skipped: Array<Attachment & { why: 'busy' | 'changed' }>;
  /** plan.deleted settled: released through the delegate (apply) or forgotten (forgetDeleted). Not leaks. */
  settled: Attachment[];
}

export async function runGc(o: GcOptions): Promise<GcReport> {
  const { records, corrupt } = o.listing ?? (await o.ledger.list());
  if (corrupt.length) {
    // A record we cannot read might hold a live address: release nothing until an operator fixes it.
    throw new CniError(ErrorCode.LedgerCorrupt, `ledger for network ${o.conf.name} has unreadable records; GC releases nothing`, {
      details: corrupt.join(', '),
    });
  }
  const liveness = new Map<string, Liveness>();
  await Promise.all(needsProbe(records, o.valid).map(async (r) => liveness.set(attachmentKey(r), await probeAttachment(o.run, r))));
  const plan = planGc({ records, valid: o.valid, liveness, now: Date.now(), graceMs: o.graceMs, delegateDels: o.delegate !== undefined });
  for (const w of plan.withheld) {
    o.log.warn(
      { containerID: w.record.containerID, ifname: w.record.ifname, ips: w.record.ips, why: w.why, reason: w.reason, fix: w.fix },
      'GC: leaked attachment withheld: no DEL is sent for it',
    );
  }
  for (const k of plan.kept.filter((k) => k.reason === 'alive')) {
    o.log.warn(
      { containerID: k.record.containerID, ifname: k.record.ifname, ips: k.record.ips },
      "GC: attachment missing from the runtime's valid list is alive; kept",
    );
  }
  const report: GcReport = {
    plan,
    released: [],
    queued: [],
    queueUnseen: [],
    forgotten: [],
    errors: [],
    forwarded: false,
    notStarted: 0,
    skipped: [],
    settled: [],
  };
  if (!o.apply || o.signal?.aborted) {
    if (o.apply) {
      report.notStarted = plan.release.length;
      return report;
    }
    // Chained, a record is the shim's own note of the runtime's address (nothing allocated through it): a provably
    // dead pod's is forgotten even when nothing may be released, or it wedges its address for the next pod.
    if (o.forgetChained)
      await releaseEach(
        o,
        plan.release.filter((r) => r.record.placement === 'chained'),
        false,
        report,
      );
    if (o.forgetDeleted) await settleDeleted(o, false, report);
    return report;
  }

  if (o.forward && o.delegate && (await o.delegate.speaks('1.1.0'))) {
    try {
      await o.delegate.gc(delegateConf(o.conf, '1.1.0', { 'cni.dev/valid-attachments': plan.keep, 'cni.dev/attachments': plan.keep }));
      report.forwarded = true;
    } catch (e) {
      report.errors.push(errorEntry(e));
    }
  }
  await releaseEach(o, plan.release, true, report);
  await settleDeleted(o, true, report);
  return report;
}

/** What a round of releases adds up to (a GcReport's outcome fields). */
type Outcomes = Pick<GcReport, 'released' | 'queued' | 'queueUnseen' | 'forgotten' | 'errors' | 'skipped' | 'notStarted'>;

/** What releasing needs: the network's delegate and ledger, the log, the stop signal and the lock wait. */
type Releaser = Pick<GcOptions, 'conf' | 'ledger' | 'delegate' | 'log' | 'signal' | 'lockWaitMs'>;

/**
 * Releases leaks a report-mode plan found, as apply does (delegate DEL under the attachment's lock, only the record
 * that was planned), with one log line each carrying `detail`: the node agent's confirmed mode (src/gc/confirm.ts),
 * which releases only the leaks found in every pass of its window. Nothing is forwarded to the delegate's GC.
 */
export async function releasePlanned(
  o: Releaser,
  items: GcPlan['release'],
  label: string,
  detail: (record: LedgerRecord) => Record<string, unknown>,
): Promise<Outcomes> {
  const out: Outcomes = { released: [], queued: [], queueUnseen: [], forgotten: [], errors: [], skipped: [], notStarted: 0 };
  await releaseEach(o, items, true, out, label, detail);
  return out;
}

/**
 * plan.deleted, released (`releaseAddress`, and only where the plan allows a DEL for it: `delegateDel`) or
 * forgotten like any planned record, reported apart from leaks.
 */
async function settleDeleted(o: GcOptions, releaseAddress: boolean, report: GcReport): Promise<void> {
  for (const del of [true, false]) {
    const items = report.plan.deleted.filter((d) => d.delegateDel === del);
    if (!items.length) continue;
    const release = releaseAddress && del;
    const part: GcReport = {
      ...report,
      released: [],
      queued: [],
      queueUnseen: [],
      forgotten: [],
      errors: [],
      skipped: [],
      settled: [],
      notStarted: 0,
    };
    const label = release ? 'settled a DELed record (delegate DEL, then forgotten)' : 'settled a DELed record (forgotten)';
    await releaseEach(o, items, release, part, label);
    report.settled.push(...part.released, ...part.queued, ...part.forgotten);
    report.queueUnseen.push(...part.queueUnseen);
    report.errors.push(...part.errors);
    report.skipped.push(...part.skipped);
    report.notStarted += part.notStarted;
  }
}

/** Releases (or, without `releaseAddress`, only forgets) each planned record; outcomes into `report`, in plan order. */
async function releaseEach(
  o: Releaser,
  items: GcPlan['release'],
  releaseAddress: boolean,
  report: Outcomes,
  label?: string,
  detail?: (record: LedgerRecord) => Record<string, unknown>,
): Promise<void> {
  // A few releases at a time (different attachments: what a runtime's parallel DELs do anyway); the report keeps
  // the plan's order. One at a time, a large GC spent most of its time waiting for each delegate DEL in turn.
  const outcomes: Array<{
    attachment: Attachment;
    error?: GcReport['errors'][number];
    skipped?: 'busy' | 'changed';
    queued?: boolean;
    queueUnseen?: boolean;
  }> = [];
  let next = 0;
  const what = label ?? (releaseAddress ? 'released' : 'forgot (chained: no address to release)');
  const releaser = async () => {
    while (next < items.length && !o.signal?.aborted) {
      const i = next++;
      const { record } = items[i]!;
      const attachment = attachmentOfRecord(record);
      try {
        // As the only ADD, DEL or CHECK of this attachment would (never interleaved with one), and only what the
        // plan saw: a record rewritten since (the runtime reused the ID) is left for the next GC.
        const done = await releaseRecord(o, record, o.lockWaitMs ?? DEFAULT_LOCK_WAIT_MS, releaseAddress);
        if (done === 'queued') {
          outcomes[i] = { attachment, queued: true };
          o.log.warn(
            { containerID: record.containerID, ifname: record.ifname, ips: record.ips, ...detail?.(record) },
            `GC: queued by the delegate (${AZURE_IPAM} could not reach CNS: the addresses come back when CNS runs); record forgotten`,
          );
        } else if (done) {
          outcomes[i] = { attachment, queueUnseen: done === 'unseen' };
          o.log.info(
            {
              containerID: record.containerID,
              ifname: record.ifname,
              ips: record.ips,
              ...detail?.(record),
              ...(done === 'unseen' ? { deleteQueue: 'not visible' } : {}),
            },
            `GC ${what}`,
          );
        } else {
          outcomes[i] = { attachment, skipped: 'changed' };
          o.log.info({ containerID: record.containerID, ifname: record.ifname }, 'GC: the record changed since it was planned; left for the next GC');
        }
      } catch (e) {
        if (e instanceof AttachmentBusy) {
          // An ADD, DEL or CHECK of it is running right now: not a leak to act on now.
          outcomes[i] = { attachment, skipped: 'busy' };
          o.log.info(
            { containerID: record.containerID, ifname: record.ifname },
            'GC: the attachment is busy (a CNI call holds it); left for the next GC',
          );
        } else outcomes[i] = { attachment, error: { attachment, ...errorEntry(e) } };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(RELEASE_PARALLEL, items.length) }, releaser));
  report.notStarted = items.length - next;
  for (const out of outcomes) {
    if (!out) continue;
    if (out.error) report.errors.push(out.error);
    else if (out.skipped) report.skipped.push({ ...out.attachment, why: out.skipped });
    else if (out.queued) report.queued.push(out.attachment);
    else (releaseAddress ? report.released : report.forgotten).push(out.attachment);
    if (out.queueUnseen) report.queueUnseen.push(out.attachment);
  }
}

/**
 * Releases one recorded attachment as the only ADD, DEL or CHECK of it would (never interleaved with one: under its
 * lock, AttachmentBusy when a call holds it past `lockWaitMs`), and only the record that was planned:
 * false, untouched, when it was rewritten since (the runtime reused the ID). The delegate's DEL first (when there is
 * one and `releaseAddress`), carrying the attachment's identity (src/ledger/identity.ts), then the record.
 * `queued`/`unseen`: azure-ipam's DEL queued the release / its queue could not be looked into (src/effects/azure-ipam.ts).
 */
async function releaseRecord(
  o: Pick<GcOptions, 'conf' | 'ledger' | 'delegate'>,
  record: LedgerRecord,
  lockWaitMs: number,
  releaseAddress = true,
): Promise<boolean | 'queued' | 'unseen'> {
  const attachment = attachmentOfRecord(record);
  return exclusiveAttachment(
    o.ledger,
    attachment,
    async () => {
      const current = await o.ledger.get(attachment);
      if (current?.updatedAt !== record.updatedAt) return false;
      let outcome: true | 'queued' | 'unseen' = true;
      if (o.delegate && releaseAddress) {
        const id = identityOf(record);
        // The plan withholds these (src/gc/plan.ts); never a DEL that names no pod for a record that may be a pod's.
        if (id.kind === 'unknown')
          throw new CniError(ErrorCode.Internal, `${record.containerID}: no identity to release it under`, { details: id.why });
        const version = await o.delegate.versionFor(o.conf.cniVersion);
        await o.delegate.del(delegateConf(o.conf, version), delegateEnvFor(record, id.cniArgs));
        if (o.delegate.type === AZURE_IPAM) {
          const seen = azureDelOutcome(record.containerID);
          if (seen !== 'released') outcome = seen;
        }
      }
      await o.ledger.remove(attachment);
      return outcome;
    },
    lockWaitMs,
  );
}

function errorEntry(e: unknown): { error: string; code: number } {
  return e instanceof CniError ? { error: e.message, code: e.code } : { error: String((e as Error)?.message ?? e), code: ErrorCode.Internal };
}

// Which ledger attachments GC may release. Pure: the effects (netns probes, delegate DELs) happen around it,
// so the GC verb, `ipam-shim gc` and its dry run all decide the same way.
import type { Attachment } from '../cni/config.js';
import { attachmentKey, attachmentOfRecord } from '../ledger/key.js';
import type { LedgerRecord, Liveness } from '../ledger/record.js';
import { identityOf, podKeyOf } from '../ledger/identity.js';

type KeepReason = 'valid' | 'agent' | 'alive' | 'unknown' | 'recent';

export interface GcPlan {
  /** What the delegate's GC gets as its valid list: valid ∪ everything kept here. */
  keep: Attachment[];
  kept: Array<{ record: LedgerRecord; reason: KeepReason }>;
  release: Array<{ record: LedgerRecord; reason: string }>;
  /**
   * Leaked, but no DEL is sent for them (src/ledger/identity.ts): `no-identity`, an older shim's record that names
   * no pod (a DEL naming none releases the empty key's addresses); `shared-identity`, its pod (namespace/name) is
   * also a kept attachment's (a StatefulSet pod re-created under its name: a pod-keyed store would release the live
   * pod's addresses). Reported with what the operator should do; in `keep` for the delegate's GC.
   */
  withheld: Array<{ record: LedgerRecord; why: 'no-identity' | 'shared-identity'; reason: string; fix: string }>;
  /**
   * Chained records the runtime DELed (`deletedAt`), not valid and provably gone: the main plugin's DEL released the
   * address, or never completed (the runtime lost its entry). Not leaks: with apply released through the delegate's
   * DEL (a no-op when the main plugin did it: DEL is per attachment), else only forgotten, as DEL did before.
   * `delegateDel` false: a DEL would be withheld (the identity rules above), so the record is only forgotten.
   */
  deleted: Array<{ record: LedgerRecord; reason: string; delegateDel: boolean }>;
}

export interface GcInputs {
  records: LedgerRecord[];
  valid: Attachment[];
  /** Liveness per record key ("cid:ifname"), probed by the caller for records not otherwise kept. */
  liveness: ReadonlyMap<string, Liveness>;
  now: number;
  /** Records younger than this are kept (an ADD may be in flight when GC is not exclusive). */
  graceMs: number;
  /**
   * Whether a release sends the delegate a DEL (there is a delegate): only then does a record's identity matter
   * (withheld). Without one a release only forgets the record.
   */
  delegateDels?: boolean;
}

/** Records that need a liveness probe: not valid, not the agent's. */
export function needsProbe(records: LedgerRecord[], valid: Attachment[]): LedgerRecord[] {
  const validKeys = new Set(valid.map(attachmentKey));
  return records.filter((r) => r.owner !== 'agent' && !validKeys.has(attachmentKey(r)));
}

export function planGc({ records, valid, liveness, now, graceMs, delegateDels = true }: GcInputs): GcPlan {
  const validKeys = new Set(valid.map(attachmentKey));
  const plan: GcPlan = { keep: valid.map(({ containerID, ifname }) => ({ containerID, ifname })), kept: [], release: [], withheld: [], deleted: [] };
  const keep = (record: LedgerRecord, reason: KeepReason) => {
    plan.kept.push({ record, reason });
    if (!validKeys.has(attachmentKey(record))) plan.keep.push(attachmentOfRecord(record));
  };
  const candidates: GcPlan['release'] = [];
  const deleted: GcPlan['release'] = [];
  for (const record of records) {
    const key = attachmentKey(record);
    if (validKeys.has(key)) keep(record, 'valid');
    else if (record.owner === 'agent') keep(record, 'agent');
    else if (now - Date.parse(record.updatedAt) < graceMs) keep(record, 'recent');
    else {
      const state = liveness.get(key) ?? 'unknown';
      if (state === 'alive') keep(record, 'alive');
      else if (state === 'unknown') keep(record, 'unknown');
      else if (record.deletedAt)
        deleted.push({ record, reason: 'DELed by the runtime, no longer cached, and its sandbox is gone or holds none of its addresses' });
      else
        candidates.push({
          record,
          reason:
            record.state === 'intent'
              ? 'ADD never completed and the sandbox holds none of its addresses'
              : 'not valid and its sandbox is gone or holds none of its addresses',
        });
    }
  }
  if (!delegateDels) {
    plan.release = candidates;
    plan.deleted = deleted.map((d) => ({ ...d, delegateDel: false }));
    return plan;
  }
  // The pods the kept attachments name, as a pod-keyed store keys them: a DEL naming one releases a live pod's.
  const keptPods = new Set<string>();
  // An older shim's agent-ip record was allocated naming no pod: to a pod-keyed store it is the empty key, which
  // a DEL naming no pod would release.
  let keptNameless: LedgerRecord | undefined;
  for (const { record } of plan.kept) {
    const id = identityOf(record);
    const pod = id.kind === 'unknown' ? undefined : podKeyOf(id.cniArgs);
    if (pod !== undefined) keptPods.add(pod);
    if (id.kind === 'agent-ip-legacy') keptNameless ??= record;
  }
  /** Why a DEL for `c` must not be sent, or undefined when it may. */
  const guard = (c: GcPlan['release'][number]): Omit<GcPlan['withheld'][number], 'record'> | undefined => {
    const id = identityOf(c.record);
    if (id.kind === 'unknown') return { why: 'no-identity', reason: `${c.reason}, but ${id.why}`, fix: id.fix };
    const pod = podKeyOf(id.cniArgs);
    if (pod !== undefined && keptPods.has(pod))
      return {
        why: 'shared-identity',
        reason: `${c.reason}, but its pod ${pod} is also a kept attachment's (a pod re-created under the same name): a DEL for it would release the live pod's addresses in an IPAM keyed by pod (azure-ipam over CNS)`,
        fix: `nothing to do while the pod ${pod} runs: GC releases this record once that pod is gone (with a delegate keyed by container ID, such as host-local, remove the record file and DEL it by hand if the address must come back sooner)`,
      };
    if (pod === undefined && keptNameless)
      return {
        why: 'shared-identity',
        reason: `${c.reason}, but its DEL would name no pod, as the allocation of ${keptNameless.containerID} (written by an older ipam-shim) does: in an IPAM keyed by pod (azure-ipam over CNS) it would release cilium-agent's address`,
        fix: `give cilium-agent its own identity first: \`ipam-shim agent-ip release --owner OWNER\` then \`ipam-shim agent-ip allocate --owner OWNER\` (a new address: restart cilium-agent), then GC releases this`,
      };
    return undefined;
  };
  for (const c of candidates) {
    const held = guard(c);
    if (held) {
      plan.withheld.push({ record: c.record, ...held });
      plan.keep.push(attachmentOfRecord(c.record));
    } else plan.release.push(c);
  }
  // A DELed record is the runtime's to release (its main plugin's DEL): a DEL the guard refuses is simply not sent.
  for (const d of deleted) plan.deleted.push({ ...d, delegateDel: guard(d) === undefined });
  return plan;
}

// What a ledger record is, apart from where it is kept: its shape and format (an upgrade contract: records carry
// `v`, never renamed; docs/upgrade.md), how a file's text becomes a record, whose attachment a container ID is,
// which records must outlive a power loss, and the refusal of a second owner for one address. The file store that
// applies these rules is src/effects/ledger.ts.
import * as z from '../cni/zod.js';
import { CniError, ErrorCode, formatIssues } from '../cni/errors.js';
import type { Attachment } from '../cni/config.js';
import { attachmentKey } from './key.js';

/**
 * The namespace CNI_NETNS named at ADD (src/effects/netns-probe.ts `readNetnsIdentity`): its nsfs device and inode,
 * and the namespaces the ADD saw the path from (its mount namespace; its pid namespace when /proc was its own), by
 * inode on the same nsfs device. GC and a later ADD tell from it that the path now names another namespace
 * (src/ledger/netns-liveness.ts).
 */
const NetnsIdentitySchema = z.object({
  dev: z.number(),
  ino: z.number(),
  mntns: z.optional(z.number()),
  pidns: z.optional(z.number()),
});
export type NetnsIdentity = z.infer<typeof NetnsIdentitySchema>;

const LedgerRecordSchema = z.object({
  v: z.literal(1),
  containerID: z.string(),
  ifname: z.string(),
  network: z.string(),
  owner: z.enum(['pod', 'agent']),
  /** `intent`: written before a delegate ADD, so a crash after the delegate allocated still leaves a trace for GC. */
  state: z.enum(['intent', 'attached']),
  placement: z.enum(['chained', 'ipam', 'cli']),
  ips: z.array(z.string()),
  /**
   * The subnets `ips` were handed out in, as the result the shim saw gave them (src/cni/result.ts resultSubnets):
   * the network's pod ranges when its IPAM has none to read (src/ledger/subnets.ts). Optional and added within
   * format 1 like `pod`: an older shim's record has none and names no subnet.
   */
  subnets: z.optional(z.array(z.string())),
  netns: z.string(),
  createdAt: z.string(),
  updatedAt: z.string(),
  note: z.optional(z.string()),
  /**
   * Chained: when the runtime's DEL reached the shim. The main plugin's DEL runs after ours and may fail (cilium-cni
   * while its agent is down), so the record stays, as the evidence GC releases through, until GC sees the pod gone
   * (src/gc/plan.ts `deleted`). Optional within format 1 like `pod`: an older reader keeps it as attached.
   */
  deletedAt: z.optional(z.string()),
  /**
   * The pod, as CNI_ARGS named it at ADD (src/cni/env.ts). Optional and added within format 1: a v1 reader that
   * does not know it ignores it (the schema strips unknown keys), so no `v` bump (docs/upgrade.md).
   */
  pod: z.optional(z.object({ namespace: z.optional(z.string()), name: z.optional(z.string()), uid: z.optional(z.string()) })),
  /** Optional and added within format 1 like `pod`: a record without it (an older shim's) keeps the older rules. */
  netnsId: z.optional(NetnsIdentitySchema),
  /**
   * The CNI_ARGS of the attachment's ADD, every pair as the runtime gave them ('' when it gave none); agent-ip's
   * own identity for its records. Every DEL and CHECK the shim sends itself carries them (src/ledger/identity.ts).
   * Optional and added within format 1 like `pod`: an older shim's record has none (identity.ts says what then).
   */
  cniArgs: z.optional(z.string()),
  /**
   * agent-ip's last confirmation that the delegate still holds `ips` (src/agent-ips/allocate.ts): by a CHECK that
   * can fail, by a repeated ADD for the same identity that answered them, or `none` (unverified: neither could
   * prove it), and since when (`at`: rewritten only when `by` or `why` changes). Absent: allocated, not confirmed
   * since. Optional within format 1 like `pod`.
   */
  verified: z.optional(z.object({ by: z.enum(['check', 'add', 'none']), at: z.string(), why: z.optional(z.string()) })),
});
export type LedgerRecord = z.infer<typeof LedgerRecordSchema>;

export const sameAttachment = (a: Attachment, b: Attachment): boolean => a.containerID === b.containerID && a.ifname === b.ifname;

/** The record format this code reads and writes (`v`; docs/upgrade.md). */
export const LEDGER_FORMAT = 1;

/**
 * A record written by a newer ipam-shim (a higher `v`, after a downgrade): refused with 103 on every path, never
 * rewritten or removed, since it may hold what this version cannot undo. Upgrading again reads it.
 */
export class NewerLedgerFormatError extends CniError {}

/**
 * A record file's text → the record (undefined for a missing file). Text that is no record → code 103 naming
 * `path`; a newer format → NewerLedgerFormatError.
 */
export function parseLedgerRecord(path: string, text: string | undefined): LedgerRecord | undefined {
  if (text === undefined) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw new CniError(ErrorCode.LedgerCorrupt, `ledger record corrupt: ${path}`, { details: (e as Error).message });
  }
  const v = (parsed as { v?: unknown } | null)?.v;
  if (typeof v === 'number' && v > LEDGER_FORMAT) {
    throw new NewerLedgerFormatError(
      ErrorCode.LedgerCorrupt,
      `ledger record written by a newer ipam-shim (format v${v}, this one reads v${LEDGER_FORMAT}): ${path}`,
      {
        details: 'left as it is: upgrade ipam-shim again to act on it (docs/upgrade.md)',
      },
    );
  }
  const r = LedgerRecordSchema.safeParse(parsed);
  if (!r.success) throw new CniError(ErrorCode.LedgerCorrupt, `ledger record corrupt: ${path}`, { details: formatIssues(r.error.issues) });
  return r.data;
}

/** Ledger.put refused a record: `ip` is recorded for another attachment, `holder` (code 11). */
export class AddressHeldError extends CniError {
  constructor(
    readonly ip: string,
    readonly holder: LedgerRecord,
    network: string,
  ) {
    super(ErrorCode.TryAgainLater, `address ${ip} is already recorded for ${attachmentKey(holder)} (owner ${holder.owner})`, {
      details: `network ${network}: the IPAM handed out an address the ledger holds for a pod that is not provably gone (its netns exists and holds the address, or cannot be looked into); has the IPAM's store lost state?`,
    });
  }
}

/**
 * Whether a recorded attachment is provably alive (src/effects/netns-probe.ts looks): `dead` only with proof,
 * `unknown` when it could not look (GC treats it as alive).
 */
export type Liveness = 'alive' | 'dead' | 'unknown';

/**
 * Whether a record's writes (and its removal) must outlive a power loss, by its owner: the durability policy of
 * fs-atomic.ts. The agent's own IPs are allocated once and kept across reboots: fsynced. A pod's are not: a power
 * loss ends every pod on the node, and its record only has to survive a SIGKILL, which needs no fsync.
 */
export const durableFor = (owner: LedgerRecord['owner']): boolean => owner === 'agent';

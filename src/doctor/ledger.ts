// Doctor's ledger check: the ledger against the delegate's own store (host-local only: its files can be read).
import { join } from 'node:path';
import { attachmentName } from '../cni/config.js';
import type { LedgerRecord } from '../ledger/record.js';
import { HOST_LOCAL_DEFAULT_DATA_DIR, ipKey, readHostLocalStore, type StoreEntry } from '../effects/host-local-store.js';
import { type DoctorCheck, type Finding, list } from '../contract/doctor-check.js';
import { effectiveIpam, typeOf } from './ipam-config.js';

interface StoreComparison {
  /** Ledger IPs host-local has no reservation for (it may hand them out again). */
  missing: Array<{ record: LedgerRecord; ip: string }>;
  /** Ledger IPs host-local reserved for someone else. */
  conflicting: Array<{ record: LedgerRecord; ip: string; holder: StoreEntry }>;
  /** Reservations for attachments the ledger does not know. */
  unknown: StoreEntry[];
  /** Intent records: an ADD in progress, or one that died between the delegate and the ledger. */
  intents: LedgerRecord[];
}

/** PURE: ledger records against host-local's reservations. */
function compareWithStore(records: LedgerRecord[], store: StoreEntry[]): StoreComparison {
  const byIp = new Map(store.map((s) => [ipKey(s.ip)!, s]));
  const out: StoreComparison = { missing: [], conflicting: [], unknown: [], intents: [] };
  for (const record of records) {
    if (record.state === 'intent') {
      out.intents.push(record);
      continue;
    }
    for (const ip of record.ips) {
      const holder = byIp.get(ipKey(ip) ?? '');
      if (!holder) out.missing.push({ record, ip });
      else if (holder.containerID !== record.containerID || (holder.ifname !== undefined && holder.ifname !== record.ifname))
        out.conflicting.push({ record, ip, holder });
    }
  }
  const conflicted = new Set(out.conflicting.map((c) => ipKey(c.ip)));
  for (const s of store) {
    // Any record of that attachment (an intent has no IPs yet) owns the reservation; a conflict is reported once.
    const owned = records.some((r) => r.containerID === s.containerID && (s.ifname === undefined || r.ifname === s.ifname));
    if (!owned && !conflicted.has(ipKey(s.ip))) out.unknown.push(s);
  }
  return out;
}

export const ledgerCheck: DoctorCheck = {
  name: 'ledger',
  async run(net) {
    const name = this.name;
    const ipam = effectiveIpam(net);
    const type = typeOf(ipam);
    if (!ipam || type !== 'host-local') {
      return [
        {
          check: name,
          verdict: 'skipped',
          summary: `cannot compare the ledger with ${type ?? 'the IPAM plugin'}'s store: only host-local's files can be read`,
        },
      ];
    }
    const dataDir = typeof ipam.dataDir === 'string' && ipam.dataDir ? ipam.dataDir : HOST_LOCAL_DEFAULT_DATA_DIR;
    const storeDir = join(dataDir, net.conf.name);
    const store = (await readHostLocalStore(storeDir)) ?? [];
    let records: LedgerRecord[];
    let corrupt: string[];
    try {
      ({ records, corrupt } = await net.ledger.list());
    } catch (e) {
      return [{ check: name, verdict: 'skipped', summary: `the ledger cannot be read (${(e as Error).message}); see the state-dir check` }];
    }
    const cmp = compareWithStore(records, store);
    const out: Finding[] = [];
    if (cmp.missing.length) {
      out.push({
        check: name,
        verdict: 'problem',
        summary: `${cmp.missing.length} ledger address(es) have no reservation in ${storeDir}: ${list(cmp.missing.map((m) => `${m.ip} (${attachmentName(m.record)})`))}`,
        fix: `host-local may hand these out again (duplicate IPs). If the container is gone: ipam-shim gc --network ${net.conf.name} --apply; if it runs, recreate the pod`,
        data: cmp.missing.map((m) => ({ ip: m.ip, containerID: m.record.containerID, ifname: m.record.ifname })),
      });
    }
    if (cmp.conflicting.length) {
      out.push({
        check: name,
        verdict: 'problem',
        summary: `${cmp.conflicting.length} address(es) are reserved in ${storeDir} for another attachment: ${list(cmp.conflicting.map((c) => `${c.ip} ledger ${attachmentName(c.record)}, store ${attachmentName({ containerID: c.holder.containerID, ifname: c.holder.ifname ?? '?' })}`))}`,
        fix: 'two attachments claim one address: find which pod really has it (ip addr in its netns) and recreate the other',
        data: cmp.conflicting.map((c) => ({
          ip: c.ip,
          ledger: attachmentName(c.record),
          store: attachmentName({ containerID: c.holder.containerID, ifname: c.holder.ifname ?? '' }),
        })),
      });
    }
    if (cmp.unknown.length && corrupt.length) {
      // An unreadable record may be the one that owns these reservations (a live pod's address): advice to remove
      // one would rest on a fact nobody could read. Point at the records instead.
      out.push({
        check: name,
        verdict: 'warn',
        summary: `${cmp.unknown.length} reservation(s) in ${storeDir} match no readable ledger record, and ${corrupt.length} record(s) are unreadable and may own them: ${list(cmp.unknown.map((u) => `${u.ip} (${attachmentName({ containerID: u.containerID, ifname: u.ifname ?? '?' })})`))}`,
        fix: `fix the unreadable ledger records first (see the state-dir check: ${list(corrupt, 3)}); leave the reservations alone until then`,
        data: { unknown: cmp.unknown, corrupt },
      });
    } else if (cmp.unknown.length) {
      out.push({
        check: name,
        verdict: 'warn',
        summary: `${cmp.unknown.length} reservation(s) in ${storeDir} for attachments the ledger does not know: ${list(cmp.unknown.map((u) => `${u.ip} (${attachmentName({ containerID: u.containerID, ifname: u.ifname ?? '?' })})`))}`,
        fix: `allocated before the shim was installed, by another caller, or leaked. If no container uses one, remove its file in ${storeDir} by hand (ipam-shim never edits the delegate's store)`,
        data: cmp.unknown,
      });
    }
    if (cmp.intents.length) {
      out.push({
        check: name,
        verdict: 'warn',
        summary: `${cmp.intents.length} unfinished ADD(s) (intent records): ${list(cmp.intents.map(attachmentName))}`,
        fix: "an ADD is running or died midway; if it persists, the runtime's DEL (or ipam-shim gc --apply) clears it",
      });
    }
    if (!out.length)
      out.push({ check: name, verdict: 'ok', summary: `${records.length} ledger record(s) match ${store.length} reservation(s) in ${storeDir}` });
    return out;
  },
};

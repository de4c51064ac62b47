// Doctor checks for the node itself: the conflists and the shim's place in them, the shim and its delegate on
// the CNI path, the state directory, and the ledger against the delegate's own store. Read-only: they report,
// never repair (not even the delegate's VERSION cache is written).
import { lstat, readdir, readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { PLUGIN_TYPE } from '../cni/config.js';
import { isSupported } from '../cni/versions.js';
import { conflistFiles, holdsShim } from '../conflist.js';
import { Delegate } from '../effects/delegate.js';
import type { LedgerRecord } from '../effects/ledger.js';
import { parseIp } from '../net/ip.js';
import type { OpenNetwork } from '../cli/network.js';
import type { DoctorCheck, Finding } from './check.js';

export const HOST_LOCAL_DEFAULT_DATA_DIR = '/var/lib/cni/networks';
const ANCHOR = 'cilium-cni';
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const typeOf = (v: unknown): string | undefined => (isObject(v) && typeof v.type === 'string' ? v.type : undefined);

function sameJson(a: unknown, b: unknown): boolean {
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k]));
  }
  return a === b;
}

/** The plugin that allocates the addresses the chained shim sees: cilium-cni if listed, else the one before it. */
function allocator(net: OpenNetwork): Record<string, unknown> | undefined {
  const plugins = (net.shim.list.plugins as unknown[]) ?? [];
  const cilium = plugins.find((p) => typeOf(p) === ANCHOR);
  if (cilium) return cilium as Record<string, unknown>;
  const prev = plugins[net.shim.index - 1];
  return isObject(prev) ? prev : undefined;
}

/** The IPAM config whose store the ledger mirrors: `delegate`, or (chained without one) the allocator's `ipam`. */
export function effectiveIpam(net: OpenNetwork): Record<string, unknown> | undefined {
  if (net.conf.settings.delegate) return net.conf.settings.delegate;
  const ipam = allocator(net)?.ipam;
  return isObject(ipam) ? ipam : undefined;
}

const list = (items: string[], max = 5): string => items.slice(0, max).join(', ') + (items.length > max ? ` (+${items.length - max} more)` : '');

// ---------------------------------------------------------------------------------------------------------------

export const conflistCheck: DoctorCheck = {
  name: 'conflist',
  async run(net) {
    const name = this.name;
    const out: Finding[] = [];
    const dir = dirname(net.shim.path);
    const files = await conflistFiles(dir);
    const valid: string[] = [];
    for (const f of files) {
      try {
        const v = JSON.parse(await readFile(f, 'utf8')) as unknown;
        if (!isObject(v)) throw new Error('not a JSON object');
        if (f.endsWith('.conflist') && !(Array.isArray(v.plugins) && v.plugins.length && v.plugins.every((p) => typeOf(p)))) throw new Error('"plugins" must be a non-empty list of objects with a "type"');
        valid.push(f);
      } catch (e) {
        out.push({ check: name, verdict: 'problem', summary: `${f} is not a valid network config: ${(e as Error).message}`, fix: 'fix or remove the file: runtimes stop at configs they cannot parse' });
      }
    }
    if (valid[0] && valid[0] !== net.shim.path) {
      out.push({
        check: name,
        verdict: 'warn',
        summary: `runtimes read ${valid[0]} first; the shim is in ${net.shim.path}`,
        fix: 'the runtime uses the first config in lexical order: make the shim\'s conflist sort first (or remove the other)',
      });
    }
    const plugins = net.shim.list.plugins as unknown[];
    const shims = plugins.filter(holdsShim).length;
    if (shims > 1) out.push({ check: name, verdict: 'problem', summary: `${shims} plugin entries in ${net.shim.path} name ipam-shim`, fix: 'keep one (ipam-shim install puts exactly one after cilium-cni)' });

    const types = plugins.map((p) => typeOf(p) ?? '?');
    if (net.conf.placement === 'chained') {
      const i = net.shim.index;
      const ciliumAt = types.indexOf(ANCHOR);
      const prev = plugins[i - 1];
      if (i === 0) {
        out.push({ check: name, verdict: 'problem', summary: 'the shim is the first plugin: it never gets a prevResult, every ADD fails (code 7)', fix: 'list it right after cilium-cni (ipam-shim install does)' });
      } else if (ciliumAt >= 0 && ciliumAt !== i - 1) {
        out.push({ check: name, verdict: 'warn', summary: `the shim is plugin ${i} (${types.join(' → ')}), not right after cilium-cni`, fix: 'run ipam-shim install: it moves the entry right after cilium-cni' });
      } else if (ciliumAt < 0 && !isObject(isObject(prev) ? prev.ipam : undefined)) {
        out.push({ check: name, verdict: 'warn', summary: `the plugin before the shim (${typeOf(prev)}) allocates no addresses`, fix: 'chain the shim after the plugin that allocates (cilium-cni)' });
      } else {
        out.push({ check: name, verdict: 'ok', summary: `chained after ${typeOf(prev)} in ${net.shim.path} (${types.join(' → ')})` });
      }
      const ipam = allocator(net)?.ipam;
      const delegate = net.conf.settings.delegate;
      const allocType = typeOf(allocator(net));
      if (!isObject(ipam)) {
        if (!delegate) out.push({ check: name, verdict: 'warn', summary: 'no "delegate" and no IPAM config to mirror', fix: 'set "delegate" to the IPAM config cilium-cni uses' });
      } else if (!delegate) {
        out.push({ check: name, verdict: 'warn', summary: `no "delegate": GC, STATUS and agent IPs cannot reach ${typeOf(ipam)}`, fix: `set "delegate" to ${allocType}'s ipam config: ${JSON.stringify(ipam)} (ipam-shim install does this by default)` });
      } else if (delegate.type !== ipam.type) {
        out.push({ check: name, verdict: 'problem', summary: `delegate is ${delegate.type} but ${allocType} allocates with ${String(ipam.type)}`, fix: `set "delegate" to ${JSON.stringify(ipam)}: GC would release through the wrong plugin` });
      } else if (!sameJson(delegate, ipam)) {
        const keys = [...new Set([...Object.keys(delegate), ...Object.keys(ipam)])].filter((k) => !sameJson(delegate[k], ipam[k]));
        out.push({ check: name, verdict: 'warn', summary: `delegate and ${allocType}'s ipam differ in ${keys.join(', ')}`, fix: `make "delegate" equal to ${JSON.stringify(ipam)}` });
      } else {
        out.push({ check: name, verdict: 'ok', summary: `delegate matches ${allocType}'s IPAM config (${delegate.type})` });
      }
    } else {
      const host = plugins[net.shim.index];
      out.push({ check: name, verdict: 'ok', summary: `in the IPAM slot of ${typeOf(host)} in ${net.shim.path}, wrapping ${net.conf.settings.delegate?.type}` });
    }
    return out;
  },
};

export const binaryCheck: DoctorCheck = {
  name: 'shim-binary',
  async run(net) {
    const path = await new Delegate({ type: PLUGIN_TYPE, cniPath: net.cniPath, env: {}, timeoutMs: 10_000, log: net.log, run: net.run })
      .find()
      .catch(() => undefined);
    if (!path) {
      return [{ check: this.name, verdict: 'problem', summary: `${PLUGIN_TYPE} is not on the CNI path (${net.cniPath.join(':')}): every pod ADD fails`, fix: 'ipam-shim install --cni-bin-dir <the runtime\'s bin dir>' }];
    }
    const r = await net.run(path, [], {
      input: JSON.stringify({ cniVersion: net.conf.cniVersion }),
      env: { CNI_COMMAND: 'VERSION', CNI_CONTAINERID: '', CNI_NETNS: 'dummy', CNI_IFNAME: 'dummy', CNI_PATH: 'dummy' },
      timeoutMs: 10_000,
      check: false,
    });
    let versions: unknown;
    try {
      versions = (JSON.parse(r.stdout) as { supportedVersions?: unknown }).supportedVersions;
    } catch {
      versions = undefined;
    }
    if (r.exitCode !== 0 || !Array.isArray(versions)) {
      return [{ check: this.name, verdict: 'problem', summary: `${path} does not answer VERSION (exit ${r.exitCode ?? 'signal'}): ${(r.stderr || r.stdout).trim().slice(0, 200)}`, fix: 'reinstall: ipam-shim install (the copy may be truncated or built for another platform)' }];
    }
    if (!versions.includes(net.conf.cniVersion)) {
      return [{ check: this.name, verdict: 'problem', summary: `${path} speaks ${versions.join(', ')}, not the conflist's ${net.conf.cniVersion}`, fix: 'install the current ipam-shim' }];
    }
    return [{ check: this.name, verdict: 'ok', summary: `${path} answers VERSION (${versions.join(', ')})` }];
  },
};

export const delegateCheck: DoctorCheck = {
  name: 'delegate',
  async run(net) {
    const d = net.conf.settings.delegate;
    if (!d) return [{ check: this.name, verdict: 'skipped', summary: 'no delegate configured (see the conflist check)' }];
    // A fresh probe, no cache: "answering now" is the question.
    const probe = new Delegate({ type: d.type, cniPath: net.cniPath, env: { CNI_PATH: net.cniPath.join(':') }, timeoutMs: net.conf.settings.delegateTimeoutMs, log: net.log, run: net.run });
    let path: string;
    try {
      path = await probe.find();
    } catch {
      return [{ check: this.name, verdict: 'problem', summary: `delegate ${d.type} is not on the CNI path (${net.cniPath.join(':')})`, fix: `install ${d.type} into the CNI bin dir, or fix "delegate.type"` }];
    }
    let versions: string[];
    try {
      versions = await probe.supportedVersions();
    } catch (e) {
      return [{ check: this.name, verdict: 'problem', summary: `delegate ${path} does not answer VERSION: ${(e as Error).message}`, fix: `run "CNI_COMMAND=VERSION ${path} </dev/null" by hand; reinstall ${d.type}` }];
    }
    const bridged = await probe.versionFor(net.conf.cniVersion).catch(() => undefined);
    if (!bridged) {
      return [{ check: this.name, verdict: 'problem', summary: `delegate ${d.type} speaks ${versions.join(', ')}: nothing up to the conflist's ${net.conf.cniVersion}`, fix: `lower the conflist's cniVersion or upgrade ${d.type}` }];
    }
    const note = bridged === net.conf.cniVersion ? '' : `; the shim speaks ${bridged} to it`;
    return [{ check: this.name, verdict: 'ok', summary: `${path} answers VERSION (${versions.filter(isSupported).join(', ')})${note}` }];
  },
};

export const stateDirCheck: DoctorCheck = {
  name: 'state-dir',
  async run(net) {
    const name = this.name;
    const { stateDir } = net.conf.settings;
    const uid = process.getuid?.();
    const out: Finding[] = [];
    const dirs = [stateDir, net.ledger.dir, join(net.ledger.dir, 'records'), join(net.ledger.dir, 'ips')];
    let present = 0;
    for (const dir of dirs) {
      const st = await lstat(dir).catch(() => undefined);
      if (!st) continue;
      present++;
      const mode = (st.mode & 0o777).toString(8).padStart(3, '0');
      if (st.isSymbolicLink() || !st.isDirectory()) {
        out.push({ check: name, verdict: 'problem', summary: `${dir} is not a directory (symlink?): every ADD fails with code 103`, fix: `remove ${dir}; the shim recreates it (0700)` });
      } else if (uid !== undefined && st.uid !== uid) {
        out.push({ check: name, verdict: 'problem', summary: `${dir} is owned by uid ${st.uid}, not ${uid}: every ADD fails with code 103`, fix: `chown ${uid} ${dir}` });
      } else if (st.mode & 0o022) {
        out.push({ check: name, verdict: 'problem', summary: `${dir} is writable by group or others (mode ${mode}): every ADD fails with code 103`, fix: `chmod 700 ${dir}` });
      } else if (st.mode & 0o055) {
        out.push({ check: name, verdict: 'warn', summary: `${dir} is readable by others (mode ${mode}); the next ADD tightens it`, fix: `chmod 700 ${dir}` });
      }
    }
    if (present === 0) return [{ check: name, verdict: 'ok', summary: `${stateDir} does not exist yet (the first ADD creates it, 0700)` }];
    if (out.some((f) => f.verdict === 'problem')) return out; // the ledger refuses to be read until that is fixed
    const { records, corrupt } = await net.ledger.list();
    if (corrupt.length) {
      out.push({ check: name, verdict: 'problem', summary: `unreadable ledger records: ${list(corrupt)}; GC releases nothing until they are fixed`, fix: 'inspect each file; if the attachment is gone, remove the file (DEL of that container also clears it)', data: corrupt });
    }
    if (!out.length) {
      const mode = ((await lstat(net.ledger.dir).catch(() => undefined))?.mode ?? 0o700) & 0o777;
      out.push({ check: name, verdict: 'ok', summary: `${net.ledger.dir}: private (0${mode.toString(8)}, ours), ${records.length} record(s)` });
    }
    return out;
  },
};

// ---------------------------------------------------------------------------------------------------------------

export interface StoreEntry {
  ip: string;
  containerID: string;
  ifname: string | undefined;
}

const ipKey = (ip: string): string | undefined => {
  try {
    const p = parseIp(ip);
    return `${p.family}:${p.value}`;
  } catch {
    return undefined;
  }
};

/** host-local's reservations: one file per IP holding "<containerID>\r\n<ifname>" (older versions: the ID only). */
export async function readHostLocalStore(dir: string): Promise<StoreEntry[] | undefined> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (e) {
    if ((e as { code?: string }).code === 'ENOENT') return undefined;
    throw e;
  }
  const out: StoreEntry[] = [];
  for (const n of names) {
    if (!ipKey(n)) continue;
    const [containerID = '', ifname] = (await readFile(join(dir, n), 'utf8')).split(/\r?\n/).map((s) => s.trim());
    out.push({ ip: n, containerID, ifname: ifname || undefined });
  }
  return out.sort((a, b) => a.ip.localeCompare(b.ip));
}

export interface StoreComparison {
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
export function compareWithStore(records: LedgerRecord[], store: StoreEntry[]): StoreComparison {
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
      else if (holder.containerID !== record.containerID || (holder.ifname !== undefined && holder.ifname !== record.ifname)) out.conflicting.push({ record, ip, holder });
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
      return [{ check: name, verdict: 'skipped', summary: `cannot compare the ledger with ${type ?? 'the IPAM plugin'}'s store: only host-local's files can be read` }];
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
    const att = (r: LedgerRecord) => `${r.containerID}/${r.ifname}`;
    if (cmp.missing.length) {
      out.push({
        check: name,
        verdict: 'problem',
        summary: `${cmp.missing.length} ledger address(es) have no reservation in ${storeDir}: ${list(cmp.missing.map((m) => `${m.ip} (${att(m.record)})`))}`,
        fix: `host-local may hand these out again (duplicate IPs). If the container is gone: ipam-shim gc --network ${net.conf.name} --apply; if it runs, recreate the pod`,
        data: cmp.missing.map((m) => ({ ip: m.ip, containerID: m.record.containerID, ifname: m.record.ifname })),
      });
    }
    if (cmp.conflicting.length) {
      out.push({
        check: name,
        verdict: 'problem',
        summary: `${cmp.conflicting.length} address(es) are reserved in ${storeDir} for another attachment: ${list(cmp.conflicting.map((c) => `${c.ip} ledger ${att(c.record)}, store ${c.holder.containerID}/${c.holder.ifname ?? '?'}`))}`,
        fix: 'two attachments claim one address: find which pod really has it (ip addr in its netns) and recreate the other',
        data: cmp.conflicting.map((c) => ({ ip: c.ip, ledger: att(c.record), store: `${c.holder.containerID}/${c.holder.ifname ?? ''}` })),
      });
    }
    if (cmp.unknown.length && corrupt.length) {
      // An unreadable record may be the one that owns these reservations (a live pod's address): advice to remove
      // one would rest on a fact nobody could read. Point at the records instead.
      out.push({
        check: name,
        verdict: 'warn',
        summary: `${cmp.unknown.length} reservation(s) in ${storeDir} match no readable ledger record, and ${corrupt.length} record(s) are unreadable and may own them: ${list(cmp.unknown.map((u) => `${u.ip} (${u.containerID}/${u.ifname ?? '?'})`))}`,
        fix: `fix the unreadable ledger records first (see the state-dir check: ${list(corrupt, 3)}); leave the reservations alone until then`,
        data: { unknown: cmp.unknown, corrupt },
      });
    } else if (cmp.unknown.length) {
      out.push({
        check: name,
        verdict: 'warn',
        summary: `${cmp.unknown.length} reservation(s) in ${storeDir} for attachments the ledger does not know: ${list(cmp.unknown.map((u) => `${u.ip} (${u.containerID}/${u.ifname ?? '?'})`))}`,
        fix: `allocated before the shim was installed, by another caller, or leaked. If no container uses one, remove its file in ${storeDir} by hand (ipam-shim never edits the delegate's store)`,
        data: cmp.unknown,
      });
    }
    if (cmp.intents.length) {
      out.push({
        check: name,
        verdict: 'warn',
        summary: `${cmp.intents.length} unfinished ADD(s) (intent records): ${list(cmp.intents.map(att))}`,
        fix: 'an ADD is running or died midway; if it persists, the runtime\'s DEL (or ipam-shim gc --apply) clears it',
      });
    }
    if (!out.length) out.push({ check: name, verdict: 'ok', summary: `${records.length} ledger record(s) match ${store.length} reservation(s) in ${storeDir}` });
    return out;
  },
};

/** In the order doctor runs them (before the feature checks). */
export const NODE_CHECKS: DoctorCheck[] = [conflistCheck, binaryCheck, delegateCheck, stateDirCheck, ledgerCheck];

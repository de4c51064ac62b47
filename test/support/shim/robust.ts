// Shared by the robustness suites (concurrency, crash, delegate faults, fuzz, permissions) and test/soak/churn.ts:
// read the shim's ledger and host-local's store straight from disk and say where they disagree.
import { readdir, readFile, lstat } from 'node:fs/promises';
import { join } from 'node:path';
import { FIXTURE_BIN } from '../paths.js';

/** The delegate wrapper of test/fixtures/bin (host-local behind configurable sleeps and faults). */
export const WRAP_IPAM = 'wrap-ipam';
export const WRAP_IPAM_PATH = join(FIXTURE_BIN, WRAP_IPAM);

export interface LedgerOnDisk {
  /** Parsed records, keyed "cid:ifname". */
  records: Map<string, { containerID: string; ifname: string; state: string; ips: string[]; owner: string; netns: string }>;
  /**
   * Chained records the runtime DELed (`deletedAt`), kept as GC's evidence until GC sees the pod gone
   * (src/verbs/del.ts markDeleted): no attachment, and their address may or may not be released yet.
   */
  deleted?: Map<string, { containerID: string; ifname: string; ips: string[]; deletedAt: string }>;
  /** Record files that did not parse (path → reason). */
  corrupt: Map<string, string>;
  /** Index entries: IP (as in the file name) → "cid:ifname". */
  index: Map<string, string>;
  /** Leftover temp files of writeFileAtomic (".name.<pid>.<attempt>.tmp") anywhere in the ledger. */
  temps: string[];
  /** Files that are neither records, index entries, temps, locks nor the STATUS memo. */
  strays: string[];
  lockPresent: boolean;
  /** The STATUS verb's memo of its last verdicts is there. */
  statusMemo: boolean;
  /** Per-attachment lock files (`.attach-<cid>:<ifname>.lock`): held now, or left by a killed holder. */
  attachmentLocks: string[];
}

async function names(dir: string): Promise<string[]> {
  try {
    return (await readdir(dir)).sort();
  } catch (e) {
    if ((e as { code?: string }).code === 'ENOENT') return [];
    throw e;
  }
}

const TEMP = /^\..+\.\d+\.\d+\.tmp$/;
const ATTACHMENT_LOCK = /^\.attach-.+\.lock(\.break)?$/;
/** Where STATUS remembers its last verdicts (src/status/memo.ts): the shim's own file in a network's directory. */
const STATUS_MEMO = '.status.json';

/** Reads <stateDir>/<network> completely; never throws on content (corrupt files are reported). */
export async function readLedger(stateDir: string, network: string): Promise<LedgerOnDisk> {
  const dir = join(stateDir, network);
  const out: LedgerOnDisk = {
    records: new Map(),
    corrupt: new Map(),
    index: new Map(),
    temps: [],
    strays: [],
    lockPresent: false,
    statusMemo: false,
    attachmentLocks: [],
  };
  for (const n of await names(dir)) {
    if (n === 'records' || n === 'ips') continue;
    if (n === 'lock') out.lockPresent = true;
    else if (n === STATUS_MEMO) out.statusMemo = true;
    else if (ATTACHMENT_LOCK.test(n)) out.attachmentLocks.push(join(dir, n));
    else if (TEMP.test(n)) out.temps.push(join(dir, n));
    else out.strays.push(join(dir, n));
  }
  for (const n of await names(join(dir, 'records'))) {
    const path = join(dir, 'records', n);
    if (TEMP.test(n)) {
      out.temps.push(path);
      continue;
    }
    if (!n.endsWith('.json')) {
      out.strays.push(path);
      continue;
    }
    try {
      if ((await lstat(path)).isSymbolicLink()) throw new Error('symlink');
      const r = JSON.parse(await readFile(path, 'utf8'));
      if (r.v !== 1 || typeof r.containerID !== 'string' || typeof r.ifname !== 'string' || !Array.isArray(r.ips)) throw new Error('not a v1 record');
      if (`${r.containerID}:${r.ifname}.json` !== n) throw new Error(`file name does not match ${r.containerID}:${r.ifname}`);
      if (r.deletedAt) (out.deleted ??= new Map()).set(`${r.containerID}:${r.ifname}`, r);
      else out.records.set(`${r.containerID}:${r.ifname}`, r);
    } catch (e) {
      out.corrupt.set(path, (e as Error).message);
    }
  }
  for (const n of await names(join(dir, 'ips'))) {
    const path = join(dir, 'ips', n);
    if (TEMP.test(n)) out.temps.push(path);
    else out.index.set(n.replaceAll('_', ':'), await readFile(path, 'utf8'));
  }
  return out;
}

/** host-local's reservations: IP → "cid:ifname" (its files hold "cid\r\nifname"). */
export async function hostLocalStore(dataDir: string, network: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const n of await names(join(dataDir, network))) {
    if (n === 'lock' || n.startsWith('last_reserved_ip')) continue;
    const text = await readFile(join(dataDir, network, n), 'utf8');
    out.set(
      n,
      text
        .split(/\r?\n/)
        .map((s) => s.trim())
        .join(':'),
    );
  }
  return out;
}

/**
 * Every way the ledger and host-local's store can disagree, as readable lines (empty = they agree):
 * corrupt/temp/stray files, a record IP host-local does not hold for that attachment, a host-local IP no
 * record claims (a leak), an index entry that does not match its record. Intent records are allowed only
 * when `allowIntent`.
 */
export function disagreements(ledger: LedgerOnDisk, store: Map<string, string>, opts: { allowIntent?: boolean } = {}): string[] {
  const out: string[] = [];
  for (const [p, why] of ledger.corrupt) out.push(`corrupt record ${p}: ${why}`);
  for (const p of ledger.temps) out.push(`temp file left: ${p}`);
  for (const p of ledger.strays) out.push(`stray file: ${p}`);
  const claimed = new Map<string, string>();
  for (const [key, r] of ledger.records) {
    if (r.state !== 'attached' && !opts.allowIntent) out.push(`record ${key} is in state ${r.state}`);
    for (const ip of r.ips) {
      if (claimed.has(ip)) out.push(`IP ${ip} recorded twice: ${claimed.get(ip)} and ${key}`);
      claimed.set(ip, key);
      if (store.get(ip) !== key) out.push(`record ${key} holds ${ip}, host-local has ${store.get(ip) ?? 'nothing'} for it`);
      if (ledger.index.get(ip) !== key) out.push(`index for ${ip} is ${ledger.index.get(ip) ?? 'missing'}, record ${key} holds it`);
    }
  }
  // A DELed record still claims what host-local still holds for it (the main plugin's DEL has not released it yet).
  for (const [key, r] of ledger.deleted ?? []) for (const ip of r.ips) if (store.get(ip) === key && !claimed.has(ip)) claimed.set(ip, key);
  for (const [ip, key] of store) if (!claimed.has(ip)) out.push(`host-local holds ${ip} for ${key}, no record claims it (leak)`);
  return out;
}

/** Runs fn over items with at most `limit` in flight; results in input order. */
export async function pool<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(limit, items.length)) }, worker));
  return results;
}

/** An integer from the environment (heavy counts are CI-sized by default, overridable). */
export function envInt(name: string, fallback: number): number {
  const v = Number(process.env[name]);
  return Number.isInteger(v) && v > 0 ? v : fallback;
}

/** Processes (pid, state, ppid, comm) whose /proc/<pid>/stat can be read. */
export async function processTable(): Promise<Array<{ pid: number; state: string; ppid: number; comm: string }>> {
  const out = [];
  for (const n of await names('/proc')) {
    if (!/^\d+$/.test(n)) continue;
    try {
      const stat = await readFile(`/proc/${n}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      const [state, ppid] = stat.slice(close + 2).split(' ');
      out.push({ pid: Number(n), state: state!, ppid: Number(ppid), comm });
    } catch {
      // gone
    }
  }
  return out;
}

/** Waits until none of `pids` is alive (zombies count as gone here; check them separately). */
export async function waitGone(pids: number[], timeoutMs = 10_000): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const table = new Map((await processTable()).map((p) => [p.pid, p]));
    const alive = pids.filter((p) => table.has(p) && table.get(p)!.state !== 'Z');
    if (!alive.length || Date.now() > deadline) return alive;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Waits until none of `pids` exists at all, zombies included: a killed delegate's orphans are reparented to
 * init, which reaps them (this sandbox's init does so within seconds). Returns those still present.
 */
export async function waitReaped(pids: number[], timeoutMs = 20_000): Promise<Array<{ pid: number; state: string; ppid: number; comm: string }>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const left = (await processTable()).filter((p) => pids.includes(p.pid));
    if (!left.length || Date.now() > deadline) return left;
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Lines of a pid file written by wrap-ipam (missing file = none). */
export async function pidsIn(file: string): Promise<number[]> {
  try {
    return (await readFile(file, 'utf8')).split('\n').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

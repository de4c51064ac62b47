// host-local's store, read-only: the reservations doctor compares the ledger with. ipam-shim never writes it.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseIp } from '../net/ip.js';

export const HOST_LOCAL_DEFAULT_DATA_DIR = '/var/lib/cni/networks';

export interface StoreEntry {
  ip: string;
  containerID: string;
  ifname: string | undefined;
}

/** The key two spellings of one address share (store file names and ledger IPs). */
export const ipKey = (ip: string): string | undefined => {
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

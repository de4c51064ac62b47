// `ipam-shim gc`: the GC a runtime never sends (0.3.1 conflists): valid = the runtime's result cache,
// then the GC verb's own algorithm and guards. Dry run unless --apply.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Attachment } from '../cni/config.js';
import { runGc } from '../gc/run-gc.js';
import { NETWORK_FLAGS, openNetwork } from './network.js';
import { parseArgv, UsageError, type Command } from './command.js';

const USAGE = `ipam-shim gc --network NAME [--cache-dir /var/lib/cni] [--grace-seconds 60] [--apply] [--allow-empty-cache]
  [--conflist PATH | --conf-dir DIR] [--cni-path DIRS] [--json]
  When the cache is missing, unreadable or holds no entry for the network while the ledger holds pod
  attachments, nothing is released (the cache may be out of sight, e.g. another mount namespace):
  --allow-empty-cache overrides that after checking by hand.`;

/** What the runtime's result cache showed for a network: its attachments, or why it could not be seen. */
export interface CacheView {
  attachments: Attachment[];
  /** `missing`: no results directory; `unreadable`: it could not be listed; `empty`: no entry for this network. */
  blind?: { kind: 'missing' | 'unreadable' | 'empty'; why: string };
}

const CACHE_KIND = 'cniCacheV1';
/** libcni's cache root (containerd, CRI-O, podman): `results/` below it. */
export const DEFAULT_CACHE_DIR = '/var/lib/cni';

/** A file's own network name, even from a truncated file (libcni writes it before the result). */
function networkNameIn(text: string): string | undefined {
  const m = /"networkName"\s*:\s*("(?:[^"\\]|\\.)*")/.exec(text);
  if (!m) return undefined;
  try {
    return JSON.parse(m[1]!) as string;
  } catch {
    return undefined;
  }
}

/**
 * The attachments the runtime knows for `network`: libcni's cache files results/<net>-<cid>-<ifname>. The
 * file name is ambiguous (names contain '-', so network "a" sees "a-b"'s files), so the file's own
 * `networkName` decides; a file of another network is never ours, even when it is corrupt (its name is read
 * from the text, or the file name starts with another network's name seen in the cache). An unreadable cache
 * file of this network makes the list unknowable and aborts (releasing on a partial list could free a live
 * pod's IP).
 */
export async function cachedAttachments(cacheDir: string, network: string): Promise<CacheView> {
  const dir = join(cacheDir, 'results');
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ENOENT') return { attachments: [], blind: { kind: 'missing', why: `the runtime's result cache ${dir} does not exist` } };
    return { attachments: [], blind: { kind: 'unreadable', why: `the runtime's result cache ${dir} cannot be read: ${(e as Error).message}` } };
  }
  const candidates = names.filter((n) => n.startsWith(`${network}-`));
  const texts = await Promise.all(candidates.map(async (name) => ({ name, path: join(dir, name), text: await readFile(join(dir, name), 'utf8').catch((e: Error) => e) })));
  interface CacheFile {
    name: string;
    path: string;
    entry?: { kind?: unknown; containerId?: unknown; ifName?: unknown; networkName?: unknown };
    error?: string;
    networkName?: string | undefined;
  }
  const parsed = texts.map((t): CacheFile => {
    const { name, path } = t;
    if (t.text instanceof Error) return { name, path, error: t.text.message };
    try {
      return { name, path, entry: JSON.parse(t.text) as CacheFile['entry'] };
    } catch (e) {
      return { name, path, error: (e as Error).message, networkName: networkNameIn(t.text) };
    }
  });
  // Longer network names sharing our prefix, as the readable files name them.
  const others = new Set(parsed.flatMap((p) => (p.entry && typeof p.entry.networkName === 'string' && p.entry.networkName !== network ? [p.entry.networkName] : [])));
  const out: Attachment[] = [];
  for (const p of parsed) {
    if (!p.entry) {
      if (p.networkName !== undefined && p.networkName !== network) continue;
      if (p.networkName === undefined && [...others].some((o) => p.name.startsWith(`${o}-`))) continue;
      throw new Error(`cannot read runtime cache ${p.path}: ${p.error}; refusing to GC on an incomplete list`);
    }
    const entry = p.entry;
    if (entry.networkName !== network) continue;
    if (entry.kind !== undefined && entry.kind !== CACHE_KIND) throw new Error(`runtime cache ${p.path} is of kind ${JSON.stringify(entry.kind)}, not ${CACHE_KIND}; refusing to GC on a list it cannot read`);
    if (typeof entry.containerId !== 'string' || typeof entry.ifName !== 'string') {
      throw new Error(`runtime cache ${p.path} lacks containerId/ifName; refusing to GC on an incomplete list`);
    }
    out.push({ containerID: entry.containerId, ifname: entry.ifName });
  }
  if (!out.length) return { attachments: out, blind: { kind: 'empty', why: `the runtime's result cache ${dir} holds no entry for network ${network}` } };
  return { attachments: out };
}

export const gcCommand: Command = {
  name: 'gc',
  summary: "release leaked IPs for runtimes that never send CNI GC (valid = the runtime's result cache); dry run by default",
  usage: USAGE,
  exitStatus: '0 nothing to release (dry run) or everything released; 1 the dry run found something to release, a release failed, or the cache was out of sight (refused); 2 usage',
  async run(argv, ctx) {
    const { values } = parseArgv({
      args: argv,
      strict: true,
      options: {
        ...NETWORK_FLAGS,
        'cache-dir': { type: 'string', default: DEFAULT_CACHE_DIR },
        apply: { type: 'boolean', default: false },
        'allow-empty-cache': { type: 'boolean', default: false },
        'grace-seconds': { type: 'string', default: '60' },
      },
    });
    if (!values.network && !values.conflist) throw new UsageError('--network (or --conflist) is required');
    const grace = Number(values['grace-seconds']);
    if (!Number.isFinite(grace) || grace < 0) throw new UsageError('--grace-seconds takes a number');
    const net = await openNetwork(values, ctx.run, ctx.env);
    const cache = await cachedAttachments(values['cache-dir']!, net.conf.name);
    const valid = cache.attachments;
    // An empty valid list is only believable when the cache was seen: a cache out of sight (missing, unreadable,
    // nothing for this network) while pods are recorded would make every pod whose netns is not visible here
    // look dead. Refuse, say why; --allow-empty-cache is the operator's explicit word.
    const { records } = await net.ledger.list();
    const pods = records.filter((r) => r.owner !== 'agent').length;
    const refused = cache.blind && pods > 0 && !values['allow-empty-cache'] ? `${cache.blind.why}, while the ledger holds ${pods} pod attachment(s): refusing to release anything (check --cache-dir; --allow-empty-cache overrides)` : undefined;
    const apply = values.apply! && !refused;
    const report = await runGc({
      conf: net.conf,
      ledger: net.ledger,
      delegate: net.delegate,
      run: net.run,
      log: net.log,
      valid,
      apply,
      // Unlike the runtime's GC this one is not exclusive: an ADD may be between its ledger write and the cache write.
      graceMs: grace * 1000,
      forward: true,
    });
    const rows = [
      ...report.plan.release.map((r) => ({ action: apply ? (report.released.some((a) => a.containerID === r.record.containerID && a.ifname === r.record.ifname) ? 'released' : 'FAILED') : 'would release', containerID: r.record.containerID, ifname: r.record.ifname, ips: r.record.ips, why: r.reason })),
      ...report.plan.kept.map((k) => ({ action: 'keep', containerID: k.record.containerID, ifname: k.record.ifname, ips: k.record.ips, why: k.reason })),
    ];
    const text = [
      `network ${net.conf.name}: ${valid.length} cached attachment(s), ${report.plan.kept.length} kept, ${report.plan.release.length} ${apply ? 'to release' : refused ? 'would be released, but nothing is (refused)' : 'would be released (dry run; --apply to release)'}`,
      ...(refused ? [`REFUSED: ${refused}`] : []),
      ...rows.map((r) => `${r.action.padEnd(13)} ${r.containerID}/${r.ifname}  ${r.ips.join(',') || '-'}  (${r.why})`),
      ...report.errors.map((e) => `error ${e.code}: ${e.attachment ? `${e.attachment.containerID}/${e.attachment.ifname}: ` : ''}${e.error}`),
    ].join('\n');
    return {
      data: { network: net.conf.name, apply, ...(refused ? { refused } : {}), valid, kept: report.plan.kept.map((k) => ({ ...k.record, reason: k.reason })), release: report.plan.release.map((r) => ({ ...r.record, reason: r.reason })), released: report.released, forwarded: report.forwarded, errors: report.errors },
      text,
      // Dry run: non-zero when something leaked, so scripts can alert on it. --apply: non-zero on any error.
      exitCode: refused || report.errors.length || (!apply && report.plan.release.length) ? 1 : 0,
    };
  },
};

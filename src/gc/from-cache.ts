// GC from the runtime's result cache, for runtimes that never send CNI GC (AKS's 0.3.1 conflists): valid = the
// attachments libcni cached, then the GC verb's own algorithm and guards (src/gc/run-gc.ts), and the refusal
// to release anything when the cache is out of sight. `ipam-shim gc` and the node agent's gc step both call
// gcFromCache; neither decides anything of its own.
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Attachment } from '../cni/config.js';
import * as z from '../cni/zod.js';
import { addressProblem, canonicalIp } from '../net/ip.js';
import type { OpenNetwork } from '../network/open.js';
import { runGc, type GcReport } from './run-gc.js';
import type { CachedPod } from './cached-pod.js';

/** What the runtime's result cache showed for a network: its attachments, or why it could not be seen. */
export interface CacheView {
  attachments: Attachment[];
  /** The same attachments, in the same order, with what the cache says about their pods. */
  pods: CachedPod[];
  /** `missing`: no results directory; `unreadable`: it could not be listed; `empty`: no entry for this network. */
  blind?: { kind: 'missing' | 'unreadable' | 'empty'; why: string };
}

/** The parts of libcni's cache entry a pod's addresses and identity come from (any result version). */
const CachedPodSchema = z.object({
  cniArgs: z.optional(z.array(z.tuple([z.string(), z.string()]))),
  result: z.optional(
    z.object({
      ips: z.optional(z.array(z.object({ address: z.string() }))),
      ip4: z.optional(z.object({ ip: z.string() })),
      ip6: z.optional(z.object({ ip: z.string() })),
    }),
  ),
});

/** PURE: what a cache entry says about its pod. */
function podOf(a: Attachment, entry: unknown): CachedPod {
  const parsed = CachedPodSchema.safeParse(entry);
  if (!parsed.success)
    return {
      ...a,
      ips: [],
      unreadable: `unexpected cniArgs or result: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    };
  const { cniArgs = [], result } = parsed.data;
  const arg = (k: string) => cniArgs.find(([key]) => key === k)?.[1] || undefined;
  const namespace = arg('K8S_POD_NAMESPACE');
  const name = arg('K8S_POD_NAME');
  const pod: CachedPod = { ...a, ips: [], ...(namespace ? { namespace } : {}), ...(name ? { name } : {}) };
  const texts = [...(result?.ips ?? []).map((i) => i.address), ...(result?.ip4 ? [result.ip4.ip] : []), ...(result?.ip6 ? [result.ip6.ip] : [])];
  const bad = texts.map(addressProblem).find(Boolean);
  if (bad) return { ...pod, unreadable: bad.message };
  pod.ips = [...new Set(texts.map(canonicalIp))];
  return pod;
}

const CACHE_KIND = 'cniCacheV1';
const CACHE_READ_PARALLEL = 8;

/** fn over items, at most `limit` at once, results in the items' order. */
async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
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
    if (code === 'ENOENT') return { attachments: [], pods: [], blind: { kind: 'missing', why: `the runtime's result cache ${dir} does not exist` } };
    return {
      attachments: [],
      pods: [],
      blind: { kind: 'unreadable', why: `the runtime's result cache ${dir} cannot be read: ${(e as Error).message}` },
    };
  }
  const candidates = names.filter((n) => n.startsWith(`${network}-`));
  // A few reads at a time: all at once held every file's buffers and promises together (the node agent's pass over
  // 5,000 cached attachments: peak RSS 215 MiB and 1.6 s, against 146 MiB and 1.1 s eight at a time).
  const texts = await mapLimit(candidates, CACHE_READ_PARALLEL, async (name) => ({
    name,
    path: join(dir, name),
    text: await readFile(join(dir, name), 'utf8').catch((e: Error) => e),
  }));
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
  const others = new Set(
    parsed.flatMap((p) => (p.entry && typeof p.entry.networkName === 'string' && p.entry.networkName !== network ? [p.entry.networkName] : [])),
  );
  const out: Attachment[] = [];
  const pods: CachedPod[] = [];
  for (const p of parsed) {
    if (!p.entry) {
      if (p.networkName !== undefined && p.networkName !== network) continue;
      if (p.networkName === undefined && [...others].some((o) => p.name.startsWith(`${o}-`))) continue;
      throw new Error(`cannot read runtime cache ${p.path}: ${p.error}; refusing to GC on an incomplete list`);
    }
    const entry = p.entry;
    if (entry.networkName !== network) continue;
    if (entry.kind !== undefined && entry.kind !== CACHE_KIND)
      throw new Error(`runtime cache ${p.path} is of kind ${JSON.stringify(entry.kind)}, not ${CACHE_KIND}; refusing to GC on a list it cannot read`);
    if (typeof entry.containerId !== 'string' || typeof entry.ifName !== 'string') {
      throw new Error(`runtime cache ${p.path} lacks containerId/ifName; refusing to GC on an incomplete list`);
    }
    const a = { containerID: entry.containerId, ifname: entry.ifName };
    out.push(a);
    pods.push(podOf(a, entry));
  }
  if (!out.length)
    return { attachments: out, pods, blind: { kind: 'empty', why: `the runtime's result cache ${dir} holds no entry for network ${network}` } };
  return { attachments: out, pods };
}

export interface CacheGcOptions {
  cacheDir: string;
  /** Release what is found (else only plan: a dry run, the agent's report mode). */
  apply: boolean;
  graceMs: number;
  /** The operator's word that an empty or missing cache is the truth (`--allow-empty-cache`). */
  allowEmptyCache: boolean;
  /** Once aborted (the agent's SIGTERM), no further release starts. */
  signal?: AbortSignal | undefined;
  /** How long a release waits for its attachment's lock (run-gc's default otherwise). */
  lockWaitMs?: number | undefined;
  /** The cache as already read this pass (the node agent reads it once for GC and its pods step). */
  cache?: CacheView | undefined;
  /**
   * Without apply, still forget the chained records of provably dead pods (run-gc.ts forgetChained): the node
   * agent's report mode. Never when the cache was out of sight (then "not valid" proves nothing).
   */
  forgetChained?: boolean | undefined;
}

export interface CacheGcOutcome {
  cache: CacheView;
  valid: Attachment[];
  /** Why nothing may be released although apply was asked for (the cache was out of sight). */
  refused: string | undefined;
  /** Whether releases were attempted: apply and not refused. */
  apply: boolean;
  report: GcReport;
}

export async function gcFromCache(
  net: Pick<OpenNetwork, 'conf' | 'ledger' | 'delegate' | 'run' | 'log'>,
  o: CacheGcOptions,
): Promise<CacheGcOutcome> {
  const cache = o.cache ?? (await cachedAttachments(o.cacheDir, net.conf.name));
  const valid = cache.attachments;
  // An empty valid list is only believable when the cache was seen: a cache out of sight (missing, unreadable,
  // nothing for this network) while pods are recorded would make every pod whose netns is not visible here
  // look dead. Refuse, say why; --allow-empty-cache is the operator's explicit word.
  const { records } = await net.ledger.list();
  const pods = records.filter((r) => r.owner !== 'agent').length;
  const refused =
    cache.blind && pods > 0 && !o.allowEmptyCache
      ? `${cache.blind.why}, while the ledger holds ${pods} pod attachment(s): refusing to release anything (check --cache-dir; --allow-empty-cache overrides)`
      : undefined;
  const apply = o.apply && !refused;
  const report = await runGc({
    conf: net.conf,
    ledger: net.ledger,
    delegate: net.delegate,
    run: net.run,
    log: net.log,
    valid,
    apply,
    // Unlike the runtime's GC this one is not exclusive: an ADD may be between its ledger write and the cache write.
    graceMs: o.graceMs,
    // Never forward GC to the delegate: its keep list is only our ledger, and a chained ADD in flight (the delegate
    // already allocated, neither the ledger nor the cache written yet) is in neither, with no lock or grace period
    // to protect it. Releases go only through per-attachment DELs under the attachment lock.
    forward: false,
    signal: o.signal,
    lockWaitMs: o.lockWaitMs,
    forgetChained: Boolean(o.forgetChained) && !refused,
  });
  return { cache, valid, refused, apply, report };
}

// GC from the runtime's result cache, for runtimes that never send CNI GC (AKS's 0.3.1 conflists): valid = the
// attachments libcni cached, then the GC verb's own algorithm and guards (src/gc/run-gc.ts), and the refusal
// to release anything when the cache is out of sight. `ipam-shim gc` and the node agent's gc step both call
// gcFromCache; neither decides anything of its own.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Attachment } from '../cni/config.js';
import { validContainerID, validInterfaceName } from '../cni/env.js';
import * as z from '../cni/zod.js';
import { badAddress, canonicalAddresses } from '../cni/result.js';
import type { OpenNetwork } from '../network/open.js';
import { runGc, type GcReport } from './run-gc.js';
import type { CachedPod, CacheView, IgnoredEntry } from '../pods/cached-pod.js';
import { readCacheFile, type FileRead } from './cache-file.js';

/**
 * One file of this network could not be looked at (not a regular file, too large, not JSON, …), or the network has
 * more entries than one pass reads: the list is unknowable, and GC must not release on a partial one. The message
 * names the file and why, never its content.
 */
export class RuntimeCacheError extends Error {
  constructor(
    readonly path: string,
    readonly why: string,
  ) {
    super(`cannot read runtime cache ${path}: ${why}; refusing to GC on an incomplete list`);
    this.name = 'RuntimeCacheError';
  }
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

/** PURE: what a cache entry says about its pod (only these fields are kept: the entry itself is dropped). */
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
  const bad = badAddress(texts);
  if (bad) return { ...pod, unreadable: bad.message };
  pod.ips = canonicalAddresses(texts);
  return pod;
}

/** PURE: why libcni would refuse this entry's names (it validates both before it writes one), or undefined. */
function entryNamesProblem(containerId: string, ifName: string): string | undefined {
  const cid = validContainerID(containerId);
  if (cid) return `containerId ${cid}`;
  const ifn = validInterfaceName(ifName);
  return ifn ? `ifName ${ifn}` : undefined;
}

const CACHE_KIND = 'cniCacheV1';
/**
 * The most cache files named for one network a pass reads. A node runs at most a few hundred pods (kubelet's
 * maxPods: 110 by default, 250 on the largest AKS nodes); more entries than this is a runtime leaking entries or a
 * planted flood, and reading them all would cost the agent memory and time without bound: "could not look".
 */
export const MAX_CACHE_ENTRIES = 10_000;

/** Files read between two yields to the event loop (HTTP probes, SIGTERM): ~1 ms of synchronous reads. */
const READ_BATCH = 64;

/** libcni's cache root (containerd, CRI-O, podman): `results/` below it. */
export const DEFAULT_CACHE_DIR = '/var/lib/cni';
/** How young an attachment GC never releases (`--grace-seconds` of `ipam-shim gc` and the agent): an ADD in flight. */
export const DEFAULT_GC_GRACE_S = 60;

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
 * One cache file, reduced at once to what the list needs (the entry's text and parse are dropped before the next
 * file is read: the pass holds compact CachedPods, not thousands of parsed entries).
 */
type CacheFile =
  | { name: string; gone: true }
  /** Could not be looked at; networkName: the file's own, read from its text when there was one. */
  | { name: string; why: string; networkName?: string | undefined }
  /** Another network's (its name kept: a longer name sharing our prefix). */
  | { name: string; networkName: unknown }
  | { name: string; ours: CachedPod | { ignored: string } | { refused: string } };

function reduce(name: string, network: string, read: FileRead): CacheFile {
  if ('gone' in read) return { name, gone: true };
  if ('why' in read) return { name, why: read.why };
  let entry: { kind?: unknown; containerId?: unknown; ifName?: unknown; networkName?: unknown } | null;
  try {
    entry = JSON.parse(read.text) as typeof entry;
  } catch {
    // Never the parser's message: it quotes the text.
    return { name, why: 'is not valid JSON', networkName: networkNameIn(read.text) };
  }
  if (typeof entry !== 'object' || entry === null) return { name, why: 'is not a JSON object' };
  if (entry.networkName !== network) return { name, networkName: entry.networkName };
  if (entry.kind !== undefined && entry.kind !== CACHE_KIND)
    return { name, ours: { refused: `is of kind ${JSON.stringify(entry.kind)}, not ${CACHE_KIND}` } };
  if (typeof entry.containerId !== 'string' || typeof entry.ifName !== 'string') return { name, ours: { refused: 'lacks containerId/ifName' } };
  const bad = entryNamesProblem(entry.containerId, entry.ifName);
  if (bad) return { name, ours: { ignored: bad } };
  return { name, ours: podOf({ containerID: entry.containerId, ifname: entry.ifName }, entry) };
}

/**
 * The attachments the runtime knows for `network`: libcni's cache files results/<net>-<cid>-<ifname>. The
 * file name is ambiguous (names contain '-', so network "a" sees "a-b"'s files), so the file's own
 * `networkName` decides; a file of another network is never ours, even when it is corrupt (its name is read
 * from the text, or the file name starts with another network's name seen in the cache). A file of this network
 * that cannot be looked at makes the list unknowable and aborts with RuntimeCacheError (releasing on a partial
 * list could free a live pod's IP); one removed since the listing is gone, not unknowable; one whose names libcni
 * would refuse is ignored (reported in `ignored`).
 */
export async function cachedAttachments(cacheDir: string, network: string): Promise<CacheView> {
  const dir = join(cacheDir, 'results');
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (e) {
    const code = (e as { code?: string }).code;
    if (code === 'ENOENT')
      return { attachments: [], pods: [], ignored: [], blind: { kind: 'missing', why: `the runtime's result cache ${dir} does not exist` } };
    return {
      attachments: [],
      pods: [],
      ignored: [],
      blind: { kind: 'unreadable', why: `the runtime's result cache ${dir} cannot be read: ${(e as Error).message}` },
    };
  }
  const candidates = names.filter((n) => n.startsWith(`${network}-`));
  if (candidates.length > MAX_CACHE_ENTRIES)
    throw new RuntimeCacheError(
      dir,
      `it holds ${candidates.length} entries named for network ${network}, more than the ${MAX_CACHE_ENTRIES} a pass reads (a runtime leaking entries?)`,
    );
  // Each file reduced before the next is read: the pass holds compact CachedPods, never every parsed entry (all at
  // once, 5,000 libcni entries held ~50 MiB more: docs/performance.md#the-node-agent).
  const files: CacheFile[] = [];
  for (const [i, name] of candidates.entries()) {
    if (i % READ_BATCH === READ_BATCH - 1) await new Promise((r) => setImmediate(r));
    files.push(reduce(name, network, readCacheFile(join(dir, name))));
  }
  // Longer network names sharing our prefix, as the readable files name them.
  const others = new Set(files.flatMap((f) => ('networkName' in f && !('why' in f) && typeof f.networkName === 'string' ? [f.networkName] : [])));
  const out: Attachment[] = [];
  const pods: CachedPod[] = [];
  const ignored: IgnoredEntry[] = [];
  for (const f of files) {
    if ('gone' in f) continue;
    if ('why' in f) {
      if (f.networkName !== undefined && f.networkName !== network) continue;
      if (f.networkName === undefined && [...others].some((o) => f.name.startsWith(`${o}-`))) continue;
      throw new RuntimeCacheError(join(dir, f.name), f.why);
    }
    if (!('ours' in f)) continue;
    const o = f.ours;
    if ('refused' in o) throw new RuntimeCacheError(join(dir, f.name), o.refused);
    if ('ignored' in o) {
      ignored.push({ file: f.name, why: o.ignored });
      continue;
    }
    out.push({ containerID: o.containerID, ifname: o.ifname });
    pods.push(o);
  }
  if (!out.length)
    return {
      attachments: out,
      pods,
      ignored,
      blind: { kind: 'empty', why: `the runtime's result cache ${dir} holds no entry for network ${network}` },
    };
  return { attachments: out, pods, ignored };
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
  /** Without apply, still forget the records the runtime DELed and no longer caches (run-gc.ts forgetDeleted). */
  forgetDeleted?: boolean | undefined;
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
    forgetDeleted: Boolean(o.forgetDeleted) && !refused,
  });
  return { cache, valid, refused, apply, report };
}

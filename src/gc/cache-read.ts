// Reading the runtime's result cache for one network, in the process that reads it (src/gc/cache-reader.ts runs it
// in a child it can abandon: a file system that stops answering blocks whoever reads it). Untrusted input: every
// file bounded (src/gc/cache-file.ts), every entry reduced at once to a compact CachedPod with fields within what
// Kubernetes allows, an entry matched to the network by its own `networkName`, names shown as one line.
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { Attachment } from '../cni/config.js';
import { validContainerID, validInterfaceName } from '../cni/env.js';
import * as z from '../cni/zod.js';
import { badAddress, canonicalAddresses } from '../cni/result.js';
import type { CachedPod, CacheView, IgnoredEntry } from '../pods/cached-pod.js';
import { readCacheFile, type FileRead } from './cache-file.js';

/**
 * One file of this network could not be looked at (not a regular file, too large, not JSON, …), or the network has
 * more entries than one pass reads: the list is unknowable, and GC must not release on a partial one. The message
 * names the file and why, never its content, on one line whatever the name holds (JSON-quoted: a file name with a
 * newline forged a line on `ipam-shim gc`'s stderr).
 */
export class RuntimeCacheError extends Error {
  constructor(
    readonly path: string,
    readonly why: string,
  ) {
    super(`cannot read runtime cache ${JSON.stringify(path)}: ${why}; refusing to GC on an incomplete list`);
    this.name = 'RuntimeCacheError';
  }
}

/**
 * Kubernetes' limits on what a cache entry names (kubelet validates a pod before its runtime ever calls CNI): a pod
 * name is a DNS subdomain (253), a namespace a DNS label (63). A pod has one or two addresses per family on an
 * interface; MAX_ENTRY_ADDRESSES is far past that, and bounds what one entry costs to canonicalise (40 entries of
 * ~36k addresses blocked the agent for 34-41 s). MAX_CNI_ARGS: libcni's runtimes pass five.
 */
export const MAX_POD_NAME = 253;
export const MAX_POD_NAMESPACE = 63;
export const MAX_ENTRY_ADDRESSES = 64;
const MAX_CNI_ARGS = 64;

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

/** PURE: why an entry's sizes are past Kubernetes' (checked before the schema walks them), or undefined. */
function oversized(entry: { cniArgs?: unknown; result?: unknown }): string | undefined {
  if (Array.isArray(entry.cniArgs)) {
    if (entry.cniArgs.length > MAX_CNI_ARGS) return `cniArgs holds ${entry.cniArgs.length} pairs, more than the ${MAX_CNI_ARGS} read`;
    for (const pair of entry.cniArgs as unknown[]) {
      if (!Array.isArray(pair) || typeof pair[1] !== 'string') continue;
      const max = pair[0] === 'K8S_POD_NAME' ? MAX_POD_NAME : pair[0] === 'K8S_POD_NAMESPACE' ? MAX_POD_NAMESPACE : undefined;
      if (max !== undefined && pair[1].length > max) return `${pair[0]} is ${pair[1].length} characters, more than the ${max} Kubernetes allows`;
    }
  }
  const ips = (entry.result as { ips?: unknown } | null | undefined)?.ips;
  if (Array.isArray(ips) && ips.length > MAX_ENTRY_ADDRESSES)
    return `result.ips holds ${ips.length} addresses, more than the ${MAX_ENTRY_ADDRESSES} an entry may`;
  return undefined;
}

/**
 * PURE: what a cache entry says about its pod (only these fields are kept: the entry itself is dropped). An entry
 * past Kubernetes' limits is malformed: its attachment stays valid (GC never releases it on its word) and its pod is
 * unreadable, the oversized field named by its size and never kept.
 */
function podOf(a: Attachment, entry: { cniArgs?: unknown; result?: unknown }): CachedPod {
  const tooBig = oversized(entry);
  if (tooBig) return { ...a, ips: [], unreadable: `malformed: ${tooBig}` };
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
  // Its file name holds the container ID, and no file name is longer than 255 bytes (NAME_MAX).
  if (containerId.length > 255) return `containerId is ${containerId.length} characters, longer than a cache file's name can hold`;
  const cid = validContainerID(containerId);
  if (cid) return `containerId ${cid}`;
  const ifn = validInterfaceName(ifName);
  return ifn ? `ifName ${ifn}` : undefined;
}

const CACHE_KIND = 'cniCacheV1';
/**
 * The most entries of one network a pass takes. A node runs at most a few hundred pods (kubelet's maxPods: 110 by
 * default, 250 on the largest AKS nodes); more entries than this is a runtime leaking entries or a planted flood:
 * "could not look". Counted by the entries' own network name: another network whose name shares our prefix
 * (`net-b` beside `net`) counts towards its own, never ours.
 */
export const MAX_CACHE_ENTRIES = 10_000;
/**
 * The most files named for the network (its name and a '-') a pass opens, whoever's they turn out to be: what
 * bounds a pass's reads when other networks sharing the prefix hold many. Past it: "could not look".
 */
const MAX_CACHE_FILES = 50_000;

/** Files read between two yields to the event loop: ~1 ms of synchronous reads. */
const READ_BATCH = 64;

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
  /** Another network's (only its name kept: a longer name sharing our prefix). */
  | { name: string; networkName: unknown }
  | { name: string; ours: CachedPod | { ignored: string } | { refused: string } };

function reduce(name: string, network: string, read: FileRead): CacheFile {
  if ('gone' in read) return { name, gone: true };
  if ('why' in read) return { name, why: read.why };
  let entry: { kind?: unknown; containerId?: unknown; ifName?: unknown; networkName?: unknown; cniArgs?: unknown; result?: unknown } | null;
  try {
    entry = JSON.parse(read.text) as typeof entry;
  } catch {
    // Never the parser's message: it quotes the text.
    return { name, why: 'is not valid JSON', networkName: networkNameIn(read.text) };
  }
  if (typeof entry !== 'object' || entry === null) return { name, why: 'is not a JSON object' };
  // Another network's: only a short name is worth keeping (it tells which file names are that network's).
  if (entry.networkName !== network)
    return { name, networkName: typeof entry.networkName === 'string' && entry.networkName.length <= 256 ? entry.networkName : undefined };
  if (entry.kind !== undefined && entry.kind !== CACHE_KIND)
    return { name, ours: { refused: `is of kind ${JSON.stringify(entry.kind).slice(0, 64)}, not ${CACHE_KIND}` } };
  if (typeof entry.containerId !== 'string' || typeof entry.ifName !== 'string') return { name, ours: { refused: 'lacks containerId/ifName' } };
  const bad = entryNamesProblem(entry.containerId, entry.ifName);
  if (bad) return { name, ours: { ignored: bad } };
  return { name, ours: podOf({ containerID: entry.containerId, ifname: entry.ifName }, entry) };
}

/**
 * The attachments the runtime knows for `network`, read here: libcni's cache files results/<net>-<cid>-<ifname>. The
 * file name is ambiguous (names contain '-', so network "a" sees "a-b"'s files), so the file's own `networkName`
 * decides, and only this network's entries count towards MAX_CACHE_ENTRIES; a file of another network is never
 * ours, even when it is corrupt (its name is read from the text, or the file name starts with another network's
 * name seen in the cache). A file of this network that cannot be looked at makes the list unknowable and aborts with
 * RuntimeCacheError (releasing on a partial list could free a live pod's IP); one removed since the listing is gone,
 * not unknowable; one whose names libcni would refuse is ignored (reported in `ignored`).
 */
export async function readCacheView(cacheDir: string, network: string): Promise<CacheView> {
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
  if (candidates.length > MAX_CACHE_FILES)
    throw new RuntimeCacheError(
      dir,
      `it holds ${candidates.length} files named for network ${network} or a network sharing its prefix, more than the ${MAX_CACHE_FILES} a pass reads`,
    );
  // Each file reduced before the next is read: the pass holds compact CachedPods, never every parsed entry (all at
  // once, 5,000 libcni entries held ~50 MiB more: docs/performance.md#the-node-agent).
  const files: CacheFile[] = [];
  let ours = 0;
  for (const [i, name] of candidates.entries()) {
    if (i % READ_BATCH === READ_BATCH - 1) await new Promise((r) => setImmediate(r));
    const f = reduce(name, network, readCacheFile(join(dir, name)));
    if ('ours' in f && ++ours > MAX_CACHE_ENTRIES)
      throw new RuntimeCacheError(
        dir,
        `it holds more than the ${MAX_CACHE_ENTRIES} entries of network ${network} a pass reads (a runtime leaking entries?)`,
      );
    files.push(f);
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

/** The reader child's work (src/gc/cache-reader.ts starts it): the view, or why the list is unknowable, as JSON. */
export async function cacheReaderMain(argv: readonly string[]): Promise<{ stdout: string; exitCode: number }> {
  const [cacheDir, network] = argv;
  if (argv.length !== 2 || !cacheDir || !network) return { stdout: '', exitCode: 2 };
  try {
    return { stdout: JSON.stringify({ view: await readCacheView(cacheDir, network) }), exitCode: 0 };
  } catch (e) {
    if (e instanceof RuntimeCacheError) return { stdout: JSON.stringify({ refused: { path: e.path, why: e.why } }), exitCode: 0 };
    throw e;
  }
}

/** The longest request line the serving reader takes (a cache dir and a network name: far below). */
const MAX_REQUEST_BYTES = 64 * 1024;

/** The heap a serving reader keeps between reads: 10,000 libcni entries (the most read) stay well below it. */
const MAX_KEPT_HEAP_BYTES = 96 * 1024 * 1024;

/** One request of the warm reader's owner (src/gc/cache-reader.ts): read `network` below `cacheDir`. */
const ReaderRequestSchema = z.object({ id: z.number(), cacheDir: z.string(), network: z.string() });

/**
 * The warm reader child (`CACHE_READER_ARG --serve`): one JSON request a line on `input`, answered one at a time
 * with one line on `write`: the request's id and what the one-shot reader prints. A request it cannot parse ends it
 * (exit 2): its owner reads a missing answer as "could not look" and starts a new reader. Ends at input's end (its
 * owner closed the pipe or is gone).
 */
export async function cacheReaderServe(
  input: AsyncIterable<Buffer>,
  write: (line: string) => Promise<void>,
  maxKeptHeapBytes = MAX_KEPT_HEAP_BYTES,
): Promise<number> {
  let pending = '';
  for await (const chunk of input) {
    pending += chunk.toString('utf8');
    let nl: number;
    while ((nl = pending.indexOf('\n')) >= 0) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      let request: { id: number; cacheDir: string; network: string };
      try {
        const parsed = ReaderRequestSchema.safeParse(JSON.parse(line));
        if (!parsed.success) return 2;
        request = parsed.data;
      } catch {
        return 2;
      }
      const r = await cacheReaderMain([request.cacheDir, request.network]);
      if (r.exitCode !== 0) return r.exitCode;
      await write(`{"id":${request.id},${r.stdout.slice(1)}\n`);
      // A read that grew the heap past what a node's cache needs (a hostile cache of huge entries): end, so that
      // memory is returned now instead of kept between passes; the owner starts a new reader for the next read.
      if (process.memoryUsage().heapTotal > maxKeptHeapBytes) return 0;
    }
    if (pending.length > MAX_REQUEST_BYTES) return 2;
  }
  return 0;
}

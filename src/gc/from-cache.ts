// GC from the runtime's result cache, for runtimes that never send CNI GC (AKS's 0.3.1 conflists): valid = the
// attachments libcni cached, then the GC verb's own algorithm and guards (src/gc/run-gc.ts), and the refusal
// to release anything when the cache is out of sight. `ipam-shim gc` and the node agent's gc step both call
// gcFromCache; neither decides anything of its own.
import type { Attachment } from '../cni/config.js';
import type { OpenNetwork } from '../network/open.js';
import { runGc, type GcReport } from './run-gc.js';
import type { CacheView } from '../pods/cached-pod.js';
import { readInChild, type CacheReadOptions } from './cache-reader.js';

export { MAX_CACHE_ENTRIES, RuntimeCacheError } from './cache-read.js';

/** libcni's cache root (containerd, CRI-O, podman): `results/` below it. */
export const DEFAULT_CACHE_DIR = '/var/lib/cni';
/** How young an attachment GC never releases (`--grace-seconds` of `ipam-shim gc` and the agent): an ADD in flight. */
export const DEFAULT_GC_GRACE_S = 60;

/**
 * The attachments the runtime knows for `network` (src/gc/cache-read.ts says how an entry is read and matched),
 * read in a child this process abandons past its bound (src/gc/cache-reader.ts): a hung file system under the cache
 * never blocks the caller. Throws RuntimeCacheError when the list is unknowable: "could not look", never "found
 * nothing".
 */
export function cachedAttachments(cacheDir: string, network: string, o?: CacheReadOptions): Promise<CacheView> {
  return readInChild(cacheDir, network, o);
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
  const listing = await net.ledger.list();
  const pods = listing.records.filter((r) => r.owner !== 'agent').length;
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
    // One listing for the refusal and the plan.
    listing,
  });
  return { cache, valid, refused, apply, report };
}

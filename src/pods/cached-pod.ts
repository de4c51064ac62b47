// The runtime's view of one pod, and of a network's pods, as its result cache holds them (src/gc/from-cache.ts reads
// it): the types alone, so that pure modules (the agent's pods view, the agent steps) can name them without reaching
// the cache reader and its file calls.
import type { Attachment } from '../cni/config.js';

/**
 * A pod attachment as the runtime cached it: its addresses (from the cached result) and, when the runtime passed
 * them in CNI_ARGS (kubelet's runtimes do), the pod's namespace and name. The node agent reads these for pods the
 * shim never saw (src/pods/view.ts).
 */
export interface CachedPod extends Attachment {
  /** Canonical addresses, without prefix. */
  ips: string[];
  namespace?: string;
  name?: string;
  /** Why the cached result's addresses could not be read (ips is then empty: unknown, not none). */
  unreadable?: string;
}

/** What the runtime's result cache showed for a network: its attachments, or why it could not be seen. */
export interface CacheView {
  attachments: Attachment[];
  /** The same attachments, in the same order, with what the cache says about their pods. */
  pods: CachedPod[];
  /** `missing`: no results directory; `unreadable`: it could not be listed; `empty`: no entry for this network. */
  blind?: { kind: 'missing' | 'unreadable' | 'empty'; why: string };
  /**
   * Entries of this network whose container ID or interface name libcni would refuse (it never writes one): left
   * out, by file name, and never turned into a path. No CNI call can have recorded such a name in the ledger.
   */
  ignored: IgnoredEntry[];
}

export interface IgnoredEntry {
  /** The cache file's name (in results/). */
  file: string;
  why: string;
}

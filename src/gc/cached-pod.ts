// The runtime's view of one pod, as its result cache holds it: the type alone, so that pure modules (the agent's
// pods view, the fixes' agent steps) can name it without reaching the cache reader and its file calls.
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

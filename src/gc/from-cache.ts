// TODO(merge): replaced by the factored body of `ipam-shim gc` after issue 14's guards are on main.
import type { Attachment } from '../cni/config.js';
import type { OpenNetwork } from '../cli/network.js';
import { cachedAttachments } from '../cli/gc.js';
import { runGc, type GcReport } from './run-gc.js';

export async function gcFromCache(net: OpenNetwork, o: { cacheDir: string; apply: boolean; graceMs: number; allowEmptyCache: boolean; signal?: AbortSignal }): Promise<{ valid: Attachment[]; report: GcReport }> {
  const valid = await cachedAttachments(o.cacheDir, net.conf.name);
  const report = await runGc({ conf: net.conf, ledger: net.ledger, delegate: net.delegate, run: net.run, log: net.log, valid, apply: o.apply, graceMs: o.graceMs, forward: true, signal: o.signal });
  return { valid, report };
}

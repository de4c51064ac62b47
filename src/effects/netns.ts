// Named network namespaces (`ip netns add | del`, /run/netns/<name>): the empty namespaces the agent's own IPs are
// allocated in.
import { CniError, ErrorCode } from '../cni/errors.js';
import type { Run } from './exec.js';

/**
 * Creates /run/netns/<name> (an existing one is kept) and returns its path, and whether this call made it (so a
 * failed caller removes only what it made); any other failure → code 5.
 */
export async function ensureNetns(run: Run, name: string): Promise<{ path: string; created: boolean }> {
  const path = `/run/netns/${name}`;
  const r = await run('ip', ['netns', 'add', name], { check: false });
  // ip's own stderr ("Cannot create namespace file ... File exists"): the program's answer, not one of our errors.
  if (r.exitCode !== 0 && !/exists/i.test(r.stderr))
    throw new CniError(ErrorCode.IoFailure, `cannot create netns ${name}`, { details: r.stderr.trim() });
  return { path, created: r.exitCode === 0 };
}

/** Removes /run/netns/<name>; a missing one, or a failure, is left for the next release to retry (best effort). */
export async function deleteNetns(run: Run, name: string): Promise<void> {
  await run('ip', ['netns', 'del', name], { check: false });
}

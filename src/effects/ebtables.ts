// ebtables nat PREROUTING: list the chain (as text: src/residue/parse.ts reads it) and delete rules one by one.
// Argv arrays only.
import { ToolError } from '../cni/errors.js';
import type { Run, RunCall, RunResult } from './exec.js';

const EBTABLES = 'ebtables';
const TIMEOUT_MS = 15_000;

/** The one call listPrerouting makes (the IPAM slot starts it early, alongside the delegate ADD). */
export const LIST_PREROUTING: RunCall = [EBTABLES, ['-t', 'nat', '-L', 'PREROUTING'], { check: false, timeoutMs: TIMEOUT_MS }];

/**
 * `ebtables -t nat -L PREROUTING` stdout, one call. Read-only, so trivially idempotent; with the nft backend
 * listing an absent table does not create it. Owns nothing. Tolerates a missing ebtables binary and a missing
 * nat table/chain (→ `available: false`); any other failure (e.g. not root) throws ToolError, because "could not
 * look" must not read as "nothing there".
 */
export async function listPrerouting(run: Run): Promise<{ available: false } | { available: true; text: string }> {
  const [, args, opts] = LIST_PREROUTING;
  const r = await run(EBTABLES, args, opts);
  if (isMissingProgram(r)) return { available: false };
  if (r.exitCode !== 0 || r.timedOut) {
    if (isAbsentTable(r.stderr)) return { available: false };
    throw new ToolError(EBTABLES, args, r.exitCode, r.stderr, { timedOut: r.timedOut });
  }
  return { available: true, text: r.stdout };
}

/**
 * Deletes exactly one listed rule: `ebtables -t nat -D PREROUTING <rule.args>` (ebtables matches the whole
 * rule, so a neighbouring address can never be hit). Idempotent: a rule that is already gone, or a table/chain
 * or binary that no longer exists, is reported as `'absent'`, not an error. Owns only the rule it is given.
 * Any other failure throws ToolError. When several identical rules exist, each call removes one of them.
 */
export async function deleteRule(run: Run, rule: { readonly args: readonly string[] }): Promise<'deleted' | 'absent'> {
  const args = ['-t', 'nat', '-D', 'PREROUTING', ...rule.args];
  const r = await run(EBTABLES, args, { check: false, timeoutMs: TIMEOUT_MS });
  if (r.exitCode === 0 && !r.timedOut) return 'deleted';
  if (isMissingProgram(r) || isAbsentRule(r.stderr) || isAbsentTable(r.stderr)) return 'absent';
  throw new ToolError(EBTABLES, args, r.exitCode, r.stderr, { timedOut: r.timedOut });
}

// Run directly, a missing program is ENOENT from spawn (r.notFound); through `ip netns exec` (runInNetns) the same thing is exit 1 with this text.
function isMissingProgram(r: RunResult): boolean {
  return r.notFound || (r.exitCode === 1 && /^exec of ".*" failed: No such file or directory/m.test(r.stderr));
}

// Messages of ebtables-nft 1.8.x and ebtables-legacy 2.0.x (recorded in test/fixtures/ebtables/stderr-*.txt).
function isAbsentTable(stderr: string): boolean {
  return /table '?\w+'? does not exist|doesn't support the ebtables '\w+' table|is incompatible, use 'nft' tool|Chain '?\w+'? doesn't exist|No chain\/target\/match by that name/i.test(
    stderr,
  );
}

function isAbsentRule(stderr: string): boolean {
  return /Bad rule \(does a matching rule exist in that chain\?\)|rule does not exist/i.test(stderr);
}

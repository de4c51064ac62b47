// ebtables nat PREROUTING: list the chain (as text: src/residue/parse.ts reads it) and delete rules one by one,
// with a named program: `ebtables` (the node's alternative), `ebtables-nft` or `ebtables-legacy` see different
// tables (src/residue/backends.ts chooses which to run). Argv arrays only.
import { ToolError } from '../cni/errors.js';
import type { Run, RunCall, RunResult } from './exec.js';

const TIMEOUT_MS = 15_000;

/** The one call listPrerouting makes for `program` (the IPAM slot starts it early, alongside the delegate ADD). */
export const listPreroutingCall = (program: string): RunCall => [program, ['-t', 'nat', '-L', 'PREROUTING'], { check: false, timeoutMs: TIMEOUT_MS }];

/** Why a listing holds no rules without being a failure. */
export type Unlisted =
  /** The program is not installed (not on PATH). */
  | { available: false; why: 'not-installed'; reason: string }
  /** The kernel cannot serve this backend's nat table (ebtables-legacy on a kernel without ebtable_nat). */
  | { available: false; why: 'kernel'; reason: string }
  /** The backend works but has no nat table/PREROUTING chain: no rule can exist in it. */
  | { available: false; why: 'no-table'; reason: string };

/**
 * `<program> -t nat -L PREROUTING` stdout, one call. Read-only, so trivially idempotent; with the nft backend
 * listing an absent table does not create it. Owns nothing. A missing program, a kernel that cannot serve the
 * table and a missing nat table/chain are answered as `available: false` with the reason; any other failure
 * (e.g. not root) throws ToolError, because "could not look" must not read as "nothing there".
 */
export async function listPrerouting(run: Run, program = 'ebtables'): Promise<Unlisted | { available: true; text: string }> {
  const [, args, opts] = listPreroutingCall(program);
  const r = await run(program, args, opts);
  if (isMissingProgram(r)) return { available: false, why: 'not-installed', reason: `${program} is not installed` };
  if (r.exitCode !== 0 || r.timedOut) {
    const first = r.stderr.trim().split('\n')[0] ?? '';
    if (!r.timedOut && isUnsupportedByKernel(r.stderr)) return { available: false, why: 'kernel', reason: first };
    if (!r.timedOut && isAbsentTable(r.stderr)) return { available: false, why: 'no-table', reason: first };
    throw new ToolError(program, args, r.exitCode, r.stderr, { timedOut: r.timedOut });
  }
  return { available: true, text: r.stdout };
}

/**
 * Deletes exactly one listed rule: `<program> -t nat -D PREROUTING <rule.args>` (ebtables matches the whole
 * rule, so a neighbouring address can never be hit). Idempotent: a rule that is already gone, or a table/chain
 * or binary that no longer exists, is reported as `'absent'`, not an error. Owns only the rule it is given.
 * Any other failure throws ToolError. When several identical rules exist, each call removes one of them.
 */
export async function deleteRule(run: Run, rule: { readonly args: readonly string[] }, program = 'ebtables'): Promise<'deleted' | 'absent'> {
  const args = ['-t', 'nat', '-D', 'PREROUTING', ...rule.args];
  const r = await run(program, args, { check: false, timeoutMs: TIMEOUT_MS });
  if (r.exitCode === 0 && !r.timedOut) return 'deleted';
  if (isMissingProgram(r) || isAbsentRule(r.stderr) || isAbsentTable(r.stderr) || isUnsupportedByKernel(r.stderr)) return 'absent';
  throw new ToolError(program, args, r.exitCode, r.stderr, { timedOut: r.timedOut });
}

// Run directly, a missing program is ENOENT from spawn (r.notFound); through `ip netns exec` (runInNetns) the same thing is exit 1 with this text.
function isMissingProgram(r: RunResult): boolean {
  return r.notFound || (r.exitCode === 1 && /^exec of ".*" failed: No such file or directory/m.test(r.stderr));
}

// Messages of ebtables-nft 1.8.x and ebtables-legacy 2.0.x (recorded in test/fixtures/ebtables/stderr-*.txt).
// ebtables-legacy on a kernel without the table: "The kernel doesn't support the ebtables 'nat' table."
function isUnsupportedByKernel(stderr: string): boolean {
  return /doesn't support the ebtables '\w+' table/i.test(stderr);
}

function isAbsentTable(stderr: string): boolean {
  return /table '?\w+'? does not exist|is incompatible, use 'nft' tool|Chain '?\w+'? doesn't exist|No chain\/target\/match by that name/i.test(
    stderr,
  );
}

function isAbsentRule(stderr: string): boolean {
  return /Bad rule \(does a matching rule exist in that chain\?\)|rule does not exist/i.test(stderr);
}

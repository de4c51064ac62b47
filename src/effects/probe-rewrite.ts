// The probe rewrite's I/O (the rules themselves and what they mean are in src/probe-rewrite/): list, apply and
// delete one nftables table, and list the uplink's tc ingress filters. Returns nft's and tc's raw JSON text;
// parsing and judging it is the caller's job.
import { ToolError } from '../cni/errors.js';
import { TOOL_TIMEOUT_MS, type Run } from './exec.js';

const TC_TIMEOUT_MS = 5_000;

/** nft is absent (or the kernel has no nf_tables): a result, not a crash, so ADD can degrade and doctor can say so. */
export interface NftUnavailable {
  available: false;
  reason: string;
}

/** `nft -j list table FAMILY NAME` stdout, or null when the table is absent. Only "nft unusable here" is a result; other failures throw. */
export async function listNftTable(run: Run, family: string, name: string): Promise<NftUnavailable | { available: true; json: string | null }> {
  const args = ['-j', 'list', 'table', family, name];
  const r = await run('nft', args, { check: false, timeoutMs: TOOL_TIMEOUT_MS });
  const unavailable = nftUnavailable(r);
  if (unavailable) return unavailable;
  if (r.exitCode === 0) return { available: true, json: r.stdout };
  if (/^Error: No such file or directory/m.test(r.stderr)) return { available: true, json: null };
  throw new ToolError('nft', args, r.exitCode, r.stderr, { timedOut: r.timedOut });
}

/** `nft -f -` with `script`: one atomic transaction. nft missing → `{available: false}`; nft rejecting it throws ToolError. */
export async function applyNftScript(run: Run, script: string): Promise<NftUnavailable | { available: true }> {
  const r = await run('nft', ['-f', '-'], { input: script, check: false, timeoutMs: TOOL_TIMEOUT_MS });
  const unavailable = nftUnavailable(r);
  if (unavailable) return unavailable;
  if (r.exitCode !== 0) throw new ToolError('nft', ['-f', '-'], r.exitCode, r.stderr, { timedOut: r.timedOut });
  return { available: true };
}

/**
 * Deletes table FAMILY NAME and nothing else. Idempotent: absent = success, with no "does it exist" race
 * (declare + delete in one transaction, so it works whether or not the table is there).
 */
export async function deleteNftTable(run: Run, family: string, name: string): Promise<NftUnavailable | { available: true }> {
  return applyNftScript(run, `table ${family} ${name}\ndelete table ${family} ${name}\n`);
}

function nftUnavailable(r: { notFound: boolean; stderr: string }): NftUnavailable | null {
  // `exec of "nft" failed` is ip-netns-exec's wording when the Run is runInNetns(ns).
  if (r.notFound || /exec of "nft" failed/.test(r.stderr)) return { available: false, reason: 'nft not found' };
  if (/Protocol not supported/.test(r.stderr)) return { available: false, reason: 'kernel without nf_tables' };
  return null;
}

/**
 * `tc -j qdisc show dev DEV` and `tc -j filter show dev DEV ingress` stdout; null when tc is missing or fails
 * (no such device) or DEV has no clsact qdisc (then there are no ingress filters: saves the second call on most nodes).
 */
export async function listIngressFilters(run: Run, dev: string): Promise<{ qdiscs: string; ingress: string } | null> {
  const qdisc = await run('tc', ['-j', 'qdisc', 'show', 'dev', dev], { check: false, timeoutMs: TC_TIMEOUT_MS });
  if (qdisc.exitCode !== 0 || !/"clsact"/.test(qdisc.stdout)) return null;
  const filters = await run('tc', ['-j', 'filter', 'show', 'dev', dev, 'ingress'], { check: false, timeoutMs: TC_TIMEOUT_MS });
  if (filters.exitCode !== 0) return null;
  return { qdiscs: qdisc.stdout, ingress: filters.stdout };
}

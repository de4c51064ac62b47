import { CniError, ErrorCode } from '../cni/errors.js';
import { delegateConf } from '../cni/config.js';
import { DelegateNoAnswer } from '../effects/delegate.js';
import type { VerbContext } from './context.js';
import { statusLook } from '../fix-list/address-steps.js';
import { span } from '../spans.js';
import { decideStatus, type StatusCheck } from '../status/decide.js';
import { readMemo, writeMemo } from '../status/memo.js';
import { decideWarnings, warningFingerprint } from '../status/warnings.js';

/** What one look found: nothing wrong, or the error to answer and whether it can clear by itself. */
type Finding = { kind: 'ok' } | { kind: Exclude<StatusCheck['kind'], 'ok'>; error: CniError };

const unavailable = (msg: string, e?: unknown) =>
  new CniError(ErrorCode.PluginNotAvailable, msg, { details: e instanceof Error ? e.message : e === undefined ? undefined : String(e) });

/**
 * STATUS: can ADD be served now? The state dir takes a write, the delegate ranges are not all reserved, the
 * delegate is there and answers, and in the IPAM slot its own STATUS (when it speaks 1.1.0) succeeds, all within
 * `statusTimeoutMs`: a runtime may wait on this call for node readiness (containerd 2.x: every CRI Status).
 * Whether a failure is answered or tolerated for a while: src/status/decide.ts.
 */
export async function cmdStatus(ctx: VerbContext): Promise<void> {
  const { statusGraceMs, stateDir } = ctx.conf.settings;
  try {
    await ctx.ledger.assertWritable();
  } catch (e) {
    // Lasting by nature, and there is nowhere to remember anything in.
    throw unavailable(`state dir ${stateDir} is not writable`, e);
  }
  const fixes = statusLook(ctx.conf);
  const found = await look(ctx, fixes.problem);
  const memo = readMemo(ctx.ledger.dir);
  const now = Date.now();
  const { verdict, memo: next } = decideStatus({ kind: found.kind }, memo, now, statusGraceMs);
  const warned = decideWarnings(warningFingerprint(fixes.warnings), memo, now);
  if (warned.log) for (const w of fixes.warnings) ctx.log.warn({ fix: w.fix, ...w.fields }, w.msg);
  if (warned.cleared) ctx.log.info('STATUS: the warnings logged before are gone');
  if (next || warned.memo)
    await writeMemo(ctx.ledger.dir, { ...(next ?? memo), warned: memo.warned, warnedAt: memo.warnedAt, ...warned.memo }).catch((e: unknown) =>
      ctx.log.warn({ err: e }, 'STATUS memo not written: the next STATUS cannot tell a blip from a lasting failure'),
    );
  switch (verdict.answer) {
    case 'ok':
      if (verdict.recovered) ctx.log.info({ failingSince: iso(memo.failingSince ?? memo.failedAt) }, 'STATUS: available again');
      return;
    case 'tolerated': {
      const { error } = found as Exclude<Finding, { kind: 'ok' }>;
      ctx.log.warn(
        { cniCode: error.code, cniMsg: error.msg, details: error.details, failingForMs: verdict.failingForMs, graceLeftMs: verdict.leftMs },
        'STATUS: delegate did not answer; tolerated within statusGraceMs (answered success)',
      );
      return;
    }
    case 'fail': {
      const { error } = found as Exclude<Finding, { kind: 'ok' }>;
      if (verdict.failingForMs === undefined) throw error;
      throw new CniError(
        error.code,
        `${error.msg} (failing for ${Math.round(verdict.failingForMs / 1000)} s, past statusGraceMs ${statusGraceMs} ms)`,
        { details: error.details },
      );
    }
  }
}

const iso = (t: number | undefined) => (t === undefined ? undefined : new Date(t).toISOString());

/** The checks after the state dir's, in order; the first failure is the finding. */
async function look(ctx: VerbContext, problem: string | undefined): Promise<Finding> {
  if (problem) return { kind: 'persistent', error: unavailable(problem) };
  if (!ctx.delegate) return { kind: 'ok' };
  const { statusTimeoutMs } = ctx.conf.settings;
  // One bound for the delegate's VERSION (a cache miss) and STATUS together: each call gets what is left of it,
  // so its process group is killed by the deadline.
  const deadline = Date.now() + statusTimeoutMs;
  const bounded = () => ctx.delegate!.withTimeout(Math.max(1, deadline - Date.now()));
  const type = ctx.delegate.type;
  const noAnswer = (command: string, e: CniError): Finding => ({
    kind: 'unanswered',
    error: !(e instanceof DelegateNoAnswer)
      ? unavailable(`delegate ${type} ${command} asked to try again later`, e)
      : e.timedOut
        ? unavailable(`delegate ${type} ${command} did not answer within ${statusTimeoutMs} ms`, 'killed with its process group')
        : unavailable(`delegate ${type} ${command} did not answer`, e),
  });
  let versions: string[];
  try {
    using versioning = span('delegate.version');
    versions = await bounded().supportedVersions();
    versioning.end();
  } catch (e) {
    if (isUnanswered(e)) return noAnswer('VERSION', e);
    return { kind: 'persistent', error: unavailable(`delegate ${type} is not available`, e) };
  }
  // Chained, the shim's ADD never calls the delegate (it works on prevResult): the plugin in front relies on that
  // IPAM for its ADD and asks it for STATUS itself (spec: a plugin that "relies on a delegated plugin … to service
  // ADD requests … must also execute a STATUS request to that plugin"). Asking again would cost every node a
  // delegate process per poll and make the node's readiness wait on it twice. Found and answering VERSION (from
  // the cache: a stat) is still required: GC and the agent's IPs need it, and it is the IPAM the chain runs.
  if (ctx.conf.placement !== 'ipam' || !versions.includes('1.1.0')) return { kind: 'ok' };
  try {
    using asking = span('delegate.status');
    await bounded().status(delegateConf(ctx.conf, '1.1.0'));
    asking.end();
    return { kind: 'ok' };
  } catch (e) {
    if (isUnanswered(e)) return noAnswer('STATUS', e);
    // The delegate's own error result is ours at once (spec: "If the delegated plugin return an error result, the
    // executing plugin should return an error result"): its 50/51 unchanged, anything else as 50 with its text.
    if (e instanceof CniError && (e.code === ErrorCode.PluginNotAvailable || e.code === ErrorCode.LimitedConnectivity))
      return { kind: 'persistent', error: e };
    return { kind: 'persistent', error: unavailable(`delegate ${type} STATUS failed`, e) };
  }
}

/** No answer of its own: timed out, died without a CNI error, or said 11 "try again later". */
const isUnanswered = (e: unknown): e is CniError => e instanceof DelegateNoAnswer || (e instanceof CniError && e.code === ErrorCode.TryAgainLater);

import { CniError, ErrorCode } from '../cni/errors.js';
import { delegateConf } from '../cni/config.js';
import type { VerbContext } from './context.js';
import { statusProblems } from './address-steps.js';
import { timed } from '../spans.js';

/** STATUS: can ADD be served now? Delegate present and answering, its own STATUS, the state dir writable. */
export async function cmdStatus(ctx: VerbContext): Promise<void> {
  const unavailable = (msg: string, e?: unknown) =>
    new CniError(ErrorCode.PluginNotAvailable, msg, { details: e instanceof Error ? e.message : e === undefined ? undefined : String(e) });
  try {
    await ctx.ledger.assertWritable();
  } catch (e) {
    throw unavailable(`state dir ${ctx.conf.settings.stateDir} is not writable`, e);
  }
  const problem = await statusProblems(ctx);
  if (problem) throw unavailable(problem);
  const delegate = ctx.delegate;
  if (!delegate) return;
  let versions: string[];
  try {
    versions = await timed('delegate.version', () => delegate.supportedVersions());
  } catch (e) {
    throw unavailable(`delegate ${delegate.type} is not available`, e);
  }
  if (versions.includes('1.1.0')) {
    try {
      await timed('delegate.status', () => delegate.status(delegateConf(ctx.conf, '1.1.0')));
    } catch (e) {
      // The delegate's own 50/51 passes through; anything else means it cannot serve ADD.
      if (e instanceof CniError && (e.code === 50 || e.code === 51)) throw e;
      throw unavailable(`delegate ${delegate.type} STATUS failed`, e);
    }
  }
}

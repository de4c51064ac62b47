// A Run that answers from a script instead of starting programs, for the startup-snapshot warm-up (src/warm.ts)
// and the verbs' unit tests. Not an effect: it starts nothing. Unscripted calls answer as a program that is not
// installed; every call is recorded.
import { ToolError } from '../cni/errors.js';
import { runElsewhere, type ProcReader, type Run, type RunOptions, type RunResult } from '../effects/exec.js';

export interface RunRecord {
  file: string;
  args: readonly string[];
  input?: string | undefined;
  /** The call's own bound (RunOptions.timeoutMs), undefined for none. */
  timeoutMs?: number | undefined;
}

/** The answer for one call: stdout (exit 0), a fuller result, or undefined for "not installed". */
export type RunScript = (file: string, args: readonly string[], opts: RunOptions) => string | Partial<RunResult> | undefined;

/**
 * `proc`: the /proc files the scripted programs' netns would show (Run.readProc, src/effects/exec.ts), so that
 * code reading them instead of starting a program takes that branch (the warm-up); absent: no /proc to read.
 */
export function scriptedRun(script: RunScript, calls: RunRecord[] = [], proc?: ProcReader): Run & { calls: RunRecord[] } {
  const run = async (file: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> => {
    calls.push({ file, args, input: opts.input, timeoutMs: opts.timeoutMs });
    const a = script(file, args, opts);
    const r: RunResult =
      a === undefined
        ? { stdout: '', stderr: `${file}: not found`, exitCode: undefined, timedOut: false, notFound: true }
        : typeof a === 'string'
          ? { stdout: a, stderr: '', exitCode: 0, timedOut: false, notFound: false }
          : { stdout: '', stderr: '', exitCode: 0, timedOut: false, notFound: false, ...a };
    if ((opts.check ?? true) && r.exitCode !== 0) throw new ToolError(file, args, r.exitCode, r.stderr, { timedOut: r.timedOut });
    return r;
  };
  return Object.assign(runElsewhere(run, proc), { calls });
}

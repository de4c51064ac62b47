// The single wrapper around child processes: argv arrays only, never a shell.
import { execa } from 'execa';
import { ToolError } from '../cni/errors.js';

export interface RunOptions {
  input?: string;
  env?: NodeJS.ProcessEnv;
  /** Replace the environment instead of extending process.env. */
  extendEnv?: boolean;
  timeoutMs?: number;
  /** Throw ToolError on a non-zero exit (default true). */
  check?: boolean;
}

export interface RunResult {
  stdout: string;
  stderr: string;
  exitCode: number | undefined;
  timedOut: boolean;
  /** The program was not found or could not be executed (ENOENT/EACCES). */
  notFound: boolean;
}

/**
 * Runs `file` with `args`. The child gets its own process group so a timeout kills everything it started
 * (a hung delegate's children included) and leaves no zombie.
 */
export async function run(file: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  const sub = execa(file, args, {
    input: opts.input ?? '',
    env: opts.env,
    extendEnv: opts.extendEnv ?? true,
    detached: true,
    reject: false,
    stripFinalNewline: false,
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  // Our own timer kills the whole group: execa's timeout kills only the child, and a grandchild holding the
  // stdout pipe would keep us waiting.
  let timedOut = false;
  const timer =
    opts.timeoutMs === undefined
      ? undefined
      : setTimeout(() => {
          timedOut = true;
          if (sub.pid) killGroup(sub.pid);
        }, opts.timeoutMs);
  const r = await sub;
  if (timer) clearTimeout(timer);
  const code = (r as { code?: string }).code;
  const result: RunResult = {
    stdout: String(r.stdout ?? ''),
    stderr: String(r.stderr ?? ''),
    exitCode: r.exitCode,
    timedOut,
    notFound: code === 'ENOENT' || code === 'EACCES',
  };
  if ((opts.check ?? true) && (r.failed || r.exitCode !== 0)) {
    throw new ToolError(file, args, r.exitCode, result.stderr || String(r.message ?? ''), { timedOut });
  }
  return result;
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // group already gone
  }
}

export type Run = typeof run;

/**
 * A Run that executes every program inside network namespace `ns` (`ip netns exec`). The shim itself runs in
 * the node's namespace; this lets operator commands and tests address another one without special cases.
 */
export function runInNetns(ns: string): Run {
  return (file, args, opts) => run('ip', ['netns', 'exec', ns, file, ...args], opts);
}

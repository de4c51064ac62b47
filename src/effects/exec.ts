// The single wrapper around child processes: argv arrays only, never a shell.
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { ToolError } from '../cni/errors.js';
import { span } from '../spans.js';

/**
 * THE default bound for one call of a node tool (`ip`, `nft`, `tc`, listing or changing a few entries: milliseconds
 * when well): a stuck one (a lock, a dying netns) is killed with its group and the call fails, instead of holding a
 * pod's ADD. A tool with a reason for another bound (ebtables' lock wait) names its own.
 */
export const TOOL_TIMEOUT_MS = 10_000;

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
  /** Why it could not be started, as its errno code (ENOENT, EACCES, ETXTBSY, …); absent when it ran. */
  spawnError?: string;
  /** It wrote more than MAX_OUTPUT_BYTES (stdout and stderr together): its group was killed, the rest not read. */
  overflow?: boolean;
  /** Its process ID: after a timeout, whether it is still there (stuck in the kernel) is /proc/<pid>'s to say. */
  pid?: number;
}

export const MAX_OUTPUT_BYTES = 64 * 1024 * 1024;
/** After the timeout's SIGKILL: how long to wait for the child's exit status before answering without it. */
export const KILL_GRACE_MS = 1000;
/** After the child exited: how long pipes that something else still holds open are read before they are dropped. */
const EXIT_GRACE_MS = 200;

/**
 * Runs `file` with `args`, here (this process's network namespace). The child gets its own process group so a
 * timeout kills everything it started (a hung delegate's children included) and leaves no zombie. `timeoutMs` is
 * a bound on the call: at the deadline the group is killed and the pipes are no longer read (a process that left
 * the group, setsid, may hold them open for as long as it lives); the call returns by timeoutMs + KILL_GRACE_MS
 * at the latest. node:child_process directly: loading execa (~8k bundled lines, evaluated on every invocation)
 * cost more than most of the processes it starts.
 */
async function runHere(file: string, args: readonly string[], opts: RunOptions = {}): Promise<RunResult> {
  return checked(file, args, opts, await spawnRun(file, args, opts));
}

interface Spawned {
  result: RunResult;
  failed: boolean;
  message: string;
}

function checked(file: string, args: readonly string[], opts: RunOptions, r: Spawned): RunResult {
  if ((opts.check ?? true) && (r.failed || r.result.exitCode !== 0)) {
    throw new ToolError(file, args, r.result.exitCode, r.result.stderr || r.message, { timedOut: r.result.timedOut });
  }
  return r.result;
}

/** Runs the process; never rejects (a program that cannot start is `notFound`/`failed`). */
async function spawnRun(file: string, args: readonly string[], opts: RunOptions): Promise<Spawned> {
  const env = (opts.extendEnv ?? true) ? { ...process.env, ...opts.env } : (opts.env ?? {});
  let timedOut = false;
  const r = await new Promise<{
    stdout: string;
    stderr: string;
    exitCode: number | undefined;
    failed: boolean;
    overflow?: boolean;
    code?: string;
    message: string;
    pid?: number | undefined;
  }>((resolve) => {
    let sub: ChildProcess;
    try {
      // No input: /dev/null, the same end-of-file as an empty pipe, without a pipe and a stream to set up.
      // Loaded at the first program run, not with this module: node:child_process brings net, dgram and the
      // stream stack (~59M instructions), which a call that starts no program (VERSION, a chained STATUS) skips.
      const { spawn } = process.getBuiltinModule('node:child_process');
      sub = spawn(file, args, { env, detached: true, stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'] });
    } catch (e) {
      resolve({
        stdout: '',
        stderr: '',
        exitCode: undefined,
        failed: true,
        code: (e as { code?: string }).code,
        message: String((e as Error).message ?? e),
      });
      return;
    }
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let size = 0;
    let overflow = false;
    let spawnError: (Error & { code?: string }) | undefined;
    const collect = (into: Buffer[]) => (b: Buffer) => {
      size += b.length;
      if (size > MAX_OUTPUT_BYTES) {
        if (!overflow && sub.pid) killGroup(sub.pid);
        overflow = true;
        return;
      }
      into.push(b);
    };
    sub.stdout!.on('data', collect(out));
    sub.stderr!.on('data', collect(err));
    let exited: { code: number | undefined; signal: NodeJS.Signals | null } | undefined;
    // Stops waiting for end-of-file: a process outside the group (setsid) can hold the pipes open for as long as
    // it lives, and 'close' waits for it. After a poll phase (setImmediate), so output already in the pipe is read.
    const abandonPipes = () =>
      setImmediate(() => {
        sub.stdout!.destroy();
        sub.stderr!.destroy();
        if (exited) finish(exited.code, exited.signal);
      });
    // Our own timer kills the whole group (a grandchild holding the stdout pipe included), then stops reading:
    // the call returns within timeoutMs + KILL_GRACE_MS whatever the delegate left behind.
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            if (exited) return abandonPipes(); // it did answer in time: only its pipes are still held
            timedOut = true;
            if (sub.pid) killGroup(sub.pid);
            abandonPipes();
            // The child itself is SIGKILLed and exits at once; one stuck in the kernel (D state) is not waited for.
            killTimer = setTimeout(() => finish(exited?.code, exited?.signal ?? 'SIGKILL'), KILL_GRACE_MS);
          }, opts.timeoutMs);
    let graceTimer: NodeJS.Timeout | undefined;
    let killTimer: NodeJS.Timeout | undefined;
    sub.on('exit', (code, signal) => {
      exited = { code: code ?? undefined, signal };
      // It answered and exited: what it wrote is in the pipe. A child it left holding the pipe gets a short grace
      // (reads of what is already buffered), not a wait for its end.
      if (!done) graceTimer = setTimeout(abandonPipes, EXIT_GRACE_MS);
    });
    let done = false;
    const finish = (exitCode: number | undefined, signal: NodeJS.Signals | null) => {
      if (done) return;
      done = true;
      if (timer) clearTimeout(timer);
      if (graceTimer) clearTimeout(graceTimer);
      if (killTimer) clearTimeout(killTimer);
      const stderr = Buffer.concat(err).toString('utf8');
      const failed = Boolean(spawnError) || overflow || exitCode !== 0;
      const message = spawnError
        ? `Command failed with ${spawnError.code ?? 'an error'}: ${file} ${args.join(' ')}\n${spawnError.message}`
        : overflow
          ? `Command's combined output was larger than ${MAX_OUTPUT_BYTES} bytes: ${file} ${args.join(' ')}`
          : signal
            ? `Command was killed with ${signal}: ${file} ${args.join(' ')}`
            : `Command failed with exit code ${exitCode}: ${file} ${args.join(' ')}`;
      resolve({ stdout: Buffer.concat(out).toString('utf8'), stderr, exitCode, failed, overflow, code: spawnError?.code, message, pid: sub.pid });
    };
    sub.on('error', (e) => {
      spawnError = e;
      // A program that could not be started emits no 'close' of its own on every Node version.
      if (sub.pid === undefined) finish(undefined, null);
    });
    sub.on('close', (code, signal) => {
      if (spawnError && sub.pid === undefined) return;
      finish(code ?? undefined, signal);
    });
    if (sub.stdin) {
      sub.stdin.on('error', () => undefined); // a child that exits without reading its input (EPIPE)
      sub.stdin.end(opts.input);
    }
  });
  const result: RunResult = {
    stdout: r.stdout,
    stderr: r.stderr,
    exitCode: r.exitCode,
    timedOut,
    notFound: r.code === 'ENOENT' || r.code === 'EACCES',
    overflow: r.overflow ?? false,
    ...(r.code ? { spawnError: r.code } : {}),
    ...(r.pid ? { pid: r.pid } : {}),
  };
  return { result, failed: r.failed, message: r.message };
}

/** What calling a Run does: runs one program and answers its result (throws ToolError unless `check: false`). */
export type Exec = (file: string, args: readonly string[], opts?: RunOptions) => Promise<RunResult>;

/** Reads one /proc file of the netns a Run's programs run in. */
export type ProcReader = (path: string) => string;

/** The mark only this module's constructors put on a Run (a type, nothing at run time). */
declare const madeByExec: unique symbol;

/**
 * Where the code's programs run, with what it can do besides running them (the seam libcni's pkg/invoke `Exec`
 * interface is for plugins). Call it to run a program. Made only here: `run` (this process's own), `wrapRun` (a
 * wrapper around a Run: a default bound, prefetching, logging; it keeps what the wrapped Run can do, so a wrapper
 * cannot lose a capability by being written by hand) and `runElsewhere` (another netns, a script, a test's fake).
 */
export interface Run extends Exec {
  /**
   * Its programs run in this process's network namespace (the node's, for the plugin and the agent): only then
   * does `prefetching` start them early. Inherited by wrappers; false for every Run made by `runElsewhere`.
   */
  readonly here: boolean;
  /**
   * Reads the /proc files of the netns its programs see, so a file read can stand in for a program
   * (src/effects/neigh.ts reads /proc/net/arp instead of starting `ip`): this process's own for `run` and its
   * wrappers, a script's for the build's warm-up (so it takes the branch production takes), none for another
   * netns (runInNetns) or a test's fake.
   */
  readonly readProc: ProcReader | undefined;
  readonly [madeByExec]: true;
}

function makeRun(exec: Exec, here: boolean, readProc: ProcReader | undefined): Run {
  // A function of its own: the caller's (a test's fake) is never changed, and may back more than one Run.
  const call: Exec = (...a) => exec(...a);
  return Object.assign(call, { here, readProc }) as Run;
}

/** The Run of this process: programs start here, and this netns's /proc is read directly. */
export const run: Run = makeRun(runHere, true, (path) => readFileSync(path, 'utf8'));

/** How a wrapper runs one call, given the Run it wraps (`inner`): usually by calling it, with other options or around it. */
export type Through = (file: string, args: readonly string[], opts: RunOptions | undefined, inner: Run) => Promise<RunResult>;

/** A Run that runs every call through `through`, with `inner`'s capabilities (where it runs, its /proc). */
export function wrapRun(inner: Run, through: Through): Run {
  return makeRun((file, args, opts) => through(file, args, opts, inner), inner.here, inner.readProc);
}

/**
 * A Run whose programs do not run here: another netns (runInNetns), a script (src/scripted/scripted-run.ts), a
 * test's fake. `readProc`: how that place's /proc files can be read anyway (the warm-up's script), else none.
 */
export function runElsewhere(exec: Exec, readProc?: ProcReader): Run {
  return makeRun(exec, false, readProc);
}

/** A call as a Run takes it. */
export type RunCall = readonly [file: string, args: readonly string[], opts: RunOptions];

/**
 * Starts `calls` now through `run` (read-only commands whose answer is needed later) and returns a Run that
 * answers the first later call with the same file, args, input and check from the early run; every other call
 * runs normally. An early run that nobody asks for is simply dropped. `spanName` names a span (the log line's
 * timings) from now until every early run has finished. Only for a Run whose programs run here: any other one
 * (a test's fake, runInNetns, the warm-up's script) is returned as it is and sees its calls in program order.
 */
export function prefetching(run: Run, calls: readonly RunCall[], spanName?: string): Run {
  if (!run.here) return run;
  const key = (file: string, args: readonly string[], opts: RunOptions = {}) => JSON.stringify([file, args, opts.input ?? '', opts.check ?? true]);
  const prefetched = spanName ? span(spanName) : undefined;
  const early = new Map(calls.map(([file, args, opts]) => [key(file, args, opts), run(file, args, opts)]));
  for (const answer of early.values()) answer.catch(() => undefined); // a failure is the later caller's, or nobody's
  if (prefetched) void Promise.allSettled(early.values()).then(prefetched.end);
  return wrapRun(run, (file, args, opts, inner) => {
    const k = key(file, args, opts);
    const answer = early.get(k);
    if (!answer) return inner(file, args, opts);
    early.delete(k);
    return answer;
  });
}

function killGroup(pid: number): void {
  try {
    process.kill(-pid, 'SIGKILL');
  } catch {
    // group already gone
  }
}

/**
 * `run` with a bound on every call that sets none (a caller's own timeoutMs, e.g. delegateTimeoutMs, stands): the
 * node agent's, so a tool stuck for good (ebtables waiting on a lock, nsenter on a dying netns) is killed with its
 * group instead of holding the pass, a child and its pipes for the agent's lifetime. Runs where `run` runs.
 */
export function withDefaultTimeout(run: Run, timeoutMs: number): Run {
  return wrapRun(run, (file, args, opts = {}, inner) => inner(file, args, { ...opts, timeoutMs: opts.timeoutMs ?? timeoutMs }));
}

/**
 * A Run that executes every program inside network namespace `ns` (`ip netns exec`). The shim itself runs in
 * the node's namespace; this lets operator commands and tests address another one without special cases.
 */
export function runInNetns(ns: string): Run {
  return runElsewhere((file, args, opts) => run('ip', ['netns', 'exec', ns, file, ...args], opts));
}

/** A long-lived child with piped stdin/stdout (startChild): what its owner may do with it, and nothing more. */
export interface LongLivedChild {
  /** Undefined when it could not be started ('exit' then follows with the errno code as `why`). */
  readonly pid: number | undefined;
  /** Writes to its stdin; false once it can no longer be written (it exited, its pipe broke). */
  write(text: string): boolean;
  /** Kills its process group (SIGKILL) and stops reading its pipes: every listener of ours is released. */
  kill(): void;
  /** The last STDERR_TAIL_BYTES of what it wrote to stderr, for a failure's message. */
  stderrTail(): string;
}

export interface ChildHandlers {
  /** A chunk of its stdout. */
  onStdout(chunk: Buffer): void;
  /** It exited, was killed, or could not be started: called once, after which no handler is called again. */
  onExit(why: string): void;
}

const STDERR_TAIL_BYTES = 4096;

/**
 * Starts `file` with `args` as a long-lived child (a server asked over its stdin/stdout, e.g. the warm cache reader
 * of src/gc/cache-reader.ts): its own process group, so kill() takes whatever it started; its handles unref'd, so an
 * idle child never keeps its owner alive (the owner's own timers bound what it waits for). Argument array, no shell.
 */
export function startChild(file: string, args: readonly string[], handlers: ChildHandlers, env?: NodeJS.ProcessEnv): LongLivedChild {
  const { spawn } = process.getBuiltinModule('node:child_process');
  let ended = false;
  let stderr = '';
  let sub: ChildProcess | undefined;
  const end = (why: string) => {
    if (ended) return;
    ended = true;
    if (sub) {
      sub.stdout?.removeAllListeners('data');
      sub.stderr?.removeAllListeners('data');
      sub.stdout?.destroy();
      sub.stderr?.destroy();
      sub.stdin?.destroy();
    }
    handlers.onExit(why);
  };
  try {
    sub = spawn(file, args, { env: { ...process.env, ...env }, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
  } catch (e) {
    const why = (e as { code?: string }).code ?? String(e);
    queueMicrotask(() => end(why));
    return { pid: undefined, write: () => false, kill: () => undefined, stderrTail: () => '' };
  }
  const child = sub;
  child.on('error', (e: Error & { code?: string }) => end(e.code ?? e.message));
  child.on('exit', (code, signal) => end(signal ? `killed by ${signal}` : `exit ${code}`));
  child.stdout!.on('data', (b: Buffer) => {
    if (!ended) handlers.onStdout(b);
  });
  child.stderr!.on('data', (b: Buffer) => {
    stderr = (stderr + b.toString('utf8')).slice(-STDERR_TAIL_BYTES);
  });
  child.stdin!.on('error', () => undefined); // EPIPE: its exit says why
  child.unref();
  for (const s of [child.stdin, child.stdout, child.stderr] as Array<{ unref?: () => void } | null>) s?.unref?.();
  return {
    pid: child.pid,
    write: (text) => {
      if (ended || !child.stdin!.writable) return false;
      child.stdin!.write(text);
      return true;
    },
    kill: () => {
      if (child.pid) killGroup(child.pid);
      end('killed');
    },
    stderrTail: () => stderr,
  };
}

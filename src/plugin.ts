// CNI mode: one invocation from env + stdin to one JSON document on stdout and an exit code.
import { dispatch, type Verbs } from './cni/skel.js';
import { readStdin } from './cni/stdin.js';
import { createLogger, logBound, silentLogger, type Logger } from './log.js';
import { DEFAULT_LOG_BACKUPS, DEFAULT_LOG_MAX_BYTES } from './cni/config.js';
import { parseCniArgs, podOf, type PodRef } from './cni/env.js';
import { createContext, type InvocationCounters } from './verbs/context.js';
import type { Run } from './effects/exec.js';
import { cpuSoFar, sinceStart, takeSpans } from './spans.js';

const DEFAULT_LOG_FILE = '/var/log/ipam-shim.log';

/** When main() started and when it had this module loaded (sinceStart(): ms since process start). */
export interface StartMarks {
  main?: number;
  /** The process's CPU time (cpuSoFar(), ms) when main() started. */
  mainCpu?: number;
  loaded?: number;
}

/** The pod for the line of a call whose environment or config did not parse: what CNI_ARGS names, if it parses. */
function podOfEnv(env: NodeJS.ProcessEnv): PodRef | undefined {
  try {
    return podOf(parseCniArgs(env.CNI_ARGS ?? ''));
  } catch {
    return undefined;
  }
}

const round1 = (ms: number) => Math.round(ms * 10) / 10;

/** When this call reached each phase (sinceStart()); undefined for a phase it never reached. */
interface CallMarks extends StartMarks {
  /** runPlugin started. */
  started: number;
  /** The config parsed (env, stdin, config read); undefined when it never did. */
  config?: number;
  /** The logger exists (after the config, or the default one after a failure). */
  logger?: number;
  /** The verb's start (undefined when the call failed before it). */
  verb?: number;
  /** The process's CPU time (cpuSoFar()) at the verb's start. */
  verbCpu?: number;
}

/**
 * The `timings` (ms) on every "CNI call done" and "CNI call failed" line: boot (process start → main), modules
 * (loading the plugin), config (env, stdin, config parse; up to the failure when it did not parse), logger,
 * every span the verb recorded (src/spans.ts: delegate.add, delegate.del, ledger.lock, …), verb, total
 * (process start → `now`). Spans the shim runs concurrently overlap. A phase the call never reached is absent.
 */
function timings(m: CallMarks, now: number): Record<string, number> {
  const t: Record<string, number> = {};
  if (m.main !== undefined) t.boot = round1(m.main);
  if (m.main !== undefined && m.loaded !== undefined) t.modules = round1(m.loaded - m.main);
  if (m.config !== undefined) t.config = round1(m.config - m.started);
  if (m.config !== undefined && m.logger !== undefined) t.logger = round1(m.logger - m.config);
  for (const [name, ms] of takeSpans()) t[name] = round1(ms);
  if (m.verb !== undefined) t.verb = round1(now - m.verb);
  t.total = round1(now);
  return t;
}

/**
 * The `cpu` (ms of this process's own CPU, user + system; the programs it ran not included) on the same lines:
 * boot (process start → main: Node's start-up and the startup snapshot), init (main → the verb: modules, config,
 * logger), verb, total (process start → the line). Where start-up goes per verb (docs/performance.md).
 */
function cpuTimings(m: CallMarks, nowCpu: number): Record<string, number> {
  const c: Record<string, number> = {};
  if (m.mainCpu !== undefined) c.boot = round1(m.mainCpu);
  if (m.mainCpu !== undefined && m.verbCpu !== undefined) c.init = round1(m.verbCpu - m.mainCpu);
  if (m.verbCpu !== undefined) c.verb = round1(nowCpu - m.verbCpu);
  c.total = round1(nowCpu);
  return c;
}

/**
 * `stdin`: the stream to read the config from, or a function that reads it (main reads fd 0 directly: creating
 * process.stdin costs more than some verbs). Only called for verbs that need stdin, after the env is valid.
 * `run`: how programs are run (the exec wrapper; the snapshot warm-up answers for the node's tools itself).
 */
export async function runPlugin(
  procEnv: NodeJS.ProcessEnv,
  stdin: NodeJS.ReadableStream | (() => Promise<string>),
  startMarks: StartMarks = {},
  run?: Run,
): Promise<{ stdout: string; exitCode: number }> {
  const marks: CallMarks = { ...startMarks, started: sinceStart() };
  let log: Logger = silentLogger;
  const counters: InvocationCounters = {};
  const verbs = async (): Promise<Verbs> => {
    const ctx = (req: Parameters<Verbs['ADD']>[0]) => createContext(req, log, procEnv, run, counters);
    return {
      // One verb per process: load only its modules (GC's planner, STATUS's checks… stay unevaluated on ADD).
      ADD: async (req) => (await import('./verbs/add.js')).cmdAdd(ctx(req)),
      DEL: async (req) => (await import('./verbs/del.js')).cmdDel(ctx(req)),
      CHECK: async (req) => (await import('./verbs/check.js')).cmdCheck(ctx(req)),
      GC: async (req) => (await import('./verbs/gc.js')).cmdGc(ctx(req)),
      STATUS: async (req) => (await import('./verbs/status.js')).cmdStatus(ctx(req)),
    };
  };
  const outcome = await dispatch(procEnv, typeof stdin === 'function' ? stdin : () => readStdin(stdin), verbs, (conf, env) => {
    marks.config = sinceStart();
    log = createLogger({
      file: conf.settings.logFile,
      level: conf.settings.logLevel,
      bound: logBound(conf.settings),
      base: {
        command: env.command,
        network: conf.name,
        containerID: env.containerID || undefined,
        ifname: env.ifname || undefined,
        netns: env.netns || undefined,
        pod: env.pod,
      },
    });
    marks.logger = marks.verb = sinceStart();
    marks.verbCpu = cpuSoFar();
  });
  if (outcome.command === 'VERSION' && !outcome.error) return outcome;
  if (log === silentLogger) {
    // The config never parsed: log where an operator looks by default.
    marks.config = sinceStart();
    log = createLogger({
      file: DEFAULT_LOG_FILE,
      bound: { maxBytes: DEFAULT_LOG_MAX_BYTES, backups: DEFAULT_LOG_BACKUPS },
      base: { command: outcome.command ?? procEnv.CNI_COMMAND, containerID: procEnv.CNI_CONTAINERID || undefined, pod: podOfEnv(procEnv) },
    });
    marks.logger = sinceStart();
  }
  // `ms`: the whole call as its caller waits for it, process start → this line (what `timings.total` says).
  const t = timings(marks, sinceStart());
  const cpu = cpuTimings(marks, cpuSoFar());
  const ms = t.total;
  if (outcome.error) {
    const { code, msg, details, logFields } = outcome.error;
    // The CNI error's msg under its own name: pino's message key is `msg`, and a second one would hide it.
    log.error({ ...logFields, code, cniMsg: msg, details, ms, outcome: 'error', timings: t, cpu }, 'CNI call failed');
  } else {
    log.info({ ms, outcome: 'ok', timings: t, cpu }, 'CNI call done');
  }
  if (outcome.conf?.settings.metricsFile) await (await import('./metrics.js')).recordInvocation(outcome, counters, log, ms); // never throws
  return outcome;
}

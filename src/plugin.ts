// CNI mode: one invocation from env + stdin to one JSON document on stdout and an exit code.
import { dispatch, type Verbs } from './cni/skel.js';
import { readStdin } from './cni/stdin.js';
import { createLogger, silentLogger, type Logger } from './log.js';
import { createContext } from './verbs/context.js';

const DEFAULT_LOG_FILE = '/var/log/ipam-shim.log';

/** When main() started and when it had this module loaded (performance.now(), ms since process start). */
export interface StartMarks {
  main?: number;
  loaded?: number;
}

const round1 = (ms: number) => Math.round(ms * 10) / 10;

/**
 * The ADD log line's `timings` (ms): boot (process start → main), modules (loading the plugin), config (env,
 * stdin, config parse), logger, every performance.measure() the verb recorded (delegate.add, residue.list, …),
 * verb, total (process start → now). Spans the shim runs concurrently overlap.
 */
function timings(marks: StartMarks, started: number, configAt: number, loggerAt: number): Record<string, number> {
  const now = performance.now();
  const t: Record<string, number> = {};
  if (marks.main !== undefined) t.boot = round1(marks.main);
  if (marks.main !== undefined && marks.loaded !== undefined) t.modules = round1(marks.loaded - marks.main);
  t.config = round1(configAt - started);
  t.logger = round1(loggerAt - configAt);
  for (const m of performance.getEntriesByType('measure')) t[m.name] = round1(m.duration);
  t.verb = round1(now - loggerAt);
  t.total = round1(now);
  return t;
}

/**
 * `stdin`: the stream to read the config from, or a function that reads it (main reads fd 0 directly: creating
 * process.stdin costs more than some verbs). Only called for verbs that need stdin, after the env is valid.
 */
export async function runPlugin(
  procEnv: NodeJS.ProcessEnv,
  stdin: NodeJS.ReadableStream | (() => Promise<string>),
  marks: StartMarks = {},
): Promise<{ stdout: string; exitCode: number }> {
  const started = performance.now();
  let configAt = started;
  let loggerAt = started;
  let log: Logger = silentLogger;
  const counters = { residueRules: 0, residueNeighbours: 0, gcReleased: 0 };
  const verbs = async (): Promise<Verbs> => {
    const ctx = (req: Parameters<Verbs['ADD']>[0]) => createContext(req, log, procEnv, undefined, counters);
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
    configAt = performance.now();
    log = createLogger({
      file: conf.settings.logFile,
      level: conf.settings.logLevel,
      base: { command: env.command, network: conf.name, containerID: env.containerID || undefined, ifname: env.ifname || undefined, netns: env.netns || undefined },
    });
    loggerAt = performance.now();
  });
  const ms = Math.round((performance.now() - started) * 10) / 10;
  if (outcome.command === 'VERSION' && !outcome.error) return outcome;
  if (log === silentLogger) {
    // The config never parsed: log where an operator looks by default.
    log = createLogger({ file: DEFAULT_LOG_FILE, base: { command: outcome.command ?? procEnv.CNI_COMMAND, containerID: procEnv.CNI_CONTAINERID || undefined } });
  }
  if (outcome.error) {
    const { code, msg, details, logFields } = outcome.error;
    // The CNI error's msg under its own name: pino's message key is `msg`, and a second one would hide it.
    log.error({ ...logFields, code, cniMsg: msg, details, ms, outcome: 'error' }, 'CNI call failed');
  } else {
    log.info(outcome.command === 'ADD' ? { ms, outcome: 'ok', timings: timings(marks, started, configAt, loggerAt) } : { ms, outcome: 'ok' }, 'CNI call done');
  }
  if (outcome.conf?.settings.metricsFile) await (await import('./metrics.js')).recordInvocation(outcome, counters, log); // never throws
  return outcome;
}

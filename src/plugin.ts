// CNI mode: one invocation from env + stdin to one JSON document on stdout and an exit code.
import { dispatch, type Verbs } from './cni/skel.js';
import { readStdin } from './cni/stdin.js';
import { createLogger, silentLogger, type Logger } from './log.js';
import { createContext } from './verbs/context.js';
import { cmdAdd } from './verbs/add.js';
import { cmdDel } from './verbs/del.js';
import { cmdCheck } from './verbs/check.js';
import { cmdGc } from './verbs/gc.js';
import { cmdStatus } from './verbs/status.js';

const DEFAULT_LOG_FILE = '/var/log/ipam-shim.log';

export async function runPlugin(procEnv: NodeJS.ProcessEnv, stdin: NodeJS.ReadableStream): Promise<{ stdout: string; exitCode: number }> {
  const started = performance.now();
  let log: Logger = silentLogger;
  const verbs = async (): Promise<Verbs> => {
    const ctx = (req: Parameters<Verbs['ADD']>[0]) => createContext(req, log, procEnv);
    return {
      ADD: (req) => cmdAdd(ctx(req)),
      DEL: (req) => cmdDel(ctx(req)),
      CHECK: (req) => cmdCheck(ctx(req)),
      GC: (req) => cmdGc(ctx(req)),
      STATUS: (req) => cmdStatus(ctx(req)),
    };
  };
  const outcome = await dispatch(procEnv, () => readStdin(stdin), verbs, (conf, env) => {
    log = createLogger({
      file: conf.settings.logFile,
      level: conf.settings.logLevel,
      base: { command: env.command, network: conf.name, containerID: env.containerID || undefined, ifname: env.ifname || undefined, netns: env.netns || undefined },
    });
  });
  const ms = Math.round((performance.now() - started) * 10) / 10;
  if (outcome.command === 'VERSION' && !outcome.error) return outcome;
  if (log === silentLogger) {
    // The config never parsed: log where an operator looks by default.
    log = createLogger({ file: DEFAULT_LOG_FILE, base: { command: outcome.command ?? procEnv.CNI_COMMAND, containerID: procEnv.CNI_CONTAINERID || undefined } });
  }
  if (outcome.error) {
    log.error({ code: outcome.error.code, msg: outcome.error.msg, details: outcome.error.details, ms, outcome: 'error' }, 'CNI call failed');
  } else {
    log.info({ ms, outcome: 'ok' }, 'CNI call done');
  }
  return outcome;
}

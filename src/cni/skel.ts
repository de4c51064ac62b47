// The protocol in one place, like CNI's skel: read env and stdin, gate by version, call one verb, and turn
// its outcome into exactly one JSON document for stdout plus an exit code. No I/O of its own: the caller
// injects env and stdin and writes what comes back.
import { type CniError, toCniError } from './errors.js';
import { readCniEnv, type CniEnv, type Command } from './env.js';
import { parseJsonObject } from './stdin.js';
import { parseNetConf, parseNetConfForDel, type NetConf } from './config.js';
import { answerVersion, assertVersionAllows, SUPPORTED_VERSIONS, versionReply } from './versions.js';
import type { Result } from './result.js';

export interface Request {
  env: CniEnv;
  conf: NetConf;
}

/** One function per verb. ADD returns the result to print; the others print nothing on success. */
export interface Verbs {
  ADD(req: Request): Promise<Result>;
  DEL(req: Request): Promise<void>;
  CHECK(req: Request): Promise<void>;
  GC(req: Request): Promise<void>;
  STATUS(req: Request): Promise<void>;
}

export interface Outcome {
  stdout: string;
  exitCode: number;
  command: Command | undefined;
  conf: NetConf | undefined;
  error: CniError | undefined;
}

export const ABOUT = `ipam-shim CNI plugin: delegated-IPAM fixes for Cilium (supports ${SUPPORTED_VERSIONS.join(', ')})`;

/** The version to stamp on an error: the config's when it is one we speak. */
const errorVersion = (raw: Record<string, unknown> | undefined): string => answerVersion(raw?.cniVersion);

/**
 * Runs one CNI invocation. `readInput` is only called for verbs that need stdin (VERSION tolerates none), and
 * for an error found before stdin was read (its cniVersion is the one to answer in).
 * `onConfig` lets the caller set up logging as soon as the config is known.
 */
export async function dispatch(
  procEnv: NodeJS.ProcessEnv,
  readInput: () => Promise<string>,
  verbs: () => Promise<Verbs>,
  onConfig: (conf: NetConf, env: CniEnv) => void = () => undefined,
): Promise<Outcome> {
  let raw: Record<string, unknown> | undefined;
  let command: Command | undefined;
  let conf: NetConf | undefined;
  let read: Promise<string> | undefined;
  try {
    const env = readCniEnv(procEnv);
    command = env.command;
    const text = await (read = readInput());
    if (command === 'VERSION') {
      raw = text.trim() ? safeObject(text) : undefined;
      return { stdout: versionReply(raw?.cniVersion), exitCode: 0, command, conf, error: undefined };
    }
    raw = parseJsonObject(text);
    conf = command === 'DEL' ? parseNetConfForDel(raw) : parseNetConf(raw);
    assertVersionAllows(command, conf.cniVersion);
    onConfig(conf, env);
    const table = await verbs();
    const req = { env, conf };
    if (command === 'ADD') {
      const result = await table.ADD(req);
      return { stdout: JSON.stringify(result), exitCode: 0, command, conf, error: undefined };
    }
    await table[command](req);
    return { stdout: '', exitCode: 0, command, conf, error: undefined };
  } catch (e) {
    const error = toCniError(e);
    // An error found before the config was read (a bad CNI_* variable) still answers in the config's version.
    if (!raw && !read) raw = await readInput().then(safeObject, () => undefined);
    return { stdout: JSON.stringify(error.toJSON(errorVersion(raw))), exitCode: 1, command, conf, error };
  }
}

function safeObject(text: string): Record<string, unknown> | undefined {
  try {
    return parseJsonObject(text, 'version request');
  } catch {
    return undefined;
  }
}

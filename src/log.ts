// pino to a file with synchronous writes (a CNI plugin exits right after its answer: nothing may be lost).
// Never stdout: stdout is the protocol.
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import pino, { type Logger } from 'pino';

export type { Logger };

export function createLogger(opts: { file?: string; level?: string; base?: Record<string, unknown> }): Logger {
  const level = opts.level ?? 'info';
  let dest: pino.DestinationStream;
  try {
    if (!opts.file) throw new Error('no log file');
    mkdirSync(dirname(opts.file), { recursive: true, mode: 0o755 });
    dest = pino.destination({ dest: opts.file, sync: true, mode: 0o640 });
  } catch {
    // The log file cannot be opened: stderr is the only other place that is not the protocol.
    dest = pino.destination({ dest: 2, sync: true });
  }
  return pino({ level, base: { pid: process.pid, ...opts.base }, timestamp: pino.stdTimeFunctions.isoTime }, dest);
}

/** A logger that drops everything, for code paths that run before the config says where to log. */
export const silentLogger: Logger = pino({ level: 'silent' });

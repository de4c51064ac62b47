// pino to a file with synchronous writes (a CNI plugin exits right after its answer: nothing may be lost).
// Never stdout: stdout is the protocol.
import { writeSync } from 'node:fs';
import pino, { type Logger } from 'pino';
import { LogFile, type LogBound } from './effects/log-file.js';

export type { Logger };

/**
 * The descriptor of each log file this process opened, shared by every logger on that file: a process that opens
 * the same network many times (a CLI command, anything long-running) holds one descriptor per file, not one per
 * logger (the node agent held one more every reconcile pass). Keyed by pid too: an entry made while the startup
 * snapshot was built (src/warm.ts logs to a temp file, whose random path is never asked for again) is never a later
 * process's descriptor.
 */
const openFiles = new Map<string, { pid: number; file: LogFile }>();

function logFile(path: string, bound: LogBound | undefined): LogFile {
  const shared = openFiles.get(path);
  if (shared?.pid === process.pid) {
    shared.file.bound = bound;
    return shared.file;
  }
  const file = new LogFile(path, bound);
  openFiles.set(path, { pid: process.pid, file });
  return file;
}

/** `bound`: rotate the file at this size (src/effects/log-file.ts; the config's `logMaxBytes`, `logBackups`). */
/** The log file's bound as the config's settings say it. */
export const logBound = (s: { logMaxBytes: number; logBackups: number }): LogBound => ({ maxBytes: s.logMaxBytes, backups: s.logBackups });

export function createLogger(opts: { file?: string; level?: string; base?: Record<string, unknown>; bound?: LogBound }): Logger {
  const level = opts.level ?? 'info';
  const base = { pid: process.pid, ...opts.base };
  // stderr: the only other place that is not the protocol (the runtime's own log keeps a plugin's stderr).
  const stderr = neverThrows(2);
  if (!opts.file) return loggerTo(stderr, { level, base });
  let file: LogFile;
  try {
    file = logFile(opts.file, opts.bound);
  } catch (e) {
    // Cannot be opened, or not ours to write (a symlink, a FIFO, a device: src/effects/log-file.ts): said once, first.
    const log = loggerTo(stderr, { level, base });
    log.warn(
      { logFile: opts.file, error: { code: (e as { code?: string }).code, message: (e as Error).message } },
      'log file not used: logging to stderr',
    );
    return log;
  }
  return loggerTo(toFile(file, stderr), { level, base });
}

/** `"level":"info"`, not pino's number (30): what an operator greps for and a log pipeline maps without a table. */
const formatters = { level: (label: string) => ({ level: label }) };

/** The shim's logger shape (named levels, ISO times, the given base fields) on any destination. */
function loggerTo(dest: pino.DestinationStream, opts: { level: string; base: Record<string, unknown> }): Logger {
  return pino({ level: opts.level, base: opts.base, formatters, timestamp: pino.stdTimeFunctions.isoTime }, dest);
}

/**
 * JSON lines on stdout, synchronous: the node agent's log (its container's log stream). Not pino.destination:
 * sonic-boom is not in the bundle (scripts/build.mjs pino-diet).
 */
export function stdoutLogger(level: string, base: Record<string, unknown>): Logger {
  return loggerTo(neverThrows(1), { level, base: { pid: process.pid, ...base } });
}

/**
 * Lines into the (bounded) log file; a line the file cannot take within its bound, or whose write fails (ENOSPC,
 * EIO, a log directory made read-only), goes to `elsewhere` (stderr): it costs neither the call nor the bound.
 */
function toFile(file: LogFile, elsewhere: pino.DestinationStream): pino.DestinationStream {
  return {
    write(line: string) {
      try {
        if (file.append(Buffer.from(line))) return;
      } catch {
        // the file system's failure: the line goes elsewhere
      }
      elsewhere.write(line);
    },
  };
}

/** How long a write to a full pipe (EAGAIN) is retried before the line is dropped. */
const FULL_PIPE_RETRY_MS = 1000;
/** Something to Atomics.wait on for a 1 ms synchronous pause between retries; made on first use, not in the snapshot. */
let pause: Int32Array | undefined;

/**
 * Synchronous writes that swallow write errors: a full or failing log disk (ENOSPC, EIO) or a closed stderr
 * must cost the log line, never the CNI call (pino's own destination throws them into the verb). A pipe that is
 * full for now (EAGAIN, a non-blocking stdout) is waited for, up to FULL_PIPE_RETRY_MS.
 */
function neverThrows(fd: number): pino.DestinationStream {
  return {
    write(line: string) {
      const buf = Buffer.from(line);
      const deadline = Date.now() + FULL_PIPE_RETRY_MS;
      for (let off = 0; off < buf.length; ) {
        try {
          off += writeSync(fd, buf, off);
        } catch (e) {
          if ((e as { code?: string }).code !== 'EAGAIN' || Date.now() > deadline) return; // dropped
          Atomics.wait((pause ??= new Int32Array(new SharedArrayBuffer(4))), 0, 0, 1);
        }
      }
    },
  };
}

/**
 * A logger that drops everything, for code paths that run before the config says where to log. Its destination
 * is a no-op: without one pino opens process.stdout, and creating that stream (a net.Socket for a pipe) costs
 * every invocation a few ms of CPU for a logger that never writes.
 */
export const silentLogger: Logger = pino({ level: 'silent', base: undefined }, { write() {} });

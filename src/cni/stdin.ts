// Bounded stdin: a CNI config is a few KiB; refuse absurd sizes instead of buffering them, and never wait
// on a terminal.
import { fstatSync, readSync } from 'node:fs';
import { CniError, ErrorCode } from './errors.js';

const MAX_STDIN_BYTES = 4 * 1024 * 1024;
/** A CNI config is a handful of levels deep (prevResult, runtimeConfig); this leaves ample room. */
const MAX_JSON_DEPTH = 128;

export async function readStdin(stream: NodeJS.ReadableStream & { isTTY?: boolean }, limit = MAX_STDIN_BYTES): Promise<string> {
  if (stream.isTTY) return '';
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of stream) {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : (chunk as Buffer);
      size += buf.length;
      if (size > limit) {
        // Stop reading: the caller still gets a proper error object.
        throw new CniError(ErrorCode.IoFailure, 'stdin too large', { details: `more than ${limit} bytes` });
      }
      chunks.push(buf);
    }
  } catch (e) {
    if (e instanceof CniError) throw e;
    throw new CniError(ErrorCode.IoFailure, 'error reading stdin', { details: String((e as Error).message ?? e), cause: e });
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** Parses stdin as a JSON object (code 6 otherwise). `__proto__` keys stay plain data. */
export function parseJsonObject(text: string, what = 'network config'): Record<string, unknown> {
  if (text.trim() === '') throw new CniError(ErrorCode.DecodingFailure, `empty ${what} on stdin`);
  if (text.includes('\u0000')) throw new CniError(ErrorCode.DecodingFailure, `failed to decode ${what}`, { details: 'contains NUL bytes' });
  const depth = nestingDepth(text);
  if (depth > MAX_JSON_DEPTH) {
    // Deeper documents parse, but every recursive walk over them (JSON.stringify for the delegate, zod) overflows.
    throw new CniError(ErrorCode.DecodingFailure, `failed to decode ${what}`, { details: `nested deeper than ${MAX_JSON_DEPTH} levels` });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new CniError(ErrorCode.DecodingFailure, `failed to decode ${what}`, { details: (e as Error).message });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CniError(ErrorCode.DecodingFailure, `failed to decode ${what}`, { details: 'not a JSON object' });
  }
  return value as Record<string, unknown>;
}

/** The deepest bracket nesting of a JSON text, strings skipped; iterative, so any depth is measured safely. */
function nestingDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b || c === 0x5b) max = Math.max(max, ++depth);
    else if (c === 0x7d || c === 0x5d) depth--;
  }
  return max;
}

let pause: Int32Array | undefined;

/**
 * readStdin for a file descriptor, synchronously, with the same limit and errors. It never creates
 * process.stdin: for a pipe that is a net.Socket, and loading the stream machinery behind it costs a CNI call
 * about 15 ms of CPU (measured: scripts/bench/, docs/performance.md). undefined for a terminal or any other
 * character device, which readStdin's stream path handles as before (a terminal is never waited on).
 */
export function readStdinFd(fd = 0, limit = MAX_STDIN_BYTES): string | undefined {
  try {
    if (fstatSync(fd).isCharacterDevice()) return undefined;
  } catch {
    return undefined; // no usable fd 0: the stream path decides
  }
  const chunks: Buffer[] = [];
  const buf = Buffer.allocUnsafe(64 * 1024);
  let size = 0;
  for (;;) {
    let n: number;
    try {
      n = readSync(fd, buf, 0, buf.length, null);
    } catch (e) {
      if ((e as { code?: string }).code === 'EAGAIN') {
        // A non-blocking pipe with nothing in it yet: wait a little, without spinning.
        Atomics.wait((pause ??= new Int32Array(new SharedArrayBuffer(4))), 0, 0, 2);
        continue;
      }
      throw new CniError(ErrorCode.IoFailure, 'error reading stdin', { details: String((e as Error).message ?? e), cause: e });
    }
    if (n === 0) break;
    size += n;
    if (size > limit) throw new CniError(ErrorCode.IoFailure, 'stdin too large', { details: `more than ${limit} bytes` });
    chunks.push(Buffer.from(buf.subarray(0, n)));
  }
  return Buffer.concat(chunks).toString('utf8');
}

// Bounded stdin: a CNI config is a few KiB; refuse absurd sizes instead of buffering them, and never wait
// on a terminal.
import { CniError, ErrorCode } from './errors.js';

export const MAX_STDIN_BYTES = 4 * 1024 * 1024;

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

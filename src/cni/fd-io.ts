// The protocol's I/O on the process's own file descriptors: stdin read once from fd 0, the reply written to fd 1.
// process.stdin/process.stdout on a pipe are net.Sockets, and loading that machinery costs more CPU than
// answering VERSION (docs/performance.md).
import { writeSync } from 'node:fs';
import { readStdin, readStdinFd, parseJsonObject } from './stdin.js';
import { versionReply } from './versions.js';

/** stdin, read once: from fd 0 directly, or through process.stdin for a terminal (never waited on). */
let input: Promise<string> | undefined;
export function readInput(): Promise<string> {
  if (!input) {
    try {
      const text = readStdinFd(0);
      input = text === undefined ? readStdin(process.stdin) : Promise.resolve(text);
    } catch (e) {
      input = Promise.reject(e);
    }
  }
  return input;
}

/**
 * VERSION without loading the dispatcher: the same reply skel's dispatch() gives (the config's version when we
 * speak it, else the latest; VERSION needs no other variable and tolerates any stdin). When stdin cannot be read
 * (too large, I/O error, a terminal) undefined: the full path answers, and logs any error, exactly as before.
 */
export function versionFast(): string | undefined {
  let text: string | undefined;
  try {
    text = readStdinFd(0);
  } catch (e) {
    input = Promise.reject(e);
    input.catch(() => undefined); // handled where the full path awaits it
    return undefined;
  }
  if (text === undefined) return undefined;
  input = Promise.resolve(text);
  let raw: Record<string, unknown> | undefined;
  if (text.trim()) {
    try {
      raw = parseJsonObject(text, 'version request');
    } catch {
      raw = undefined;
    }
  }
  const v = raw?.cniVersion;
  return versionReply(v);
}

let pause: Int32Array | undefined;

/** All of `text` to fd 1, synchronously (the caller exits right after). */
export function writeStdout(text: string): void {
  const buf = Buffer.from(text, 'utf8');
  for (let off = 0; off < buf.length; ) {
    try {
      off += writeSync(1, buf, off, buf.length - off);
    } catch (e) {
      if ((e as { code?: string }).code !== 'EAGAIN') throw e;
      Atomics.wait((pause ??= new Int32Array(new SharedArrayBuffer(4))), 0, 0, 2); // a non-blocking pipe is full
    }
  }
}

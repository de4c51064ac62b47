// Entry point only: CNI_COMMAND set → the plugin; arguments → the operator CLI; neither → the about line.
// The only place that writes final output and sets the exit code.
//
// Start-up is most of a CNI call's cost (docs/performance.md), so this file is careful about what loads when:
// - nothing here may import the config schema (zod), the logger (pino) or the verbs at the top: esbuild
//   evaluates a statically imported module, and everything it imports, before main() runs;
// - stdin and stdout are read and written through their file descriptors: process.stdin/process.stdout on a
//   pipe are net.Sockets, and loading that machinery costs more CPU than answering VERSION;
// - the single executable is built with a V8 startup snapshot that already holds the verbs, evaluated (src/warm.ts).
import { writeSync } from 'node:fs';
import { readStdin, readStdinFd, parseJsonObject } from './cni/stdin.js';
import { versionReply } from './cni/versions.js';
import { startup } from './startup.js';

/** process start → here (node bootstrap + the bundle, or the snapshot); the ADD log line reports it. */
let mainAt = performance.now();

async function main(): Promise<number> {
  if (process.env.CNI_COMMAND) {
    if (process.env.CNI_COMMAND.toUpperCase() === 'VERSION') {
      const reply = versionFast();
      if (reply !== undefined) {
        write(reply);
        return 0;
      }
    }
    const { runPlugin } = await import('./plugin.js');
    const { stdout, exitCode } = await runPlugin(process.env, readInput, { main: mainAt, loaded: performance.now() });
    write(stdout);
    return exitCode;
  }
  const argv = process.argv.slice(2);
  if (argv.length === 0) {
    const { ABOUT } = await import('./cni/skel.js');
    process.stderr.write(`${ABOUT}\n`);
    return 0;
  }
  const { runCli } = await import('./cli/index.js');
  const { stdout, stderr, exitCode } = await runCli(argv, process.env);
  if (stderr) process.stderr.write(stderr);
  write(stdout);
  return exitCode;
}

/** stdin, read once: from fd 0 directly, or through process.stdin for a terminal (never waited on). */
let input: Promise<string> | undefined;
function readInput(): Promise<string> {
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
function versionFast(): string | undefined {
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
function write(text: string): void {
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

function start(): void {
  main().then(
    (code) => process.exit(code),
    (e) => {
      // Unreachable by design (every path returns an outcome); still never crash silently.
      process.stderr.write(`ipam-shim: ${e instanceof Error ? e.stack : String(e)}\n`);
      process.stdout.write(JSON.stringify({ cniVersion: '1.1.0', code: 999, msg: String(e instanceof Error ? e.message : e) }), () => process.exit(1));
    },
  );
}

// Only the bundle the single executable's snapshot is built from has this set (scripts/build.mjs): node:v8 loads
// the stream machinery, which the plain bundle must not pay for on every call.
if (process.env.IPAM_SHIM_SNAPSHOT_ENTRY === '1' && process.getBuiltinModule('node:v8').startupSnapshot.isBuildingSnapshot()) {
  const { startupSnapshot, setFlagsFromString } = process.getBuiltinModule('node:v8');
  // Build time of the single executable (scripts/build.mjs, sea-config `useSnapshot`): src/warm.ts fills the V8
  // startup snapshot. It runs regular expressions: compiled to machine code (V8 tiers a regexp up after one run)
  // they cannot be serialized and the build aborts; interpreted (bytecode) they can, and tier up at run time.
  // The flags go back before serializing (--regexp-interpret-all also turned off --regexp-tier-up): a snapshot
  // records the flags it was built with and refuses to load under others. A failing warm-up fails the build.
  setFlagsFromString('--regexp-interpret-all');
  startupSnapshot.addSerializeCallback(() => setFlagsFromString('--no-regexp-interpret-all --regexp-tier-up'));
  void import('./warm.js').then((m) => m.warm());
  startupSnapshot.setDeserializeMainFunction(() => {
    mainAt = performance.now();
    startup.fromSnapshot = true;
    start();
  });
} else {
  start();
}

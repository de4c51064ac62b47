// Entry point only: CNI_COMMAND set → the plugin; arguments → the operator CLI; neither → the about line.
// The only place that sets the exit code. Start-up is most of a CNI call's cost (docs/performance.md): nothing
// here may import the config schema (zod), the logger (pino) or the verbs at the top (esbuild evaluates a
// statically imported module before main() runs); the single executable starts from a V8 startup snapshot that
// already holds them, evaluated (src/snapshot.ts, src/warm.ts).
import { ErrorCode } from './cni/errors.js';
import { readInput, versionFast, writeStdout } from './cni/fd-io.js';
import { buildingCodeCache, buildingSnapshot } from './snapshot.js';
import { startup } from './startup.js';
import { cpuSoFar, sinceStart } from './spans.js';

/** process start → here (node bootstrap + the bundle, or the snapshot), in ms and in CPU ms; the log line reports both. */
let mainAt = sinceStart();
let mainCpu = cpuSoFar();

async function main(): Promise<number> {
  if (process.env.CNI_COMMAND) {
    const fast = process.env.CNI_COMMAND.toUpperCase() === 'VERSION' ? versionFast() : undefined;
    if (fast !== undefined) return reply(fast, 0);
    const { runPlugin } = await import('./plugin.js');
    const { stdout, exitCode } = await runPlugin(process.env, readInput, { main: mainAt, mainCpu, loaded: sinceStart() });
    return reply(stdout, exitCode);
  }
  const argv = process.argv.slice(2);
  if (argv.length === 0) {
    process.stderr.write(`${(await import('./cni/skel.js')).ABOUT}\n`);
    return 0;
  }
  // The runtime's result cache read in a child the caller can abandon (src/gc/cache-reader.ts CACHE_READER_ARG).
  if (argv[0] === '__read-runtime-cache') {
    const reader = await import('./cli/cache-reader.js');
    // --serve: the node agent's warm reader, asked one JSON line at a time over stdin/stdout.
    if (argv[1] === '--serve' && argv.length === 2)
      return reader.cacheReaderServe(process.stdin, (line) => new Promise((r) => process.stdout.write(line, () => r())));
    const r = await reader.cacheReaderMain(argv.slice(1));
    return reply(r.stdout, r.exitCode);
  }
  const { stdout, stderr, exitCode } = await (await import('./cli/index.js')).runCli(argv, process.env);
  if (stderr) process.stderr.write(stderr);
  return reply(stdout, exitCode);
}

const reply = (stdout: string, exitCode: number): number => (writeStdout(stdout), exitCode);

function start(): void {
  main().then(
    (code) => process.exit(code),
    (e) => {
      // Unreachable by design (every path returns an outcome); still never crash silently.
      process.stderr.write(`ipam-shim: ${e instanceof Error ? e.stack : String(e)}\n`);
      process.stdout.write(JSON.stringify({ cniVersion: '1.1.0', code: ErrorCode.Internal, msg: String(e instanceof Error ? e.message : e) }), () =>
        process.exit(1),
      );
    },
  );
}

function startFromSnapshot(): void {
  mainAt = sinceStart();
  mainCpu = cpuSoFar();
  startup.fromSnapshot = true;
  start();
}

if (!buildingCodeCache() && !buildingSnapshot(startFromSnapshot)) start();

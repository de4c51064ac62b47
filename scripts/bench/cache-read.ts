// npx tsx scripts/bench/cache-read.ts [--sizes 500,5000] [--runs 3] [--module src/gc/from-cache.ts]
//
// The runtime's result cache read alone (src/gc/from-cache.ts cachedAttachments, what the agent's gc and pods steps
// read once a pass): N entries as libcni writes them for containerd's pods (~3 KiB each: base64 conflist, CNI_ARGS,
// capability args with pod annotations, a full result). Each run is a fresh Node process (tsx) that reads the cache
// once, with the DaemonSet's NODE_OPTIONS (--max-semi-space-size=1), and reports wall, CPU, peak RSS (maxRSS) and the
// heap the view keeps. --module points at another copy of the reader (e.g. the one before a change, from
// `git show REV:src/gc/from-cache.ts`) for a before/after. Prints a table; never asserts.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { benchCid, heading, libcniCacheEntry, stats, table } from '../bench-lib.js';

const ROOT = resolve(import.meta.dirname, '../..');
const { values: flags } = parseArgs({
  options: {
    sizes: { type: 'string', default: '500,5000' },
    runs: { type: 'string', default: '3' },
    module: { type: 'string', default: 'src/gc/from-cache.ts' },
  },
  strict: true,
});
const SIZES = flags.sizes.split(',').map(Number);
const RUNS = Number(flags.runs);
const MODULE = resolve(ROOT, flags.module);
const WORK = mkdtempSync(join(tmpdir(), 'ipam-shim-bench-cache-'));

const CHILD = `
const { cachedAttachments } = await import(process.env.BENCH_MODULE);
const c0 = process.cpuUsage(); const t0 = performance.now();
const view = await cachedAttachments(process.env.BENCH_CACHE, 'bench');
const wall = performance.now() - t0; const cpu = process.cpuUsage(c0);
globalThis.gc?.(); 
process.stdout.write(JSON.stringify({ n: view.pods.length, wall, cpu: (cpu.user + cpu.system) / 1000,
  maxRss: process.resourceUsage().maxRSS / 1024, heapKept: process.memoryUsage().heapUsed / 1048576 }));
`;

try {
  heading(
    `the result cache read once (cachedAttachments), ${MODULE.replace(`${ROOT}/`, '')}, ${RUNS} runs each, NODE_OPTIONS=--max-semi-space-size=1`,
  );
  const conflist = JSON.stringify({
    cniVersion: '1.0.0',
    name: 'bench',
    plugins: [
      { type: 'cilium-cni', ipam: { type: 'azure-ipam' }, enable_debug: false, 'log-file': '/var/run/cilium/cilium-cni.log' },
      { type: 'ipam-shim', delegate: { type: 'azure-ipam' }, reservedCIDRs: ['10.224.0.0/24'] },
    ],
  });
  const rows = [['N', 'entry bytes', 'wall ms median (min–max)', 'CPU ms median', 'peak RSS MiB median (min–max)', 'heap kept MiB']];
  for (const N of SIZES) {
    const cache = join(WORK, String(N));
    mkdirSync(join(cache, 'results'), { recursive: true });
    let bytes = 0;
    for (let i = 0; i < N; i++) {
      const cid = benchCid(i);
      const address = `10.${128 + ((i >> 16) & 63)}.${(i >> 8) & 255}.${i & 255}`;
      const text = libcniCacheEntry({ net: 'bench', cid, address, conflist });
      bytes = text.length;
      writeFileSync(join(cache, 'results', `bench-${cid}-eth0`), text);
    }
    const out: Array<{ wall: number; cpu: number; maxRss: number; heapKept: number }> = [];
    for (let r = 0; r < RUNS; r++) {
      const stdout = execFileSync(join(ROOT, 'node_modules/.bin/tsx'), ['--expose-gc', '--input-type=module', '-e', CHILD], {
        env: { ...process.env, BENCH_MODULE: MODULE, BENCH_CACHE: cache, NODE_OPTIONS: '--max-semi-space-size=1' },
      }).toString();
      out.push(JSON.parse(stdout));
    }
    const w = stats(out.map((o) => o.wall));
    const c = stats(out.map((o) => o.cpu));
    const m = stats(out.map((o) => o.maxRss));
    const h = stats(out.map((o) => o.heapKept));
    rows.push([
      String(N),
      String(bytes),
      `${w.median.toFixed(0)} (${w.min.toFixed(0)}–${w.max.toFixed(0)})`,
      c.median.toFixed(0),
      `${m.median.toFixed(1)} (${m.min.toFixed(1)}–${m.max.toFixed(1)})`,
      h.median.toFixed(1),
    ]);
  }
  console.log(table(rows));
} finally {
  rmSync(WORK, { recursive: true, force: true });
}

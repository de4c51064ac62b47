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
import { heading, stats, table } from '../bench-lib.js';

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

function entry(net: string, i: number, conflist: string): string {
  const cid = i.toString(16).padStart(8, '0').repeat(8);
  return JSON.stringify({
    kind: 'cniCacheV1',
    containerId: cid,
    config: Buffer.from(conflist).toString('base64'),
    ifName: 'eth0',
    networkName: net,
    netns: `/var/run/netns/cni-${cid.slice(0, 8)}-${cid.slice(8, 12)}-${cid.slice(12, 16)}-${cid.slice(16, 20)}-${cid.slice(20, 32)}`,
    cniArgs: [
      ['IgnoreUnknown', '1'],
      ['K8S_POD_NAMESPACE', 'team-a'],
      ['K8S_POD_NAME', `web-${cid.slice(0, 10)}`],
      ['K8S_POD_INFRA_CONTAINER_ID', cid],
      ['K8S_POD_UID', `${cid.slice(0, 8)}-${cid.slice(8, 12)}-${cid.slice(12, 16)}-${cid.slice(16, 20)}-${cid.slice(20, 32)}`],
    ],
    capabilityArgs: {
      dns: { Servers: ['10.0.0.10'], Searches: ['team-a.svc.cluster.local', 'svc.cluster.local', 'cluster.local'], Options: ['ndots:5'] },
      'io.kubernetes.cri.pod-annotations': {
        'kubernetes.io/config.seen': '2026-11-20T10:00:00.000000000Z',
        'kubernetes.io/config.source': 'api',
        'prometheus.io/scrape': 'true',
        'checksum/config': 'a'.repeat(64),
      },
    },
    result: {
      cniVersion: '1.0.0',
      interfaces: [
        { name: `lxc${cid.slice(0, 8)}`, mac: '0a:58:0a:f4:00:05' },
        { name: 'eth0', mac: '0a:58:0a:f4:00:06', sandbox: '/var/run/netns/cni-x' },
      ],
      ips: [{ interface: 1, address: `10.${128 + ((i >> 16) & 63)}.${(i >> 8) & 255}.${i & 255}/32`, gateway: '10.128.0.1' }],
      routes: [{ dst: '0.0.0.0/0', gw: '10.128.0.1' }],
      dns: {},
    },
  });
}

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
      const text = entry('bench', i, conflist);
      bytes = text.length;
      writeFileSync(join(cache, 'results', `bench-${i.toString(16).padStart(8, '0').repeat(8)}-eth0`), text);
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

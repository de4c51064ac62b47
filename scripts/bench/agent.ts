// npx tsx scripts/bench/agent.ts [--sizes 500,5000] [--idle-seconds 60] [--idle-interval 30] [--passes 5] [--entries libcni|minimal]
// (root; build first: npm run build; also `npm run bench`, section agent)
//
// The node agent (the built single executable, `ipam-shim agent`) in a scratch node netns:
//   idle   CPU (% of one core) and RSS over --idle-seconds at --idle-interval between passes, on the smallest size;
//   pass   one reconcile pass with N ledger records, N cached attachments (the runtime's result cache) and N
//          unrelated ebtables rules in nat PREROUTING: wall (the pass's own figure), CPU (the agent's and its
//          reaped children's: ebtables, ip) and the process's peak RSS (VmHWM) after the passes.
// CPU comes from /proc/<pid>/stat (utime + stime + cutime + cstime), read around each SIGHUP-started pass. The
// GC step runs in report mode (releases are delegate DELs, measured by bench.ts's gc section); 1 in 50 records
// is leaked (netns gone, not cached) so the plan has work. Prints tables; never asserts.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { benchCid, fmtMs, heading, libcniCacheEntry, stats, table } from '../bench-lib.js';

const ROOT = resolve(import.meta.dirname, '../..');
const AGENT = join(ROOT, 'dist/ipam-shim');
const { values: flags } = parseArgs({
  options: {
    sizes: { type: 'string', default: '500,5000' },
    /** Pods on the node for the idle window (AKS's default maximum is 110 per node on overlay networks). */
    'idle-size': { type: 'string', default: '110' },
    'idle-seconds': { type: 'string', default: '60' },
    'idle-interval': { type: 'string', default: '30' },
    passes: { type: 'string', default: '5' },
    keep: { type: 'boolean', default: false },
    /** K=V added to the agent's environment (repeatable), e.g. NODE_OPTIONS=--max-semi-space-size=1 */
    'agent-env': { type: 'string', multiple: true, default: [] },
    /** Run `node dist/ipam-shim.js` instead of the single executable (for comparison). */
    script: { type: 'boolean', default: false },
    /**
     * How the cache entries look: `libcni` (default) as containerd writes them (base64 conflist, CNI_ARGS, capability
     * args with the pod's annotations, a full result: ~3 KiB), `minimal` (only the names: the figures before issue 34).
     */
    entries: { type: 'string', default: 'libcni' },
  },
  strict: true,
});
const SIZES = flags.sizes
  .split(',')
  .map(Number)
  .filter((n) => n > 0);
const IDLE_S = Number(flags['idle-seconds']);
const IDLE_INTERVAL = Number(flags['idle-interval']);
const PASSES = Number(flags.passes);
if (process.getuid?.() !== 0) {
  console.error('bench-agent: needs root (network namespaces, ebtables)');
  process.exit(2);
}
const AGENT_ENV = Object.fromEntries(flags['agent-env'].map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
const AGENT_ARGV = flags.script ? [process.execPath, join(ROOT, 'dist/ipam-shim.js')] : [AGENT];
const TICK = Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
const NS = `ipamshim-agentbench-${process.pid}`;
const WORK = mkdtempSync(join(tmpdir(), 'ipam-shim-bench-agent-'));
const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'inherit'] });
const inNs = (file: string, args: string[], input?: string) =>
  execFileSync('ip', ['netns', 'exec', NS, file, ...args], { input, stdio: ['pipe', 'ignore', 'inherit'] });

/** The children of `pid` still running (the agent's warm cache reader): their CPU is not in its cutime yet. */
function liveChildren(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((t) =>
      readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8').trim().split(' ').filter(Boolean).map(Number),
    );
  } catch {
    return [];
  }
}

/** CPU seconds of a process and its children (reaped and running), and its RSS figures; childHwmKiB: theirs. */
function usage(pid: number): { cpuS: number; rssKiB: number; hwmKiB: number; anonKiB: number; fileKiB: number; childHwmKiB: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  let ticks = [11, 12, 13, 14].reduce((a, i) => a + Number(f[i]), 0); // utime stime cutime cstime
  let childHwmKiB = 0;
  for (const c of liveChildren(pid)) {
    try {
      const cs = readFileSync(`/proc/${c}/stat`, 'utf8');
      const cf = cs.slice(cs.lastIndexOf(')') + 2).split(' ');
      ticks += [11, 12, 13, 14].reduce((a, i) => a + Number(cf[i]), 0);
      childHwmKiB = Math.max(childHwmKiB, Number(/^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${c}/status`, 'utf8'))?.[1] ?? 0));
    } catch {
      // exited meanwhile: its CPU is in cutime now
    }
  }
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { cpuS: ticks / TICK, rssKiB: kib('VmRSS'), hwmKiB: kib('VmHWM'), anonKiB: kib('RssAnon'), fileKiB: kib('RssFile'), childHwmKiB };
}

/** One result-cache entry as libcni writes it for a pod of containerd (or only its names: --entries minimal). */
function cacheEntry(net: string, cid: string, address: string, conflist: string): string {
  if (flags.entries === 'minimal')
    return JSON.stringify({ kind: 'cniCacheV1', containerId: cid, ifName: 'eth0', networkName: net, config: '', result: {} });
  return libcniCacheEntry({ net, cid, address, conflist, annotations: { 'kubectl.kubernetes.io/restartedAt': '2026-11-20T09:59:00Z' } });
}

const ipOf = (base: number, i: number) => `${base >> 8}.${base & 255}.${(i >> 8) & 255}.${i & 255}`;

/** A node with N pods the shim recorded and the runtime cached, N unrelated ebtables rules, 1 in 50 leaked. */
function makeWorld(N: number): { confDir: string; cacheDir: string; net: string } {
  const net = `ab${N}`;
  const dir = join(WORK, net);
  const stateDir = join(dir, 'state');
  const records = join(stateDir, net, 'records');
  const ips = join(stateDir, net, 'ips');
  const results = join(dir, 'cache', 'results');
  const confDir = join(dir, 'net.d');
  for (const d of [stateDir, join(stateDir, net), records, ips]) mkdirSync(d, { recursive: true, mode: 0o700 });
  // The leaked pods' netns directory exists (only their files are gone): GC takes a missing path as proof of death
  // only when its directory is visible.
  mkdirSync(join(dir, 'gone'), { recursive: true });
  mkdirSync(results, { recursive: true });
  mkdirSync(confDir, { recursive: true });
  const old = new Date(Date.now() - 86_400_000).toISOString();
  const hostLocal = { type: 'host-local', dataDir: join(dir, 'host-local'), ranges: [[{ subnet: '10.128.0.0/9' }]] };
  const list = {
    cniVersion: '1.0.0',
    name: net,
    plugins: [
      { type: 'ptp', ipam: hostLocal },
      { type: 'ipam-shim', stateDir, logFile: join(dir, 'shim.log'), delegate: hostLocal },
    ],
  };
  const conflist = JSON.stringify(list);
  for (let i = 0; i < N; i++) {
    const cid = flags.entries === 'minimal' ? `pod-${i}` : benchCid(i);
    const addr = ipOf((10 << 8) | 128, i + 1);
    const leaked = i % 50 === 25;
    const rec = {
      v: 1,
      containerID: cid,
      ifname: 'eth0',
      network: net,
      owner: 'pod',
      state: 'attached',
      placement: 'chained',
      ips: [addr],
      netns: join(dir, 'gone', cid),
      createdAt: old,
      updatedAt: old,
    };
    writeFileSync(join(records, `${cid}:eth0.json`), `${JSON.stringify(rec)}\n`, { mode: 0o600 });
    writeFileSync(join(ips, addr), `${cid}:eth0`, { mode: 0o600 });
    if (!leaked) writeFileSync(join(results, `${net}-${cid}-eth0`), cacheEntry(net, cid, addr, conflist));
  }
  writeFileSync(join(confDir, '10-bench.conflist'), conflist);
  return { confDir, cacheDir: join(dir, 'cache'), net };
}

/** N unrelated azure-vnet-shaped per-pod rules (other addresses), as one ebtables-restore. */
function plantRules(N: number): void {
  inNs('ebtables', ['-t', 'nat', '-F', 'PREROUTING']);
  const lines = ['*nat'];
  for (let i = 0; i < N; i++) {
    const addr = ipOf((10 << 8) | 241, i + 1);
    const mac = `0:d:3a:1:${((i >> 8) & 255).toString(16)}:${(i & 255).toString(16)}`;
    lines.push(
      i % 2
        ? `-A PREROUTING -p IPv4 -i eth0 --ip-dst ${addr} -j dnat --to-dst ${mac} --dnat-target ACCEPT`
        : `-A PREROUTING -p ARP --arp-op Request --arp-ip-dst ${addr} -j arpreply --arpreply-mac ${mac} --arpreply-target DROP`,
    );
  }
  lines.push('COMMIT', '');
  inNs('ebtables-restore', ['--noflush'], lines.join('\n'));
}

interface Running {
  child: ChildProcess;
  passes: Array<Record<string, any>>;
  /** Largest RssAnon (private memory) seen while waiting for passes, polled every 10 ms. */
  peakAnonKiB: number;
  waitPasses: (n: number, ms?: number) => Promise<void>;
}

function startAgent(world: { confDir: string; cacheDir: string; net: string }, interval: number, port: number): Running {
  const child = spawn(
    'ip',
    [
      'netns',
      'exec',
      NS,
      ...AGENT_ARGV,
      'agent',
      '--no-install',
      '--network',
      world.net,
      '--conf-dir',
      world.confDir,
      '--cache-dir',
      world.cacheDir,
      '--cni-path',
      '/usr/lib/cni',
      '--interval',
      String(interval),
      '--listen',
      `127.0.0.1:${port}`,
      '--grace-seconds',
      '0',
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin', ...AGENT_ENV },
    },
  );
  const r: Running = { child, passes: [], peakAnonKiB: 0, waitPasses: async () => undefined };
  let buf = '';
  child.stdout!.on('data', (d: Buffer) => {
    buf += d.toString();
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      try {
        const j = JSON.parse(line) as Record<string, any>;
        if (String(j.msg).startsWith('reconcile pass')) r.passes.push(j);
      } catch {
        // not a log line
      }
    }
  });
  r.waitPasses = async (n, ms = 600_000) => {
    const end = Date.now() + ms;
    while (r.passes.length < n) {
      if (Date.now() > end || child.exitCode !== null) throw new Error(`agent: ${r.passes.length} of ${n} passes (exit ${child.exitCode})`);
      try {
        r.peakAnonKiB = Math.max(r.peakAnonKiB, usage(child.pid!).anonKiB);
      } catch {
        // exiting
      }
      await new Promise((res) => setTimeout(res, 10));
    }
  };
  return r;
}

async function stop(r: Running): Promise<void> {
  if (r.child.exitCode !== null) return;
  const done = new Promise((res) => r.child.once('close', res));
  r.child.kill('SIGTERM');
  await done;
}

const mib = (kib: number) => (kib / 1024).toFixed(1);

try {
  ip('netns', 'add', NS);
  ip('-n', NS, 'link', 'set', 'lo', 'up');
  console.log(
    `# bench-agent: ${AGENT_ARGV.join(' ')}${Object.keys(AGENT_ENV).length ? ` with ${JSON.stringify(AGENT_ENV)}` : ''}, node ${process.version}, ${cpus().length} CPUs, netns ${NS}`,
  );

  heading(
    `one reconcile pass: N ledger records, N cached attachments, N unrelated ebtables rules (${PASSES} passes after a first one; GC report mode)`,
  );
  const rows = [
    [
      'N',
      'first pass wall ms',
      'pass wall ms median (min–max)',
      'pass CPU ms median (min–max)',
      'peak RSS MiB (VmHWM)',
      'of it private ≈ peak RssAnon',
      'RSS after MiB (file-backed)',
    ],
  ];
  const perN: Array<{ N: number; wall: number; cpu: number; hwm: number }> = [];
  for (const N of SIZES) {
    const world = makeWorld(N);
    plantRules(N);
    const a = startAgent(world, 3600, 9740);
    await a.waitPasses(1);
    const first = a.passes[0]!;
    if (first.errors) console.warn(`N=${N}: the first pass reported ${first.errors} error(s): ${JSON.stringify(first.steps)}`);
    const wall: number[] = [];
    const cpu: number[] = [];
    for (let i = 0; i < PASSES; i++) {
      const before = usage(a.child.pid!);
      a.child.kill('SIGHUP');
      await a.waitPasses(i + 2);
      const after = usage(a.child.pid!);
      wall.push(a.passes[i + 1]!.durationMs as number);
      cpu.push((after.cpuS - before.cpuS) * 1000);
    }
    const u = usage(a.child.pid!);
    await stop(a);
    const w = stats(wall);
    const c = stats(cpu);
    perN.push({ N, wall: w.median, cpu: c.median, hwm: u.hwmKiB });
    rows.push([
      String(N),
      String(first.durationMs),
      `${fmtMs(w.median)} (${fmtMs(w.min)}–${fmtMs(w.max)})`,
      `${fmtMs(c.median)} (${fmtMs(c.min)}–${fmtMs(c.max)})`,
      mib(u.hwmKiB),
      mib(a.peakAnonKiB),
      `${mib(u.rssKiB)} (${mib(u.fileKiB)})`,
    ]);
    console.log(
      `N=${N}: leaked found ${first.leaked}, steps ${JSON.stringify(first.steps)}; peak RSS of a live child (the warm cache reader) ${mib(u.childHwmKiB)} MiB`,
    );
  }
  console.log(table(rows));
  if (perN.length >= 2) {
    const [lo, hi] = [perN[0]!, perN.at(-1)!];
    console.log(
      `growth ${lo.N} → ${hi.N} (×${(hi.N / lo.N).toFixed(0)}): wall ×${(hi.wall / lo.wall).toFixed(1)}, CPU ×${(hi.cpu / lo.cpu).toFixed(1)} (linear would be ×${(hi.N / lo.N).toFixed(0)})`,
    );
  }

  const IDLE_N = Number(flags['idle-size']);
  heading(`idle: ${IDLE_S} s at a ${IDLE_INTERVAL} s interval (N=${IDLE_N}; the passes in the window included)`);
  const world = makeWorld(IDLE_N);
  plantRules(IDLE_N);
  const a = startAgent(world, IDLE_INTERVAL, 9741);
  await a.waitPasses(1);
  await new Promise((r) => setTimeout(r, 2_000)); // start-up settles
  const t0 = Date.now();
  const u0 = usage(a.child.pid!);
  const rss: number[] = [u0.rssKiB];
  while (Date.now() - t0 < IDLE_S * 1000) {
    await new Promise((r) => setTimeout(r, Math.min(5_000, IDLE_S * 1000 - (Date.now() - t0))));
    rss.push(usage(a.child.pid!).rssKiB);
  }
  const u1 = usage(a.child.pid!);
  const seconds = (Date.now() - t0) / 1000;
  const passes = a.passes.length - 1;
  await stop(a);
  console.log(
    table([
      ['window s', 'passes in it', 'CPU s', 'CPU % of one core', 'RSS MiB min–max', 'peak RSS MiB (VmHWM)', 'RssAnon / RssFile MiB at the end'],
      [
        seconds.toFixed(0),
        String(passes),
        (u1.cpuS - u0.cpuS).toFixed(2),
        ((100 * (u1.cpuS - u0.cpuS)) / seconds).toFixed(3),
        `${mib(Math.min(...rss))}–${mib(Math.max(...rss))}`,
        mib(u1.hwmKiB),
        `${mib(u1.anonKiB)} / ${mib(u1.fileKiB)}`,
      ],
    ]),
  );
  console.log(
    `(CPU is counted in clock ticks of 1/${TICK} s: over ${seconds.toFixed(0)} s the resolution is ${(100 / TICK / seconds).toFixed(3)} % of a core)`,
  );
} finally {
  try {
    ip('netns', 'del', NS);
  } catch {
    // already gone
  }
  if (!flags.keep) rmSync(WORK, { recursive: true, force: true });
  else console.log(`kept ${WORK}`);
}

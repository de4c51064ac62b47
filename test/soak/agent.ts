// Agent soak: the BUILT node agent (`ipam-shim agent`, the single executable) for thousands of reconcile passes at a
// short interval, under a hard RLIMIT_NOFILE (prlimit, util-linux), over a ledger and a runtime result cache of a
// few hundred pods (plus a few leaked ones it reports every pass), with /metrics scraped all the while. The agent's
// open fds (/proc/<pid>/fd), RSS (/proc/<pid>/status) and V8 heap (its /metrics, the lowest reading between two
// samples: the live heap after a GC, not where the collector happened to be) are sampled every --sample-every
// passes. Prints the series; exit 1 if fds grow at all (beyond a pass's own children's pipes), if RSS or the heap
// floor grow past their slack, if a pass fails, a scrape fails, or the agent does not stop cleanly on SIGTERM.
//
//   npm run soak:agent -- [--passes 10000] [--pods 300] [--leaked 10] [--interval 0.1]
//                         [--sample-every 1000] [--nofile 1024] [--flood 300] [--json FILE] [--keep]
//   --flood N: once, after the second sample, N idle connections are opened to the agent's HTTP port at once: its fds
//   may rise by at most its connection cap (src/agent/http-server.ts MAX_CONNECTIONS) while they are held, the agent must
//   close them itself (its header timeout) and answer /healthz again within 20 s, and the passes go on.
//   IPAM_SHIM_AGENT (default dist/ipam-shim) is the executable soaked. Needs root: it runs inside a scratch network
//   namespace (re-executing itself under `ip netns exec`), every file under a temp dir. test/e2e/agent-soak.test.ts
//   runs it briefly in CI.
import { execa } from 'execa';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { Ledger } from '../../src/effects/ledger.js';
import type { LedgerRecord } from '../../src/ledger/record.js';
import { parseMetrics } from '../../src/metrics.js';
import { MAX_CONNECTIONS } from '../../src/agent/http-server.js';
import { connect, type Socket } from 'node:net';
import { agentArgs, jsonLines } from '../support/shim/agent.js';
import { shimKeys } from '../support/shim/conf.js';
import { ciliumCni } from '../support/shim/cilium.js';
import { PLUGIN_DIR, ROOT } from '../support/paths.js';

const AGENT = process.env.IPAM_SHIM_AGENT ?? join(ROOT, 'dist/ipam-shim');

const { values: flags } = parseArgs({
  options: {
    passes: { type: 'string', default: '10000' },
    pods: { type: 'string', default: '300' },
    leaked: { type: 'string', default: '10' },
    interval: { type: 'string', default: '0.1' },
    'sample-every': { type: 'string', default: '1000' },
    flood: { type: 'string', default: '300' },
    nofile: { type: 'string', default: '1024' },
    json: { type: 'string' },
    keep: { type: 'boolean', default: false },
  },
});
const num = (name: keyof typeof flags): number => {
  const n = Number(flags[name]);
  if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} takes a number, got ${JSON.stringify(flags[name])}`);
  return n;
};

const uid = (n = 6) => randomBytes(8).toString('hex').slice(0, n);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const MiB = 1024 * 1024;

/** Fds a pass may hold for a moment (an ebtables, ip or nft child's three pipes, an HTTP scrape's socket). */
const FD_SLACK = 8;
/** RSS may settle upwards after the first samples (V8 sizing its heap, the allocator's arenas). */
const RSS_SLACK_MIB = 24;
const HEAP_SLACK_MIB = 8;
const HEAP_SLACK_FRACTION = 0.2;

async function main(): Promise<number> {
  if (process.getuid?.() !== 0) {
    process.stderr.write('soak-agent: needs root (network namespaces)\n');
    return 2;
  }
  if (!existsSync(AGENT)) {
    process.stderr.write(`soak-agent: ${AGENT} is missing: run "npm run build" first\n`);
    return 2;
  }
  if (process.env.IPAM_SHIM_SOAK_AGENT_INNER) return soak();
  const node = `soak-agent-${uid()}`;
  await execa('ip', ['netns', 'add', node]);
  try {
    const inner = execa('ip', ['netns', 'exec', node, process.execPath, ...process.execArgv, process.argv[1]!, ...process.argv.slice(2)], {
      env: { ...process.env, IPAM_SHIM_SOAK_AGENT_INNER: node },
      stdio: 'inherit',
      reject: false,
    });
    // Interrupted: the inner run stops its agent and removes its files; then the netns goes.
    const forward = (sig: NodeJS.Signals) => () => inner.kill(sig);
    process.on('SIGINT', forward('SIGINT'));
    process.on('SIGTERM', forward('SIGTERM'));
    const r = await inner;
    return r.exitCode ?? 1;
  } finally {
    await execa('ip', ['netns', 'del', node], { reject: false });
  }
}

export interface Sample {
  pass: number;
  fds: number;
  rssMiB: number;
  /** The lowest heap-used reading /metrics gave since the previous sample (undefined: the agent does not export it). */
  heapMiB: number | undefined;
  /** The V8 heap's committed size at the sample: bounded by the executable's V8 flags (its new space is 2 × 64 MiB). */
  heapTotalMiB: number | undefined;
  /** RSS outside the V8 heap (RSS − heapTotal): what a native leak would grow. */
  nonHeapMiB: number | undefined;
  seconds: number;
}

export interface SoakReport {
  agent: string;
  passes: number;
  pods: number;
  leaked: number;
  intervalS: number;
  /** The agent's own "Max open files" (soft hard), as /proc/<pid>/limits shows it. */
  nofile: string;
  scrapes: number;
  scrapeFailures: number;
  failedPasses: number;
  samples: Sample[];
  growth: { fds: number; rssMiB: number; nonHeapMiB: number | undefined; heapMiB: number | undefined };
  flood: { opened: number; fdsBefore: number; fdsPeak: number; closedByAgent: number; healthyAfterS: number | undefined } | undefined;
  exit: { code: number | undefined; stoppedLine: boolean };
  problems: string[];
  seconds: number;
}

/** The node the agent sees: an uplink with both families, a chained conflist, the ledger, the result cache. */
async function makeNode(dir: string, pods: number, leaked: number): Promise<{ network: string; confDir: string; cacheDir: string; binDir: string }> {
  const ip = (...a: string[]) => execa('ip', a);
  await ip('link', 'set', 'lo', 'up');
  // A veth pair (both ends here) stands for the uplink: the dummy module may not be loaded.
  await ip('link', 'add', 'uplink0', 'type', 'veth', 'peer', 'name', 'uplink0p');
  await ip('link', 'set', 'uplink0p', 'up');
  await ip('addr', 'add', '10.240.0.5/16', 'dev', 'uplink0');
  await ip('-6', 'addr', 'add', 'fd00:10:240::5/64', 'dev', 'uplink0', 'nodad');
  await ip('link', 'set', 'uplink0', 'up');

  const network = `soak${uid(4)}`;
  const stateDir = join(dir, 'state');
  const cacheDir = join(dir, 'cache');
  const confDir = join(dir, 'net.d');
  const binDir = join(dir, 'opt-cni-bin');
  for (const d of [join(cacheDir, 'results'), confDir, binDir]) await mkdir(d, { recursive: true });
  const hostLocal = {
    type: 'host-local',
    dataDir: join(dir, 'host-local'),
    ranges: [[{ subnet: '10.240.0.0/16' }], [{ subnet: 'fd00:10:240::/64' }]],
  };
  const confList = {
    cniVersion: '1.0.0',
    name: network,
    plugins: [
      ciliumCni(hostLocal),
      shimKeys({
        dirs: { stateDir, logFile: join(dir, 'shim.log') },
        delegate: hostLocal,
        keys: { metricsFile: join(dir, 'ipam-shim.prom'), uplink: 'uplink0' },
      }),
    ],
  };
  const confText = JSON.stringify(confList);
  await writeFile(join(confDir, '10-soak.conflist'), confText);

  const ledger = new Ledger(stateDir, network);
  const at = new Date(Date.now() - 3600_000).toISOString();
  for (let i = 0; i < pods + leaked; i++) {
    const containerID = `${i < pods ? 'pod' : 'leaked'}-${String(i).padStart(4, '0')}-${uid(8)}`;
    const v4 = `10.240.${1 + (i >> 8)}.${i & 255}`;
    const ips = i % 2 ? [v4] : [v4, `fd00:10:240::${(i + 16).toString(16)}`];
    const rec: LedgerRecord = {
      v: 1,
      containerID,
      ifname: 'eth0',
      network,
      owner: 'pod',
      state: 'attached',
      placement: 'chained',
      ips,
      netns: `/run/netns/soak-gone-${i}`,
      createdAt: at,
      updatedAt: at,
    };
    await ledger.put(rec);
    if (i >= pods) continue; // leaked: the runtime forgot it (no cache entry) and its netns is gone
    const result = { cniVersion: '1.0.0', ips: ips.map((ip) => ({ address: `${ip}/${ip.includes(':') ? 64 : 16}` })) };
    const entry = {
      kind: 'cniCacheV1',
      containerId: containerID,
      config: Buffer.from(confText).toString('base64'),
      ifName: 'eth0',
      networkName: network,
      netns: rec.netns,
      result,
    };
    await writeFile(join(cacheDir, 'results', `${network}-${containerID}-eth0`), JSON.stringify(entry), { mode: 0o600 });
  }
  return { network, confDir, cacheDir, binDir };
}

const fdCount = (pid: number): number => readdirSync(`/proc/${pid}/fd`).length;
const rssMiB = (pid: number): number => Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? Number.NaN) / 1024;
const nofileOf = (pid: number): string => {
  const line =
    readFileSync(`/proc/${pid}/limits`, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files')) ?? '';
  return line.replace('Max open files', '').trim().split(/\s+/).slice(0, 2).join(' ');
};

async function soak(): Promise<number> {
  const t0 = Date.now();
  const passes = num('passes');
  const pods = num('pods');
  const leaked = num('leaked');
  const intervalS = num('interval');
  const every = Math.max(1, num('sample-every'));
  const nofile = num('nofile');
  const dir = await mkdtemp(join(tmpdir(), 'ipam-shim-soak-agent-'));
  const log = join(dir, 'agent.log');
  const port = 20000 + Math.floor(Math.random() * 20000);
  let proc: ReturnType<typeof execa> | undefined;
  let interrupted = false;
  const interrupt = () => {
    interrupted = true;
  };
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
  try {
    const node = await makeNode(dir, pods, leaked);
    const argv = [
      AGENT,
      ...agentArgs(AGENT, { ...node, cniPath: PLUGIN_DIR }, { graceSeconds: 0 }),
      ...['--interval', String(intervalS), '--listen', `127.0.0.1:${port}`],
    ];
    // prlimit execs the agent: the pid is the agent's.
    const cmd = nofile > 0 ? ['prlimit', `--nofile=${nofile}:${nofile}`, ...argv] : argv;
    proc = execa(cmd[0]!, cmd.slice(1), { reject: false, stdout: { file: log }, stderr: { file: `${log}.stderr` } });
    const pid = proc.pid!;
    const url = `http://127.0.0.1:${port}`;
    const scrape = async (): Promise<string | undefined> => {
      try {
        const r = await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(10_000) });
        return r.ok ? await r.text() : undefined;
      } catch {
        return undefined;
      }
    };
    const readyBy = Date.now() + 60_000;
    while (
      !(await fetch(`${url}/readyz`).then(
        (r) => r.ok,
        () => false,
      ))
    ) {
      if (proc.exitCode !== undefined && proc.exitCode !== null)
        throw new Error(`the agent exited at start: ${await readFile(`${log}.stderr`, 'utf8')}${await readFile(log, 'utf8')}`);
      if (Date.now() > readyBy) throw new Error('the agent was not ready within 60 s');
      await sleep(50);
    }
    const report: SoakReport = {
      agent: AGENT,
      passes: 0,
      pods,
      leaked,
      intervalS,
      nofile: nofileOf(pid),
      scrapes: 0,
      scrapeFailures: 0,
      failedPasses: 0,
      samples: [],
      growth: { fds: 0, rssMiB: 0, nonHeapMiB: undefined, heapMiB: undefined },
      flood: undefined,
      exit: { code: undefined, stoppedLine: false },
      problems: [],
      seconds: 0,
    };
    let heapFloor: number | undefined;
    let next = 1; // the first sample right after the first pass: the baseline
    const print = (s: Sample) =>
      process.stdout.write(
        `pass ${String(s.pass).padStart(6)}  fds ${String(s.fds).padStart(4)}  rss ${s.rssMiB.toFixed(1).padStart(6)} MiB  heap ${s.heapMiB === undefined ? '   n/a' : s.heapMiB.toFixed(1).padStart(6)} MiB  heap total ${s.heapTotalMiB?.toFixed(1) ?? 'n/a'} MiB  rss−heap ${s.nonHeapMiB?.toFixed(1) ?? 'n/a'} MiB  (${s.seconds.toFixed(0)} s)\n`,
      );
    process.stdout.write(
      `soak-agent: ${AGENT} (pid ${pid}, Max open files ${report.nofile}), ${pods} pods + ${leaked} leaked, ${passes} passes at ${intervalS} s\n`,
    );
    // Scrape back to back (one at a time) until the agent has run the passes asked for.
    while (report.passes < passes) {
      if (interrupted) throw new Error(`interrupted after ${report.passes} passes`);
      const body = await scrape();
      report.scrapes++;
      if (body === undefined) {
        report.scrapeFailures++;
        if (proc.exitCode !== undefined && proc.exitCode !== null) throw new Error(`the agent died (exit ${proc.exitCode})`);
        await sleep(100);
        continue;
      }
      const m = [...parseMetrics(body).values()];
      report.passes = m.filter((s) => s.name === 'ipam_shim_agent_reconcile_passes_total').reduce((a, s) => a + s.value, 0);
      report.failedPasses = m.find((s) => s.name === 'ipam_shim_agent_reconcile_passes_total' && s.labels.outcome === 'error')?.value ?? 0;
      const heap = m.find((s) => s.name === 'nodejs_heap_size_used_bytes')?.value;
      const heapTotal = m.find((s) => s.name === 'nodejs_heap_size_total_bytes')?.value;
      if (heap !== undefined) heapFloor = Math.min(heapFloor ?? heap, heap);
      if (report.passes >= next) {
        const rss = rssMiB(pid);
        const heapTotalMiB = heapTotal === undefined ? undefined : heapTotal / MiB;
        const s: Sample = {
          pass: report.passes,
          fds: fdCount(pid),
          rssMiB: rss,
          heapMiB: heapFloor === undefined ? undefined : heapFloor / MiB,
          heapTotalMiB,
          nonHeapMiB: heapTotalMiB === undefined ? undefined : rss - heapTotalMiB,
          seconds: (Date.now() - t0) / 1000,
        };
        report.samples.push(s);
        print(s);
        heapFloor = undefined;
        next = next === 1 ? every : next + every;
        if (report.samples.length === 2 && num('flood') > 0) report.flood = await flood(port, pid, num('flood'));
      }
      await sleep(20);
    }
    proc.kill('SIGTERM');
    const done = await Promise.race([proc, sleep(10_000).then(() => undefined)]);
    report.exit.code = done?.exitCode ?? undefined;
    report.exit.stoppedLine = jsonLines(await readFile(log, 'utf8')).at(-1)?.msg === 'agent stopped';
    judge(report);
    report.seconds = (Date.now() - t0) / 1000;
    process.stdout.write(
      `soak-agent: ${report.passes} passes in ${report.seconds.toFixed(0)} s, ${report.scrapes} scrapes (${report.scrapeFailures} failed), ${report.failedPasses} failed passes; growth fds ${report.growth.fds}, rss ${report.growth.rssMiB.toFixed(1)} MiB (outside the heap ${report.growth.nonHeapMiB?.toFixed(1) ?? 'n/a'}), heap ${report.growth.heapMiB?.toFixed(1) ?? 'n/a'} MiB\n`,
    );
    for (const p of report.problems) process.stdout.write(`PROBLEM: ${p}\n`);
    if (flags.json) await writeFile(flags.json, JSON.stringify(report, null, 2));
    return report.problems.length ? 1 : 0;
  } finally {
    if (proc && (proc.exitCode === undefined || proc.exitCode === null)) {
      proc.kill('SIGKILL');
      await proc;
    }
    if (flags.keep) process.stdout.write(`soak-agent: kept ${dir}\n`);
    else await rm(dir, { recursive: true, force: true });
  }
}

/** N idle connections at once (no request sent): how far the agent's fds rise, whether it closes them, when it is healthy again. */
async function flood(port: number, pid: number, n: number): Promise<NonNullable<SoakReport['flood']>> {
  const fdsBefore = fdCount(pid);
  let closedByAgent = 0;
  const sockets: Socket[] = [];
  await Promise.all(
    Array.from(
      { length: n },
      () =>
        new Promise<void>((resolve) => {
          const s = connect(port, '127.0.0.1');
          sockets.push(s);
          s.once('connect', () => resolve());
          s.once('error', () => resolve());
          s.once('close', () => {
            closedByAgent++;
            resolve();
          });
        }),
    ),
  );
  await sleep(1000);
  const fdsPeak = fdCount(pid);
  const t0 = Date.now();
  let healthyAfterS: number | undefined;
  while (Date.now() - t0 < 20_000) {
    if (
      closedByAgent === n &&
      (await fetch(`http://127.0.0.1:${port}/healthz`, { signal: AbortSignal.timeout(2_000) }).then(
        (r) => r.ok,
        () => false,
      ))
    ) {
      healthyAfterS = (Date.now() - t0) / 1000;
      break;
    }
    await sleep(200);
  }
  for (const s of sockets) s.destroy();
  process.stdout.write(
    `flood: ${n} idle connections, agent fds ${fdsBefore} → ${fdsPeak} while held, ${closedByAgent} closed by the agent, healthy again after ${healthyAfterS ?? 'never (20 s)'} s\n`,
  );
  return { opened: n, fdsBefore, fdsPeak, closedByAgent, healthyAfterS };
}

/**
 * Growth: fds from the first sample (any rise is a leak); RSS outside the V8 heap and the heap's floor from the
 * second (after the first interval's warm-up), each on the lower of the last two samples. RSS itself is reported, not
 * judged: it rises while V8 commits its new space (up to 2 × the executable's --max-semi-space-size) and then stays;
 * the heap floor catches a JS leak and RSS − heap total a native one. Without the heap series (an agent that does not export them), RSS is judged.
 */
function judge(r: SoakReport): void {
  const [first, second] = r.samples;
  const last = r.samples.at(-1);
  if (!first || !second || !last || r.samples.length < 3) {
    r.problems.push(`only ${r.samples.length} samples: run more passes than 2 × --sample-every`);
    return;
  }
  r.growth.fds = Math.max(...r.samples.map((s) => s.fds)) - first.fds;
  r.growth.rssMiB = last.rssMiB - second.rssMiB;
  // RSS − heap total swings by tens of MiB while V8 commits new space and then touches its pages (heap total jumps
  // first, RSS follows over the next passes: 98 → 124 MiB between passes 100 and 400 of a CI soak, 122 → 118 MiB
  // between passes 500 and 2,000 of a long one). Judged, like the heap, on the lower of the last two samples: a
  // native leak raises both.
  const lastNonHeap = Math.min(...r.samples.slice(-2).map((s) => s.nonHeapMiB ?? Number.NaN));
  if (second.nonHeapMiB !== undefined && !Number.isNaN(lastNonHeap)) r.growth.nonHeapMiB = lastNonHeap - second.nonHeapMiB;
  // The heap floor of one window can miss its scavenge (the executable's new space is large): the lower of the last two.
  const lastHeap = Math.min(...r.samples.slice(-2).map((s) => s.heapMiB ?? Number.NaN));
  if (second.heapMiB !== undefined && !Number.isNaN(lastHeap)) r.growth.heapMiB = lastHeap - second.heapMiB;
  if (r.growth.fds > FD_SLACK) r.problems.push(`open fds grew by ${r.growth.fds} (${first.fds} → ${last.fds})`);
  const native = r.growth.nonHeapMiB ?? r.growth.rssMiB;
  if (native > RSS_SLACK_MIB)
    r.problems.push(`${r.growth.nonHeapMiB === undefined ? 'RSS' : 'RSS outside the V8 heap'} grew by ${native.toFixed(1)} MiB`);
  if (r.growth.heapMiB !== undefined && r.growth.heapMiB > HEAP_SLACK_MIB + HEAP_SLACK_FRACTION * second.heapMiB!)
    r.problems.push(`heap grew by ${r.growth.heapMiB.toFixed(1)} MiB`);
  if (r.flood) {
    const { fdsBefore, fdsPeak, opened, closedByAgent, healthyAfterS } = r.flood;
    if (fdsPeak - fdsBefore > MAX_CONNECTIONS + FD_SLACK)
      r.problems.push(`${opened} idle connections raised the agent's fds by ${fdsPeak - fdsBefore} (cap ${MAX_CONNECTIONS})`);
    if (closedByAgent < opened || healthyAfterS === undefined)
      r.problems.push(
        `after the flood: ${closedByAgent}/${opened} connections closed by the agent, /healthz ${healthyAfterS === undefined ? 'not' : ''} answering within 20 s`,
      );
  }
  if (r.failedPasses) r.problems.push(`${r.failedPasses} passes failed (see the agent's log)`);
  if (r.scrapeFailures) r.problems.push(`${r.scrapeFailures} scrapes of /metrics failed`);
  if (r.exit.code !== 0 || !r.exit.stoppedLine)
    r.problems.push(`the agent did not stop cleanly on SIGTERM (exit ${r.exit.code}, last line "agent stopped": ${r.exit.stoppedLine})`);
}

process.exitCode = await main().catch((e: unknown) => {
  process.stderr.write(`soak-agent: ${(e as Error).stack ?? e}\n`);
  return 1;
});

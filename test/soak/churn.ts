// Soak: N minutes of random ADD / DEL / CHECK / GC churn through the libcni-like runner (test/support/runtimes/runner.ts)
// against the BUILT shim and the real reference plugins, in network namespaces it creates and removes. Two
// lanes by default, one per placement:
//   chained  cilium-cni + host-local, then ipam-shim chained after it (with host-local as its delegate for GC);
//            GC = the runner's GC (DELs of stale cached attachments) + the shim's GC verb at 1.1.0 with the
//            runner's cache as valid list (what libcni 1.2 sends the chained plugin).
//   ipam     cilium-cni with ipam-shim in its IPAM slot over host-local; GC = the runner's GC + `ipam-shim gc --apply`
//            over the runner's result cache (the operator GC for runtimes that never send one).
// cilium-cni is the test beds' stand-in of the 1.17 line (test/fixtures/cilium-cni/), with cilium-agent's API
// stand-in listening for it in this process; the lists are at 1.0.0, which 1.17 takes (the shim's GC verb is sent
// to it directly, as no runtime sends one through a 1.0.0 list).
// Besides plain churn, "lost" operations make real leaks for GC to find: the runtime forgets an attachment
// (cache file gone) and its sandbox disappears without a DEL. GC runs exclusively per lane, as libcni's does.
// At the end everything attached is DELed, a final GC runs, and the host-local store, the ledger and the
// runner's cache must all be empty (leaks = 0). Prints operations done, errors by code, leaked allocations and
// p50/p99 latency per verb (whole list through the runner, and the shim's own time from its log). Exit 1 on any
// leak or error.
//
//   npm run soak -- [--minutes 10] [--placement both|chained|ipam] [--concurrency 4] [--max-attached 16]
//                   [--keep] [--json FILE]
//   IPAM_SHIM_SOAK_MINUTES overrides the default duration. Needs root. Runs inside a scratch network namespace
//   (re-executing itself under `ip netns exec`), so cilium-cni's veths, routes and the shim's residue checks never touch
//   the machine's own namespace; every state directory lives under a temp dir.
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { CniRunner, GcError, PluginError, RunnerError, type JsonObject } from '../support/runtimes/runner.js';
import { disagreements, hostLocalStore, readLedger } from '../support/shim/robust.js';
import { PLUGIN_DIR, ROOT } from '../support/paths.js';
import { CiliumAgentStandIn } from '../support/doubles/cilium-agent.js';
import { ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';

const SHIM = process.env.IPAM_SHIM_BIN ?? join(ROOT, 'dist/ipam-shim.js');

const { values: flags } = parseArgs({
  options: {
    minutes: { type: 'string', default: process.env.IPAM_SHIM_SOAK_MINUTES ?? '10' },
    placement: { type: 'string', default: 'both' },
    concurrency: { type: 'string', default: '4' },
    'max-attached': { type: 'string', default: '16' },
    keep: { type: 'boolean', default: false },
    json: { type: 'string' },
  },
});

const uid = (n = 6) => randomBytes(8).toString('hex').slice(0, n);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---------------------------------------------------------------------------------------------------------------
// Re-exec inside a scratch "node" netns.

async function main(): Promise<number> {
  if (process.getuid?.() !== 0) {
    process.stderr.write('soak: needs root (network namespaces)\n');
    return 2;
  }
  if (!existsSync(SHIM)) {
    process.stderr.write(`soak: ${SHIM} is missing: run "npm run build" first\n`);
    return 2;
  }
  if (process.env.IPAM_SHIM_SOAK_INNER) return soak();
  const host = `soak-node-${uid()}`;
  await execa('ip', ['netns', 'add', host]);
  try {
    await execa('ip', ['netns', 'exec', host, 'ip', 'link', 'set', 'lo', 'up']);
    const r = await execa('ip', ['netns', 'exec', host, process.execPath, ...process.execArgv, process.argv[1]!, ...process.argv.slice(2)], {
      env: { ...process.env, IPAM_SHIM_SOAK_INNER: host },
      stdio: 'inherit',
      reject: false,
    });
    return r.exitCode ?? 1;
  } finally {
    await execa('ip', ['netns', 'del', host], { reject: false });
  }
}

// ---------------------------------------------------------------------------------------------------------------

/** Exclusive (GC) vs shared (everything else) access to one lane, like libcni's "GC runs alone". */
class Gate {
  private shared = 0;
  private exclusive = false;
  private waiters: Array<() => void> = [];
  private wait = () => new Promise<void>((r) => this.waiters.push(r));
  private wake = () => {
    for (const w of this.waiters.splice(0)) w();
  };
  async withShared<T>(fn: () => Promise<T>): Promise<T> {
    while (this.exclusive) await this.wait();
    this.shared++;
    try {
      return await fn();
    } finally {
      this.shared--;
      this.wake();
    }
  }
  async withExclusive<T>(fn: () => Promise<T>): Promise<T> {
    while (this.exclusive) await this.wait();
    this.exclusive = true;
    try {
      while (this.shared > 0) await this.wait();
      return await fn();
    } finally {
      this.exclusive = false;
      this.wake();
    }
  }
}

interface Lane {
  name: string;
  placement: 'chained' | 'ipam';
  runner: CniRunner;
  shimConf: JsonObject;
  conflistFile: string;
  stateDir: string;
  dataDir: string;
  logFile: string;
  attached: Map<string, string>; // cid → netns name (idle)
  busy: Set<string>;
  gate: Gate;
  seq: number;
}

type Verb = 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'LOST';

const latencies = new Map<string, number[]>(); // "lane VERB" → ms
const errors = new Map<string, number>(); // "lane VERB code" → count
const errorSamples: string[] = [];
const ops = new Map<string, number>();
const netnses = new Set<string>();
/** Attachments the shim's GC released (the "lost" ones it found), per placement. */
const released = new Map<string, number>();

function note(lane: Lane, verb: Verb, ms: number): void {
  const k = `${lane.placement} ${verb}`;
  (latencies.get(k) ?? latencies.set(k, []).get(k)!).push(ms);
  ops.set(k, (ops.get(k) ?? 0) + 1);
}

function codeOf(e: unknown): string {
  if (e instanceof PluginError) return `${e.code}`;
  if (e instanceof RunnerError) return e.code === undefined ? 'runner' : `${e.code}`;
  const cause = (e as { cause?: unknown })?.cause;
  if (cause) return codeOf(cause);
  return 'other';
}

function fail(lane: Lane, verb: Verb, e: unknown): void {
  const inner = e instanceof GcError ? e.errors : [e];
  for (const x of inner) {
    const k = `${lane.placement} ${verb} ${codeOf(x)}`;
    errors.set(k, (errors.get(k) ?? 0) + 1);
    if (errorSamples.length < 20) errorSamples.push(`${k}: ${x instanceof Error ? x.message : String(x)}`.slice(0, 600));
  }
}

async function addNetns(): Promise<string> {
  const name = `sk-${uid(8)}`;
  await execa('ip', ['netns', 'add', name]);
  netnses.add(name);
  return name;
}
async function delNetns(name: string): Promise<void> {
  await execa('ip', ['netns', 'del', name], { reject: false });
  netnses.delete(name);
}

async function timed<T>(lane: Lane, verb: Verb, fn: () => Promise<T>): Promise<T | undefined> {
  const t = performance.now();
  try {
    return await fn();
  } catch (e) {
    fail(lane, verb, e);
    return undefined;
  } finally {
    note(lane, verb, performance.now() - t);
    lane.runner.invocations.splice(0); // the runner keeps every call; a soak cannot
  }
}

function pickIdle(lane: Lane): string | undefined {
  const idle = [...lane.attached.keys()].filter((c) => !lane.busy.has(c));
  return idle.length ? idle[Math.floor(Math.random() * idle.length)] : undefined;
}

async function opAdd(lane: Lane): Promise<void> {
  const cid = `soak-${lane.placement}-${lane.seq++}`;
  lane.busy.add(cid);
  try {
    const ns = await addNetns();
    const ok = await timed(lane, 'ADD', () => lane.runner.add(cid, `/run/netns/${ns}`));
    if (ok) lane.attached.set(cid, ns);
    else {
      // The runtime DELs after a failed ADD, then drops the sandbox.
      await lane.runner.del(cid, `/run/netns/${ns}`).catch((e) => fail(lane, 'DEL', e));
      await delNetns(ns);
    }
  } finally {
    lane.busy.delete(cid);
  }
}

async function opOnIdle(lane: Lane, verb: 'DEL' | 'CHECK' | 'LOST'): Promise<void> {
  const cid = pickIdle(lane);
  if (!cid) return;
  const ns = lane.attached.get(cid)!;
  lane.busy.add(cid);
  try {
    if (verb === 'CHECK') await timed(lane, 'CHECK', () => lane.runner.check(cid, `/run/netns/${ns}`));
    else if (verb === 'DEL') {
      const done = await timed(lane, 'DEL', async () => {
        await lane.runner.del(cid, `/run/netns/${ns}`);
        return true;
      });
      if (done) {
        lane.attached.delete(cid);
        await delNetns(ns);
      }
    } else {
      // LOST: the runtime forgets the attachment and the sandbox goes away without a DEL — a real leak.
      await timed(lane, 'LOST', async () => {
        await rm(lane.runner.cacheFilePath(cid), { force: true });
        await delNetns(ns);
      });
      lane.attached.delete(cid);
    }
  } finally {
    lane.busy.delete(cid);
  }
}

/** GC for a lane, exclusively: the runner's GC (valid = what is attached, maybe minus one it "forgets"), then the shim's. */
async function opGc(lane: Lane): Promise<void> {
  await lane.gate.withExclusive(async () => {
    const forget = Math.random() < 0.3 ? pickIdle(lane) : undefined;
    const valid = [...lane.attached.keys()].filter((c) => c !== forget).map((containerID) => ({ containerID, ifname: 'eth0' }));
    await timed(lane, 'GC', async () => {
      await lane.runner.gc(valid);
      if (forget) {
        await delNetns(lane.attached.get(forget)!);
        lane.attached.delete(forget);
      }
      await shimGc(lane);
    });
  });
}

async function shimGc(lane: Lane): Promise<void> {
  const cached = (await lane.runner.cachedAttachments())
    .filter((c) => c.networkName === lane.name)
    .map((c) => ({ containerID: c.containerId, ifname: c.ifName }));
  if (lane.placement === 'chained') {
    const conf = { ...lane.shimConf, name: lane.name, cniVersion: '1.1.0', 'cni.dev/valid-attachments': cached, 'cni.dev/attachments': cached };
    const r = await execa(SHIM, [], {
      input: JSON.stringify(conf),
      env: {
        PATH: process.env.PATH!,
        CNI_COMMAND: 'GC',
        CNI_CONTAINERID: '',
        CNI_NETNS: '',
        CNI_IFNAME: '',
        CNI_ARGS: '',
        CNI_PATH: lane.runner.pluginDirs.join(':'),
      },
      extendEnv: false,
      reject: false,
    });
    if (r.exitCode !== 0) throw gcFailure('shim GC verb', String(r.stdout), String(r.stderr));
    const log = await readFile(lane.logFile, 'utf8').catch(() => '');
    const last = log
      .trimEnd()
      .split('\n')
      .reverse()
      .map((l) => {
        try {
          return JSON.parse(l);
        } catch {
          return {};
        }
      })
      .find((l) => l.msg === 'GC');
    released.set(lane.placement, (released.get(lane.placement) ?? 0) + (Number(last?.released) || 0));
  } else {
    const r = await execa(
      SHIM,
      // --allow-empty-cache: the soak's own runtime cache is legitimately empty once every container is gone.
      [
        'gc',
        '--conflist',
        lane.conflistFile,
        '--cache-dir',
        lane.runner.cacheDir,
        '--cni-path',
        lane.runner.pluginDirs.join(':'),
        '--grace-seconds',
        '0',
        '--apply',
        '--allow-empty-cache',
        '--json',
      ],
      { env: { PATH: process.env.PATH! }, extendEnv: false, reject: false },
    );
    if (r.exitCode !== 0) throw gcFailure('ipam-shim gc --apply', String(r.stdout), String(r.stderr));
    const out = JSON.parse(String(r.stdout)) as { released?: unknown[] };
    released.set(lane.placement, (released.get(lane.placement) ?? 0) + (out.released?.length ?? 0));
  }
}

function gcFailure(what: string, stdout: string, stderr: string): Error {
  let code: number | undefined;
  try {
    code = JSON.parse(stdout).code;
  } catch {
    code = undefined;
  }
  return new RunnerError(`${what} failed: ${(stdout || stderr).trim().slice(0, 400)}`, code);
}

function percentile(sorted: number[], p: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function shimLatencies(lanes: Lane[]): Promise<Map<string, number[]>> {
  const out = new Map<string, number[]>();
  for (const lane of lanes) {
    const text = await readFile(lane.logFile, 'utf8').catch(() => '');
    for (const line of text.split('\n')) {
      if (!line) continue;
      try {
        const l = JSON.parse(line) as { command?: string; ms?: number; outcome?: string };
        if (typeof l.ms !== 'number' || !l.command || !l.outcome) continue;
        const k = `${lane.placement} ${l.command}`;
        (out.get(k) ?? out.set(k, []).get(k)!).push(l.ms);
      } catch {
        // not a call line
      }
    }
  }
  return out;
}

function latencyTable(title: string, m: Map<string, number[]>): string {
  const rows = [...m]
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([k, v]) => {
      const s = [...v].sort((a, b) => a - b);
      return `  ${k.padEnd(16)} n=${String(s.length).padStart(5)}  p50 ${percentile(s, 50).toFixed(0).padStart(6)} ms  p99 ${percentile(s, 99).toFixed(0).padStart(6)} ms  max ${s[s.length - 1]!.toFixed(0).padStart(6)} ms`;
    });
  return `${title}\n${rows.join('\n')}`;
}

async function soak(): Promise<number> {
  const minutes = Number(flags.minutes);
  const concurrency = Number(flags.concurrency);
  const maxAttached = Number(flags['max-attached']);
  const placements = flags.placement === 'both' ? (['chained', 'ipam'] as const) : ([flags.placement] as Array<'chained' | 'ipam'>);
  if (!(minutes > 0) || !(concurrency > 0) || !(maxAttached > 0) || placements.some((p) => p !== 'chained' && p !== 'ipam')) {
    process.stderr.write('soak: bad flags\n');
    return 2;
  }
  const dir = await mkdtemp(join(tmpdir(), 'ipam-shim-soak-'));
  const bin = join(dir, 'bin');
  await mkdir(bin);
  await execa('ln', ['-s', SHIM, join(bin, 'ipam-shim')]);
  const cacheDir = join(dir, 'cache');
  await mkdir(join(dir, 'net.d'));
  const agent = await CiliumAgentStandIn.start({ socketPath: join(dir, 'cilium.sock') });
  const lanes: Lane[] = [];
  for (const [i, placement] of placements.entries()) {
    const name = `soak-${placement}`;
    const stateDir = join(dir, 'state');
    const dataDir = join(dir, 'host-local');
    const logFile = join(dir, `${placement}.log`);
    const subnet = `10.${241 + i}.0.0/24`;
    const hostLocal = { type: 'host-local', dataDir, ranges: [[{ subnet }]] };
    const shimKeys = { stateDir, logFile, ipv6ProbeRewrite: 'off' };
    const shimConf: JsonObject =
      placement === 'chained'
        ? { type: 'ipam-shim', ...shimKeys, delegate: hostLocal }
        : ciliumCni({ type: 'ipam-shim', ...shimKeys, delegate: hostLocal });
    const plugins = placement === 'chained' ? [ciliumCni(hostLocal), shimConf] : [shimConf];
    const confList = { cniVersion: '1.0.0', name, plugins };
    const conflistFile = join(dir, 'net.d', `10-${name}.conflist`);
    await writeFile(conflistFile, JSON.stringify(confList, null, 2));
    lanes.push({
      name,
      placement,
      runner: new CniRunner({ confList, pluginDirs: [bin, ciliumCniDir('1.17'), PLUGIN_DIR], cacheDir, env: agent.env() }),
      shimConf,
      conflistFile,
      stateDir,
      dataDir,
      logFile,
      attached: new Map(),
      busy: new Set(),
      gate: new Gate(),
      seq: 0,
    });
  }

  const started = Date.now();
  const deadline = started + minutes * 60_000;
  console.log(
    `soak: ${minutes} min, lanes ${placements.join('+')}, concurrency ${concurrency}, up to ${maxAttached} attached per lane, in netns ${process.env.IPAM_SHIM_SOAK_INNER}; scratch ${dir}`,
  );
  const progress = setInterval(() => {
    const total = [...ops.values()].reduce((a, b) => a + b, 0);
    const errs = [...errors.values()].reduce((a, b) => a + b, 0);
    console.log(
      `  ${((Date.now() - started) / 60_000).toFixed(1)} min: ${total} ops, ${errs} errors, attached ${lanes.map((l) => `${l.placement}=${l.attached.size}`).join(' ')}`,
    );
  }, 30_000);

  const worker = async () => {
    while (Date.now() < deadline) {
      const lane = lanes[Math.floor(Math.random() * lanes.length)]!;
      const r = Math.random();
      const n = lane.attached.size;
      if (r < 0.02) await opGc(lane);
      else
        await lane.gate.withShared(async () => {
          if (r < 0.04) await opOnIdle(lane, 'LOST');
          else if (r < 0.45 && n + lane.busy.size < maxAttached) await opAdd(lane);
          else if (r < 0.72) await opOnIdle(lane, 'CHECK');
          else await opOnIdle(lane, 'DEL');
        });
      await sleep(1);
    }
  };
  let leaks = 0;
  let exit = 0;
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
    clearInterval(progress);

    // Wind down: DEL everything still attached, then one GC per lane for whatever "lost" left behind.
    for (const lane of lanes) {
      for (const [cid, ns] of [...lane.attached]) {
        await timed(lane, 'DEL', () => lane.runner.del(cid, `/run/netns/${ns}`));
        await delNetns(ns);
        lane.attached.delete(cid);
      }
      await timed(lane, 'GC', () => shimGc(lane));
    }

    const report: string[] = [];
    for (const lane of lanes) {
      const store = await hostLocalStore(lane.dataDir, lane.name);
      const ledger = await readLedger(lane.stateDir, lane.name);
      const cached = (await lane.runner.cachedAttachments()).filter((c) => c.networkName === lane.name);
      const problems = disagreements(ledger, store);
      leaks += store.size + ledger.records.size + cached.length;
      report.push(
        `  ${lane.placement.padEnd(8)} host-local ${store.size}  ledger records ${ledger.records.size}  runner cache ${cached.length}  temp files ${ledger.temps.length}  corrupt ${ledger.corrupt.size}` +
          (problems.length ? `\n    ${problems.slice(0, 10).join('\n    ')}` : ''),
      );
      if (ledger.temps.length || ledger.corrupt.size) exit = 1;
    }
    const elapsed = (Date.now() - started) / 60_000;
    const totalOps = [...ops.values()].reduce((a, b) => a + b, 0);
    console.log(`\nsoak done: ${elapsed.toFixed(1)} min, ${totalOps} operations`);
    console.log(
      `operations: ${[...ops]
        .sort()
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
    console.log(
      `errors by code: ${
        errors.size
          ? [...errors]
              .sort()
              .map(([k, v]) => `${k}: ${v}`)
              .join(', ')
          : 'none'
      }`,
    );
    for (const e of errorSamples) console.log(`  ${e}`);
    const lost = (p: string) => ops.get(`${p} LOST`) ?? 0;
    console.log(
      `lost attachments (sandbox gone, no DEL, not cached) released by the shim's GC: ${lanes.map((l) => `${l.placement} ${released.get(l.placement) ?? 0}/${lost(l.placement)}`).join(', ')}`,
    );
    console.log(`leaked allocations after DELing everything and a final GC: ${leaks}`);
    console.log(report.join('\n'));
    console.log(latencyTable('latency per verb, whole list through the runner (cilium-cni + shim):', latencies));
    console.log(latencyTable("latency per verb, the shim's own (its log's ms):", await shimLatencies(lanes)));
    if (flags.json)
      await writeFile(
        flags.json,
        JSON.stringify({ minutes: elapsed, ops: Object.fromEntries(ops), errors: Object.fromEntries(errors), leaks }, null, 2),
      );
    if (leaks || errors.size) exit = 1;
  } finally {
    clearInterval(progress);
    for (const ns of [...netnses]) await delNetns(ns);
    await agent.stop();
    if (flags.keep || exit) console.log(`scratch kept: ${dir}`);
    else await rm(dir, { recursive: true, force: true });
  }
  return exit;
}

main().then(
  (code) => process.exit(code),
  (e) => {
    process.stderr.write(`soak: ${e instanceof Error ? e.stack : String(e)}\n`);
    process.exit(1);
  },
);

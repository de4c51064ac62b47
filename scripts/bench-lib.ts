// Shared timing and table helpers for the benchmarks in scripts/ (bench/, one module per section, and the bench-*.ts scripts).
// Rules they implement: every figure is a median with min/max over many runs; cases that are compared are
// measured in the same run, alternating (round-robin, rotating the starting case), so the noise of a shared
// machine hits every side equally; child processes get argv arrays, never a shell string.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

// ---------------------------------------------------------------------------------------------------------
// Processes.

export interface SpawnOptions {
  input?: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Kill after this long (default 120 s). */
  timeoutMs?: number;
}

export interface Timed {
  /** Wall time of the child, fork to exit, in ms (from spawn() to 'close' without the runner). */
  ms: number;
  /** User + system CPU of the child and every descendant it waited for (a plugin's delegate, its tools), in ms. */
  cpuMs?: number;
  /** The kernel's ru_maxrss for the child (the largest of it and its waited-for descendants), KiB. */
  maxRssKiB?: number;
  code: number | null;
  stdout: string;
  stderr: string;
}

// A 20-line C runner measures what Node cannot see: the child's rusage (CPU time, peak RSS) from wait4(), and a
// wall time that excludes Node's own spawn overhead. CPU time is the steadier figure on a shared machine: waiting
// for a core inflates wall time, not CPU time. Built once per run with the system C compiler; without one the
// helpers fall back to Node's wall time and /usr/bin/time for RSS.
const RUNNER_C = `#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>
#include <fcntl.h>
#include <time.h>
#include <sys/wait.h>
#include <sys/resource.h>
int main(int argc, char **argv) {
  if (argc < 2) return 127;
  fcntl(3, F_SETFD, FD_CLOEXEC);
  struct timespec a, b;
  clock_gettime(CLOCK_MONOTONIC, &a);
  pid_t pid = fork();
  if (pid == 0) { execvp(argv[1], argv + 1); _exit(127); }
  int status; struct rusage ru;
  if (pid < 0 || wait4(pid, &status, 0, &ru) < 0) return 126;
  clock_gettime(CLOCK_MONOTONIC, &b);
  double wall = (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
  double cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  dprintf(3, "%.3f %.3f %ld %d\\n", wall, cpu, ru.ru_maxrss, code);
  return code;
}
`;

let runner: string | null | undefined;

/** The compiled runner's path, or null when there is no C compiler (then: Node wall time, /usr/bin/time RSS). */
export function runnerPath(): string | null {
  if (runner !== undefined) return runner;
  runner = null;
  if (process.env.BENCH_NO_RUNNER === '1') return runner;
  try {
    const dir = mkdtempSync(join(tmpdir(), 'bench-runner-'));
    process.on('exit', () => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'runner.c'), RUNNER_C);
    execFileSync('cc', ['-O2', '-o', join(dir, 'runner'), join(dir, 'runner.c')], { stdio: 'ignore' });
    if (existsSync(join(dir, 'runner'))) runner = join(dir, 'runner');
  } catch {
    runner = null;
  }
  return runner;
}

/** Runs argv[0] with argv[1..] (no shell) and returns its wall time (and, with the runner, CPU and RSS). */
export function timeRun(argv: readonly string[], opts: SpawnOptions = {}): Promise<Timed> {
  const r = runnerPath();
  return new Promise((resolve, reject) => {
    const started = process.hrtime.bigint();
    const [file, args] = r ? [r, [...argv]] : [argv[0]!, argv.slice(1)];
    const child = spawn(file, args, {
      env: opts.env ?? process.env,
      cwd: opts.cwd,
      stdio: ['pipe', 'pipe', 'pipe', ...(r ? (['pipe'] as const) : [])],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    const stat: Buffer[] = [];
    child.stdout!.on('data', (b: Buffer) => out.push(b));
    child.stderr!.on('data', (b: Buffer) => err.push(b));
    if (r) (child.stdio[3] as NodeJS.ReadableStream).on('data', (b: Buffer) => stat.push(b));
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 120_000);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      const base = { code, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') };
      const line = Buffer.concat(stat).toString('utf8').trim();
      if (r && line) {
        const [wall, cpu, rss] = line.split(' ').map(Number);
        resolve({ ...base, ms: wall!, cpuMs: cpu!, maxRssKiB: rss! });
      } else resolve({ ...base, ms });
    });
    child.stdin!.on('error', () => undefined); // a child that exits without reading stdin (node -e 0)
    child.stdin!.end(opts.input ?? '');
  });
}

/** Like timeRun, but fails loudly on a non-zero exit: a benchmark of a failing call measures nothing. */
export async function mustRun(argv: readonly string[], opts: SpawnOptions = {}): Promise<Timed> {
  const r = await timeRun(argv, opts);
  if (r.code !== 0) throw new Error(`${argv.join(' ')} exited ${r.code}: ${(r.stdout + r.stderr).trim().slice(0, 2000)}`);
  return r;
}

const TIME_BIN = '/usr/bin/time';

/** Peak RSS (KiB, the kernel's ru_maxrss of the child) and wall time: the runner, else `/usr/bin/time -f %M`. */
export async function rssRun(argv: readonly string[], opts: SpawnOptions = {}): Promise<Timed & { maxRssKiB: number }> {
  if (runnerPath()) {
    const r = await timeRun(argv, opts);
    if (r.maxRssKiB !== undefined) return { ...r, maxRssKiB: r.maxRssKiB };
  }
  const dir = mkdtempSync(join(tmpdir(), 'bench-rss-'));
  const file = join(dir, 'rss');
  try {
    const r = await timeRun([TIME_BIN, '-f', '%M', '-o', file, ...argv], opts);
    const maxRssKiB = Number(readFileSync(file, 'utf8').trim().split('\n').at(-1));
    return { ...r, maxRssKiB };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------------------
// Statistics.

export interface Stats {
  n: number;
  median: number;
  min: number;
  max: number;
  p99: number;
  mean: number;
}

/** Nearest-rank percentile (p in 0..100) of an unsorted sample. */
export function percentile(samples: readonly number[], p: number): number {
  if (!samples.length) return NaN;
  const s = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * s.length);
  return s[Math.min(s.length - 1, Math.max(0, rank - 1))]!;
}

export function stats(samples: readonly number[]): Stats {
  if (!samples.length) return { n: 0, median: NaN, min: NaN, max: NaN, p99: NaN, mean: NaN };
  const s = [...samples].sort((a, b) => a - b);
  const mid = s.length >> 1;
  const median = s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
  return { n: s.length, median, min: s[0]!, max: s.at(-1)!, p99: percentile(s, 99), mean: s.reduce((a, b) => a + b, 0) / s.length };
}

// ---------------------------------------------------------------------------------------------------------
// Alternating measurement.

/** One measurement: wall ms, and CPU ms / peak RSS KiB where the runner measured them. */
export interface Sample {
  ms: number;
  cpuMs?: number;
  rssKiB?: number;
}

export const sampleOf = (t: Timed): Sample => ({ ms: t.ms, cpuMs: t.cpuMs, rssKiB: t.maxRssKiB });

/** Samples of one case, one array per figure (cpu/rss only hold the samples that had them). */
export interface Samples {
  ms: number[];
  cpu: number[];
  rss: number[];
}

export const emptySamples = (): Samples => ({ ms: [], cpu: [], rss: [] });

export function pushSample(into: Samples, v: number | Sample): void {
  const s = typeof v === 'number' ? { ms: v } : v;
  into.ms.push(s.ms);
  if (s.cpuMs !== undefined) into.cpu.push(s.cpuMs);
  if (s.rssKiB !== undefined) into.rss.push(s.rssKiB);
}

/** One case of a comparison: `run` performs one measured operation and returns its sample (ms, or a Sample). */
export interface Case {
  name: string;
  run: (iteration: number) => Promise<number | Sample>;
  /** Untimed work after each sample (cleanup such as a DEL), outside the measurement. */
  after?: (iteration: number) => Promise<void>;
}

export interface AlternateOptions {
  runs: number;
  /** Untimed rounds first (page cache, delegate VERSION cache, JIT of the bench itself). Default 2. */
  warmup?: number;
  /** Called once per round after every case ran (untimed). */
  afterRound?: (iteration: number) => Promise<void>;
}

/**
 * Round-robin over the cases, `runs` times, rotating which case goes first each round so no case always
 * follows the same neighbour. Returns the samples per case name.
 */
export async function alternate(cases: readonly Case[], opts: AlternateOptions): Promise<Map<string, Samples>> {
  const samples = new Map<string, Samples>(cases.map((c) => [c.name, emptySamples()]));
  const warmup = opts.warmup ?? 2;
  for (let i = 0; i < warmup + opts.runs; i++) {
    for (let k = 0; k < cases.length; k++) {
      const c = cases[(i + k) % cases.length]!;
      const v = await c.run(i);
      if (c.after) await c.after(i);
      if (i >= warmup) pushSample(samples.get(c.name)!, v);
    }
    if (opts.afterRound) await opts.afterRound(i);
  }
  return samples;
}

// ---------------------------------------------------------------------------------------------------------
// Formatting.

export const fmtMs = (ms: number): string => (Number.isNaN(ms) ? '–' : ms >= 100 ? ms.toFixed(0) : ms >= 10 ? ms.toFixed(1) : ms.toFixed(2));
export const fmtMiB = (kib: number): string => (Number.isNaN(kib) ? '–' : (kib / 1024).toFixed(1));
export const fmtRatio = (r: number): string => (Number.isFinite(r) ? `${r.toFixed(2)}×` : '–');

/** "median (min–max)" in ms. */
export const fmtStats = (s: Stats, fmt: (v: number) => string = fmtMs): string => `${fmt(s.median)} (${fmt(s.min)}–${fmt(s.max)})`;

/** A plain-text table: first row is the header; numbers right-aligned, text left-aligned. */
export function table(rows: ReadonlyArray<ReadonlyArray<string>>): string {
  const widths: number[] = [];
  for (const r of rows) for (const [i, c] of r.entries()) widths[i] = Math.max(widths[i] ?? 0, c.length);
  const numeric = (c: string) => /^[-–+]?\d[\d.,]*(×|%)?( \(.*\))?$/.test(c);
  const line = (r: ReadonlyArray<string>) =>
    r
      .map((c, i) => (i > 0 && numeric(c) ? c.padStart(widths[i]!) : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  const [head, ...body] = rows;
  return [line(head!), widths.map((w) => '-'.repeat(w)).join('  '), ...body.map(line)].join('\n');
}

/** Prints a section heading and records the machine's load, so noisy sections can be recognised. */
export function heading(title: string): void {
  const [l1] = loadavg();
  console.log(`\n## ${title}  (load avg ${l1!.toFixed(2)})\n`);
}

/** Spread of a sample as max/min: a quick noise indicator for the reader. */
export const spread = (s: Stats): number => s.max / s.min;

// ---------------------------------------------------------------------------------------------------------
// Fixtures.

/** A 64-hex container ID, as containerd's, from a counter (deterministic: a bench is repeatable). */
export const benchCid = (i: number): string => i.toString(16).padStart(8, '0').repeat(8);

/**
 * One result-cache entry (cniCacheV1) as libcni writes it for a pod of containerd (~3 KiB): the base64 conflist,
 * CNI_ARGS, capability args with the pod's annotations (`annotations` added before the last one), a full result.
 */
export function libcniCacheEntry(o: { net: string; cid: string; address: string; conflist: string; annotations?: Record<string, string> }): string {
  const { cid } = o;
  const uuid = `${cid.slice(0, 8)}-${cid.slice(8, 12)}-${cid.slice(12, 16)}-${cid.slice(16, 20)}-${cid.slice(20, 32)}`;
  return JSON.stringify({
    kind: 'cniCacheV1',
    containerId: cid,
    config: Buffer.from(o.conflist).toString('base64'),
    ifName: 'eth0',
    networkName: o.net,
    netns: `/var/run/netns/cni-${uuid}`,
    cniArgs: [
      ['IgnoreUnknown', '1'],
      ['K8S_POD_NAMESPACE', 'team-a'],
      ['K8S_POD_NAME', `web-${cid.slice(0, 10)}`],
      ['K8S_POD_INFRA_CONTAINER_ID', cid],
      ['K8S_POD_UID', uuid],
    ],
    capabilityArgs: {
      dns: { Servers: ['10.0.0.10'], Searches: ['team-a.svc.cluster.local', 'svc.cluster.local', 'cluster.local'], Options: ['ndots:5'] },
      'io.kubernetes.cri.pod-annotations': {
        'kubernetes.io/config.seen': '2026-11-20T10:00:00.000000000Z',
        'kubernetes.io/config.source': 'api',
        'prometheus.io/scrape': 'true',
        ...o.annotations,
        'checksum/config': 'a'.repeat(64),
      },
    },
    result: {
      cniVersion: '1.0.0',
      interfaces: [
        { name: `lxc${cid.slice(0, 8)}`, mac: '0a:58:0a:f4:00:05' },
        { name: 'eth0', mac: '0a:58:0a:f4:00:06', sandbox: '/var/run/netns/cni-x' },
      ],
      ips: [{ interface: 1, address: `${o.address}/32`, gateway: '10.128.0.1' }],
      routes: [{ dst: '0.0.0.0/0', gw: '10.128.0.1' }],
      dns: {},
    },
  });
}

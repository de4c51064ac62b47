// 4. Concurrency: PARALLEL ADDs at once.
import { rmSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { type Case, alternate, fmtMs, heading, percentile, stats, table } from '../bench-lib.js';
import {
  HL_DATA,
  HOST_LOCAL,
  type Json,
  NS,
  PARALLEL,
  SCALE_RUNS,
  VARIANTS,
  cell,
  cni,
  cniEnv,
  hlConf,
  med,
  nextCid,
  ratio,
  results,
  shimArgv,
  slotConf,
} from './context.js';

export async function sectionConcurrency(): Promise<void> {
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
      Array.from({ length: PARALLEL }, () =>
        cni(argv, c, cniEnv('ADD', { containerID: nextCid('conc'), netns: `/run/netns/${NS}-none`, ifname: 'eth0' })),
      ),
    );
    const wall = Number(process.hrtime.bigint() - started) / 1e6;
    const ips = calls.flatMap((x) => (x.json?.ips ?? []).map((i: Json) => i.address));
    if (new Set(ips).size !== ips.length || ips.length !== PARALLEL * 2)
      throw new Error(`${name}: ${ips.length} addresses, ${new Set(ips).size} distinct`);
    cleanup(net);
    (rounds.get(name) ?? rounds.set(name, []).get(name)!).push({
      wall,
      lat: calls.map((x) => x.ms),
      cpu: calls.reduce((a, x) => a + (x.cpuMs ?? NaN), 0),
    });
    return wall;
  };
  const cases: Case[] = [
    {
      name: 'host-local',
      run: () =>
        burst(
          'host-local',
          HOST_LOCAL(),
          (n) => hlConf(n, 'dual'),
          (n) => rmSync(join(HL_DATA, n), { recursive: true, force: true }),
        ),
    },
  ];
  for (const v of VARIANTS) {
    cases.push({
      name: `${v.name} SEA→host-local`,
      run: () =>
        burst(
          `${v.name} SEA→host-local`,
          shimArgv(v),
          (n) => slotConf(v, n, 'dual'),
          (n) => {
            rmSync(join(v.dataDir, n), { recursive: true, force: true });
            rmSync(join(v.stateDir, n), { recursive: true, force: true });
          },
        ),
    });
  }
  await alternate(cases, { runs: SCALE_RUNS, warmup: 1 });
  const rows: string[][] = [
    ['case', 'burst wall median (min–max) ms', 'latency p50', 'p99', 'p99 per round (median)', 'CPU per ADD', 'wall ÷ host-local'],
  ];
  const hl = med(
    rounds
      .get('host-local')!
      .slice(-SCALE_RUNS)
      .map((r) => r.wall),
  );
  const out: Json = {};
  for (const c of cases) {
    const rs = rounds.get(c.name)!.slice(-SCALE_RUNS);
    const walls = rs.map((r) => r.wall);
    const lat = rs.flatMap((r) => r.lat);
    const cpuPer = med(rs.map((r) => r.cpu / PARALLEL));
    rows.push([
      c.name,
      cell(walls),
      fmtMs(percentile(lat, 50)),
      fmtMs(percentile(lat, 99)),
      fmtMs(med(rs.map((r) => percentile(r.lat, 99)))),
      fmtMs(cpuPer),
      ratio(med(walls), hl),
    ]);
    out[c.name] = { wall: stats(walls), p50: percentile(lat, 50), p99: percentile(lat, 99), cpuPerAdd: cpuPer };
  }
  console.log(table(rows));
  console.log(
    `\nEvery round checks that all ${PARALLEL * 2} addresses are distinct. ${PARALLEL} processes on ${cpus().length} CPUs: CPU-bound, so the burst`,
  );
  console.log('wall is about (CPU per ADD × parallel ÷ CPUs); latency = each ADD from fork to exit.');
  results.concurrency = out;
}

// STATUS: a steady per-node cost once a runtime sends it (containerd ≥ 2.0.1 with a 1.1.0 list: one STATUS per
// plugin on every CRI Status call, kubelet's 5 s poll). The shim in both placements over host-local, against the
// embedded runtime's `node -e 0` (the floor the target is judged on) and host-local's own STATUS, same rounds.
// Needs reference plugins that speak 1.1.0 (Debian 12's 1.1.1 refuse a 1.1.0 config): --plugins11.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Case, alternate, fmtMs, heading, mustRun, sampleOf, stats, table } from '../bench-lib.js';
import {
  type Json,
  PLUGINS11,
  RUNS,
  SEA_NODE,
  VARIANTS,
  type Variant,
  cell,
  cniEnv,
  floorRun,
  med,
  ratio,
  results,
  seaNodeFloor,
  shimArgv,
} from './context.js';
import { CPU_SPLIT_HEAD, FLOOR, cpuSplit, cpuSplitRow, seaFloors } from './floor.js';

/** kubelet's runtime-status period: how often containerd 2.x runs STATUS. */
const POLL_S = 5;
const RANGES = [[{ subnet: '10.97.0.0/24' }]];

const delegate = (dataDir: string) => ({ type: 'host-local', dataDir, ranges: RANGES });
/** The IPAM slot: what ptp hands its IPAM plugin on STATUS (libcni gives each plugin its own entry). */
const slot = (v: Variant): Json => ({
  cniVersion: '1.1.0',
  name: 'status',
  type: 'ptp',
  ipam: { type: 'ipam-shim', stateDir: v.stateDir, logFile: v.logFile, delegate: delegate(v.dataDir) },
});
/** Chained: the shim's own entry of the list (its own log file, so the timings below are per placement). */
const chained = (v: Variant): Json => ({
  cniVersion: '1.1.0',
  name: 'status',
  type: 'ipam-shim',
  stateDir: v.stateDir,
  logFile: chainedLog(v),
  delegate: delegate(v.dataDir),
});
const chainedLog = (v: Variant) => `${v.logFile}.chained`;

export async function sectionStatus(): Promise<void> {
  heading(`STATUS: the per-node cost at kubelet's ${POLL_S} s poll (${RUNS} runs, alternating)`);
  if (!existsSync(join(PLUGINS11, 'host-local'))) {
    console.log(`(skipped: no reference plugins that speak 1.1.0 in ${PLUGINS11}; scripts/install-deps.sh provides them, or --plugins11 DIR)`);
    return;
  }
  const env = cniEnv('STATUS', { path: [PLUGINS11] });
  const floors = await seaFloors();
  const call = (argv: string[], conf: Json) => async () => sampleOf(await mustRun(argv, { env, input: JSON.stringify(conf) }));
  const hlConf = { cniVersion: '1.1.0', name: 'status', type: 'ptp', ipam: delegate(join(VARIANTS[0]!.dataDir, 'alone')) };
  const cases: Case[] = [
    { name: 'node -e 0', run: floorRun },
    ...(await seaNodeFloor()),
    { name: 'host-local STATUS', run: call([join(PLUGINS11, 'host-local')], hlConf) },
    ...(floors?.cases(env, JSON.stringify(hlConf)) ?? []),
  ];
  for (const v of VARIANTS) {
    cases.push({ name: `${v.name} STATUS, IPAM slot`, run: call(shimArgv(v), slot(v)) });
    cases.push({ name: `${v.name} STATUS, chained`, run: call(shimArgv(v), chained(v)) });
  }
  // A failing call measures nothing: mustRun throws on any exit but 0, warm-up rounds included.
  const samples = await alternate(cases, { runs: RUNS });
  const node24 = cases.find((c) => c.name.startsWith('node v24'))?.name ?? 'node -e 0';
  const floor = samples.get(node24)!;
  const hl = samples.get('host-local STATUS')!;
  const sea = samples.get(FLOOR);
  const rows: string[][] = [
    [
      'case',
      'wall median (min–max) ms',
      'CPU median (min–max) ms',
      `CPU × ${node24}`,
      'CPU − host-local',
      'CPU × floor',
      '(CPU − host-local) × floor',
      `CPU per minute at ${POLL_S} s`,
    ],
  ];
  for (const c of cases) {
    const x = samples.get(c.name)!;
    const perMin = (60 / POLL_S) * med(x.cpu);
    rows.push([
      c.name,
      cell(x.ms),
      cell(x.cpu),
      ratio(med(x.cpu), med(floor.cpu)),
      fmtMs(med(x.cpu) - med(hl.cpu)),
      sea ? ratio(med(x.cpu), med(sea.cpu)) : '–',
      // The IPAM slot's target leaves the delegate's own STATUS out (issue 33): it is host-local's cost, not ours.
      sea && c.name.endsWith('IPAM slot') ? ratio(med(x.cpu) - med(hl.cpu), med(sea.cpu)) : '',
      `${fmtMs(perMin)} ms (${((perMin / 60_000) * 100).toFixed(3)} % of a core)`,
    ]);
  }
  console.log(table(rows));
  console.log(
    `\nFloor: ${node24}${existsSync(SEA_NODE) ? ' (the runtime the single executable embeds)' : ''}. CPU includes the delegate's STATUS (host-local, reaped).`,
  );
  // Where a STATUS's time goes: the shim's own `timings` (its last RUNS "CNI call done" lines per case), and its
  // CPU split (Node's bootstrap from the floor's probe, the rest from the lines' `cpu`).
  const bootstrap = floors ? await floors.bootstrapCpu(RUNS) : [];
  const split: string[][] = [CPU_SPLIT_HEAD];
  for (const [v, placement, file] of VARIANTS.flatMap((v) => [[v, 'IPAM slot', v.logFile] as const, [v, 'chained', chainedLog(v)] as const])) {
    const lines = existsSync(file)
      ? readFileSync(file, 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as Json)
          .filter((l) => l.command === 'STATUS' && l.timings)
          .slice(-RUNS)
      : [];
    if (lines.some((l) => l.cpu))
      split.push(cpuSplitRow(`${v.name} STATUS, ${placement}`, cpuSplit(lines, samples.get(`${v.name} STATUS, ${placement}`)!, bootstrap)));
    const keys = [...new Set(lines.flatMap((l) => Object.keys(l.timings)))];
    if (keys.length)
      console.log(
        `${v.name} STATUS, ${placement}, timings (medians, ms): ${keys.map((k) => `${k} ${fmtMs(stats(lines.map((l) => l.timings[k] ?? 0)).median)}`).join(', ')}`,
      );
  }
  if (split.length > 1)
    console.log(`\n${table(split)}\n(exit + programs run: the runner's CPU minus the line's; in the IPAM slot it holds host-local's STATUS)`);
  results.status = Object.fromEntries([...samples].map(([k, x]) => [k, { wall: stats(x.ms), cpu: stats(x.cpu) }]));
}

// 1. VERSION: the shim against its floors (the empty single executable of the runtime it embeds, `node -e 0`) and the Go plugin.
import { SEA_EXEC_ARGV } from '../sea.mjs';
import { FLOOR, seaFloors } from './floor.js';
import { type Case, alternate, fmtMs, heading, mustRun, sampleOf, stats, table } from '../bench-lib.js';
import {
  HOST_LOCAL,
  RUNS,
  SEA_NODE,
  VARIANTS,
  VERSION_ENV,
  VERSION_IN,
  cell,
  floorRun,
  med,
  ratio,
  results,
  seaNodeFloor,
  shimArgv,
  statsOf,
} from './context.js';

export async function sectionVersion(): Promise<void> {
  heading(`VERSION: start-up floor (${RUNS} runs, alternating)`);
  const timed =
    (argv: string[], env: NodeJS.ProcessEnv = VERSION_ENV, input = VERSION_IN) =>
    async () =>
      sampleOf(await mustRun(argv, { env, input }));
  const cases: Case[] = [
    { name: 'node -e 0', run: floorRun },
    ...(await seaNodeFloor()),
    { name: 'host-local VERSION', run: timed(HOST_LOCAL()) },
    ...((await seaFloors())?.cases(VERSION_ENV, VERSION_IN) ?? []),
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
  const sea = samples.get(FLOOR);
  const rows: string[][] = [
    ['case', 'wall median ms', 'min', 'max', 'wall × node -e 0', 'CPU median (min–max) ms', 'CPU × node -e 0', 'CPU × floor'],
  ];
  for (const c of cases) {
    const x = samples.get(c.name)!;
    const w = stats(x.ms);
    rows.push([
      c.name,
      fmtMs(w.median),
      fmtMs(w.min),
      fmtMs(w.max),
      ratio(w.median, med(floor.ms)),
      cell(x.cpu),
      ratio(med(x.cpu), med(floor.cpu)),
      sea ? ratio(med(x.cpu), med(sea.cpu)) : '–',
    ]);
  }
  console.log(table(rows));
  console.log(
    `\n${FLOOR}: the runtime the shim embeds (${SEA_NODE}), built as scripts/build.mjs builds the shim (flags ${SEA_EXEC_ARGV.join(' ')}); the target: VERSION ≤ 1.1× it (issue 44).`,
  );
  results.version = statsOf(samples);
}

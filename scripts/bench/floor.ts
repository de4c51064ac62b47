// The packaging floor (issue 33): what a single executable of the exact Node the shim embeds costs before any of
// our code runs, made the way scripts/build.mjs makes the shim (scripts/sea.mjs: the same runtime, the same
// execArgv, the blob written under those flags so V8 accepts its code cache). The targets are judged against the
// empty script; the empty snapshot shows what starting from any startup snapshot costs on top; the probe is the
// empty script reporting its own CPU at its first line, the bootstrap share of every call's split.
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { SEA_EXEC_ARGV, injectBlob, writeBlob } from '../sea.mjs';
import { type Case, type Samples, mustRun, sampleOf, stats } from '../bench-lib.js';
import { FLOOR_ENV, NODE, ROOT, SEA_NODE, WORK, type Json, cell } from './context.js';

/** The case the packaging targets (issues 33, 44) divide by. */
export const FLOOR = 'floor: SEA of an empty script';
export const FLOOR_SNAPSHOT = 'SEA of an empty snapshot';

interface Floors {
  /** The empty script and the empty snapshot, as cases that take the plugin's environment and stdin. */
  cases: (env: NodeJS.ProcessEnv, input: string) => Case[];
  /** The empty script's own CPU (ms) at its first line, median of `runs` runs: Node's bootstrap of a SEA. */
  bootstrapCpu: (runs: number) => Promise<number[]>;
}

let made: Promise<Floors | undefined> | undefined;

/** The floors, built once per bench run (undefined, with a line saying why, when they cannot be). */
export function seaFloors(): Promise<Floors | undefined> {
  made ??= build().catch((e: unknown) => {
    console.log(`(no SEA floors: ${(e as Error).message.slice(0, 300)})`);
    return undefined;
  });
  return made;
}

async function build(): Promise<Floors> {
  const postject = join(ROOT, 'node_modules/postject/dist/cli.js');
  if (!existsSync(SEA_NODE) || !existsSync(postject)) throw new Error(`no ${SEA_NODE} or postject (npm ci)`);
  const dir = join(WORK, 'floor');
  mkdirSync(dir, { recursive: true });
  const make = (name: string, script: string, extra: Json) => {
    const file = join(dir, name);
    writeFileSync(`${file}.js`, script);
    const config = { main: `${file}.js`, output: `${file}.blob`, disableExperimentalSEAWarning: true, execArgv: SEA_EXEC_ARGV, ...extra };
    writeFileSync(`${file}.json`, JSON.stringify(config));
    writeBlob(SEA_NODE, `${file}.json`);
    copyFileSync(SEA_NODE, file);
    injectBlob(NODE, file, `${file}.blob`, postject);
    return file;
  };
  const script = make('empty-script', '', { useCodeCache: true });
  const snapshot = make('empty-snapshot', "process.getBuiltinModule('node:v8').startupSnapshot.setDeserializeMainFunction(() => {});\n", {
    useSnapshot: true,
  });
  const probe = make(
    'cpu-probe',
    "const u = process.cpuUsage(); process.getBuiltinModule('node:fs').writeSync(1, String((u.user + u.system) / 1000));\n",
    { useCodeCache: true },
  );
  // A floor that printed anything (a rejected code cache warns on stderr) is not the floor.
  for (const f of [script, snapshot]) {
    const r = await mustRun([f], { env: FLOOR_ENV });
    if (r.stdout || r.stderr) throw new Error(`${f} printed ${JSON.stringify(r.stdout + r.stderr)}`);
  }
  return {
    cases: (env, input) => [
      { name: FLOOR, run: async () => sampleOf(await mustRun([script], { env, input })) },
      { name: FLOOR_SNAPSHOT, run: async () => sampleOf(await mustRun([snapshot], { env, input })) },
    ],
    bootstrapCpu: async (runs) => {
      const out: number[] = [];
      for (let i = 0; i < runs; i++) out.push(Number((await mustRun([probe], { env: FLOOR_ENV })).stdout));
      return out;
    },
  };
}

/** One row of a per-verb CPU split: where a call's CPU goes, from the `cpu` of its log lines and the runner's. */
export interface CpuSplit {
  bootstrap: number[];
  snapshot: number[];
  init: number[];
  verb: number[];
  /** The runner's CPU (the process and the programs it ran) minus the line's `cpu.total`: exit, children. */
  rest: number[];
  whole: number[];
}

/**
 * The split of one case: Node's bootstrap (the probe's CPU at its first line), the snapshot's deserialisation
 * (the line's `cpu.boot` minus that), our init (modules, config, logger), the verb, and the rest (exit and the
 * programs the call ran) from the runner's figure. `lines`: the case's last log lines, `whole`: its runner CPU.
 */
export function cpuSplit(lines: Json[], whole: Samples, bootstrap: number[]): CpuSplit {
  const boot = stats(bootstrap).median;
  const of = (k: string) => lines.map((l) => l.cpu?.[k]).filter((x): x is number => typeof x === 'number');
  const totals = of('total');
  const wholeMed = stats(whole.cpu).median;
  return {
    bootstrap,
    snapshot: of('boot').map((b) => b - boot),
    init: of('init'),
    verb: of('verb'),
    rest: totals.map((t) => wholeMed - t),
    whole: whole.cpu,
  };
}

export const CPU_SPLIT_HEAD = [
  'CPU split, medians (min–max) ms',
  "Node's bootstrap",
  'snapshot deserialisation (code cache: its load + the bundle)',
  'our init',
  'the verb',
  'exit + programs run',
  'whole call',
];
export const cpuSplitRow = (name: string, s: CpuSplit): string[] => [
  name,
  cell(s.bootstrap),
  cell(s.snapshot),
  cell(s.init),
  cell(s.verb),
  cell(s.rest),
  cell(s.whole),
];

/** "a / b" of two medians as a ratio with two decimals. */
export const times = (a: readonly number[], b: readonly number[]): string => {
  const r = stats(a).median / stats(b).median;
  return Number.isFinite(r) ? `${r.toFixed(2)}×` : '–';
};

// 3. Where an ADD's and a DEL's time goes, from the shim's own `timings` on its "CNI call done" log lines.
import { existsSync, readFileSync } from 'node:fs';
import { heading, type Sample, type Samples, stats, table } from '../bench-lib.js';
import { type Json, RUNS, VARIANTS, cell, cniEnv, results, shimArgv, slotConf } from './context.js';
import { CPU_SPLIT_HEAD, FLOOR, cpuSplit, cpuSplitRow, seaFloors, times } from './floor.js';
import { type Pair, alternatePairs, slotPair } from './pairs.js';

/** The ADD's phases in the order they happen; any other key the log carries is shown after them. */
const ADD_PHASES: Array<[string, string]> = [
  ['boot', 'process start → main (node bootstrap + bundle compile)'],
  ['modules', 'loading the plugin modules (pino, zod, …)'],
  ['config', 'stdin + env + config parse (zod)'],
  ['logger', 'logger creation'],
  ['residue.backends', 'which ebtables backends to read (file probes, no process)'],
  ['residue.prefetch', 'residue listing, started early (ebtables + ip neigh)'],
  ['delegate.version', 'delegate VERSION (cached probe)'],
  ['ledger.intent', 'ledger: open + intent record'],
  ['ledger.lock', 'of which: ledger open + attachment lock'],
  ['delegate.add', 'delegate ADD (host-local exec)'],
  ['address', 'address steps (reserved, residue, IPv6 probe)'],
  ['residue.list', 'residue listing as address steps wait for it'],
  ['probe6', 'IPv6 probe rewrite check (ip route, nft list)'],
  ['ledger.write', 'ledger: attached record'],
  ['verb', 'the whole verb'],
  ['total', "process start → log line (the line's `ms`)"],
];

/** The DEL's phases (IPAM slot): the lock, then the delegate's release, then the record goes. */
const DEL_PHASES: Array<[string, string]> = [
  ...ADD_PHASES.slice(0, 4),
  ['ledger.lock', 'ledger open + attachment lock'],
  ['delegate.version', 'delegate VERSION (cached probe)'],
  ['delegate.del', 'delegate DEL (host-local exec)'],
  ['ledger.remove', 'ledger: record and IP index removed'],
  ...ADD_PHASES.slice(-2),
];

export async function sectionSplit(): Promise<void> {
  heading(`ADD and DEL cost split, IPAM slot dual-stack, from the shim's timing log lines (${RUNS} runs)`);
  const pairs: Pair[] = VARIANTS.map((v) => slotPair(`${v.name} SEA`, shimArgv(v), slotConf(v, 'split', 'dual'), `split-${v.name}`));
  const floors = await seaFloors();
  // The packaging floor in the same rounds (it takes an ADD's environment and config, and ignores them).
  if (floors) {
    const [floor] = floors.cases(cniEnv('ADD'), JSON.stringify(slotConf(VARIANTS[0]!, 'split', 'dual')));
    pairs.push({ name: FLOOR, add: async (i) => ({ s: (await floor!.run(i)) as Sample }) });
  }
  const walls = await alternatePairs(pairs, RUNS);
  const lines = new Map(
    VARIANTS.map((v) => [
      v.name,
      existsSync(v.logFile)
        ? readFileSync(v.logFile, 'utf8')
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l) as Json)
        : [],
    ]),
  );
  const add = splitTable('ADD', ADD_PHASES, lines, walls.add);
  console.log('\nSpans overlap where the shim runs things concurrently (residue.prefetch runs alongside delegate.version … delegate.add).\n');
  const del = splitTable('DEL', DEL_PHASES, lines, walls.del);
  // Where each call's CPU goes, against the floor measured in the same rounds.
  const bootstrap = floors ? await floors.bootstrapCpu(RUNS) : [];
  const floorCpu = walls.add.get(FLOOR)?.cpu ?? [];
  const rows: string[][] = [[...CPU_SPLIT_HEAD, 'whole × floor']];
  for (const [command, samples] of [
    ['ADD', walls.add],
    ['DEL', walls.del],
  ] as const)
    for (const v of VARIANTS) {
      const done = lines
        .get(v.name)!
        .filter((l) => l.command === command && l.network === 'split' && l.msg === 'CNI call done')
        .slice(-RUNS);
      const w = samples.get(`${v.name} SEA`)!;
      rows.push([...cpuSplitRow(`${v.name} ${command}`, cpuSplit(done, w, bootstrap)), floorCpu.length ? times(w.cpu, floorCpu) : '–']);
    }
  if (floorCpu.length) rows.push([FLOOR, '', '', '', '', '', cell(floorCpu), '1.00×']);
  console.log(`\n${table(rows)}\n(exit + programs run: the runner's CPU minus the line's: host-local, ebtables, ip, nft, and the exit)`);
  results.split = add;
  results.splitDel = del;
}

/** Prints one verb's split (its last RUNS "CNI call done" lines per variant, beside the wall and CPU measured). */
function splitTable(command: 'ADD' | 'DEL', phases: Array<[string, string]>, lines: Map<string, Json[]>, walls: Map<string, Samples>) {
  const rows: string[][] = [[`${command} phase`, ...VARIANTS.map((v) => `${v.name} median (min–max) ms`), 'what']];
  const perVariant = new Map<string, Map<string, number[]>>();
  for (const v of VARIANTS) {
    const m = new Map<string, number[]>();
    const done = lines
      .get(v.name)!
      .filter((l) => l.command === command && l.network === 'split' && l.msg === 'CNI call done')
      .slice(-RUNS);
    for (const l of done)
      for (const [k, val] of Object.entries((l.timings ?? {}) as Record<string, number>)) (m.get(k) ?? m.set(k, []).get(k)!).push(val);
    const w = walls.get(`${v.name} SEA`)!;
    m.set('wall', w.ms);
    m.set('cpu', w.cpu);
    if (m.get('total'))
      m.set(
        'exit',
        w.ms.map((x, i) => x - (m.get('total')![i] ?? NaN)).filter((x) => !Number.isNaN(x)),
      );
    perVariant.set(v.name, m);
  }
  const keys = [...phases.map(([k]) => k)];
  for (const m of perVariant.values()) for (const k of m.keys()) if (!keys.includes(k) && !['wall', 'exit', 'cpu'].includes(k)) keys.push(k);
  keys.push('exit', 'wall', 'cpu');
  const what = new Map([
    ...phases,
    ['exit', "outside the line: start-up before Node's time origin, stdout, exit, reaping (wall − total)"],
    ['wall', `the ${command} process as the caller sees it`],
    ['cpu', `CPU of the ${command} process and all it ran (${command === 'ADD' ? 'host-local, ebtables, ip, nft' : 'host-local'})`],
  ]);
  for (const k of keys) {
    const cells = VARIANTS.map((v) => cell(perVariant.get(v.name)!.get(k) ?? []));
    if (cells.every((c) => c === '–')) continue;
    rows.push([k, ...cells, what.get(k) ?? '']);
  }
  console.log(table(rows));
  return Object.fromEntries([...perVariant].map(([n, m]) => [n, Object.fromEntries([...m].map(([k, xs]) => [k, stats(xs)]))]));
}

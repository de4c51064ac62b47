// 3. Where an ADD's time goes, from the shim's own `timings` on its "CNI call done" log line.
import { existsSync, readFileSync } from 'node:fs';
import { heading, stats, table } from '../bench-lib.js';
import { type Json, RUNS, VARIANTS, cell, results, shimArgv, slotConf } from './context.js';
import { alternatePairs, slotPair } from './pairs.js';

/** Phases in the order they happen; any other key the log carries is shown after them. */
const PHASES: Array<[string, string]> = [
  ['boot', 'process start → main (node bootstrap + bundle compile)'],
  ['modules', 'loading the plugin modules (pino, zod, …)'],
  ['config', 'stdin + env + config parse (zod)'],
  ['logger', 'logger creation'],
  ['residue.prefetch', 'residue listing, started early (ebtables + ip neigh)'],
  ['delegate.version', 'delegate VERSION (cached probe)'],
  ['ledger.intent', 'ledger: open + intent record'],
  ['delegate.add', 'delegate ADD (host-local exec)'],
  ['address', 'address steps (reserved, residue, IPv6 probe)'],
  ['residue.list', 'residue listing as address steps wait for it'],
  ['probe6', 'IPv6 probe rewrite check (ip route, nft list)'],
  ['ledger.write', 'ledger: attached record'],
  ['verb', 'the whole verb'],
  ['total', 'process start → log line'],
];

export async function sectionSplit(): Promise<void> {
  heading(`ADD cost split, IPAM slot dual-stack, from the shim's timing log line (${RUNS} runs)`);
  const pairs = VARIANTS.map((v) => slotPair(`${v.name} SEA`, shimArgv(v), slotConf(v, 'split', 'dual'), `split-${v.name}`));
  const walls = await alternatePairs(pairs, RUNS);
  const rows: string[][] = [['phase', ...VARIANTS.map((v) => `${v.name} median (min–max) ms`), 'what']];
  const perVariant = new Map<string, Map<string, number[]>>();
  for (const v of VARIANTS) {
    const m = new Map<string, number[]>();
    const lines = existsSync(v.logFile) ? readFileSync(v.logFile, 'utf8').trim().split('\n') : [];
    const adds = lines
      .map((l) => JSON.parse(l) as Json)
      .filter((l) => l.command === 'ADD' && l.network === 'split' && l.msg === 'CNI call done')
      .slice(-RUNS);
    for (const l of adds)
      for (const [k, val] of Object.entries((l.timings ?? {}) as Record<string, number>)) (m.get(k) ?? m.set(k, []).get(k)!).push(val);
    const w = walls.add.get(`${v.name} SEA`)!;
    m.set('wall', w.ms);
    m.set('cpu', w.cpu);
    if (m.get('total'))
      m.set(
        'exit',
        w.ms.map((x, i) => x - (m.get('total')![i] ?? NaN)).filter((x) => !Number.isNaN(x)),
      );
    perVariant.set(v.name, m);
  }
  const keys = [...PHASES.map(([k]) => k)];
  for (const m of perVariant.values()) for (const k of m.keys()) if (!keys.includes(k) && !['wall', 'exit', 'cpu'].includes(k)) keys.push(k);
  keys.push('exit', 'wall', 'cpu');
  const what = new Map([
    ...PHASES,
    ['exit', 'after the log line: stdout, exit, reaping (wall − total)'],
    ['wall', 'the ADD process as the caller sees it'],
    ['cpu', 'CPU of the ADD process and all it ran (host-local, ebtables, ip, nft)'],
  ]);
  for (const k of keys) {
    const cells = VARIANTS.map((v) => cell(perVariant.get(v.name)!.get(k) ?? []));
    if (cells.every((c) => c === '–')) continue;
    rows.push([k, ...cells, what.get(k) ?? '']);
  }
  console.log(table(rows));
  console.log('\nSpans overlap where the shim runs things concurrently (residue.prefetch runs alongside delegate.version … delegate.add).');
  results.split = Object.fromEntries([...perVariant].map(([n, m]) => [n, Object.fromEntries([...m].map(([k, xs]) => [k, stats(xs)]))]));
}

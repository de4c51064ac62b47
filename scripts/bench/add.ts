// 2. ADD/DEL: IPAM slot (shim → host-local vs host-local) and chained (ptp → shim vs ptp alone).
import { join } from 'node:path';
import { type Sample, type Samples, emptySamples, fmtMs, heading, mustRun, pushSample, stats, table, timeRun } from '../bench-lib.js';
import {
  HOST_LOCAL,
  type Json,
  NS,
  PTP,
  RUNS,
  VARIANTS,
  WORK,
  cell,
  cni,
  cniEnv,
  hlConf,
  med,
  nextCid,
  ratio,
  results,
  seaNodeFloor,
  shimArgv,
  slotConf,
  statsOf,
} from './context.js';
import { type Pair, alternatePairs, slotPair, nodeFloorPair } from './pairs.js';

export async function sectionAdd(): Promise<void> {
  heading(`ADD/DEL in the IPAM slot: shim → host-local vs host-local alone (${RUNS} runs, alternating)`);
  const pairs: Pair[] = [nodeFloorPair, ...(await seaNodeFloor()).map((f) => ({ name: f.name, add: async () => ({ s: await f.run() }) }))];
  for (const family of ['v4', 'dual'] as const) {
    const net = `slot-${family}`;
    pairs.push(slotPair(`host-local ${family}`, HOST_LOCAL(), hlConf(net, family), 'hl'));
    for (const v of VARIANTS) pairs.push(slotPair(`${v.name} SEA→host-local ${family}`, shimArgv(v), slotConf(v, net, family), v.name));
  }
  const slot = await alternatePairs(pairs, RUNS);
  const floor = slot.add.get('node -e 0')!;
  const rows: string[][] = [
    [
      'case',
      'ADD wall median (min–max) ms',
      'shim-only',
      '÷ node -e 0',
      'ADD CPU median',
      'shim-only',
      '÷ node -e 0',
      'DEL wall median (min–max)',
      'DEL CPU',
      'ADD+DEL shim-only',
      '÷ 2× node -e 0',
    ],
  ];
  rows.push(['node -e 0', cell(floor.ms), '', '', fmtMs(med(floor.cpu)), '', '', '', '', '', '']);
  for (const p of pairs.slice(1)) {
    const a = slot.add.get(p.name)!;
    const d = slot.del.get(p.name) ?? emptySamples(); // the floors have no DEL
    const family = p.name.endsWith(' dual') ? 'dual' : 'v4';
    const isShim = p.name.includes('SEA→');
    const hl = slot.add.get(`host-local ${family}`)!;
    const hlDel = slot.del.get(`host-local ${family}`)!;
    const ow = med(a.ms) - med(hl.ms);
    const oc = med(a.cpu) - med(hl.cpu);
    // The shim's share of a pod's whole life in the slot: its ADD and DEL over host-local's, per node start-up.
    const both = med(a.ms) + med(d.ms) - med(hl.ms) - med(hlDel.ms);
    rows.push([
      p.name,
      cell(a.ms),
      isShim ? fmtMs(ow) : '',
      isShim ? ratio(ow, med(floor.ms)) : '',
      fmtMs(med(a.cpu)),
      isShim ? fmtMs(oc) : '',
      isShim ? ratio(oc, med(floor.cpu)) : '',
      cell(d.ms),
      fmtMs(med(d.cpu)),
      isShim ? fmtMs(both) : '',
      isShim ? ratio(both, 2 * med(floor.ms)) : '',
    ]);
  }
  console.log(table(rows));
  console.log('\nshim-only = shim ADD median − host-local ADD median (same family, same rounds); target ≤ 1.30× node -e 0.');
  console.log('ADD+DEL shim-only = (shim ADD + DEL) − (host-local ADD + DEL), medians; ÷ twice node -e 0 (issue 18: ≤ 1.5×).');
  console.log('CPU = user+system of the process and everything it ran and reaped (the delegate, ebtables, ip, nft).');
  results.addSlot = { add: statsOf(slot.add), del: statsOf(slot.del) };

  heading(`Chained: ptp → shim vs ptp alone, IPv4, real container netnses (${RUNS} runs, alternating)`);
  const chainPairs: Pair[] = [];
  const netnses: string[] = [];
  const mkNs = async () => {
    const name = `${NS}-c${netnses.length}`;
    await mustRun(['ip', 'netns', 'add', name]);
    netnses.push(name);
    return `/run/netns/${name}`;
  };
  const ptpConf = (k: number, dataDir: string): Json => ({
    cniVersion: '1.0.0',
    name: 'chain',
    type: 'ptp',
    ipMasq: false,
    ipam: { type: 'host-local', dataDir, ranges: [[{ subnet: `10.98.${k}.0/24` }]] },
  });
  const add2 = (a: Sample, b: Sample): Sample => ({
    ms: a.ms + b.ms,
    cpuMs: a.cpuMs !== undefined && b.cpuMs !== undefined ? a.cpuMs + b.cpuMs : undefined,
  });
  {
    const netns = await mkNs();
    const conf = ptpConf(0, join(WORK, 'chain-0'));
    chainPairs.push({
      name: 'ptp alone',
      add: async () => {
        const e = { containerID: nextCid('ptp'), netns, ifname: 'eth0' };
        const r = await cni(PTP(), conf, cniEnv('ADD', e));
        return { s: r, state: { e, result: r.json } };
      },
      del: async (_i, st) => {
        const { e, result } = st as { e: Json; result: Json };
        return cni(PTP(), { ...conf, prevResult: result }, cniEnv('DEL', e));
      },
    });
  }
  const shimPart = new Map<string, { add: Samples; del: Samples; round: number }>();
  let k = 1;
  for (const v of VARIANTS) {
    const netns = await mkNs();
    const pconf = ptpConf(k, join(WORK, `chain-${k}`));
    k++;
    const sconf: Json = { cniVersion: '1.0.0', name: 'chain', type: 'ipam-shim', stateDir: v.stateDir, logFile: v.logFile };
    const name = `ptp → ${v.name} SEA`;
    const own = { add: emptySamples(), del: emptySamples(), round: 0 };
    shimPart.set(name, own);
    chainPairs.push({
      name,
      add: async (i) => {
        const e = { containerID: nextCid(`chain-${v.name}`), netns, ifname: 'eth0' };
        const p = await cni(PTP(), pconf, cniEnv('ADD', e));
        const s = await cni(shimArgv(v), { ...sconf, prevResult: p.json }, cniEnv('ADD', e));
        if (i >= 2) pushSample(own.add, s);
        return { s: add2(p, s), state: { e, result: s.json } };
      },
      del: async (i, st) => {
        const { e, result } = st as { e: Json; result: Json };
        // libcni: DEL in reverse order, every plugin getting the cached (final) result.
        const s = await cni(shimArgv(v), { ...sconf, prevResult: result }, cniEnv('DEL', e));
        const p = await cni(PTP(), { ...pconf, prevResult: result }, cniEnv('DEL', e));
        if (i >= 2) pushSample(own.del, s);
        return add2(s, p);
      },
    });
  }
  try {
    const chain = await alternatePairs([nodeFloorPair, ...chainPairs], RUNS);
    const floor2 = chain.add.get('node -e 0')!;
    const rows2: string[][] = [
      [
        'chain',
        'ADD wall median (min–max) ms',
        'CPU',
        'shim part wall',
        '÷ node -e 0',
        'shim part CPU',
        '÷ node -e 0',
        'DEL wall median (min–max)',
        'shim part',
      ],
    ];
    rows2.push(['node -e 0', cell(floor2.ms), fmtMs(med(floor2.cpu)), '', '', '', '', '', '']);
    for (const p of chainPairs) {
      const a = chain.add.get(p.name)!;
      const d = chain.del.get(p.name)!;
      const own = shimPart.get(p.name);
      rows2.push([
        p.name,
        cell(a.ms),
        fmtMs(med(a.cpu)),
        own ? fmtMs(med(own.add.ms)) : '',
        own ? ratio(med(own.add.ms), med(floor2.ms)) : '',
        own ? fmtMs(med(own.add.cpu)) : '',
        own ? ratio(med(own.add.cpu), med(floor2.cpu)) : '',
        cell(d.ms),
        own ? fmtMs(med(own.del.ms)) : '',
      ]);
    }
    console.log(table(rows2));
    console.log("\nshim part = the shim process alone in the chain; the chain's figures add it to ptp's.");
    results.chained = {
      add: statsOf(chain.add),
      del: statsOf(chain.del),
      shimPart: Object.fromEntries(
        [...shimPart].map(([kk, vv]) => [kk, { add: stats(vv.add.ms), addCpu: stats(vv.add.cpu), del: stats(vv.del.ms) }]),
      ),
    };
  } finally {
    for (const n of netnses) await timeRun(['ip', 'netns', 'del', n]);
  }
}

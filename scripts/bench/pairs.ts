// A/B pairs measured alternately, each ADD followed by its DEL (the add, split and gc sections).
import { type Sample, type Samples, emptySamples, pushSample } from '../bench-lib.js';
import { type Json, NS, cni, cniEnv, floorRun, nextCid, rotate } from './context.js';

export interface Pair {
  name: string;
  /** Runs ADD (timed) and returns the state DEL needs. */
  add: (i: number) => Promise<{ s: Sample; state?: unknown }>;
  /** Runs DEL (timed); absent for pure floors. */
  del?: (i: number, state: unknown) => Promise<Sample>;
}

/** Rounds of: every pair's ADD (rotating order), then every pair's DEL (rotating order). */
export async function alternatePairs(pairs: Pair[], runs: number, warmup = 2): Promise<{ add: Map<string, Samples>; del: Map<string, Samples> }> {
  const add = new Map(pairs.map((p) => [p.name, emptySamples()]));
  const del = new Map(pairs.filter((p) => p.del).map((p) => [p.name, emptySamples()]));
  for (let i = 0; i < warmup + runs; i++) {
    const states = new Map<string, unknown>();
    for (const p of rotate(pairs, i)) {
      const r = await p.add(i);
      states.set(p.name, r.state);
      if (i >= warmup) pushSample(add.get(p.name)!, r.s);
    }
    for (const p of rotate(pairs, i)) {
      if (!p.del) continue;
      const s = await p.del(i, states.get(p.name));
      if (i >= warmup) pushSample(del.get(p.name)!, s);
    }
  }
  return { add, del };
}

export function slotPair(name: string, argv: string[], conf: Json, tag: string): Pair {
  return {
    name,
    add: async () => {
      const e = { containerID: nextCid(tag), netns: `/run/netns/${NS}-none`, ifname: 'eth0' };
      const r = await cni(argv, conf, cniEnv('ADD', e));
      return { s: r, state: { e, result: r.json } };
    },
    del: async (_i, state) => {
      const { e, result } = state as { e: Json; result: Json };
      return cni(argv, { ...conf, prevResult: result }, cniEnv('DEL', e));
    },
  };
}

export const nodeFloorPair: Pair = { name: 'node -e 0', add: async () => ({ s: await floorRun() }) };

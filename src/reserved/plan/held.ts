// PURE: the node CIDRs nodes hold now (CiliumNodes), against a planned pool (pool.ts): which held
// blocks sit on a reserved subnet and who holds them, and the lowest-free-first order Cilium's cidrset takes after
// an operator restart.
import { type Cidr, parseCidr } from '../../net/cidr.js';

export interface CollisionPoint {
  index: bigint;
  nodeCidr: string;
  /** A reserved CIDR the block touches (first in list order). */
  reserved: string;
  /** For a held block: the nodes holding it (as the CiliumNodes name them). */
  nodes?: string[];
}

export interface TakenPlan {
  /** Distinct blocks held. */
  count: bigint;
  /** The highest block index held (null: none). */
  highest: bigint | null;
  /** Held blocks that touch a reserved CIDR: nodes that sit on a reserved subnet now (at most maxRanges listed). */
  colliding: CollisionPoint[];
  collidingCount: bigint;
  /** Lowest free block first: the first free colliding block and how many free blocks precede it. */
  lowestFree: { firstCollision: CollisionPoint | null; nodesBefore: bigint };
  /** Free blocks that touch no reserved CIDR. */
  safeFree: bigint;
  /** Given CIDRs that are no block of the pool (another pool, another mask, an old pool entry). */
  notInPool: string[];
}

export interface Held {
  /** Distinct held block indexes, ascending. */
  sorted: bigint[];
  notInPool: string[];
}

/** Canonical node CIDR text → the nodes holding it (unparseable entries are planPool's `taken` error). */
export function holderMap(holders: Array<{ cidr: string; node: string }>): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const h of holders) {
    let text: string;
    try {
      text = parseCidr(h.cidr).text;
    } catch {
      continue;
    }
    const names = out.get(text) ?? [];
    if (!names.includes(h.node)) names.push(h.node);
    out.set(text, names);
  }
  return out;
}

/** `t` is exactly one node CIDR of an entry. */
export const isBlock = (t: Cidr, pools: Cidr[], mask: number) => t.prefix === mask && pools.some((p) => t.first >= p.first && t.last <= p.last);

/** The global block index of each held CIDR (one that is exactly a block of an entry), deduplicated. */
export function heldBlocks(taken: Cidr[], pools: Cidr[], entries: Array<{ offset: bigint }>, mask: number, shift: bigint): Held {
  const set = new Set<bigint>();
  const notInPool: string[] = [];
  for (const t of taken) {
    const pi = pools.findIndex((p) => t.first >= p.first && t.last <= p.last);
    if (pi < 0 || t.prefix !== mask) {
      notInPool.push(t.text);
      continue;
    }
    set.add(entries[pi]!.offset + ((t.first - pools[pi]!.first) >> shift));
  }
  return { sorted: [...set].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0)), notInPool };
}

/** How many of the ascending `sorted` are below `index` (binary search). */
function countBelow(sorted: bigint[], index: bigint): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (sorted[mid]! < index) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export type Merged = { from: bigint; to: bigint; reserved: number[] };

export function planTaken(
  held: Held,
  merged: Merged[],
  total: bigint,
  colliding: bigint,
  point: (i: bigint, m: Merged) => CollisionPoint,
  maxRanges: number,
): TakenPlan {
  const isHeld = (i: bigint) => {
    const k = countBelow(held.sorted, i);
    return k < held.sorted.length && held.sorted[k] === i;
  };
  const collidingHeld: CollisionPoint[] = [];
  let collidingHeldCount = 0n;
  let firstFree: CollisionPoint | null = null;
  for (const m of merged) {
    // Held blocks inside this range: they are contiguous in `sorted`.
    const lo = countBelow(held.sorted, m.from);
    const hi = countBelow(held.sorted, m.to + 1n);
    collidingHeldCount += BigInt(hi - lo);
    for (let k = lo; k < hi && collidingHeld.length < maxRanges; k++) collidingHeld.push(point(held.sorted[k]!, m));
    if (!firstFree && BigInt(hi - lo) < m.to - m.from + 1n) {
      // The first index of the range that no node holds: walk the held run from its start.
      let i = m.from;
      while (isHeld(i)) i++;
      firstFree = point(i, m);
    }
  }
  const count = BigInt(held.sorted.length);
  return {
    count,
    highest: held.sorted.length ? held.sorted[held.sorted.length - 1]! : null,
    colliding: collidingHeld,
    collidingCount: collidingHeldCount,
    lowestFree: {
      firstCollision: firstFree,
      // Free blocks below the first free colliding one: its index less the held blocks below it.
      nodesBefore: firstFree ? firstFree.index - BigInt(countBelow(held.sorted, firstFree.index)) : total - count - (colliding - collidingHeldCount),
    },
    safeFree: total - count - (colliding - collidingHeldCount),
    notInPool: held.notInPool,
  };
}

// PURE: a pool as global block indexes, the model of pool.ts: entry i's node CIDRs follow entry i-1's, and a
// reserved CIDR touches one interval of indexes per entry it meets (two shifts); intervals that overlap or abut merge.
import type { Cidr } from '../../net/cidr.js';

export interface PoolEntryPlan {
  cidr: string;
  /** Global index of this entry's first block. */
  offset: bigint;
  blocks: bigint;
}

/** Each entry's first global block index and block count, and the pool's total. */
export function poolEntries(pools: Cidr[], mask: number): { entries: PoolEntryPlan[]; total: bigint } {
  const entries: PoolEntryPlan[] = [];
  let total = 0n;
  for (const p of pools) {
    const blocks = 1n << BigInt(mask - p.prefix);
    entries.push({ cidr: p.text, offset: total, blocks });
    total += blocks;
  }
  return { entries, total };
}

interface Interval {
  from: bigint;
  to: bigint;
  reserved: number; // index into the family's reserved list
}

/** A run of colliding block indexes (inclusive) and the reserved CIDRs (indexes into the family's list) feeding it. */
export interface MergedRange {
  from: bigint;
  to: bigint;
  reserved: number[];
}

/** The colliding index ranges, ascending and merged, and how many reserved CIDRs touch no pool entry. */
export function collidingRanges(
  pools: Cidr[],
  entries: PoolEntryPlan[],
  reserved: Cidr[],
  shift: bigint,
): { merged: MergedRange[]; outside: number } {
  // One interval per (reserved, pool entry) pair that intersect.
  const intervals: Interval[] = [];
  let outside = 0;
  reserved.forEach((r, ri) => {
    let touched = false;
    pools.forEach((p, pi) => {
      const first = r.first > p.first ? r.first : p.first;
      const last = r.last < p.last ? r.last : p.last;
      if (first > last) return;
      touched = true;
      const off = entries[pi]!.offset;
      intervals.push({ from: off + ((first - p.first) >> shift), to: off + ((last - p.first) >> shift), reserved: ri });
    });
    if (!touched) outside++;
  });
  intervals.sort((a, b) => (a.from < b.from ? -1 : a.from > b.from ? 1 : a.reserved - b.reserved));

  // Merge overlapping or adjacent intervals, remembering which reserved CIDRs fed each.
  const merged: MergedRange[] = [];
  for (const iv of intervals) {
    const top = merged[merged.length - 1];
    if (top && iv.from <= top.to + 1n) {
      if (iv.to > top.to) top.to = iv.to;
      top.reserved.push(iv.reserved);
    } else {
      merged.push({ from: iv.from, to: iv.to, reserved: [iv.reserved] });
    }
  }
  return { merged, outside };
}

/** The entry holding global block `index`. */
export function locate(entries: PoolEntryPlan[], index: bigint): PoolEntryPlan {
  for (const e of entries) if (index >= e.offset && index < e.offset + e.blocks) return e;
  throw new Error(`block index ${index} outside the pool`);
}

/** The addresses of global block `index`. */
export function blockRange(entries: PoolEntryPlan[], pools: Cidr[], index: bigint, shift: bigint): { first: bigint; last: bigint } {
  const e = locate(entries, index);
  const p = pools[entries.indexOf(e)]!;
  const first = p.first + ((index - e.offset) << shift);
  return { first, last: first + (1n << shift) - 1n };
}

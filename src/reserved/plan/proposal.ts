// PURE: the smallest change to a pool list (cluster-pool's clusterPoolIPv4PodCIDRList, a CiliumPodIPPool's cidrs)
// that leaves no node CIDR on a reserved subnet and holds the requested node count. "Smallest" (docs/reserved.md):
// 1. an entry that touches no reserved subnet stays as it is, where it is;
// 2. an entry that does is replaced, in its place, by the fewest CIDRs covering exactly its node CIDRs that touch
//    none (the largest aligned sub-CIDRs around the reserved blocks): every node CIDR a node holds outside the
//    reserved subnets stays in the list at its address, so no live node is renumbered; the nodes holding a
//    removed block are named, they are the ones to move;
// 3. only when that leaves fewer node CIDRs than nodes: one CIDR appended, the smallest aligned one with room for
//    the rest, the first free one after the last entry (else from the start) inside the private range the pool lies
//    in, touching no entry, no reserved subnet and no node CIDR held elsewhere; when none exists, how many are missing.
// Cost: O((R + P + H) log) bigint operations: the removed blocks are ranges, never enumerated.
import { BITS, type Family } from '../../net/ip.js';
import { type Cidr, type IpRange, makeCidr, parseCidr } from '../../net/cidr.js';

export interface ProposalInput {
  family: Family;
  mask: number;
  pools: Cidr[];
  /** This family's reserved CIDRs. */
  reserved: Cidr[];
  /** Node CIDRs held that are blocks of the pool, with the nodes holding each (may be unnamed: []). */
  held: Array<{ cidr: Cidr; nodes: string[] }>;
  /** Node CIDRs held that are no block of the pool (another mask, a former entry): an appended CIDR avoids them. */
  heldElsewhere: Cidr[];
  /** How many nodes the list must hold (0: only take the reserved blocks out). */
  nodes: bigint;
}

interface EntryChange {
  entry: string;
  /** keep: touches no reserved subnet; split: replaced by `into`; drop: every block of it touches one. */
  action: 'keep' | 'split' | 'drop';
  into: string[];
  /** The node CIDRs taken out, as CIDRs (each reserved subnet rounded out to node-CIDR boundaries). */
  removed: string[];
  /** The reserved CIDRs that made them. */
  reserved: string[];
}

interface Move {
  nodeCidr: string;
  nodes: string[];
  /** The first reserved CIDR (list order) the node CIDR touches. */
  reserved: string;
}

export interface Proposal {
  nodes: bigint;
  /** Any entry changed or appended. */
  changed: boolean;
  /** No existing entry changes: the proposal only appends (what Cilium supports in place). */
  appendOnly: boolean;
  /** The proposed list, in order (empty when `tooLong`). */
  list: string[];
  /** How many entries the proposed list has (null: more than 1,000, see `tooLong`). */
  entryCount: number | null;
  /** More than 1,000 entries: not written out (nor counted); the reserved subnets are too scattered to cut around. */
  tooLong: boolean;
  entries: EntryChange[];
  append: string[];
  /** Node CIDRs in `list`, none touching a reserved subnet. */
  capacity: bigint;
  /** Held node CIDRs that stay (they lie in `list`). */
  heldKept: bigint;
  /** capacity − heldKept. */
  free: bigint;
  /** capacity ≥ nodes. */
  fits: boolean;
  /** nodes − capacity when it does not fit, else 0. */
  missing: bigint;
  /** The private range an appended CIDR is taken from (null: the pool lies in none, nothing is appended). */
  space: string | null;
  /** The prefix an appended CIDR needs (null: nothing to append). */
  appendPrefix: number | null;
  /** Held node CIDRs on a reserved subnet: their nodes must move. */
  move: Move[];
}

/** The most entries a proposed list (and each entry's removed or reserved list) is written out with. */
const MAX_LIST_ENTRIES = 1000;

// Where an appended entry may come from: the private ranges (RFC 1918, RFC 6598 shared, RFC 4193 ULA).
const SPACES: Record<Family, string[]> = { 4: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '100.64.0.0/10'], 6: ['fc00::/7'] };

export function proposePool(input: ProposalInput): Proposal {
  const { family, mask, pools, reserved } = input;
  const shift = BigInt(BITS[family] - mask);
  const cuts: IpRange[][] = [];
  const removedAll: IpRange[] = [];
  let capacity = 0n;
  let pieces = 0;
  for (const p of pools) {
    // Reserved CIDRs over this entry, rounded out to whole node CIDRs, merged.
    const cut = merge(
      reserved
        .filter((r) => r.first <= p.last && p.first <= r.last)
        .map((r) => ({
          family,
          first: blockStart(r.first > p.first ? r.first : p.first, p.first, shift),
          last: blockStart(r.last < p.last ? r.last : p.last, p.first, shift) + (1n << shift) - 1n,
        })),
    );
    cuts.push(cut);
    removedAll.push(...cut);
    for (const g of cut) capacity -= (g.last - g.first + 1n) >> shift;
    capacity += (p.last - p.first + 1n) >> shift;
    if (!cut.length) pieces++;
    // Counted only up to the bound: past it the list is not written out, and counting 20k gaps costs seconds.
    else for (const g of complement(p, cut)) if (pieces <= MAX_LIST_ENTRIES) pieces += rangeToBlocks(family, g.first, g.last).length;
  }
  // Past the bound the pieces are counted, not written out: no operator applies such a list (move the pool instead).
  const tooLong = pieces > MAX_LIST_ENTRIES;
  const cidrsOf = (g: IpRange) => rangeToBlocks(family, g.first, g.last).map(([at, bits]) => makeCidr(family, at, BITS[family] - bits).text);
  const entries: EntryChange[] = pools.map((p, i) => {
    const cut = cuts[i]!;
    const into = !cut.length ? [p.text] : tooLong ? [] : complement(p, cut).flatMap(cidrsOf);
    return {
      entry: p.text,
      action: !cut.length ? 'keep' : into.length || tooLong ? 'split' : 'drop',
      into,
      removed: cut.slice(0, MAX_LIST_ENTRIES).flatMap(cidrsOf).slice(0, MAX_LIST_ENTRIES),
      reserved: reserved
        .filter((r) => r.first <= p.last && p.first <= r.last)
        .slice(0, MAX_LIST_ENTRIES)
        .map((r) => r.text),
    };
  });
  const list = entries.flatMap((e) => e.into);
  const removed = merge(removedAll);

  const move: Move[] = [];
  let heldKept = 0n;
  const seen = new Set<string>();
  for (const h of input.held) {
    if (seen.has(h.cidr.text)) continue;
    seen.add(h.cidr.text);
    if (!inAny(removed, h.cidr.first)) {
      heldKept++;
      continue;
    }
    const r = reserved.find((x) => x.first <= h.cidr.last && h.cidr.first <= x.last);
    move.push({ nodeCidr: h.cidr.text, nodes: h.nodes, reserved: r?.text ?? '' });
  }

  const append: string[] = [];
  let space: Cidr | undefined;
  let appendPrefix: number | null = null;
  let missing = input.nodes > capacity ? input.nodes - capacity : 0n;
  if (missing > 0n) {
    const last = pools[pools.length - 1]!;
    space = SPACES[family].map((s) => parseCidr(s)).find((s) => s.first <= last.first && last.last <= s.last);
    const bits = ceilLog2(missing);
    const prefix = mask - bits;
    appendPrefix = prefix;
    if (space && prefix >= space.prefix) {
      const obstacles = merge([...pools, ...reserved, ...input.heldElsewhere].map((c) => ({ family, first: c.first, last: c.last })));
      const size = 1n << BigInt(BITS[family] - prefix);
      const at = firstFree(obstacles, alignUp(last.last + 1n, size), space.last, size) ?? firstFree(obstacles, space.first, space.last, size);
      if (at !== undefined) {
        const c = makeCidr(family, at, prefix).text;
        append.push(c);
        if (!tooLong) list.push(c);
        capacity += 1n << BigInt(bits);
        missing = 0n;
      }
    }
  }
  const appendOnly = entries.every((e) => e.action === 'keep');
  return {
    nodes: input.nodes,
    changed: !appendOnly || append.length > 0,
    appendOnly,
    list,
    entryCount: tooLong ? null : pieces + append.length,
    tooLong,
    entries,
    append,
    capacity,
    heldKept,
    free: capacity - heldKept,
    fits: missing === 0n,
    missing,
    space: space?.text ?? null,
    appendPrefix,
    move,
  };
}

/** The first address of the node CIDR (of entry starting at `base`) holding `addr`. */
const blockStart = (addr: bigint, base: bigint, shift: bigint) => base + (((addr - base) >> shift) << shift);

const alignUp = (v: bigint, size: bigint) => ((v + size - 1n) / size) * size;

function ceilLog2(n: bigint): number {
  let bits = 0;
  while (1n << BigInt(bits) < n) bits++;
  return bits;
}

/** Sorted, with overlapping and adjacent ranges joined. */
function merge(ranges: IpRange[]): IpRange[] {
  const sorted = [...ranges].sort((a, b) => (a.first < b.first ? -1 : a.first > b.first ? 1 : 0));
  const out: IpRange[] = [];
  for (const r of sorted) {
    const top = out[out.length - 1];
    if (top && r.first <= top.last + 1n) {
      if (r.last > top.last) top.last = r.last;
    } else out.push({ ...r });
  }
  return out;
}

/** Is `v` in one of the merged, sorted `ranges` (binary search). */
function inAny(ranges: IpRange[], v: bigint): boolean {
  let lo = 0;
  let hi = ranges.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ranges[mid]!.last < v) lo = mid + 1;
    else hi = mid;
  }
  return lo < ranges.length && ranges[lo]!.first <= v;
}

/** The parts of `outer` outside the merged, sorted `cut` (all inside `outer`). */
function complement(outer: IpRange, cut: IpRange[]): IpRange[] {
  const out: IpRange[] = [];
  let next = outer.first;
  for (const c of cut) {
    if (c.first > next) out.push({ family: outer.family, first: next, last: c.first - 1n });
    next = c.last + 1n;
  }
  if (next <= outer.last) out.push({ family: outer.family, first: next, last: outer.last });
  return out;
}

/**
 * The fewest CIDRs covering exactly first..last, as [start, host bits]: blocks grow while `start` is aligned to the
 * next size and the block still fits (each set low bit of `start` is one block), then shrink to fill the rest. O(bits)
 * bigint operations per range, not per block.
 */
function rangeToBlocks(family: Family, first: bigint, last: bigint): Array<[bigint, number]> {
  const out: Array<[bigint, number]> = [];
  const max = BITS[family];
  let at = first;
  let i = 0;
  for (; i < max && at <= last; i++) {
    if (((at >> BigInt(i)) & 1n) === 0n) continue;
    const size = 1n << BigInt(i);
    if (at + size - 1n > last) break;
    out.push([at, i]);
    at += size;
  }
  // `at` is aligned to 2^i now and what is left is smaller than the block that did not fit.
  for (let j = i; j >= 0 && at <= last; j--) {
    const size = 1n << BigInt(j);
    if (at + size - 1n <= last) {
      out.push([at, j]);
      at += size;
    }
  }
  return out;
}

/** The first `size`-aligned start ≥ from whose block fits before `end` and meets none of the merged `obstacles`. */
function firstFree(obstacles: IpRange[], from: bigint, end: bigint, size: bigint): bigint | undefined {
  let at = alignUp(from, size);
  for (const o of obstacles) {
    if (at + size - 1n > end) return undefined;
    if (o.last < at) continue;
    if (o.first > at + size - 1n) return at;
    at = alignUp(o.last + 1n, size);
  }
  return at + size - 1n <= end ? at : undefined;
}

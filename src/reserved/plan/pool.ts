// PURE: plan a Cilium cluster-pool against reserved subnets.
//
// Model (docs/reserved.md): cluster-pool cuts each pool entry into node CIDRs of `nodeMask` bits and hands them
// out in order — entry 0's blocks first, then entry 1's — and does not reuse a block after its node is deleted.
// So allocation number k (0-based, counted over the cluster's life) gets global block index k, and "how many
// nodes can join before trouble" is the distance to the next block that touches a reserved subnet.
//
// With the blocks nodes hold now (`taken`, from CiliumNodes) the order is Cilium's cidrset: each entry hands out the
// first free block at or after the one after its last allocation, wrapping; the first entry that is not full is
// used. The operator does not persist where it stopped: after an operator restart (or while an earlier entry has a
// gap) the next block is the lowest free one. So two orders are planned: after the highest taken block (no restart
// since, the model above with `allocated` = highest + 1) and lowest free first; the nearer collision is the answer.
//
// Cost: for each (reserved CIDR, pool entry) pair the touched block indexes form one interval, computed with two
// shifts; intervals are sorted and merged. O(R·P·log(R·P)) bigint operations, independent of the pool's size —
// a /8 pool with /24 blocks and an fd00::/48 pool with /120 blocks cost the same.
import { BITS, type Family } from '../../net/ip.js';
import { type Cidr, makeCidr, parseCidrs } from '../../net/cidr.js';
import { type CollisionPoint, type TakenPlan, heldBlocks, holderMap, isBlock, planTaken } from './held.js';
import { type Proposal, proposePool } from './proposal.js';
import { blockRange, collidingRanges, locate, type PoolEntryPlan, poolEntries } from './blocks.js';

export interface PlanInput {
  /** Pool entries in Cilium's order (clusterPoolIPv4PodCIDRList / IPv6 list); IPv4 and IPv6 may be mixed. */
  pools: string[];
  /** Node CIDR prefix length (`--node-mask`). Applies to IPv4 pools; also to IPv6 pools when no IPv4 pool is given. */
  nodeMask?: number;
  /** Node CIDR prefix length for IPv6 pools (`--node-mask-v6`; required when both families are planned). */
  nodeMaskV6?: number;
  /** May be empty: then every node CIDR is safe. */
  reserved: string[];
  /** Node CIDRs already handed out (the next allocation gets this index). Applies to every family. */
  allocated?: number | bigint;
  /** How many merged collision ranges to list per family (the rest are only counted). Default 50. */
  maxRanges?: number;
  /**
   * Node CIDRs nodes hold now (CiliumNodes' spec.ipam.podCIDRs), either family. When given, `allocated` is taken
   * as the highest held block + 1, and `fromTaken` plans the lowest-free-first order too.
   */
  taken?: string[];
  /** Who holds which node CIDR (CiliumNodes' names), to name the nodes on a reserved subnet. */
  holders?: Array<{ cidr: string; node: string }>;
  /** How many nodes the proposed list must hold (proposal.ts). Default 0. */
  nodes?: bigint;
}

interface CollisionRange {
  /** First and last colliding global block index (inclusive). */
  from: bigint;
  to: bigint;
  count: bigint;
  /** Node CIDRs of `from` and `to`. */
  fromCidr: string;
  toCidr: string;
  /** Reserved CIDRs (canonical text) touching this range, at most 5 listed. */
  reserved: string[];
  /** How many reserved CIDRs touch this range in total. */
  reservedCount: number;
}

export interface FamilyPlan {
  family: Family;
  nodeMask: number;
  entries: PoolEntryPlan[];
  totalBlocks: bigint;
  /** Number of distinct blocks touching any reserved CIDR. */
  collidingBlocks: bigint;
  /** total − colliding: node CIDRs that are safe to hand out at all. */
  safeCapacity: bigint;
  /** Merged colliding index ranges, ascending, at most `maxRanges`. */
  collisions: CollisionRange[];
  /** Number of merged ranges in total (collisions.length may be smaller). */
  collisionRangeCount: number;
  truncated: boolean;
  /** Counted from the pool's start. */
  fromStart: {
    firstCollision: CollisionPoint | null;
    /** Nodes that can join before the first collision (all blocks when there is none). */
    nodesBefore: bigint;
  };
  /** Counted from `allocated` (the next allocation's index). */
  fromAllocated: {
    allocated: bigint;
    firstCollision: CollisionPoint | null;
    nodesBefore: bigint;
    /** Non-colliding blocks at or after `allocated`. */
    safeRemaining: bigint;
    /** `allocated` is at or past the end of the pool. */
    exhausted: boolean;
  };
  /** Reserved CIDRs of this family that touch no pool entry. */
  reservedOutsidePool: number;
  /** With `taken`: the blocks nodes hold and the lowest-free-first order. */
  fromTaken?: TakenPlan;
  /** The smallest change to the list that avoids every reserved CIDR with room for `nodes` nodes. */
  proposal: Proposal;
  warnings: string[];
}

export interface Plan {
  families: FamilyPlan[];
  /** Any block of any family collides. */
  collision: boolean;
}

const MAX_LISTED_RESERVED = 5;

/** Plans every family present in `pools`. Throws an Error with an operator-readable message on bad input. */
export function planPool(input: PlanInput): Plan {
  const pools = parseCidrs(input.pools, 'pool list');
  if (pools.length === 0) throw new Error('no pool given');
  const reserved = parseCidrs(input.reserved, 'reserved CIDR list');
  const allocated = BigInt(input.allocated ?? 0);
  if (allocated < 0n) throw new Error(`allocated must be ≥ 0, got ${allocated}`);
  const maxRanges = input.maxRanges ?? 50;
  const taken = input.taken ? parseCidrs(input.taken, 'node CIDRs held') : undefined;
  const holders = holderMap(input.holders ?? []);
  const nodes = input.nodes ?? 0n;
  if (nodes < 0n) throw new Error(`nodes must be ≥ 0, got ${nodes}`);
  const hasV4 = pools.some((p) => p.family === 4);
  const families: FamilyPlan[] = [];
  for (const family of [4, 6] as const) {
    const entries = pools.filter((p) => p.family === family);
    if (!entries.length) continue;
    // Messages name the command's flags: this module's only caller is `ipam-shim plan`.
    let mask: number | undefined = family === 4 ? input.nodeMask : (input.nodeMaskV6 ?? (hasV4 ? undefined : input.nodeMask));
    if (mask === undefined) {
      throw new Error(
        family === 4
          ? 'IPv4 pools need --node-mask'
          : hasV4
            ? 'IPv6 pools need --node-mask-v6 when IPv4 pools are planned too'
            : 'IPv6 pools need --node-mask-v6 (or --node-mask)',
      );
    }
    mask = checkMask(family, mask, entries);
    const held = taken?.filter((t) => t.family === family);
    families.push(
      planFamily(
        family,
        mask,
        entries,
        reserved.filter((r) => r.family === family),
        allocated,
        maxRanges,
        held,
        holders,
        nodes,
      ),
    );
  }
  return { families, collision: families.some((f) => f.collidingBlocks > 0n) };
}

function checkMask(family: Family, mask: number, entries: Cidr[]): number {
  if (!Number.isInteger(mask) || mask < 0 || mask > BITS[family]) {
    throw new Error(`IPv${family} node mask must be an integer from 0 to ${BITS[family]}, got ${mask}`);
  }
  for (const e of entries) {
    if (mask < e.prefix) throw new Error(`node mask /${mask} is shorter than pool ${e.text}`);
  }
  return mask;
}

function planFamily(
  family: Family,
  mask: number,
  pools: Cidr[],
  reserved: Cidr[],
  allocatedIn: bigint,
  maxRanges: number,
  taken: Cidr[] | undefined,
  holders: Map<string, string[]>,
  nodes: bigint,
): FamilyPlan {
  const shift = BigInt(BITS[family] - mask);
  const { entries, total } = poolEntries(pools, mask);
  const warnings: string[] = [];
  for (let i = 0; i < pools.length; i++) {
    for (let j = 0; j < i; j++) {
      const a = pools[i]!;
      const b = pools[j]!;
      if (a.first <= b.last && b.first <= a.last)
        warnings.push(`pool entries ${b.text} and ${a.text} overlap: their node CIDRs would be handed out twice`);
    }
  }

  const { merged, outside } = collidingRanges(pools, entries, reserved, shift);
  let colliding = 0n;
  for (const m of merged) colliding += m.to - m.from + 1n;

  const nodeCidr = (index: bigint): string => {
    const e = locate(entries, index);
    const p = pools[entries.indexOf(e)]!;
    return makeCidr(family, p.first + ((index - e.offset) << shift), mask).text;
  };
  const reservedOf = (m: { reserved: number[] }): number[] => [...new Set(m.reserved)].sort((a, b) => a - b);
  const point = (index: bigint, m: { reserved: number[]; from: bigint; to: bigint }): CollisionPoint => {
    // The reserved CIDR that actually touches `index` (merged ranges may join several).
    const block = blockRange(entries, pools, index, shift);
    const ri = reservedOf(m).find((i) => reserved[i]!.first <= block.last && block.first <= reserved[i]!.last) ?? m.reserved[0]!;
    const text = nodeCidr(index);
    const by = holders.get(text);
    return { index, nodeCidr: text, reserved: reserved[ri]!.text, ...(by ? { nodes: by } : {}) };
  };

  const collisions: CollisionRange[] = merged.slice(0, maxRanges).map((m) => {
    const ris = reservedOf(m);
    return {
      from: m.from,
      to: m.to,
      count: m.to - m.from + 1n,
      fromCidr: nodeCidr(m.from),
      toCidr: nodeCidr(m.to),
      reserved: ris.slice(0, MAX_LISTED_RESERVED).map((i) => reserved[i]!.text),
      reservedCount: ris.length,
    };
  });

  const first = merged[0];
  const fromStart = {
    firstCollision: first ? point(first.from, first) : null,
    nodesBefore: first ? first.from : total,
  };

  const held = taken ? heldBlocks(taken, pools, entries, mask, shift) : undefined;
  const allocated = held ? (held.sorted.length ? held.sorted[held.sorted.length - 1]! + 1n : 0n) : allocatedIn;
  const exhausted = allocated >= total;
  const start = exhausted ? total : allocated;
  let next: CollisionPoint | null = null;
  let collidingAfter = 0n;
  for (const m of merged) {
    if (m.to < start) continue;
    const from = m.from > start ? m.from : start;
    if (!next) next = point(from, m);
    collidingAfter += m.to - from + 1n;
  }
  const fromAllocated = {
    allocated,
    firstCollision: next,
    nodesBefore: next ? next.index - start : total - start,
    safeRemaining: total - start - collidingAfter,
    exhausted,
  };
  if (exhausted) warnings.push(`allocated ${allocated} ≥ ${total} node CIDRs: the IPv${family} pool is exhausted`);
  if (held?.notInPool.length) {
    warnings.push(
      `${held.notInPool.length} node CIDR(s) held are no /${mask} block of this pool (another pool, mask or former entry): ${held.notInPool.slice(0, MAX_LISTED_RESERVED).join(', ')}`,
    );
  }

  return {
    family,
    nodeMask: mask,
    entries,
    totalBlocks: total,
    collidingBlocks: colliding,
    safeCapacity: total - colliding,
    collisions,
    collisionRangeCount: merged.length,
    truncated: merged.length > collisions.length,
    fromStart,
    fromAllocated,
    reservedOutsidePool: outside,
    ...(held ? { fromTaken: planTaken(held, merged, total, colliding, point, maxRanges) } : {}),
    proposal: proposePool({
      family,
      mask,
      pools,
      reserved,
      held: (taken ?? []).filter((t) => isBlock(t, pools, mask)).map((t) => ({ cidr: t, nodes: holders.get(t.text) ?? [] })),
      heldElsewhere: (taken ?? []).filter((t) => !isBlock(t, pools, mask)),
      nodes,
    }),
    warnings,
  };
}

/** JSON-safe copy: every bigint becomes a decimal string (IPv6 counts exceed 2^53). */
export function planToJson(plan: Plan): unknown {
  return JSON.parse(JSON.stringify(plan, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)));
}

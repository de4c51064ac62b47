import fc from 'fast-check';
import { IPv4, IPv4CidrRange, IPv4Prefix, IPv6, IPv6CidrRange, IPv6Prefix } from 'ip-num';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/contract/command.js';
import { planCommand } from '../../src/reserved/plan/command.js';
import { type FamilyPlan, planPool } from '../../src/reserved/plan/pool.js';

// ---- oracle: enumerate every node CIDR with ip-num and test it against every reserved CIDR (small pools only) ----

type AnyRange = IPv4CidrRange | IPv6CidrRange;
const toRange = (s: string): AnyRange => (s.includes(':') ? IPv6CidrRange.fromCidr(s) : IPv4CidrRange.fromCidr(s));

function bruteForce(pools: string[], nodeMask: number, reserved: string[], allocated = 0) {
  const blocks: AnyRange[] = [];
  for (const p of pools) {
    const r = toRange(p);
    if (r instanceof IPv4CidrRange) blocks.push(...r.splitInto(IPv4Prefix.fromNumber(BigInt(nodeMask))));
    else blocks.push(...(r as IPv6CidrRange).splitInto(IPv6Prefix.fromNumber(BigInt(nodeMask))));
  }
  // Bounds come from ip-num; the overlap test is the plain "neither ends before the other starts".
  const bounds = (r: AnyRange) => ({ v6: r instanceof IPv6CidrRange, first: r.getFirst().value, last: r.getLast().value });
  const res = reserved.map(toRange).map(bounds);
  const colliding: number[] = [];
  blocks.map(bounds).forEach((b, i) => {
    if (res.some((r) => r.v6 === b.v6 && !(r.last < b.first || b.last < r.first))) colliding.push(i);
  });
  const ranges: Array<[number, number]> = [];
  for (const i of colliding) {
    const top = ranges[ranges.length - 1];
    if (top && top[1] === i - 1) top[1] = i;
    else ranges.push([i, i]);
  }
  const total = blocks.length;
  const start = Math.min(allocated, total);
  const next = colliding.find((i) => i >= start);
  return {
    total,
    colliding: colliding.length,
    ranges,
    first: colliding[0] ?? null,
    nextFromAllocated: next ?? null,
    nodesBeforeFromAllocated: (next ?? total) - start,
    safeRemaining: blocks.slice(start).length - colliding.filter((i) => i >= start).length,
    cidrs: blocks.map((b) => b.toCidrString()),
  };
}

function summary(f: FamilyPlan) {
  return {
    total: Number(f.totalBlocks),
    colliding: Number(f.collidingBlocks),
    ranges: f.collisions.map((c) => [Number(c.from), Number(c.to)]),
    first: f.fromStart.firstCollision ? Number(f.fromStart.firstCollision.index) : null,
    nextFromAllocated: f.fromAllocated.firstCollision ? Number(f.fromAllocated.firstCollision.index) : null,
    nodesBeforeFromAllocated: Number(f.fromAllocated.nodesBefore),
    safeRemaining: Number(f.fromAllocated.safeRemaining),
  };
}

const only = (p: ReturnType<typeof planPool>, family: 4 | 6 = 4): FamilyPlan => {
  const f = p.families.find((x) => x.family === family);
  if (!f) throw new Error(`no IPv${family} plan`);
  return f;
};

describe('planPool: known answers', () => {
  it('10.0.0.0/8 with /24 nodes: reserved 10.4.76.0/24 is block 1100', () => {
    const f = only(planPool({ pools: ['10.0.0.0/8'], nodeMask: 24, reserved: ['10.4.76.0/24'] }));
    expect(f.totalBlocks).toBe(65536n);
    expect(f.collidingBlocks).toBe(1n);
    expect(f.safeCapacity).toBe(65535n);
    expect(f.fromStart).toEqual({ firstCollision: { index: 1100n, nodeCidr: '10.4.76.0/24', reserved: '10.4.76.0/24' }, nodesBefore: 1100n });
    expect(f.collisions).toEqual([
      { from: 1100n, to: 1100n, count: 1n, fromCidr: '10.4.76.0/24', toCidr: '10.4.76.0/24', reserved: ['10.4.76.0/24'], reservedCount: 1 },
    ]);
    // independent: (10.4.76.0 − 10.0.0.0) / 256
    expect(Number((IPv4.fromString('10.4.76.0').value - IPv4.fromString('10.0.0.0').value) / 256n)).toBe(1100);
  });

  it('counts from --allocated: before, inside and after the collisions', () => {
    const base = { pools: ['10.0.0.0/8'], nodeMask: 24, reserved: ['10.4.76.0/24', '10.4.80.0/22'] };
    expect(only(planPool({ ...base, allocated: 1000 })).fromAllocated).toMatchObject({
      allocated: 1000n,
      firstCollision: { index: 1100n },
      nodesBefore: 100n,
      safeRemaining: 65536n - 1000n - 5n,
      exhausted: false,
    });
    // inside the 4-block range 1104–1107: the next allocation itself collides
    expect(only(planPool({ ...base, allocated: 1105 })).fromAllocated).toMatchObject({
      firstCollision: { index: 1105n, nodeCidr: '10.4.81.0/24', reserved: '10.4.80.0/22' },
      nodesBefore: 0n,
    });
    expect(only(planPool({ ...base, allocated: 2000 })).fromAllocated).toMatchObject({
      firstCollision: null,
      nodesBefore: 63536n,
      safeRemaining: 63536n,
    });
  });

  it('reserved larger than the pool: every block collides', () => {
    const f = only(planPool({ pools: ['10.4.0.0/16'], nodeMask: 24, reserved: ['10.0.0.0/8'] }));
    expect(f).toMatchObject({
      totalBlocks: 256n,
      collidingBlocks: 256n,
      safeCapacity: 0n,
      fromStart: { nodesBefore: 0n, firstCollision: { index: 0n } },
    });
    expect(f.collisions).toMatchObject([{ from: 0n, to: 255n, fromCidr: '10.4.0.0/24', toCidr: '10.4.255.0/24' }]);
  });

  it('reserved outside the pool: clean, and counted as outside', () => {
    const p = planPool({ pools: ['10.0.0.0/8'], nodeMask: 24, reserved: ['192.168.0.0/16', 'fd00::/64', '11.0.0.0/24'] });
    expect(p.collision).toBe(false);
    const f = only(p);
    expect(f).toMatchObject({ collidingBlocks: 0n, safeCapacity: 65536n, collisions: [], fromStart: { firstCollision: null, nodesBefore: 65536n } });
    expect(f.reservedOutsidePool).toBe(2); // the IPv6 one belongs to no planned family
  });

  it('a reserved CIDR smaller than a node CIDR collides with the one block holding it', () => {
    const f = only(planPool({ pools: ['10.0.0.0/8'], nodeMask: 24, reserved: ['10.4.76.200/29', '10.4.76.7'] }));
    expect(f.collisions).toMatchObject([{ from: 1100n, to: 1100n, reservedCount: 2 }]);
  });

  it('merges adjacent and overlapping reserved CIDRs into one range', () => {
    const f = only(planPool({ pools: ['10.0.0.0/8'], nodeMask: 24, reserved: ['10.4.77.0/24', '10.4.76.0/24', '10.4.76.0/23', '10.4.78.0/24'] }));
    expect(f.collisions).toMatchObject([
      { from: 1100n, to: 1102n, count: 3n, reserved: ['10.4.77.0/24', '10.4.76.0/24', '10.4.76.0/23', '10.4.78.0/24'], reservedCount: 4 },
    ]);
    expect(f.collidingBlocks).toBe(3n);
  });

  it('counts indexes across pool entries in order', () => {
    const f = only(planPool({ pools: ['10.1.0.0/16', '10.0.0.0/16'], nodeMask: 24, reserved: ['10.0.5.0/24', '10.1.0.0/24'] }));
    expect(f.entries).toEqual([
      { cidr: '10.1.0.0/16', offset: 0n, blocks: 256n },
      { cidr: '10.0.0.0/16', offset: 256n, blocks: 256n },
    ]);
    expect(f.collisions.map((c) => [c.from, c.fromCidr])).toEqual([
      [0n, '10.1.0.0/24'],
      [261n, '10.0.5.0/24'],
    ]);
  });

  it('IPv6: fd00::/48 with /120 nodes', () => {
    const f = only(planPool({ pools: ['fd00::/48'], nodeMask: 120, reserved: ['fd00::1:0/112', 'fd00:0:0:1::/64', 'fd01::/16'] }), 6);
    expect(f.totalBlocks).toBe(1n << 72n);
    expect(f.collisions).toMatchObject([
      { from: 256n, to: 511n, count: 256n, fromCidr: 'fd00::1:0/120', toCidr: 'fd00::1:ff00/120' },
      { from: 1n << 56n, to: (2n << 56n) - 1n, count: 1n << 56n, fromCidr: 'fd00:0:0:1::/120' },
    ]);
    expect(f.collidingBlocks).toBe(256n + (1n << 56n));
    expect(f.fromStart.nodesBefore).toBe(256n);
    expect(f.reservedOutsidePool).toBe(1);
  });

  it('plans both families; IPv6 needs its own mask then', () => {
    expect(() => planPool({ pools: ['10.0.0.0/8', 'fd00::/104'], nodeMask: 24, reserved: [] })).toThrow(/IPv6 pools need --node-mask-v6/);
    const p = planPool({ pools: ['fd00::/104', '10.0.0.0/8'], nodeMask: 24, nodeMaskV6: 120, reserved: ['fd00::ff00/120'] });
    expect(p.families.map((f) => [f.family, f.totalBlocks, f.collidingBlocks])).toEqual([
      [4, 65536n, 0n],
      [6, 65536n, 1n],
    ]);
    expect(p.collision).toBe(true);
    expect(only(p, 6).fromStart.firstCollision?.index).toBe(255n);
  });

  it('lists at most maxRanges ranges but counts them all', () => {
    const reserved = Array.from({ length: 100 }, (_, i) => `10.0.${i * 2}.0/24`);
    const f = only(planPool({ pools: ['10.0.0.0/16'], nodeMask: 24, reserved, maxRanges: 3 }));
    expect(f.collisions).toHaveLength(3);
    expect(f.collisionRangeCount).toBe(100);
    expect(f.truncated).toBe(true);
    expect(f.collidingBlocks).toBe(100n);
  });

  it('node mask equal to the pool prefix gives one block; an exhausted pool is flagged', () => {
    const f = only(planPool({ pools: ['10.4.76.0/24'], nodeMask: 24, reserved: ['10.4.76.9'], allocated: 5 }));
    expect(f).toMatchObject({
      totalBlocks: 1n,
      collidingBlocks: 1n,
      fromAllocated: { exhausted: true, nodesBefore: 0n, safeRemaining: 0n, firstCollision: null },
    });
    expect(f.warnings.join()).toMatch(/exhausted/);
  });

  it('warns about overlapping pool entries', () => {
    expect(only(planPool({ pools: ['10.0.0.0/16', '10.0.128.0/17'], nodeMask: 24, reserved: [] })).warnings.join()).toMatch(/overlap/);
  });

  it('rejects bad input with operator-readable messages', () => {
    expect(() => planPool({ pools: ['10.0.0.0/16'], nodeMask: 8, reserved: [] })).toThrow(/node mask \/8 is shorter than pool 10\.0\.0\.0\/16/);
    expect(() => planPool({ pools: ['10.0.0.0/16'], nodeMask: 33, reserved: [] })).toThrow(/from 0 to 32/);
    expect(() => planPool({ pools: [], nodeMask: 24, reserved: [] })).toThrow(/no pool/);
    expect(() => planPool({ pools: ['10.0.0.0/16'], nodeMask: 24, reserved: ['x'] })).toThrow(/invalid CIDR "x"/);
    expect(() => planPool({ pools: ['10.0.0.0/16'], nodeMask: 24, reserved: [], allocated: -1 })).toThrow(/allocated/);
  });
});

describe('planPool agrees with brute force (property)', () => {
  // Pools of 1–3 entries with at most 2^6 blocks each; reserved CIDRs placed in, around and outside the pools.
  const v4Case = fc
    .record({
      mask: fc.integer({ min: 22, max: 30 }),
      entries: fc.array(fc.record({ extra: fc.integer({ min: 0, max: 6 }), base: fc.integer({ min: 0, max: 0xffff }) }), {
        minLength: 1,
        maxLength: 3,
      }),
      reserved: fc.array(fc.record({ entry: fc.nat(), offset: fc.integer({ min: -64, max: 64 }), prefix: fc.integer({ min: 14, max: 32 }) }), {
        maxLength: 6,
      }),
      allocated: fc.integer({ min: 0, max: 200 }),
    })
    .map(({ mask, entries, reserved, allocated }) => {
      const pools = entries.map(({ extra, base }) => {
        const prefix = mask - extra;
        const addr = (BigInt(0x0a000000 + base * 4096) >> BigInt(32 - prefix)) << BigInt(32 - prefix);
        return { text: `${new IPv4(addr).toString()}/${prefix}`, first: addr };
      });
      const res = reserved.map(({ entry, offset, prefix }) => {
        const p = pools[entry % pools.length]!;
        let addr = p.first + BigInt(offset) * (1n << BigInt(32 - mask));
        if (addr < 0n) addr = 0n;
        return `${new IPv4(addr).toString()}/${prefix}`;
      });
      return { pools: pools.map((p) => p.text), nodeMask: mask, reserved: res, allocated };
    });

  it('IPv4', { timeout: 60_000 }, () => {
    fc.assert(
      fc.property(v4Case, (c) => {
        const f = only(planPool({ ...c, maxRanges: 1000 }));
        const want = bruteForce(c.pools, c.nodeMask, c.reserved, c.allocated);
        expect(summary(f)).toEqual({ ...want, cidrs: undefined, ranges: want.ranges });
        for (const r of f.collisions) expect([r.fromCidr, r.toCidr]).toEqual([want.cidrs[Number(r.from)], want.cidrs[Number(r.to)]]);
      }),
      { numRuns: 200 },
    );
  });

  const v6Case = fc
    .record({
      mask: fc.integer({ min: 116, max: 128 }),
      extra: fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 1, maxLength: 2 }),
      reserved: fc.array(fc.record({ entry: fc.nat(), offset: fc.integer({ min: -32, max: 96 }), prefix: fc.integer({ min: 100, max: 128 }) }), {
        maxLength: 5,
      }),
      allocated: fc.integer({ min: 0, max: 100 }),
    })
    .map(({ mask, extra, reserved, allocated }) => {
      const pools = extra.map((e, i) => {
        const prefix = mask - e;
        const addr = IPv6.fromString(`fd00:${i}::`).value;
        return { text: `${new IPv6(addr).toString()}/${prefix}`, first: addr };
      });
      const res = reserved.map(({ entry, offset, prefix }) => {
        const p = pools[entry % pools.length]!;
        const addr = p.first + BigInt(offset) * (1n << BigInt(128 - mask));
        return `${new IPv6(addr < 0n ? 0n : addr).toString()}/${prefix}`;
      });
      return { pools: pools.map((p) => p.text), nodeMask: mask, reserved: res, allocated };
    });

  it('IPv6', { timeout: 60_000 }, () => {
    fc.assert(
      fc.property(v6Case, (c) => {
        const f = only(planPool({ ...c, maxRanges: 1000 }), 6);
        const want = bruteForce(c.pools, c.nodeMask, c.reserved, c.allocated);
        expect(summary(f)).toEqual({ ...want, cidrs: undefined, ranges: want.ranges });
      }),
      { numRuns: 100 },
    );
  });
});

describe('planPool on large inputs', () => {
  // Deterministic pseudo-random reserved subnets (xorshift), so the run is repeatable.
  function rng(seed: number) {
    let s = seed >>> 0 || 1;
    return () => {
      s ^= s << 13;
      s >>>= 0;
      s ^= s >>> 17;
      s ^= s << 5;
      s >>>= 0;
      return s;
    };
  }

  it('10.0.0.0/8 ÷ /24 and fd00::/48 ÷ /120 against 1,000 reserved subnets each', () => {
    const next = rng(42);
    const v4: string[] = [];
    const v6: string[] = [];
    for (let i = 0; i < 1000; i++) {
      const prefix = 20 + (next() % 13); // /20../32
      v4.push(`${new IPv4(BigInt(((0x0a << 24) | (next() & 0xffffff)) >>> 0)).toString()}/${prefix}`);
      const p6 = 64 + (next() % 65); // /64../128
      const low = (BigInt(next()) << 64n) | (BigInt(next()) << 32n) | BigInt(next());
      v6.push(`${new IPv6(IPv6.fromString('fd00::').value | (low & ((1n << 80n) - 1n))).toString()}/${p6}`);
    }
    const t0 = performance.now();
    const p = planPool({ pools: ['10.0.0.0/8', 'fd00::/48'], nodeMask: 24, nodeMaskV6: 120, reserved: [...v4, ...v6], allocated: 3000 });
    const ms = performance.now() - t0;
    console.log(`planPool large inputs (2 pools, 2,000 reserved): ${ms.toFixed(1)} ms`);

    // IPv4 cross-check with a block bitmap (65,536 blocks, filled per reserved CIDR — a different method).
    const marks = new Uint8Array(65536);
    for (const r of v4) {
      const c = IPv4CidrRange.fromCidr(r);
      const a = Number((c.getFirst().value - 0x0a000000n) >> 8n);
      const b = Number((c.getLast().value - 0x0a000000n) >> 8n);
      for (let i = a; i <= b; i++) marks[i] = 1;
    }
    const f4 = only(p);
    expect(f4.collidingBlocks).toBe(BigInt(marks.reduce((s, m) => s + m, 0)));
    expect(f4.fromStart.firstCollision?.index).toBe(BigInt(marks.indexOf(1)));
    expect(f4.fromAllocated.firstCollision?.index).toBe(BigInt(marks.indexOf(1, 3000)));

    const f6 = only(p, 6);
    expect(f6.totalBlocks).toBe(1n << 72n);
    expect(f6.collidingBlocks > 0n && f6.collidingBlocks < f6.totalBlocks).toBe(true);
    expect(f6.safeCapacity + f6.collidingBlocks).toBe(f6.totalBlocks);
    expect(f6.collisions.length).toBeLessThanOrEqual(50);
    // The proposal counts its capacity on its own (pieces around the reserved blocks): the same safe capacity.
    expect(f4.proposal.capacity).toBe(f4.safeCapacity);
    expect(f6.proposal.capacity).toBe(f6.safeCapacity);
    expect(f6.proposal.tooLong).toBe(true);
    expect(f6.proposal.list).toEqual([]);
  });
});

describe('plan command', () => {
  const ctx = { run: (() => Promise.reject(new Error('plan runs no program'))) as never, env: {} };

  it('renders the known case and exits 1 on a collision', async () => {
    const out = await planCommand.run(['--pool', '10.0.0.0/8', '--node-mask', '24', '--reserved', '10.4.76.0/24', '--allocated', '1000'], ctx);
    expect(out.exitCode).toBe(1);
    expect(out.text).toContain('IPv4 pool 10.0.0.0/8, /24 per node: 65536 node CIDRs');
    expect(out.text).toContain('first collision from the start: index 1100 (10.4.76.0/24 over 10.4.76.0/24); 1100 nodes fit before it');
    expect(out.text).toContain('from allocated 1000: next collision at index 1100');
    expect(out.text).toMatch(/100 more nodes fit before it/);
    expect(out.text).toMatch(/INDEXES\s+COUNT\s+NODE CIDRS\s+RESERVED\n\s+1100\s+1\s+10\.4\.76\.0\/24\s+10\.4\.76\.0\/24/);
    const data = out.data as { families: Array<{ fromStart: { firstCollision: { index: unknown } }; totalBlocks: unknown }>; collision: boolean };
    expect(data.collision).toBe(true);
    expect(data.families[0]!.fromStart.firstCollision.index).toBe('1100'); // bigints are JSON strings
    expect(JSON.parse(JSON.stringify(data))).toEqual(data);
  });

  it('accepts comma lists, repeated flags and --json; exits 0 when clean', async () => {
    const out = await planCommand.run(
      [
        '--pool',
        '10.0.0.0/16,10.1.0.0/16',
        '--pool',
        'fd00::/104',
        '--node-mask',
        '24',
        '--node-mask-v6',
        '120',
        '--reserved',
        '192.168.0.0/16,',
        '--reserved',
        'fd01::/64',
        '--json',
      ],
      ctx,
    );
    expect(out.exitCode).toBe(0);
    expect(out.text).toContain('IPv4 pool 10.0.0.0/16, 10.1.0.0/16, /24 per node: 512 node CIDRs');
    expect(out.text).toContain('IPv6 pool fd00::/104, /120 per node: 65536 node CIDRs');
    expect(out.text).toContain('no node CIDR touches a reserved subnet');
  });

  it('throws UsageError for bad or missing flags', async () => {
    const bad = [
      [],
      ['--allocated', '3', '--ciliumnodes', 'nodes.yaml'],
      ['--pool', '10.0.0.0/8', '--ippools', 'pools.yaml'],
      ['--values', '-', '--ciliumnodes', '-'],
      ['--pool', '10.0.0.0/8', '--node-mask', 'x', '--reserved', '10.0.0.0/8'],
      ['--pool', '10.0.0.0/8', '--node-mask', '24', '--reserved', '10.0.0.0/8', '--allocated', '-3'],
      ['--pool', '10.0.0.0/8', '--node-mask', '24', '--reserved', 'nope'],
      ['--pool', '10.0.0.0/8', '--node-mask', '4', '--reserved', '10.0.0.0/8'],
      ['--pool', '10.0.0.0/8', '--node-mask', '24', '--reserved', '10.0.0.0/8', '--bogus'],
      ['--pool', '10.0.0.0/8', '--node-mask', '24', '--reserved', '10.0.0.0/8', 'positional'],
    ];
    for (const argv of bad) await expect(planCommand.run(argv, ctx), argv.join(' ')).rejects.toBeInstanceOf(UsageError);
  });

  it('names the pool, not the reserved list, when --pool is garbage', async () => {
    const err = await planCommand.run(['--pool', 'garbage', '--node-mask', '24', '--reserved', '10.0.0.0/8'], ctx).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageError);
    expect((err as Error).message).toMatch(/^invalid pool list: \[0\] invalid CIDR "garbage"/);
    expect((err as Error).message).not.toMatch(/reserved/);
  });

  it('plans an IPv6-only pool with --node-mask-v6 alone', async () => {
    const out = await planCommand.run(['--pool', 'fd00::/104', '--node-mask-v6', '120', '--reserved', 'fd00::ff00/120'], ctx);
    expect(out.text).toContain('IPv6 pool fd00::/104, /120 per node: 65536 node CIDRs');
    expect(out.exitCode).toBe(1);
  });

  it("takes Cilium's default mask for a family the flags leave out, and says so", async () => {
    const both = await planCommand.run(['--pool', '10.0.0.0/8,fd00::/104', '--node-mask', '24', '--reserved', '10.0.0.0/8'], ctx);
    expect(both.text).toContain('IPv6 pool fd00::/104, /120 per node: 65536 node CIDRs');
    expect(both.text).toContain("Cilium's defaults for: ipam.operator.clusterPoolIPv6MaskSize");
    const v4 = await planCommand.run(['--pool', '10.0.0.0/8', '--node-mask-v6', '120'], ctx);
    expect(v4.text).toContain('IPv4 pool 10.0.0.0/8, /24 per node: 65536 node CIDRs');
    // Only the family planned: an IPv4-only --pool took no IPv6 default and says so.
    expect(v4.text).toContain("Cilium's defaults for: ipam.operator.clusterPoolIPv4MaskSize\n");
    const v4only = await planCommand.run(['--pool', '10.0.0.0/8', '--node-mask', '24', '--reserved', '10.4.76.0/24'], ctx);
    expect(v4only.text).not.toContain("Cilium's defaults");
    const none = await planCommand.run(['--reserved', '10.4.76.0/24'], ctx);
    expect(none.text).toContain('IPv4 pool 10.0.0.0/8, /24 per node: 65536 node CIDRs');
    expect(none.text).toContain('first collision from the start: index 1100');
    expect(none.exitCode).toBe(1);
  });

  it('--nodes sizes the proposal; a bad count is a usage error; without a collision the exit code stays 0', async () => {
    const out = await planCommand.run(['--pool', '10.0.0.0/16', '--node-mask', '24', '--nodes', '300'], ctx);
    expect(out.exitCode).toBe(0);
    expect(out.text).toContain('  proposal, the smallest change to ipam.operator.clusterPoolIPv4PodCIDRList for 300 nodes (--nodes):');
    expect(out.text).toContain('    append 10.1.0.0/18 (next free in 10.0.0.0/8');
    expect(out.text).toContain('    apply: append (what Cilium supports in place)');
    const fw = await planCommand.run(['--pool', '10.0.0.0/8', '--node-mask', '16', '--reserved', '10.3.0.0/24'], ctx);
    expect(fw.exitCode).toBe(1);
    expect(fw.text).toContain('for 0 nodes (none given: --nodes N sizes it)');
    expect(fw.text).toContain('    replace 10.0.0.0/8 by 8 CIDR(s) without 10.3.0.0/16 (over 10.3.0.0/24)');
    for (const bad of ['-1', 'x', '1.5']) {
      await expect(planCommand.run(['--pool', '10.0.0.0/8', '--nodes', bad], ctx), bad).rejects.toBeInstanceOf(UsageError);
    }
  });

  it('plans zero reserved subnets: every node CIDR is safe', async () => {
    const out = await planCommand.run(['--pool', '10.0.0.0/16', '--node-mask', '24'], ctx);
    expect(out.exitCode).toBe(0);
    expect(out.text).toContain('no node CIDR touches a reserved subnet; safe capacity 256');
  });
});

// ---- the proposal (src/reserved/plan/proposal.ts), checked by arithmetic with ip-num, not by its own code ----

const v4 = (s: string) => IPv4CidrRange.fromCidr(s);
const span = (s: string) => {
  const r = toRange(s);
  return { first: r.getFirst().value, last: r.getLast().value, prefix: Number(r.cidrPrefix.getValue()) };
};
const meets = (a: string, b: string) => {
  const x = span(a);
  const y = span(b);
  return !(x.last < y.first || y.last < x.first);
};
const inside = (a: string, b: string) => {
  const x = span(a);
  const y = span(b);
  return y.first <= x.first && x.last <= y.last;
};
const blocksOf = (cidr: string, mask: number) => 2n ** BigInt(mask - span(cidr).prefix);

describe('planPool proposal: the smallest change to the list', () => {
  const holders = [0, 1, 2, 3].map((i) => ({ cidr: `10.${i}.0.0/16`, node: `node-${i}` }));

  it('the firewall incident: 10.0.0.0/8 at /16, firewall 10.3.0.0/24 under node-3; the node named, a list that avoids it with room', () => {
    const f = only(
      planPool({ pools: ['10.0.0.0/8'], nodeMask: 16, reserved: ['10.3.0.0/24'], taken: holders.map((h) => h.cidr), holders, nodes: 5n }),
    );
    expect(f.fromTaken!.colliding).toEqual([{ index: 3n, nodeCidr: '10.3.0.0/16', reserved: '10.3.0.0/24', nodes: ['node-3'] }]);
    const p = f.proposal;
    expect(p.move).toEqual([{ nodeCidr: '10.3.0.0/16', nodes: ['node-3'], reserved: '10.3.0.0/24' }]);
    // Arithmetic: no entry meets the reserved subnet, every entry is in the old pool, the blocks add up to ≥ 5.
    for (const c of p.list) {
      expect(meets(c, '10.3.0.0/24'), c).toBe(false);
      expect(inside(c, '10.0.0.0/8'), c).toBe(true);
      expect(span(c).prefix).toBeLessThanOrEqual(16);
    }
    const capacity = p.list.reduce((n, c) => n + blocksOf(c, 16), 0n);
    expect(capacity).toBe(255n);
    expect(p.capacity).toBe(capacity);
    expect(capacity >= 5n && p.fits).toBe(true);
    // No live node renumbered: the other held node CIDRs lie in the new list.
    for (const h of holders.slice(0, 3))
      expect(
        p.list.some((c) => inside(h.cidr, c)),
        h.cidr,
      ).toBe(true);
    expect(p).toMatchObject({ heldKept: 3n, free: 252n, changed: true, appendOnly: false, append: [] });
    // The largest pieces: 256 − 1 blocks in 8 CIDRs (one per bit below /8 down to /16).
    expect(p.list).toEqual([
      '10.0.0.0/15',
      '10.2.0.0/16',
      '10.4.0.0/14',
      '10.8.0.0/13',
      '10.16.0.0/12',
      '10.32.0.0/11',
      '10.64.0.0/10',
      '10.128.0.0/9',
    ]);
  });

  it('more nodes than the pieces hold: appends the smallest aligned CIDR after the pool, past the reserved subnets', () => {
    const f = only(planPool({ pools: ['10.0.0.0/16'], nodeMask: 24, reserved: ['10.0.5.0/24', '10.1.0.0/20'], nodes: 300n }));
    const p = f.proposal;
    // 255 safe /24s; 45 missing → 64 (/18); 10.1.0.0/18 meets 10.1.0.0/20, so the next one.
    expect(p.append).toEqual(['10.1.64.0/18']);
    expect(p.list.at(-1)).toBe('10.1.64.0/18');
    const capacity = p.list.reduce((n, c) => n + blocksOf(c, 24), 0n);
    expect(capacity).toBe(255n + 64n);
    expect(p).toMatchObject({ capacity, fits: true, missing: 0n, space: '10.0.0.0/8' });
    for (const c of p.list) for (const r of ['10.0.5.0/24', '10.1.0.0/20']) expect(meets(c, r), `${c} ${r}`).toBe(false);
  });

  it('only appends when no entry touches a reserved subnet (what Cilium supports in place)', () => {
    const p = only(planPool({ pools: ['10.0.0.0/16'], nodeMask: 24, reserved: ['192.168.0.0/16'], nodes: 257n })).proposal;
    expect(p).toMatchObject({ appendOnly: true, changed: true, append: ['10.1.0.0/24'], list: ['10.0.0.0/16', '10.1.0.0/24'], capacity: 257n });
  });

  it('says plainly when the space cannot hold the nodes, and how many node CIDRs are missing', () => {
    const p = only(planPool({ pools: ['10.0.0.0/8'], nodeMask: 16, reserved: ['10.3.0.0/24'], nodes: 300n })).proposal;
    expect(p).toMatchObject({ fits: false, missing: 45n, append: [], space: '10.0.0.0/8', appendPrefix: 10, capacity: 255n });
  });

  it('IPv6: the pieces of fd00::/112 around fd00::4c00/118 at /120', () => {
    const p = only(planPool({ pools: ['fd00::/112'], nodeMaskV6: 120, reserved: ['fd00::4c00/118'], nodes: 10n }), 6).proposal;
    expect(p.list).toEqual(['fd00::/114', 'fd00::4000/117', 'fd00::4800/118', 'fd00::5000/116', 'fd00::6000/115', 'fd00::8000/113']);
    expect(p.entries[0]).toMatchObject({ action: 'split', removed: ['fd00::4c00/118'], reserved: ['fd00::4c00/118'] });
    expect(p.capacity).toBe(252n);
    expect(p.list.reduce((n, c) => n + blocksOf(c, 120), 0n)).toBe(252n);
  });

  it('drops an entry that is reserved throughout, keeps the others in order', () => {
    const p = only(planPool({ pools: ['10.9.0.0/24', '10.3.0.0/24', '10.8.0.0/23'], nodeMask: 26, reserved: ['10.3.0.0/23'] })).proposal;
    expect(p.entries.map((e) => e.action)).toEqual(['keep', 'drop', 'keep']);
    expect(p.list).toEqual(['10.9.0.0/24', '10.8.0.0/23']);
    expect(p.capacity).toBe(12n);
  });

  it('does not write out a list past 1,000 entries; counts it and says to move the pool', async () => {
    // 600 reserved /32s spread over 10.0.0.0/8 at /24: each cuts one block, ~2 × 16 pieces around each.
    const reserved = Array.from({ length: 600 }, (_, i) => `10.${(i * 7) % 256}.${(i * 13) % 256}.1`);
    const f = only(planPool({ pools: ['10.0.0.0/8'], nodeMask: 24, reserved }));
    expect(f.proposal).toMatchObject({ tooLong: true, list: [], capacity: f.safeCapacity });
    expect(f.proposal.entryCount).toBeNull();
    const out = await planCommand.run(['--pool', '10.0.0.0/8', '--node-mask', '24', '--reserved', reserved.join(',')], {
      run: (() => Promise.reject(new Error('plan runs no program'))) as never,
      env: {},
    });
    expect(out.text).toContain('    none written out: cut around the reserved subnets the list would take more than 1,000 entries');
  });

  it('a clean pool with room: no change', () => {
    const p = only(planPool({ pools: ['10.0.0.0/16'], nodeMask: 24, reserved: ['10.9.0.0/16'], nodes: 10n })).proposal;
    expect(p).toMatchObject({ changed: false, fits: true, list: ['10.0.0.0/16'], move: [] });
  });

  it('property: the list covers exactly the blocks that touch no reserved CIDR, disjoint, in the pool (IPv4)', { timeout: 60_000 }, () => {
    const arb = fc.record({
      base: fc.integer({ min: 0, max: 255 }),
      poolPrefix: fc.integer({ min: 16, max: 22 }),
      extra: fc.integer({ min: 0, max: 6 }),
      reserved: fc.array(fc.tuple(fc.integer({ min: 0, max: 0xffff }), fc.integer({ min: 16, max: 32 })), { maxLength: 6 }),
      held: fc.array(fc.integer({ min: 0, max: 1023 }), { maxLength: 8 }),
    });
    fc.assert(
      fc.property(arb, ({ base, poolPrefix, extra, reserved, held }) => {
        const pool = v4(`10.${base}.0.0/${poolPrefix}`).toCidrString();
        const mask = Math.min(poolPrefix + extra, 26);
        const res = reserved.map(([off, pre]) =>
          v4(`${IPv4.fromNumber((v4(pool).getFirst().value & 0xffff0000n) + BigInt(off)).toString()}/${pre}`).toCidrString(),
        );
        const blocks = bruteForce([pool], mask, []).cidrs;
        const taken = held.filter((i) => i < blocks.length).map((i) => blocks[i]!);
        const p = only(planPool({ pools: [pool], nodeMask: mask, reserved: res, taken, nodes: 0n })).proposal;
        const safe = blocks.filter((b) => !res.some((r) => meets(b, r)));
        // Every safe block is in exactly one entry; no entry meets a reserved CIDR; all inside the pool.
        for (const b of safe) expect(p.list.filter((c) => inside(b, c)).length, b).toBe(1);
        for (const c of p.list) {
          expect(inside(c, pool)).toBe(true);
          for (const r of res) expect(meets(c, r), `${c} ${r}`).toBe(false);
        }
        expect(p.capacity).toBe(BigInt(safe.length));
        expect(p.list.reduce((n, c) => n + blocksOf(c, mask), 0n)).toBe(BigInt(safe.length));
        // The held blocks that touch a reserved CIDR are exactly the ones to move.
        const moving = [...new Set(taken)].filter((b) => res.some((r) => meets(b, r)));
        expect(p.move.map((m) => m.nodeCidr).sort()).toEqual(moving.sort());
        expect(p.heldKept).toBe(BigInt(new Set(taken).size - moving.length));
      }),
      { numRuns: 300 },
    );
  });
});

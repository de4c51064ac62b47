import fc from 'fast-check';
import { IPv4, IPv4CidrRange, IPv4Prefix, IPv6, IPv6CidrRange, IPv6Prefix } from 'ip-num';
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../src/cli/command.js';
import { planCommand } from '../../src/cli/plan.js';
import { type FamilyPlan, planPool } from '../../src/reserved/pool-plan.js';

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
    const none = await planCommand.run(['--reserved', '10.4.76.0/24'], ctx);
    expect(none.text).toContain('IPv4 pool 10.0.0.0/8, /24 per node: 65536 node CIDRs');
    expect(none.text).toContain('first collision from the start: index 1100');
    expect(none.exitCode).toBe(1);
  });

  it('plans zero reserved subnets: every node CIDR is safe', async () => {
    const out = await planCommand.run(['--pool', '10.0.0.0/16', '--node-mask', '24'], ctx);
    expect(out.exitCode).toBe(0);
    expect(out.text).toContain('no node CIDR touches a reserved subnet; safe capacity 256');
  });
});

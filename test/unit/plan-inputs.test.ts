// plan's inputs (src/reserved/plan/inputs.ts) on the fixture files and on edge cases, and the planner's held-CIDR model
// (src/reserved/plan/pool.ts `taken`) against a simulation of Cilium's cidrset (lowest free block first).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { CLUSTER_POOL, fromAzureSubnets, fromCiliumNodes, fromHelmValues, fromPodIPPools } from '../../src/reserved/plan/inputs.js';
import { planPool } from '../../src/reserved/plan/pool.js';
import { formatIp } from '../../src/net/ip.js';

const DIR = resolve(import.meta.dirname, '../fixtures/plan');
const docs = async (name: string) => parseAllDocuments(await readFile(join(DIR, name), 'utf8')).map((d) => d.toJS() as unknown);

describe('fromHelmValues', () => {
  it("fills in Cilium's defaults for what the file leaves out, and says which", async () => {
    const [values] = await docs('values.yaml');
    const h = fromHelmValues(values, 'values.yaml');
    expect(h.mode).toBe('cluster-pool');
    expect(h.clusterPool).toEqual({ name: CLUSTER_POOL, source: 'values.yaml', v4: { cidrs: ['10.0.0.0/8'], mask: 24 } });
    expect(h.defaulted).toEqual(['ipam.operator.clusterPoolIPv4MaskSize']);
    // An empty file is Cilium's defaults throughout.
    const empty = fromHelmValues(null, 'empty.yaml');
    expect(empty.clusterPool.v4).toEqual({ cidrs: ['10.0.0.0/8'], mask: 24 });
    expect(empty.clusterPool.v6).toBeUndefined();
    expect(empty.defaulted).toEqual(['ipam.operator.clusterPoolIPv4PodCIDRList', 'ipam.operator.clusterPoolIPv4MaskSize', 'ipam.mode']);
  });

  it('plans IPv6 only when ipv6.enabled, with a quoted mask and a comma-separated list accepted', async () => {
    const [values] = await docs('values-dual.yaml');
    const h = fromHelmValues(values, 'v');
    expect(h.clusterPool.v4).toEqual({ cidrs: ['10.0.0.0/16', '10.1.0.0/16'], mask: 24 });
    expect(h.clusterPool.v6).toEqual({ cidrs: ['fd00::/104'], mask: 120 });
    const set = fromHelmValues({ ipv6: { enabled: true }, ipam: { operator: { clusterPoolIPv4PodCIDRList: '10.0.0.0/16, 10.1.0.0/16' } } }, 'v');
    expect(set.clusterPool.v4?.cidrs).toEqual(['10.0.0.0/16', '10.1.0.0/16']);
    expect(set.clusterPool.v6).toEqual({ cidrs: ['fd00::/104'], mask: 120 });
  });

  it('reads multi-pool auto-created pools, and refuses malformed values naming the field', async () => {
    const [values] = await docs('values-multipool.yaml');
    expect(fromHelmValues(values, 'v').autoPools).toEqual([
      { name: 'default', source: 'v: autoCreateCiliumPodIPPools.default', v4: { cidrs: ['10.4.0.0/16'], mask: 24 } },
    ]);
    expect(() => fromHelmValues({ ipam: { operator: { clusterPoolIPv4MaskSize: 'big' } } }, 'v.yaml')).toThrow(
      /^v\.yaml: ipam\.operator\.clusterPoolIPv4MaskSize: /,
    );
    expect(() => fromHelmValues({ ipam: { operator: { autoCreateCiliumPodIPPools: { x: { ipv4: { cidrs: ['10.0.0.0/8'] } } } } } }, 'v')).toThrow(
      /pool x: ipv4\.maskSize is required/,
    );
  });
});

describe('fromCiliumNodes / fromPodIPPools / fromAzureSubnets', () => {
  it('collects the node CIDRs per pool and the nodes without one', async () => {
    const held = fromCiliumNodes(await docs('ciliumnodes.yaml'), 'n');
    expect(held.nodes).toBe(7);
    expect(held.byPool.get(CLUSTER_POOL)).toEqual(['10.0.0.0/24', '10.0.1.0/24', '10.0.2.0/24', '10.0.4.0/24', '10.0.5.0/24', '10.4.76.0/24']);
    expect(held.pending).toEqual(['aks-burst-40731652-vmss00000m']);
    const multi = fromCiliumNodes(await docs('ciliumnodes-multipool.yaml'), 'n');
    expect(Object.fromEntries(multi.byPool)).toEqual({ default: ['10.4.0.0/24', '10.4.1.0/24', '10.4.3.0/24'], batch: ['172.20.0.0/27'] });
    // One object (kubectl get ciliumnode NAME -o yaml) reads like a List of one.
    const [list] = (await docs('ciliumnodes.yaml')) as Array<{ items: unknown[] }>;
    expect(fromCiliumNodes([list!.items[0]], 'n').byPool.get(CLUSTER_POOL)).toEqual(['10.0.0.0/24']);
  });

  it('reads CiliumPodIPPools and Azure subnets (addressPrefix and addressPrefixes)', async () => {
    expect(fromPodIPPools(await docs('ciliumpodippools.yaml'), 'p')).toEqual([
      { name: 'batch', source: 'p', v4: { cidrs: ['172.20.0.0/22'], mask: 27 }, v6: { cidrs: ['fd00:20::/112'], mask: 120 } },
    ]);
    const [subnets] = await docs('azure-subnets.json');
    expect(fromAzureSubnets(subnets, 's')).toEqual([
      { cidr: '10.224.0.0/16', name: 'aks-subnet' },
      { cidr: '10.4.76.0/24', name: 'AzureFirewallSubnet' },
      { cidr: '10.4.77.0/27', name: 'GatewaySubnet' },
      { cidr: '10.4.0.0/22', name: 'app-gateway' },
      { cidr: 'fd12:3456:789a::/64', name: 'app-gateway' },
    ]);
  });

  it('CiliumNodes: which node holds which node CIDR, per pool (plan names the nodes on a reserved subnet)', async () => {
    const held = fromCiliumNodes(await docs('ciliumnodes-firewall.yaml'), 'nodes.yaml');
    expect(held.nodes).toBe(5);
    expect(held.pending).toEqual(['aks-nodepool1-31877520-vmss000004']);
    expect(held.holders.get(CLUSTER_POOL)).toEqual(
      [0, 1, 2, 3].map((i) => ({ cidr: `10.${i}.0.0/16`, node: `aks-nodepool1-31877520-vmss00000${i}` })),
    );
    const multi = fromCiliumNodes(await docs('ciliumnodes-multipool.yaml'), 'm');
    expect(multi.holders.get('default')).toEqual([
      { cidr: '10.4.0.0/24', node: 'worker-a' },
      { cidr: '10.4.1.0/24', node: 'worker-a' },
      { cidr: '10.4.3.0/24', node: 'worker-b' },
    ]);
  });

  it('refuses the wrong kind of object, naming the file and what it found', async () => {
    const nodes = await docs('ciliumnodes.yaml');
    expect(() => fromPodIPPools(nodes, 'nodes.yaml')).toThrow(
      /^nodes\.yaml: expected CiliumPodIPPool objects .*found CiliumNode aks-nodepool1-26519183-vmss000000$/,
    );
    expect(() => fromCiliumNodes([{ kind: 'CiliumNode', metadata: { name: 'x' }, spec: { ipam: { podCIDRs: '10.0.0.0/24' } } }], 'n')).toThrow(
      /^n: spec\.ipam\.podCIDRs: /,
    );
  });
});

// ---- the held-CIDR model against a simulation of Cilium's cidrset after an operator restart ----

/** Lowest free block first: the first free colliding index, and how many free blocks come before it. */
function simulateLowestFree(total: number, colliding: Set<number>, held: Set<number>) {
  let before = 0;
  for (let i = 0; i < total; i++) {
    if (held.has(i)) continue;
    if (colliding.has(i)) return { first: i, before };
    before++;
  }
  return { first: null, before };
}

/** The node CIDR at block `index` of pool 10.0.0.0/16 with /`mask` nodes (Cilium's cluster-pool order), by arithmetic. */
const nodeCidrOf10_0 = (mask: number, index: number): string => `${formatIp(4, 0x0a000000n + (BigInt(index) << BigInt(32 - mask)))}/${mask}`;

describe('planPool with held node CIDRs (property)', () => {
  it('agrees with the lowest-free-first simulation and with after-the-highest', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 20, max: 26 }),
        fc.array(fc.tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: 22, max: 28 })), { maxLength: 4 }),
        fc.uniqueArray(fc.integer({ min: 0, max: 255 }), { maxLength: 40 }),
        (mask, res, heldIdx) => {
          const pools = ['10.0.0.0/16'];
          const total = 2 ** (mask - 16);
          const held = heldIdx.filter((i) => i < total);
          const reserved = res.map(([third, prefix]) => `10.0.${third}.0/${prefix}`);
          const plan = planPool({ pools, nodeMask: mask, reserved, taken: held.map((i) => nodeCidrOf10_0(mask, i)) });
          const f = plan.families[0]!;
          const collidingSet = new Set<number>();
          for (const c of f.collisions) for (let i = Number(c.from); i <= Number(c.to); i++) collidingSet.add(i);
          const sim = simulateLowestFree(total, collidingSet, new Set(held));
          const t = f.fromTaken!;
          expect(t.count).toBe(BigInt(held.length));
          expect(t.lowestFree.firstCollision === null ? null : Number(t.lowestFree.firstCollision.index)).toBe(sim.first);
          expect(Number(t.lowestFree.nodesBefore)).toBe(sim.before);
          expect(Number(t.collidingCount)).toBe(held.filter((i) => collidingSet.has(i)).length);
          expect(Number(t.safeFree)).toBe(total - held.length - [...collidingSet].filter((i) => !held.includes(i)).length);
          const highest = held.length ? Math.max(...held) : -1;
          expect(f.fromAllocated.allocated).toBe(BigInt(highest + 1));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('reports held CIDRs that are no block of the pool', () => {
    const f = planPool({ pools: ['10.0.0.0/16'], nodeMask: 24, reserved: [], taken: ['10.0.3.0/24', '10.9.0.0/24', '10.0.4.0/25'] }).families[0]!;
    expect(f.fromTaken?.count).toBe(1n);
    expect(f.fromTaken?.notInPool).toEqual(['10.9.0.0/24', '10.0.4.0/25']);
    expect(f.warnings.join('\n')).toContain('2 node CIDR(s) held are no /24 block of this pool');
  });
});

// `ipam-shim plan` reading what an operator has, through the built single executable: Cilium's Helm values,
// `kubectl get ciliumnodes|ciliumpodippools -o yaml` and `az network vnet subnet list` output (the files in
// test/fixtures/plan/, written in the shapes those tools print), from files and from stdin. Bad files are usage
// errors (exit 2) that name the file; nothing goes to stdout then.
import { describe, expect, it } from 'vitest';
import { execa } from 'execa';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IPv4CidrRange } from 'ip-num';
import { BUNDLE_SHIM, ROOT, SEA_SHIM } from '../support/shim/cni.js';

const DIR = join(ROOT, 'test/fixtures/plan');
const f = (name: string) => join(DIR, name);

async function plan(args: string[], input?: string, bin: string[] = [SEA_SHIM]): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  const r = await execa(bin[0]!, [...bin.slice(1), 'plan', ...args], {
    reject: false,
    env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
    extendEnv: false,
    ...(input === undefined ? {} : { input }),
  });
  return { exitCode: r.exitCode ?? -1, stdout: r.stdout, stderr: r.stderr };
}

describe("plan from the cluster's files (the single executable)", () => {
  it('Helm values + CiliumNodes + Azure subnets: the node already on the firewall subnet, the next collisions in both orders', async () => {
    const r = await plan(['--values', f('values.yaml'), '--ciliumnodes', f('ciliumnodes.yaml'), '--azure-subnets', f('azure-subnets.json')]);
    expect(r.exitCode, r.stderr).toBe(1);
    const lines = r.stdout.split('\n');
    expect(lines).toContain(`--ciliumnodes ${f('ciliumnodes.yaml')}: 7 CiliumNode(s), 1 holding no node CIDR yet`);
    expect(lines).toContain(`--azure-subnets ${f('azure-subnets.json')}: 5 reserved CIDR(s) from 4 subnet(s)`);
    // The values set the list; the mask, which they leave to Cilium's default, comes from the nodes' /24s.
    expect(lines).toContain('from the node CIDRs the CiliumNodes hold: ipam.operator.clusterPoolIPv4MaskSize 24');
    expect(r.stdout).not.toContain("Cilium's defaults for");
    expect(lines).toContain('IPv4 pool 10.0.0.0/8, /24 per node: 65536 node CIDRs');
    // 10.4.0.0/22 → 1024-1027, 10.4.76.0/24 + 10.4.77.0/27 → 1100-1101, 10.224.0.0/16 → 57344-57599.
    expect(lines).toContain('  colliding: 262 node CIDRs in 3 ranges; safe capacity 65274');
    expect(lines).toContain('  nodes hold 6 node CIDRs (highest index 1100)');
    expect(lines).toContain(
      '  1 held node CIDR(s) lie on a reserved subnet NOW: index 1100 (10.4.76.0/24 over 10.4.76.0/24 AzureFirewallSubnet) held by aks-burst-40731652-vmss00000k',
    );
    expect(lines).toContain(
      '  after the highest held (operator not restarted since): next collision at index 1101 (10.4.77.0/24 over 10.4.77.0/27 GatewaySubnet); 0 more nodes fit before it; 64178 safe node CIDRs left',
    );
    // Free below 1024: index 3 and 6-1023 (indexes 0, 1, 2, 4, 5 are held) = 1019.
    expect(lines).toContain(
      '  lowest free first (after an operator restart): next collision at index 1024 (10.4.0.0/24 over 10.4.0.0/22 app-gateway); 1019 more nodes fit before it; 65269 safe free node CIDRs',
    );
    expect(lines).toContain('CiliumNodes holding no node CIDR yet: aks-burst-40731652-vmss00000m');
  });

  // Issue 37, part 8: plan named the colliding index but not the node on it, and proposed no list.
  describe('the firewall-subnet incident: 10.0.0.0/8, /16 per node, AzureFirewallSubnet 10.3.0.0/24 under the fourth node', () => {
    const args = [
      '--values',
      f('values-firewall.yaml'),
      '--ciliumnodes',
      f('ciliumnodes-firewall.yaml'),
      '--azure-subnets',
      f('azure-subnets-firewall.json'),
    ];
    const HOLDER = 'aks-nodepool1-31877520-vmss000003';
    const RESERVED = ['10.224.0.0/16', '10.3.0.0/24'];
    const range = (c: string) => {
      const r = IPv4CidrRange.fromCidr(c);
      return { first: r.getFirst().value, last: r.getLast().value, prefix: Number(r.cidrPrefix.getValue()) };
    };
    const meets = (a: string, b: string) => !(range(a).last < range(b).first || range(b).last < range(a).first);
    const inside = (a: string, b: string) => range(b).first <= range(a).first && range(a).last <= range(b).last;
    /** Checks a proposed list by arithmetic: /16 node CIDRs it holds, none touching a reserved subnet. */
    const capacityOf = (list: string[]) => {
      let n = 0n;
      for (const c of list) {
        for (const r of RESERVED) expect(meets(c, r), `${c} meets ${r}`).toBe(false);
        expect(range(c).prefix, c).toBeLessThanOrEqual(16);
        n += 1n << BigInt(16 - range(c).prefix);
      }
      // Entries never overlap: the operator would hand a node CIDR out twice.
      const sorted = list.map(range).sort((a, b) => (a.first < b.first ? -1 : 1));
      for (let i = 1; i < sorted.length; i++) expect(sorted[i]!.first > sorted[i - 1]!.last).toBe(true);
      return n;
    };

    it('text: the holder named, a list that avoids both reserved subnets with room for the 5 CiliumNodes', async () => {
      const r = await plan(args);
      expect(r.exitCode, r.stderr).toBe(1);
      const lines = r.stdout.split('\n');
      expect(lines).toContain('IPv4 pool 10.0.0.0/8, /16 per node: 256 node CIDRs');
      expect(lines).toContain(
        `  1 held node CIDR(s) lie on a reserved subnet NOW: index 3 (10.3.0.0/16 over 10.3.0.0/24 AzureFirewallSubnet) held by ${HOLDER}`,
      );
      expect(lines).toContain('  proposal, the smallest change to ipam.operator.clusterPoolIPv4PodCIDRList for 5 nodes (the CiliumNodes given):');
      const listLine = lines.find((l) => l.startsWith('    ipam.operator.clusterPoolIPv4PodCIDRList: '))!;
      const list = listLine.split(': ')[1]!.split(',');
      expect(capacityOf(list)).toBe(254n);
      // The nodes that stay keep their node CIDRs: each lies in an entry of the proposed list.
      for (const held of ['10.0.0.0/16', '10.1.0.0/16', '10.2.0.0/16'])
        expect(
          list.some((c) => inside(held, c)),
          held,
        ).toBe(true);
      expect(lines).toContain('    254 node CIDRs, none on a reserved subnet; 3 held stay where they are, 251 free; room for 5 nodes');
      expect(r.stdout).toContain('    move these nodes once the list is applied (cordon, drain, delete the node and its CiliumNode;');
      expect(lines).toContain(`      ${HOLDER} holds 10.3.0.0/16 over 10.3.0.0/24 AzureFirewallSubnet`);
      expect(r.stdout).toContain("    apply: Cilium's cluster-pool cannot skip a node CIDR inside an entry");
    });

    it('--json: the same, and --nodes past what 10.0.0.0/8 holds is said plainly (exit codes unchanged)', async () => {
      const r = await plan([...args, '--json']);
      expect(r.exitCode, r.stderr).toBe(1);
      const v4 = JSON.parse(r.stdout).families[0];
      expect(v4.fromTaken.colliding).toEqual([{ index: '3', nodeCidr: '10.3.0.0/16', reserved: '10.3.0.0/24', nodes: [HOLDER] }]);
      const p = v4.proposal;
      expect(p).toMatchObject({ nodes: '5', changed: true, appendOnly: false, fits: true, capacity: '254', heldKept: '3', append: [] });
      expect(p.move).toEqual([{ nodeCidr: '10.3.0.0/16', nodes: [HOLDER], reserved: '10.3.0.0/24' }]);
      expect(capacityOf(p.list)).toBe(BigInt(p.capacity));
      expect(BigInt(p.capacity) >= 5n).toBe(true);
      for (const c of p.list) expect(inside(c, '10.0.0.0/8'), c).toBe(true);

      const big = await plan([...args, '--nodes', '300', '--json']);
      expect(big.exitCode, big.stderr).toBe(1);
      expect(JSON.parse(big.stdout).families[0].proposal).toMatchObject({
        nodes: '300',
        fits: false,
        missing: '46',
        space: '10.0.0.0/8',
        append: [],
      });
      const text = await plan([...args, '--nodes', '300']);
      expect(text.stdout).toContain('NO room for 300 nodes: 46 node CIDRs missing, no free /10 left in 10.0.0.0/8');
    });
  });

  // Issue 43, item 3: the help's own pipe example (no --values) planned the /16 cluster at Cilium's default /24:
  // a list Cilium cannot use, "nothing to move" while a node sat on the firewall subnet, the mismatch a last warning.
  describe('without --values: the mask from the nodes, or a refusal when they contradict the plan', () => {
    const nodes = () => readFile(f('ciliumnodes-firewall.yaml'), 'utf8');
    const subnets = ['--azure-subnets', f('azure-subnets-firewall.json')];
    const HOLDER = 'aks-nodepool1-31877520-vmss000003';

    it("kubectl get ciliumnodes -o yaml | ipam-shim plan --ciliumnodes -: /16 from the nodes, the values file's plan, the literal helm command", async () => {
      const r = await plan(['--ciliumnodes', '-', ...subnets], await nodes());
      expect(r.exitCode, r.stderr).toBe(1);
      const lines = r.stdout.split('\n');
      expect(lines).toContain('from the node CIDRs the CiliumNodes hold: ipam.operator.clusterPoolIPv4MaskSize 16');
      expect(lines).toContain("Cilium's defaults for: ipam.operator.clusterPoolIPv4PodCIDRList");
      expect(lines).toContain('IPv4 pool 10.0.0.0/8, /16 per node: 256 node CIDRs');
      expect(lines).toContain(
        `  1 held node CIDR(s) lie on a reserved subnet NOW: index 3 (10.3.0.0/16 over 10.3.0.0/24 AzureFirewallSubnet) held by ${HOLDER}`,
      );
      expect(r.stdout).not.toContain('nothing to move');
      expect(r.stdout).not.toContain('warning:');
      // The same proposal as from the cluster's values file (values-firewall.yaml: clusterPoolIPv4MaskSize 16).
      const json = JSON.parse((await plan(['--ciliumnodes', '-', ...subnets, '--json'], await nodes())).stdout);
      const withValues = JSON.parse(
        (await plan(['--values', f('values-firewall.yaml'), '--ciliumnodes', f('ciliumnodes-firewall.yaml'), ...subnets, '--json'])).stdout,
      );
      expect(json.inputs.inferred).toEqual(['ipam.operator.clusterPoolIPv4MaskSize 16']);
      expect(json.families).toEqual(withValues.families);
      // The command to run, whole: the list as --set takes it, the chart kept at the version it runs.
      const list: string[] = json.families[0].proposal.list;
      expect(lines.map((l) => l.trim())).toContain(
        `helm upgrade cilium cilium/cilium --namespace kube-system --reuse-values --version "$(helm get metadata cilium -n kube-system -o json | jq -r .version)" --set ipam.operator.clusterPoolIPv4PodCIDRList='{${list.join(',')}}'`,
      );
      expect(lines.map((l) => l.trim())).toContain('kubectl -n kube-system rollout restart deployment/cilium-operator');
    });

    it.each([
      [
        'a mask given that the nodes do not hold',
        ['--node-mask', '24'],
        (y: string) => y,
        `the CiliumNodes hold IPv4 node CIDRs that are no /24 (10.0.0.0/16 held by aks-nodepool1-31877520-vmss000000, 10.1.0.0/16 held by aks-nodepool1-31877520-vmss000001, 10.2.0.0/16 held by aks-nodepool1-31877520-vmss000002, 1 more; 4 /16 in all), but this plan cuts 10.0.0.0/8 into /24 per node (--node-mask)`,
      ],
      [
        'node CIDRs of two sizes and no mask given',
        [],
        (y: string) => y.replace('- 10.2.0.0/16', '- 10.2.0.0/24'),
        `the CiliumNodes hold IPv4 node CIDRs that are no /24 (10.0.0.0/16 held by aks-nodepool1-31877520-vmss000000, 10.1.0.0/16 held by aks-nodepool1-31877520-vmss000001, 10.3.0.0/16 held by ${HOLDER}; 3 /16, 1 /24 in all), but this plan cuts 10.0.0.0/8 into /24 per node (Cilium's default)`,
      ],
      [
        "node CIDRs outside Cilium's default list",
        [],
        (y: string) => y.replaceAll(/- 10\.(\d)\.0\.0\/16/g, '- 172.16.$1.0/24').replace('- 172.16.3.0/24', '- 10.3.0.0/24'),
        "the CiliumNodes hold IPv4 node CIDRs outside Cilium's default list 10.0.0.0/8 (172.16.0.0/24 held by aks-nodepool1-31877520-vmss000000, 172.16.1.0/24 held by aks-nodepool1-31877520-vmss000001, 172.16.2.0/24 held by aks-nodepool1-31877520-vmss000002)",
      ],
      [
        'a --pool none of the node CIDRs lies in',
        ['--pool', '192.168.0.0/16'],
        (y: string) => y,
        'the CiliumNodes hold IPv4 node CIDRs outside the list 192.168.0.0/16 (10.0.0.0/16 held by aks-nodepool1-31877520-vmss000000, 10.1.0.0/16 held by aks-nodepool1-31877520-vmss000001, 10.2.0.0/16 held by aks-nodepool1-31877520-vmss000002, 1 more: all of them), from --pool',
      ],
    ])('%s: exit 2, the mismatch the first line, nothing planned', async (_name, flags, edit, message) => {
      const r = await plan(['--ciliumnodes', '-', ...subnets, ...flags], edit(await nodes()));
      expect(r.exitCode, r.stdout).toBe(2);
      expect(r.stdout).toBe('');
      const first = r.stderr.split('\n')[0]!;
      expect(first).toContain(`ipam-shim plan: ${message}`);
      expect(first).toContain('helm get values cilium -n kube-system --all -o yaml > values.yaml');
    });
  });

  it('reads CiliumNodes from stdin (kubectl … | ipam-shim plan --ciliumnodes -), --json', async () => {
    const r = await plan(['--ciliumnodes', '-', '--azure-subnets', f('azure-subnets.json'), '--json'], await readFile(f('ciliumnodes.yaml'), 'utf8'));
    expect(r.exitCode, r.stderr).toBe(1);
    const out = JSON.parse(r.stdout);
    expect(out.inputs).toMatchObject({ mode: 'cluster-pool', nodes: 7, pendingNodes: ['aks-burst-40731652-vmss00000m'] });
    expect(out.inputs.files[0]).toMatchObject({ flag: '--ciliumnodes', source: 'stdin' });
    // No values file: the list is Cilium's default, the mask the nodes' (every node CIDR held is a /24).
    expect(out.inputs.defaulted).toEqual(['ipam.operator.clusterPoolIPv4PodCIDRList']);
    expect(out.inputs.inferred).toEqual(['ipam.operator.clusterPoolIPv4MaskSize 24']);
    const v4 = out.families[0];
    expect(v4.fromTaken).toMatchObject({
      count: '6',
      highest: '1100',
      collidingCount: '1',
      lowestFree: { nodesBefore: '1019' },
      safeFree: '65269',
      notInPool: [],
    });
    expect(v4.fromAllocated).toMatchObject({ allocated: '1101', nodesBefore: '0' });
  });

  it('dual-stack values: both lists, a quoted mask, the IPv6 pool planned because ipv6.enabled', async () => {
    const r = await plan(['--values', f('values-dual.yaml'), '--reserved', '10.1.5.0/24,fd00::4c00/118']);
    expect(r.exitCode, r.stderr).toBe(1);
    expect(r.stdout).toContain('IPv4 pool 10.0.0.0/16, 10.1.0.0/16, /24 per node: 512 node CIDRs');
    expect(r.stdout).toContain('first collision from the start: index 261 (10.1.5.0/24 over 10.1.5.0/24); 261 nodes fit before it');
    expect(r.stdout).toContain('IPv6 pool fd00::/104, /120 per node: 65536 node CIDRs');
    expect(r.stdout).toContain('first collision from the start: index 76 (fd00::4c00/120 over fd00::4c00/118); 76 nodes fit before it');
    expect(r.stdout).not.toContain("Cilium's defaults");
  });

  it('multi-pool: the auto-created pool from the values and the CiliumPodIPPools, each planned with the CIDRs nodes hold in it', async () => {
    const r = await plan([
      '--values',
      f('values-multipool.yaml'),
      '--ippools',
      f('ciliumpodippools.yaml'),
      '--ciliumnodes',
      f('ciliumnodes-multipool.yaml'),
      '--azure-subnets',
      f('azure-subnets.json'),
      '--json',
    ]);
    expect(r.exitCode, r.stderr).toBe(1);
    const out = JSON.parse(r.stdout);
    expect(out.inputs.mode).toBe('multi-pool');
    expect(out.inputs.defaulted).toEqual([]);
    expect(out.pools.map((p: { name: string }) => p.name)).toEqual(['default', 'batch']);
    const [def, batch] = out.pools;
    // default = 10.4.0.0/16 in /24s: 10.4.0-3 (app-gateway) and 10.4.76-77 collide; worker-a and worker-b hold 0, 1, 3.
    expect(def.collision).toBe(true);
    expect(def.families[0]).toMatchObject({ totalBlocks: '256', collidingBlocks: '6' });
    expect(def.families[0].fromTaken).toMatchObject({
      count: '3',
      highest: '3',
      collidingCount: '3',
      lowestFree: { firstCollision: { index: '2' }, nodesBefore: '0' },
    });
    // batch = 172.20.0.0/22 in /27s and fd00:20::/112 in /120s: nothing reserved there; worker-a holds one /27.
    expect(batch.collision).toBe(false);
    expect(batch.families.map((x: { family: number; totalBlocks: string }) => [x.family, x.totalBlocks])).toEqual([
      [4, '32'],
      [6, '256'],
    ]);
    expect(batch.families[0].fromTaken).toMatchObject({ count: '1', safeFree: '31' });
    // Each pool's proposal counts the nodes holding a block of it, and names those on a reserved subnet.
    expect(def.families[0].proposal).toMatchObject({ nodes: '2', fits: true, capacity: '250', heldKept: '0' });
    expect(def.families[0].proposal.move.map((m: { nodes: string[] }) => m.nodes[0])).toEqual(['worker-a', 'worker-a', 'worker-b']);
    expect(batch.families[0].proposal).toMatchObject({ nodes: '1', changed: false });
  });

  it('the bundle (node ipam-shim.js) loads the YAML parser from the file beside it, as the executable does from its asset', async () => {
    const args = ['--values', f('values-dual.yaml'), '--json'];
    const sea = await plan(args);
    const bundle = await plan(args, undefined, [process.execPath, BUNDLE_SHIM]);
    expect(bundle.exitCode, bundle.stderr).toBe(0);
    expect(JSON.parse(bundle.stdout)).toEqual(JSON.parse(sea.stdout));
  });

  it('the same multi-pool plan as text names each pool and where it came from', async () => {
    const r = await plan(['--values', f('values-multipool.yaml'), '--ippools', f('ciliumpodippools.yaml')]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain(`pool default (${f('values-multipool.yaml')}: autoCreateCiliumPodIPPools.default)`);
    expect(r.stdout).toContain(`pool batch (${f('ciliumpodippools.yaml')})`);
  });

  it.each([
    [['--ciliumnodes', f('azure-subnets.json')], /azure-subnets\.json: expected kubectl output \(a List of CiliumNode objects/],
    [
      ['--ippools', f('ciliumnodes.yaml')],
      /ciliumnodes\.yaml: expected CiliumPodIPPool objects .* found CiliumNode aks-nodepool1-26519183-vmss000000/,
    ],
    [['--azure-subnets', f('ciliumnodes.yaml')], /ciliumnodes\.yaml \[0\]: subnet \(no name\) has no addressPrefix/],
    [['--values', f('missing.yaml')], /missing\.yaml: cannot read: ENOENT/],
    [['--values', '-', '--ciliumnodes', '-'], /only one input can be read from stdin/],
  ])('refuses %j as a usage error naming the file', async (args, message) => {
    const r = await plan(args);
    expect(r.exitCode).toBe(2);
    expect(r.stdout).toBe('');
    expect(r.stderr.split('\n')[0]).toMatch(message);
  });

  it('refuses a file that is not YAML or JSON, and an IPAM mode plan does not model', async () => {
    const bad = await plan(['--values', '-'], 'ipam: [unclosed\n');
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toMatch(/^ipam-shim plan: stdin: not YAML or JSON: /);
    const azure = await plan(['--values', '-'], 'ipam:\n  mode: azure\n');
    expect(azure.exitCode).toBe(2);
    expect(azure.stderr).toMatch(/ipam\.mode azure: plan models cluster-pool and multi-pool/);
  });

  // Issue 34, item 7: a billion-laughs file was answered with exit 3 ("internal error"), not naming the file.
  describe('malformed input of any kind, alias bombs included: exit 2 naming the file, quickly', () => {
    /** Each level lists the one above nine times: 9^9 (387 million) strings once every alias is expanded. */
    const bomb = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
      .concat([...'bcdefghi'].map((k, i) => `${k}: &${k} [${Array(9).fill(`*${'abcdefghi'[i]}`).join(',')}]`))
      .join('\n');
    const MALFORMED: Record<string, string | Buffer> = {
      'alias bomb': `${bomb}\n`,
      'alias bomb in a list item': `kind: List\nitems:\n  - ${bomb.replaceAll('\n', '\n    ')}\n`,
      'alias bomb, second document': `kind: List\nitems: []\n---\n${bomb}\n`,
      'deeply nested flow sequences': `${'['.repeat(50_000)}${']'.repeat(50_000)}\n`,
      'deeply nested block maps': `${Array.from({ length: 3_000 }, (_, i) => `${' '.repeat(i)}k:`).join('\n')} 1\n`,
      'an alias to no anchor': 'ipam: *nowhere\n',
      'not text': Buffer.from([0xff, 0xfe, 0x00, 0x1b, 0x5b, 0x32, 0x4a, 0x00, 0x7b, 0x80]),
    };
    const FLAGS = ['--values', '--ciliumnodes', '--ippools', '--azure-subnets'];

    it.each(Object.keys(MALFORMED))('%s: from a file, each flag, and from stdin', async (name) => {
      const dir = await mkdtemp(join(tmpdir(), 'ipam-shim-plan-'));
      try {
        const file = join(dir, 'input.yaml');
        await writeFile(file, MALFORMED[name]!);
        for (const flag of FLAGS) {
          for (const [path, source, input] of [
            [file, file, undefined],
            ['-', 'stdin', MALFORMED[name]!],
          ] as const) {
            const t0 = Date.now();
            const r = await plan([flag, path], input as string | undefined);
            const what = `${flag} ${path}: ${r.stderr}`;
            expect(r.exitCode, what).toBe(2);
            expect(r.stdout, what).toBe('');
            // `FILE: why`, or `FILE [n]: why` for the nth document.
            expect(r.stderr.startsWith(`ipam-shim plan: ${source}`) && /^(: | \[\d+\]: )/.test(r.stderr.slice(16 + source.length)), what).toBe(true);
            expect(Date.now() - t0, what).toBeLessThan(10_000);
          }
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    });

    it('a directory where a file is expected; an endless input (read up to 256 MiB, not into memory without end)', async () => {
      const r = await plan(['--ciliumnodes', DIR]);
      expect(r.exitCode).toBe(2);
      expect(r.stderr).toMatch(new RegExp(`^ipam-shim plan: ${DIR}: cannot read: EISDIR`));
      const t0 = Date.now();
      const endless = await plan(['--values', '/dev/zero']);
      expect(endless.exitCode, endless.stderr).toBe(2);
      expect(endless.stderr).toMatch(/^ipam-shim plan: \/dev\/zero: larger than 256 MiB/);
      expect(Date.now() - t0).toBeLessThan(30_000);
    });
  });
});

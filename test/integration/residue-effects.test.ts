// azure-vnet residue against the real ebtables (nft backend) and iproute2, each test in fresh namespaces.
// Asserts by re-reading the system: full `ebtables -t nat -L` and `ip neigh show` text before and after.
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { CniError, ErrorCode } from '../../src/cni/errors.js';
import { deleteRule } from '../../src/effects/ebtables.js';
import { runInNetns, wrapRun, type Run } from '../../src/effects/exec.js';
import { deleteNeighbour, listNeighbours } from '../../src/effects/neigh.js';
import { cleanResidue } from '../../src/residue/clean.js';
import { findOrphans, listPreroutingResidue, listResidueFor } from '../../src/residue/find.js';
import { localMacs } from '../../src/effects/links.js';
import { rootOrSkip, TestNet, uid } from '../support/net/netns.js';
import { natListing, podRules, vnetBridge, withoutLines } from '../support/net/azure-vnet.js';

const POD = '10.240.0.32';
const POD_MAC = '0:d:3a:30:47:42'; // the dead MAC of a pod azure-vnet once attached
const DECOYS = [
  ...podRules('10.240.0.3', 'a2:96:88:20:cb:c6'),
  ...podRules('10.240.0.30/32', '0:d:3a:30:47:30'),
  ...podRules('10.240.0.33', '0:d:3a:30:47:33'),
  ['-p', 'IPv6', '-i', 'eth0', '--ip6-dst', 'fd00:10:240::320', '-j', 'dnat', '--to-dst', '0:d:3a:30:47:20', '--dnat-target', 'ACCEPT'],
];
const NODE_WIDE = [
  ['-p', 'ARP', '--arp-op', 'Request', '--arp-ip-dst', '10.240.0.5', '-j', 'arpreply', '--arpreply-mac', '0:d:3a:30:47:1'],
  ['-p', 'ARP', '-i', 'eth0', '--arp-op', 'Reply', '-j', 'dnat', '--to-dst', 'ff:ff:ff:ff:ff:ff', '--dnat-target', 'ACCEPT'],
  ['-p', 'IPv4', '--ip-dst', '10.240.0.0/16', '-j', 'dnat', '--to-dst', POD_MAC, '--dnat-target', 'ACCEPT'],
];
const SNAT = ['-s', 'unicast', '-o', 'eth0', '-j', 'snat', '--to-src', '0:d:3a:30:47:1', '--snat-arp', '--snat-target', 'ACCEPT'];

const appendAll = async (r: Run, rules: string[][]) => {
  for (const rule of rules) await r('ebtables', ['-t', 'nat', '-A', 'PREROUTING', ...rule]);
};
const neighText = async (r: Run) => (await r('ip', ['neigh', 'show'])).stdout;

describe.skipIf(!rootOrSkip())('residue effects (root, real ebtables and iproute2)', () => {
  const net = new TestNet();
  afterEach(() => net.cleanup());

  /** A node netns with bridge azure0 (10.240.0.5/16), residue for .32, decoys and node-wide rules. */
  async function residueNode(): Promise<{ ns: string; r: Run }> {
    const ns = await net.netns('node');
    const r = runInNetns(ns);
    for (const dev of ['azure0', 'lxcpod']) {
      await r('ip', ['link', 'add', dev, 'type', 'bridge']);
      await r('ip', ['link', 'set', dev, 'up']);
    }
    await r('ip', ['addr', 'add', '10.240.0.5/16', 'dev', 'azure0']);
    await appendAll(r, [...DECOYS.slice(0, 2), ...podRules(POD, POD_MAC), ...DECOYS.slice(2), ...NODE_WIDE]);
    await r('ebtables', ['-t', 'nat', '-A', 'POSTROUTING', ...SNAT]);
    const neigh = (ip: string, mac: string, dev = 'azure0') => r('ip', ['neigh', 'add', ip, 'lladdr', mac, 'dev', dev, 'nud', 'permanent']);
    await neigh(POD, POD_MAC);
    await neigh('10.240.0.3', 'a2:96:88:20:cb:c6');
    await neigh('10.240.0.30', '0:d:3a:30:47:30');
    await neigh('10.240.0.33', '0:d:3a:30:47:33');
    await neigh('fd00:10:240::32', POD_MAC);
    await neigh(POD, '0a:58:0a:f0:00:20', 'lxcpod'); // the pod's own (excluded) device
    return { ns, r };
  }

  it('cleans exactly the pod’s rules and neighbour; everything else is byte-for-byte unchanged', async () => {
    const { r } = await residueNode();
    const [ebBefore, neighBefore] = [await natListing(r), await neighText(r)];

    const seen = await listResidueFor(r, [POD], { excludeDevs: ['lxcpod'] });
    expect(seen.ebtablesAvailable).toBe(true);
    expect(seen.rules.map((x) => x.kind)).toEqual(['arpreply', 'dnat4']);

    const res = await cleanResidue(r, [POD], { excludeDevs: ['lxcpod'] });
    const removedLines = [
      '-p ARP --arp-op Request --arp-ip-dst 10.240.0.32 -j arpreply --arpreply-mac 00:0d:3a:30:47:42',
      '-p IPv4 -i eth0 --ip-dst 10.240.0.32 -j dnat --to-dst 00:0d:3a:30:47:42 --dnat-target ACCEPT',
    ];
    expect(res.removed.rules.map((x) => x.text)).toEqual(removedLines);
    expect(res.removed.neighbours).toEqual([{ ip: POD, dev: 'azure0', mac: '00:0d:3a:30:47:42', state: ['PERMANENT'] }]);
    expect(res.errors).toEqual([]);

    expect(await natListing(r)).toBe(withoutLines(ebBefore, removedLines));
    expect(await neighText(r)).toBe(withoutLines(neighBefore, ['10.240.0.32 dev azure0 lladdr 00:0d:3a:30:47:42 PERMANENT ']));

    // Idempotent: a second run finds and removes nothing.
    const again = await cleanResidue(r, [POD], { excludeDevs: ['lxcpod'] });
    expect(again.removed).toEqual({ rules: [], neighbours: [] });
    expect(await listResidueFor(r, [POD], { excludeDevs: ['lxcpod'] })).toMatchObject({ ebtablesAvailable: true, rules: [], neighbours: [] });
  });

  it("lists each backend with its own program: ebtables-nft holds the rules, ebtables-legacy (no nat table in this kernel) is unavailable with the kernel's reason; deletes with the holder's program", async () => {
    const { r } = await residueNode();
    const ebBefore = await natListing(r, 'ebtables-nft');
    const both = {
      read: [
        { name: 'legacy' as const, program: 'ebtables-legacy' },
        { name: 'nft' as const, program: 'ebtables-nft' },
      ],
      skipped: [],
    };
    const listed = await listPreroutingResidue(r, undefined, both);
    expect(listed.available).toBe(true);
    expect(listed.backends).toEqual([
      { name: 'legacy', program: 'ebtables-legacy', available: false, reason: "The kernel doesn't support the ebtables 'nat' table." },
      { name: 'nft', program: 'ebtables-nft', available: true, rules: listed.rules.length },
    ]);
    expect(new Set(listed.rules.map((x) => `${x.backend} ${x.program}`))).toEqual(new Set(['nft ebtables-nft']));
    const dnat = listed.rules.find((x) => x.ip === POD && x.kind === 'dnat4')!;
    expect(await deleteRule(r, dnat, dnat.program)).toBe('deleted');
    // The legacy program cannot delete what it cannot see: "absent", never a false "deleted".
    expect(await deleteRule(r, listed.rules.find((x) => x.ip === POD && x.kind === 'arpreply')!, 'ebtables-legacy')).toBe('absent');
    expect(await natListing(r, 'ebtables-nft')).toBe(withoutLines(ebBefore, [dnat.text]));
  });

  it('cleans an IPv6 pod without touching its IPv4-looking or ::320 neighbours', async () => {
    const { r } = await residueNode();
    await appendAll(r, [['-p', 'IPv6', '-i', 'eth0', '--ip6-dst', 'fd00:10:240::32', '-j', 'dnat', '--to-dst', POD_MAC, '--dnat-target', 'ACCEPT']]);
    const before = await natListing(r);
    const res = await cleanResidue(r, ['fd00:10:240:0::32/64']);
    expect(res.removed.rules.map((x) => x.text)).toEqual([
      '-p IPv6 -i eth0 --ip6-dst fd00:10:240::32 -j dnat --to-dst 00:0d:3a:30:47:42 --dnat-target ACCEPT',
    ]);
    expect(res.removed.neighbours.map((n) => n.ip)).toEqual(['fd00:10:240::32']);
    expect(await natListing(r)).toBe(
      withoutLines(
        before,
        res.removed.rules.map((x) => x.text),
      ),
    );
  });

  it('delete primitives are idempotent; orphans are reported by MAC', async () => {
    const { r } = await residueNode();
    const { rules } = await listPreroutingResidue(r);
    const rule = rules.find((x) => x.ip === POD && x.kind === 'dnat4')!;
    expect(await deleteRule(r, rule)).toBe('deleted');
    expect(await deleteRule(r, rule)).toBe('absent');
    expect(await deleteNeighbour(r, POD, 'azure0')).toBe('deleted');
    expect(await deleteNeighbour(r, POD, 'azure0')).toBe('absent');
    expect(await deleteNeighbour(r, POD, 'nosuchdev')).toBe('absent');
    expect((await listNeighbours(r, 6)).map((n) => n.ip)).toEqual(['fd00:10:240::32']);

    // Give azure0 the dead pod MAC: its rules stop being orphans, the decoys' remain.
    await r('ip', ['link', 'set', 'azure0', 'address', '00:0d:3a:30:47:42']);
    const orphans = findOrphans((await listPreroutingResidue(r)).rules, await localMacs(r));
    expect(orphans.map((x) => x.ip).sort()).toEqual([
      '10.240.0.3',
      '10.240.0.3',
      '10.240.0.30',
      '10.240.0.30',
      '10.240.0.33',
      '10.240.0.33',
      '10.240.0.5',
      'fd00:10:240::320',
    ]);
  });

  it('absent ebtables is tolerated; neighbours are still cleaned', async () => {
    const { r } = await residueNode();
    const noEbtables = wrapRun(r, (file, args, opts, inner) => inner(file === 'ebtables' ? `/nonexistent-${uid()}/ebtables` : file, args, opts));
    const res = await cleanResidue(noEbtables, [POD]);
    expect(res.ebtablesAvailable).toBe(false);
    expect(res.removed.rules).toEqual([]);
    expect(res.removed.neighbours.map((n) => n.dev).sort()).toEqual(['azure0', 'lxcpod']);
  });

  it('a deletion that really fails throws CniError 102 naming the rule, after trying the rest', async () => {
    const { r } = await residueNode();
    const listed = await natListing(r);
    // ebtables -D as an unprivileged user: a real failure ("Permission denied (you must be root)").
    const failingDelete = wrapRun(r, (file, args, opts, inner) =>
      file === 'ebtables' && args.includes('-D')
        ? inner('setpriv', ['--reuid', '65534', '--regid', '65534', '--clear-groups', file, ...args], opts)
        : inner(file, args, opts),
    );
    const err = await cleanResidue(failingDelete, [POD], { excludeDevs: ['lxcpod'] }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(CniError);
    expect((err as CniError).code).toBe(ErrorCode.ResidueCleanupFailed);
    expect((err as CniError).details).toContain('--arp-ip-dst 10.240.0.32 -j arpreply');
    expect((err as CniError).details).toContain('--ip-dst 10.240.0.32 -j dnat');
    // The neighbour deletion went ahead regardless; the rules are untouched.
    expect((await listResidueFor(r, [POD])).neighbours.map((n) => n.dev)).toEqual(['lxcpod']);
    expect(await natListing(r)).toBe(listed);

    const kept = await cleanResidue(failingDelete, [POD], { keepGoing: true });
    expect(kept.errors.map((e) => e.message).join('\n')).toMatch(/Permission denied/);
  });

  it('with 2,000 unrelated rules, cleaning one IP removes exactly its rules', async () => {
    const ns = await net.netns('node');
    const r = runInNetns(ns);
    const lines = ['*nat', ':PREROUTING ACCEPT'];
    for (let i = 0; i < 1000; i++) {
      const ip = `10.241.${i >> 8}.${i & 255}`;
      const mac = `0:d:3a:${(i >> 8).toString(16)}:${(i & 255).toString(16)}:1`;
      if (i === 500) for (const rule of podRules(POD, POD_MAC)) lines.push(`-A PREROUTING ${rule.join(' ')}`);
      for (const rule of podRules(ip, mac)) lines.push(`-A PREROUTING ${rule.join(' ')}`);
    }
    await r('ebtables-restore', ['--noflush'], { input: `${lines.join('\n')}\n` });
    const before = await natListing(r);
    expect(before).toContain('entries: 2002,');

    const t0 = performance.now();
    const res = await cleanResidue(r, [POD]);
    const ms = performance.now() - t0;
    expect(res.removed.rules.map((x) => x.ip)).toEqual([POD, POD]);
    expect(await natListing(r)).toBe(
      withoutLines(
        before,
        res.removed.rules.map((x) => x.text),
      ),
    );
    expect(ms).toBeLessThan(5_000);
    console.info(`cleanResidue with 2,002 rules: ${ms.toFixed(0)} ms`);
  });

  it('real packets: the residue blackholes the pod, cleanResidue brings it back', async () => {
    const node = await net.netns('node');
    const vnet = await vnetBridge(net, node, `${POD}/32`);
    const pod = await net.netns('pod');
    const [rv, rn] = [runInNetns(vnet), runInNetns(node)];

    // Attach the pod with the reference ptp plugin + host-local, run inside the node netns.
    const dataDir = await mkdtemp(join(tmpdir(), 'residue-hl-'));
    net.defer(() => rm(dataDir, { recursive: true, force: true }));
    const conf = JSON.stringify({
      cniVersion: '1.0.0',
      name: `residue-${uid()}`,
      type: 'ptp',
      ipam: {
        type: 'host-local',
        dataDir,
        ranges: [[{ subnet: '10.240.0.0/16', rangeStart: '10.240.0.32', rangeEnd: '10.240.0.63' }]],
        routes: [{ dst: '0.0.0.0/0' }],
      },
    });
    const ptp = (command: string) =>
      rn('/usr/lib/cni/ptp', [], {
        input: conf,
        env: {
          CNI_COMMAND: command,
          CNI_CONTAINERID: `residue-${pod}`,
          CNI_NETNS: `/run/netns/${pod}`,
          CNI_IFNAME: 'eth0',
          CNI_PATH: '/usr/lib/cni',
        },
      });
    const added = JSON.parse((await ptp('ADD')).stdout) as { ips: Array<{ address: string }> };
    net.defer(() => ptp('DEL'));
    expect(added.ips[0]?.address).toBe(`${POD}/16`);

    const ping = () => rv('ping', ['-c', '3', '-i', '0.2', '-W', '1', POD], { check: false });
    expect((await ping()).exitCode).toBe(0);

    await appendAll(rn, podRules(POD, POD_MAC));
    const lost = await ping();
    expect(lost.exitCode).not.toBe(0);
    expect(lost.stdout).toContain('100% packet loss');
    const counters = (await rn('ebtables', ['-t', 'nat', '-L', 'PREROUTING', '--Lc'])).stdout;
    const dnatPackets = Number(counters.match(/--ip-dst 10\.240\.0\.32 .*pcnt = (\d+)/)?.[1]);
    expect(dnatPackets).toBeGreaterThanOrEqual(3);

    const res = await cleanResidue(rn, [added.ips[0]!.address]);
    expect(res.removed.rules.map((x) => x.kind)).toEqual(['arpreply', 'dnat4']);
    expect((await ping()).exitCode).toBe(0);
  });
});

// Failure 1 through CRI: azure-vnet's per-pod ebtables rules (arpreply + dnat) and a PERMANENT neighbour for the
// address the pod will get are planted in the node, next to decoys and node-wide rules (the verified reproduction,
// as in test/e2e/residue.test.ts):
//   netns vnet (10.240.0.4/16) ── veth ── node netns: eth0 ⊂ bridge azure0 (10.240.0.5/16), ip_forward=1,
//   containerd running there; pods attached by cilium-cni (the bed's stand-in) + host-local 10.240.0.32–63.
// After RunPodSandbox the VNet host reaches the pod with real ping; decoys and node-wide rules are intact.
// A pod started while the shim was not in the list (the watch window, an upgrade) is the node agent's: its first
// pass reads containerd's result cache and removes that pod's residue; a pod holding a reserved address is
// reported with its namespace/name and left alone.
import { execa } from 'execa';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { runInNetns, type Run } from '../../src/effects/exec.js';
import { hostLocalAllocations, ledgerRecords } from '../support/shim/cni.js';
import { inNs } from '../support/net/netns.js';
import { PLACEMENTS, shimConfList, VERSIONS } from '../support/runtimes/cri/conflists.js';
import { criOrSkip, useCriBed } from '../support/runtimes/cri/suite.js';
import { CRI_SHIM } from '../support/runtimes/cri/bed.js';
import { natRestoreInput, podRules, vnetBridge, withoutLines } from '../support/net/azure-vnet.js';
import { followAgent, isPass } from '../support/shim/agent.js';

const enabled = criOrSkip();
const POD = '10.240.0.32';
const DEAD_MAC = '0:d:3a:30:47:42';
const RANGES = [[{ subnet: '10.240.0.0/16', rangeStart: '10.240.0.32', rangeEnd: '10.240.0.63' }]];

const isPodLine = (l: string) => /--(arp-)?ip-dst 10\.240\.0\.32(\/32)? /.test(l);

describe.skipIf(!enabled)('azure-vnet residue through containerd CRI', () => {
  let vnet = '';
  let r: Run;
  let eth0Mac = '';
  const s = useCriBed({
    confList: (dirs) => shimConfList(dirs, { placement: 'chained', cniVersion: '0.3.1', ranges: RANGES }),
    async prepare(node, net) {
      vnet = await vnetBridge(net, node);
      r = runInNetns(node);
      eth0Mac = (JSON.parse((await r('ip', ['-j', 'link', 'show', 'eth0'])).stdout) as Array<{ address: string }>)[0]!.address;
    },
  });

  /** A clean slate in the node, then azure-vnet's leftovers: node-wide rules, the pod's rules, decoys, neighbours. */
  async function plantResidue(): Promise<void> {
    await r('ebtables', ['-t', 'nat', '-F']);
    await r('ip', ['neigh', 'flush', 'nud', 'permanent']);
    const chain = [
      ['-p', 'ARP', '--arp-op', 'Request', '--arp-ip-dst', '10.240.0.5', '-j', 'arpreply', '--arpreply-mac', eth0Mac],
      ...podRules('10.240.0.3', 'a2:96:88:20:cb:c6'),
      ...podRules('10.240.0.30/32', '0:d:3a:30:47:30'),
      ...podRules(POD, DEAD_MAC),
      ...podRules('10.240.0.33', '0:d:3a:30:47:33'),
      ['-p', 'IPv6', '-i', 'eth0', '--ip6-dst', 'fd00:10:240::32', '-j', 'dnat', '--to-dst', DEAD_MAC, '--dnat-target', 'ACCEPT'],
    ];
    await r('ebtables-restore', ['--noflush'], { input: natRestoreInput(chain, eth0Mac) });
    await r('ip', ['neigh', 'add', POD, 'lladdr', DEAD_MAC, 'dev', 'azure0', 'nud', 'permanent']);
    await r('ip', ['neigh', 'add', '10.240.0.33', 'lladdr', '0:d:3a:30:47:33', 'dev', 'azure0', 'nud', 'permanent']);
  }
  const natListing = async () => (await r('ebtables', ['-t', 'nat', '-L'])).stdout;
  const permanentNeigh = async () => (await r('ip', ['neigh', 'show', 'nud', 'permanent'])).stdout;
  const ping = async () => (await inNs(vnet, 'ping', ['-c', '3', '-i', '0.2', '-W', '1', '-q', POD], { reject: false })).exitCode;
  /** host-local hands out round-robin: forget its last reservation so every case's pod gets POD again. */
  const resetHostLocal = () => rm(path.join(s.bed.dataDir, s.bed.network), { recursive: true, force: true });

  it('without the shim the residue eats the pod’s traffic (the failure is real in this bed)', async () => {
    await s.bed.setConfList(shimConfList(s.bed, { placement: 'chained', cniVersion: '0.3.1', ranges: RANGES, withoutShim: true }));
    await resetHostLocal();
    await plantResidue();
    const pod = await s.bed.runPod('no-shim');
    expect(pod.ips).toEqual([POD]);
    expect(await ping()).not.toBe(0);
    await s.bed.removePod(pod.id);
  });

  describe.each(VERSIONS)('cniVersion %s', (cniVersion) => {
    it.each(PLACEMENTS)('%s: after RunPodSandbox the VNet host pings the pod; exactly the pod’s rules and neighbour are gone', async (placement) => {
      await s.bed.setConfList(shimConfList(s.bed, { placement, cniVersion, ranges: RANGES }));
      await resetHostLocal();
      await plantResidue();
      const before = await natListing();
      const neighBefore = await permanentNeigh();
      const podLines = before.split('\n').filter(isPodLine);
      expect(podLines).toHaveLength(2);
      expect(neighBefore).toContain(`${POD} dev azure0 lladdr 00:0d:3a:30:47:42 PERMANENT`);

      const pod = await s.bed.runPod(`residue-${placement}`);
      expect(pod.ips).toEqual([POD]);
      expect(await ledgerRecords(s.bed.stateDir, s.bed.network)).toEqual([`${pod.id}:eth0.json`]);
      expect(await ping()).toBe(0);
      expect(await natListing()).toBe(withoutLines(before, podLines));
      expect(await permanentNeigh()).toBe(withoutLines(neighBefore, [`${POD} dev azure0 lladdr 00:0d:3a:30:47:42 PERMANENT `]));

      await s.bed.removePod(pod.id);
      expect(await ledgerRecords(s.bed.stateDir, s.bed.network)).toEqual([]);
      expect(await hostLocalAllocations(s.bed.dataDir, s.bed.network)).toEqual([]);
      // DEL touches no residue rule: what is left stays as it was
      expect(await natListing()).toBe(withoutLines(before, podLines));
    });
  });

  /**
   * `ipam-shim agent` on the node (its netns, the host's /var/lib/cni where containerd's libcni caches), verifying
   * the bed's conflist (--no-install), until its first pass ends; then SIGTERM. Returns its JSON log lines.
   */
  async function agentFirstPass(): Promise<Array<Record<string, any>>> {
    const proc = execa(
      'nsenter',
      [
        `--net=/run/netns/${s.node}`,
        CRI_SHIM,
        'agent',
        '--no-install',
        '--conflist',
        s.bed.confListPath,
        '--cni-path',
        s.bed.binDir,
        '--cache-dir',
        '/var/lib/cni',
        '--interval',
        '3600',
        '--jitter',
        '0',
      ],
      { reject: false, buffer: false },
    );
    const agent = followAgent(proc);
    try {
      const end = Date.now() + 60_000;
      while (!agent.passes().length) {
        if (Date.now() > end || proc.exitCode !== null) throw new Error(`no pass from the agent:\n${agent.text()}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      proc.kill('SIGTERM');
      await proc;
    }
    return agent.lines();
  }

  it("a pod started without the shim in the list: the agent's first pass removes exactly its residue (decoys stay) and the VNet host pings it", async () => {
    await s.bed.setConfList(shimConfList(s.bed, { placement: 'chained', cniVersion: '0.3.1', ranges: RANGES, withoutShim: true }));
    await resetHostLocal();
    await plantResidue();
    const pod = await s.bed.runPod('outside');
    expect(pod.ips).toEqual([POD]);
    expect(await ping()).not.toBe(0);
    const before = await natListing();
    const neighBefore = await permanentNeigh();
    const podLines = before.split('\n').filter(isPodLine);
    expect(podLines).toHaveLength(2);
    // The shim's entry is back in the list (install --watch after a rewrite): too late for this pod's ADD.
    await s.bed.setConfList(shimConfList(s.bed, { placement: 'chained', cniVersion: '0.3.1', ranges: RANGES }));
    expect(await ledgerRecords(s.bed.stateDir, s.bed.network)).toEqual([]);

    const lines = await agentFirstPass();
    const pass = lines.find(isPass)!;
    expect(pass, JSON.stringify(lines)).toMatchObject({ runtimePods: 1, unseenPods: 1, reservedPods: 0, residueRemoved: 3, errors: 0 });
    expect(lines.some((l) => /never saw/.test(l.msg) && l.new?.[0]?.pod === 'default/outside')).toBe(true);
    expect(await ping()).toBe(0);
    expect(await natListing()).toBe(withoutLines(before, podLines));
    expect(await permanentNeigh()).toBe(withoutLines(neighBefore, [`${POD} dev azure0 lladdr 00:0d:3a:30:47:42 PERMANENT `]));
    await s.bed.removePod(pod.id);
    expect(await hostLocalAllocations(s.bed.dataDir, s.bed.network)).toEqual([]);
  });

  it('a pod holding a reserved address (through the cache): reported with its namespace/name, its residue and address untouched', async () => {
    await s.bed.setConfList(shimConfList(s.bed, { placement: 'chained', cniVersion: '0.3.1', ranges: RANGES, withoutShim: true }));
    await resetHostLocal();
    await plantResidue();
    const pod = await s.bed.runPod('reserved');
    expect(pod.ips).toEqual([POD]);
    await s.bed.setConfList(
      shimConfList(s.bed, { placement: 'chained', cniVersion: '0.3.1', ranges: RANGES, shim: { reservedCIDRs: [`${POD}/32`] } }),
    );
    const before = await natListing();
    const neighBefore = await permanentNeigh();

    const lines = await agentFirstPass();
    const pass = lines.find(isPass)!;
    expect(pass, JSON.stringify(lines)).toMatchObject({ runtimePods: 1, unseenPods: 1, reservedPods: 1, residueRemoved: 0, errors: 0 });
    expect(lines.find((l) => l.reservedCIDR === `${POD}/32`)).toMatchObject({
      level: 'warn',
      namespace: 'default',
      name: 'reserved',
      containerID: pod.id,
      ip: POD,
    });
    expect(await natListing()).toBe(before);
    expect(await permanentNeigh()).toBe(neighBefore);
    expect((await s.bed.inspect(pod.id)).ips).toEqual([POD]);
    expect(await hostLocalAllocations(s.bed.dataDir, s.bed.network)).toEqual([POD]);
    await s.bed.removePod(pod.id);
  });
});

// Failure 2 through CRI: cilium-agent's own IP (allocated with `ipam-shim agent-ip allocate` on the node) is never
// released while pods come and go through containerd; a pod address leaked by a node that lost its runtime state
// (containerd killed, sandboxes gone without a DEL, libcni's cache and containerd's state wiped) is found and
// released by `ipam-shim gc --apply`, whose valid list is containerd's own result cache; live pods keep theirs.
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { hostLocalAllocations, ledgerRecords } from '../support/shim/cni.js';
import { uid } from '../support/net/netns.js';
import { PLACEMENTS, shimConfList, VERSIONS } from '../support/runtimes/cri/conflists.js';
import { criOrSkip, useCriBed } from '../support/runtimes/cri/suite.js';

const enabled = criOrSkip();

describe.skipIf(!enabled)('agent IPs and GC through containerd CRI', () => {
  const s = useCriBed({
    confList: (dirs) => shimConfList(dirs, { placement: 'chained', cniVersion: '0.3.1', ranges: [[{ subnet: '10.100.0.0/24' }]] }),
  });
  let third = 0;

  describe.each(VERSIONS)('cniVersion %s', (cniVersion) => {
    it.each(PLACEMENTS)('%s: the agent IP survives pods coming and going; gc --apply releases only the leaked pod', async (placement) => {
      third++;
      await s.bed.setConfList(shimConfList(s.bed, { placement, cniVersion, ranges: [[{ subnet: `10.100.${third}.0/24` }]] }));
      const owner = `health-${uid()}`;
      s.net.defer(() => execa('ip', ['netns', 'del', `ipam-shim-agent-${owner}`], { reject: false }));
      const store = () => hostLocalAllocations(s.bed.dataDir, s.bed.network);
      const ledger = () => ledgerRecords(s.bed.stateDir, s.bed.network);

      const agent = await s.bed.cli(['agent-ip', 'allocate', '--owner', owner]);
      expect(agent.exitCode, agent.stderr).toBe(0);
      const agentIps: string[] = agent.json.ips;
      expect(agentIps).toHaveLength(1);
      const agentRecord = `cilium-agent-${owner}:eth0.json`;

      // pods come and go through kubelet's calls (each removal sends containerd's repeated DELs)
      const a = await s.bed.runPod('a');
      const b = await s.bed.runPod('b');
      await s.bed.removePod(a.id);
      const leaked = await s.bed.runPod('leaked');
      await s.bed.removePod(b.id);
      expect(new Set([...agentIps, ...a.ips, ...b.ips, ...leaked.ips]).size).toBe(4);
      expect(await ledger()).toEqual([agentRecord, `${leaked.id}:eth0.json`].sort());
      expect(await store()).toEqual([...agentIps, ...leaked.ips].sort());

      // The node loses its runtime with `leaked` running: no DEL ever comes for it. New pods start afterwards.
      await s.bed.crashAndWipe();
      const live = [await s.bed.runPod('live-1'), await s.bed.runPod('live-2')];
      expect(await store()).toEqual([...agentIps, ...leaked.ips, ...live.flatMap((p) => p.ips)].sort());

      const dry = await s.bed.cli(['gc', '--grace-seconds', '0']);
      expect(dry.exitCode, dry.stdout).toBe(1); // something leaked
      expect(dry.json.valid.map((v: { containerID: string }) => v.containerID).sort()).toEqual(live.map((p) => p.id).sort());
      expect(dry.json.release.map((r: { containerID: string; ips: string[] }) => [r.containerID, r.ips])).toEqual([[leaked.id, leaked.ips]]);
      expect(await store()).toContain(leaked.ips[0]);

      const applied = await s.bed.cli(['gc', '--grace-seconds', '0', '--apply']);
      expect(applied.exitCode, applied.stdout).toBe(0);
      expect(applied.json.released).toEqual([{ containerID: leaked.id, ifname: 'eth0' }]);
      expect(applied.json.kept.map((k: { containerID: string; reason: string }) => [k.containerID, k.reason]).sort()).toEqual(
        [[`cilium-agent-${owner}`, 'agent'], ...live.map((p) => [p.id, 'valid'])].sort(),
      );
      expect(await store()).toEqual([...agentIps, ...live.flatMap((p) => p.ips)].sort());
      expect(await ledger()).toEqual([agentRecord, ...live.map((p) => `${p.id}:eth0.json`)].sort());
      for (const p of live) await execa('nsenter', [`--net=/run/netns/${s.node}`, 'ping', '-c', '1', '-W', '2', p.ips[0]!]);

      for (const p of live) await s.bed.removePod(p.id);
      expect(await store()).toEqual(agentIps);
      expect((await s.bed.cli(['agent-ip', 'release', '--owner', owner])).exitCode).toBe(0);
      expect(await store()).toEqual([]);
      expect(await ledger()).toEqual([]);
    });
  });
});

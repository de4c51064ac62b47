// Failure 2 through CRI: cilium-agent's own IP (allocated with `ipam-shim agent-ip allocate` on the node) is never
// released while pods come and go through containerd; a pod address leaked by a node that lost its runtime state
// (containerd killed, sandboxes gone without a DEL, libcni's cache and containerd's state wiped) is found and
// released by `ipam-shim gc --apply`, whose valid list is containerd's own result cache; live pods keep theirs;
// the agent's own pass (`ipam-shim agent --gc apply`) releases such a pod the same way. Each with every delegate of
// DELEGATE_CASES: host-local, and azure-ipam over the CNS stand-in in both of CNS's key schemes, where a DEL that did
// not name the leaked pod would release another key's address (issue 47: cilium-agent's).
import { execa } from 'execa';
import { describe, expect, it } from 'vitest';
import { ledgerRecords } from '../support/shim/cni.js';
import { uid } from '../support/net/netns.js';
import { DELEGATE_CASES, delegateBed, PLACEMENTS, shimConfList, VERSIONS } from '../support/runtimes/cri/conflists.js';
import { criOrSkip, useCriBed } from '../support/runtimes/cri/suite.js';
import { CRI_SHIM, type CriBed, type Pod } from '../support/runtimes/cri/bed.js';
import { followAgent } from '../support/shim/agent.js';

const enabled = criOrSkip();

/** CNS's pool for the azure-ipam cases (host-local gets a /24 of its own per test). */
const POOLS = [{ subnet: '10.100.0.0/16', first: '10.100.9.10', last: '10.100.9.60' }];

/**
 * With CNS (an azure-ipam bed): exactly these holdings, each pod under its key and the agent's address under the key
 * it got at allocation. Nothing to check with host-local (its store is compared by address).
 */
async function expectCns(bed: CriBed, agent: { key: string | undefined; ips: string[] }, pods: Pod[]): Promise<void> {
  if (!bed.cns) return;
  expect(await bed.cns.holdings()).toEqual(Object.fromEntries([[agent.key, agent.ips], ...pods.map((p) => [bed.cnsKey(p), p.ips])]));
}

/**
 * `ipam-shim agent --gc apply` on the node (its netns, the host's /var/lib/cni where containerd's libcni caches),
 * verifying the bed's conflist (--no-install), until its first pass ends; then SIGTERM. Returns that pass's line.
 */
async function agentFirstPass(bed: CriBed): Promise<Record<string, any>> {
  const args = ['agent', '--no-install', '--conflist', bed.confListPath, '--cni-path', bed.binDir, '--cache-dir', '/var/lib/cni'];
  const flags = ['--gc', 'apply', '--grace-seconds', '0', '--interval', '3600', '--jitter', '0'];
  const proc = execa('nsenter', [`--net=/run/netns/${bed.node}`, CRI_SHIM, ...args, ...flags], { reject: false, buffer: false });
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
  return agent.passes()[0]!;
}

for (const dc of DELEGATE_CASES)
  describe.skipIf(!enabled)(`agent IPs and GC through containerd CRI (${dc.label})`, () => {
    const { delegate } = dc;
    const s = useCriBed({
      ...delegateBed(dc, POOLS),
      confList: (dirs) => shimConfList(dirs, { placement: 'chained', cniVersion: '0.3.1', ranges: [[{ subnet: '10.100.0.0/24' }]], delegate }),
    });
    let third = 0;
    const store = () => s.bed.delegateHeld();
    const ledger = () => ledgerRecords(s.bed.stateDir, s.bed.network);
    /** `agent-ip allocate` for a fresh owner: its addresses and, with CNS, the key they are held under. */
    async function allocateAgentIp(): Promise<{ owner: string; ips: string[]; key: string | undefined; record: string }> {
      const owner = `health-${uid()}`;
      s.net.defer(() => execa('ip', ['netns', 'del', `ipam-shim-agent-${owner}`], { reject: false }));
      const agent = await s.bed.cli(['agent-ip', 'allocate', '--owner', owner]);
      expect(agent.exitCode, agent.stderr).toBe(0);
      const ips: string[] = agent.json.ips;
      expect(ips).toHaveLength(1);
      const key = await s.bed.cns?.holderOf(ips[0]!);
      // Its own identity: neither the empty one (`:`) nor a pod's.
      if (s.bed.cns) expect(key).toBeDefined();
      if (s.bed.cns) expect(key).not.toBe(':');
      return { owner, ips, key, record: `cilium-agent-${owner}:eth0.json` };
    }

    describe.each(VERSIONS)('cniVersion %s', (cniVersion) => {
      it.each(PLACEMENTS)('%s: the agent IP survives pods coming and going; gc --apply releases only the leaked pod', async (placement) => {
        third++;
        await s.bed.setConfList(shimConfList(s.bed, { placement, cniVersion, ranges: [[{ subnet: `10.100.${third}.0/24` }]], delegate }));
        const agent = await allocateAgentIp();
        const { owner, ips: agentIps, record: agentRecord } = agent;

        // pods come and go through kubelet's calls (each removal sends containerd's repeated DELs)
        const a = await s.bed.runPod('a');
        const b = await s.bed.runPod('b');
        await s.bed.removePod(a.id);
        const leaked = await s.bed.runPod('leaked');
        await s.bed.removePod(b.id);
        // Addresses held at once differ; `leaked` may get `a`'s address back (CNS hands out the first free one).
        expect(new Set([...agentIps, ...a.ips, ...b.ips]).size).toBe(3);
        expect([...agentIps, ...b.ips]).not.toContain(leaked.ips[0]);
        expect(await ledger()).toEqual([agentRecord, `${leaked.id}:eth0.json`].sort());
        expect(await store()).toEqual([...agentIps, ...leaked.ips].sort());
        await expectCns(s.bed, agent, [leaked]);

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
        await expectCns(s.bed, agent, live);
        expect(await ledger()).toEqual([agentRecord, ...live.map((p) => `${p.id}:eth0.json`)].sort());
        for (const p of live) await execa('nsenter', [`--net=/run/netns/${s.node}`, 'ping', '-c', '1', '-W', '2', p.ips[0]!]);

        for (const p of live) await s.bed.removePod(p.id);
        expect(await store()).toEqual(agentIps);
        expect((await s.bed.cli(['agent-ip', 'release', '--owner', owner])).exitCode).toBe(0);
        expect(await store()).toEqual([]);
        expect(await ledger()).toEqual([]);
      });
    });

    it("the agent's pass (--gc apply) releases exactly the pod whose cache entry was lost, never cilium-agent's address", async () => {
      await s.bed.setConfList(
        shimConfList(s.bed, { placement: 'chained', cniVersion: '0.3.1', ranges: [[{ subnet: '10.100.200.0/24' }]], delegate }),
      );
      const agent = await allocateAgentIp();
      const leaked = await s.bed.runPod('leaked');
      await s.bed.crashAndWipe();
      const live = await s.bed.runPod('live');
      expect(await store()).toEqual([...agent.ips, ...leaked.ips, ...live.ips].sort());
      await expectCns(s.bed, agent, [leaked, live]);
      const asked = (await s.bed.cns?.requests())?.length ?? 0;

      const pass = await agentFirstPass(s.bed);
      expect(pass.msg, JSON.stringify(pass)).toBe('reconcile pass ok');
      expect(await store()).toEqual([...agent.ips, ...live.ips].sort());
      await expectCns(s.bed, agent, [live]);
      expect(await ledger()).toEqual([agent.record, `${live.id}:eth0.json`].sort());
      // The pass's only release named the leaked pod.
      if (s.bed.cns)
        expect(
          (await s.bed.cns.requests())
            .slice(asked)
            .filter((r) => r.path.endsWith('/releaseipconfigs'))
            .map((r) => r.key),
        ).toEqual([s.bed.cnsKey(leaked)]);
      await execa('nsenter', [`--net=/run/netns/${s.node}`, 'ping', '-c', '1', '-W', '2', live.ips[0]!]);

      await s.bed.removePod(live.id);
      expect((await s.bed.cli(['agent-ip', 'release', '--owner', agent.owner])).exitCode).toBe(0);
      expect(await store()).toEqual([]);
      expect(await ledger()).toEqual([]);
    });
  });

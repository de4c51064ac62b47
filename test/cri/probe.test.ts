// Failure 3 through CRI: a dual-stack pod started by containerd; Azure's LB probe from fe80::1234:5678:9abc is
// answered by real ping once the shim's ADD has put AgentBaker's rewrite (table ip6 azureSLBProbe) in the node.
//   netns lb (fe80::1234:5678:9abc only) ── eth0 ── node netns (fe80::1, forwarding, containerd) ── cilium-cni's lxc ── pods
// (the topology of test/e2e/probe-rewrite.test.ts).
import { describe, expect, it } from 'vitest';
import { runInNetns, type Run } from '../../src/effects/exec.js';
import { hostLocalAllocations, ledgerRecords } from '../support/shim/cni.js';
import { PLACEMENTS, shimConfList, VERSIONS, type Range } from '../support/runtimes/cri/conflists.js';
import { criOrSkip, useCriBed } from '../support/runtimes/cri/suite.js';

const enabled = criOrSkip();
const PROBE_SOURCE = 'fe80::1234:5678:9abc';
const TABLE = 'azureSLBProbe';
const ranges = (n: number): Range[][] => [[{ subnet: `10.101.${n}.0/24` }], [{ subnet: `fd00:10:101:${n}::/64` }]];

/** Waits until no address in the netns is tentative (DAD): until then replies cannot leave the pod. */
async function settled(run: Run): Promise<void> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const out = (await run('ip', ['-6', '-j', 'addr', 'show', 'tentative'])).stdout;
    if (!(JSON.parse(out || '[]') as Array<{ addr_info?: unknown[] }>).some((l) => (l.addr_info ?? []).length > 0)) return;
    if (Date.now() > deadline) throw new Error('addresses still tentative after 10 s');
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe.skipIf(!enabled)('IPv6 LB probes to a dual-stack pod through containerd CRI', () => {
  let inLb: Run;
  let inNode: Run;
  const s = useCriBed({
    confList: (dirs) => shimConfList(dirs, { placement: 'chained', cniVersion: '0.3.1', ranges: ranges(0) }),
    async prepare(node, net) {
      const lb = await net.netns('lb');
      [inLb, inNode] = [runInNetns(lb), runInNetns(node)];
      await net.veth(lb, 'eth0', node, 'eth0');
      await inLb('ip', ['link', 'set', 'eth0', 'addrgenmode', 'none']);
      await inLb('ip', ['-6', 'addr', 'flush', 'dev', 'eth0']);
      await inLb('ip', ['-6', 'addr', 'add', `${PROBE_SOURCE}/64`, 'dev', 'eth0', 'nodad']);
      await inLb('ip', ['-6', 'route', 'add', 'fd00:10::/32', 'via', 'fe80::1', 'dev', 'eth0']);
      await inNode('ip', ['-6', 'addr', 'add', 'fe80::1/64', 'dev', 'eth0', 'nodad']);
      await inNode('sysctl', ['-qw', 'net.ipv6.conf.all.forwarding=1']);
      await inNode('ip', ['-6', 'route', 'add', 'default', 'via', PROBE_SOURCE, 'dev', 'eth0']);
    },
  });
  const probe = async (ip: string) => (await inLb('ping', ['-6', '-c', '2', '-W', '1', ip], { check: false })).exitCode;
  const hasTable = async () => (await inNode('nft', ['list', 'tables', 'ip6'])).stdout.includes(`table ip6 ${TABLE}`);
  let n = 0;

  it('without the shim the probe dies at the node (the failure is real in this bed)', async () => {
    await s.bed.setConfList(shimConfList(s.bed, { placement: 'chained', cniVersion: '1.0.0', ranges: ranges(++n), withoutShim: true }));
    const pod = await s.bed.runPod('no-shim');
    expect(pod.ips).toHaveLength(2);
    await settled(runInNetns(pod.netnsPath.split('/').pop()!));
    await settled(inNode);
    expect(await hasTable()).toBe(false);
    expect(await probe(pod.ips[1]!)).not.toBe(0);
    await s.bed.removePod(pod.id);
  });

  describe.each(VERSIONS)('cniVersion %s', (cniVersion) => {
    it.each(PLACEMENTS)('%s: RunPodSandbox gives both families; the probe is answered', async (placement) => {
      const i = ++n;
      await s.bed.setConfList(shimConfList(s.bed, { placement, cniVersion, ranges: ranges(i), shim: { ipv6ProbeRewrite: 'auto' } }));
      const pod = await s.bed.runPod(`dual-${placement}`);
      expect(pod.ips[0]).toMatch(new RegExp(`^10\\.101\\.${i}\\.\\d+$`));
      expect(pod.ips[1]).toMatch(new RegExp(`^fd00:10:101:${i}::`));
      expect(await ledgerRecords(s.bed.stateDir, s.bed.network)).toEqual([`${pod.id}:eth0.json`]);
      expect(await hasTable()).toBe(true);
      // no address may still be tentative on either end (DAD) before the reply can leave
      await settled(runInNetns(pod.netnsPath.split('/').pop()!));
      await settled(inNode);
      expect(await probe(pod.ips[1]!)).toBe(0);
      await s.bed.removePod(pod.id);
      expect(await ledgerRecords(s.bed.stateDir, s.bed.network)).toEqual([]);
      expect(await hostLocalAllocations(s.bed.dataDir, s.bed.network)).toEqual([]);
    });
  });
});

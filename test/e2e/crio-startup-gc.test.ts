// CRI-O's start-up GC, through the real libcni 1.3 (the cnitool harness): CRI-O ≥ 1.32 calls GCNetworkList once
// at every start with the pods it still knows as the valid list (ocicni: GCArgs{ValidAttachments: a nil slice when
// no pod of the network survived, which libcni sends as null: a node after a reboot). libcni first DELs every cached
// attachment of the network not in that list, then (1.1.0 list) sends GC to each plugin. Here: pods attached through
// the harness on a 1.1.0 list (the newer cilium-cni stand-in, then the shim chained, host-local 1.9 as the delegate of
// both), cilium-agent's own
// IP, then a "restart" that lost some result caches and some sandboxes, then the one GC.
import { execa } from 'execa';
import { unlink } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentIpArgv, chainedCniPath, writeChainedList } from '../support/shim/chained-node.js';
import { hostLocalAllocations, shimBinDir } from '../support/shim/cni.js';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { logged } from '../support/shim/log.js';
import { disagreements, hostLocalStore, readLedger } from '../support/shim/robust.js';
import { skipRuntime } from '../support/runtimes/runtimes.js';
import { CnitoolRuntime } from '../support/runtimes/cnitool.js';

const root = rootOrSkip();
const { s, net } = useScratchNet();
const cilium = useCiliumAgent();

/**
 * A node with the shim chained after cilium-cni (the newer stand-in) on a 1.1.0 list, cilium-agent's own address (recorded by the shim, in no
 * runtime's cache) and the named pods attached through the real libcni.
 */
async function crioNode(names: string[]) {
  const node = await net.netns('node');
  const network = `crio${uid()}`;
  const { confList, conflistPath } = await writeChainedList(s, network, { subnet: '10.79.0.0/24', rangeStart: '10.79.0.10', rangeEnd: '10.79.0.60' });
  const cniPath = chainedCniPath(await shimBinDir(s.dir));
  const cacheDir = join(s.dir, 'cache');
  const crio = new CnitoolRuntime({ confList, pluginDirs: cniPath, cacheDir, netns: node, env: cilium.agent.env() });

  // cilium-agent's own address, recorded by the shim, in no runtime's cache (an owner of its own: /run/netns is shared).
  const owner = `health-${uid()}`;
  net.defer(() => execa('ip', ['netns', 'del', `ipam-shim-agent-${owner}`], { reject: false }));
  const agent = await execa('ip', agentIpArgv({ node, action: 'allocate', owner, conflist: conflistPath, cniPath: cniPath.join(':') }));
  const agentIp = (JSON.parse(agent.stdout) as { ips: string[] }).ips[0]!;

  const pods: Record<string, { ns: string; ip: string }> = {};
  for (const name of names) {
    const ns = await net.netns('pod');
    const args = `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=${name};K8S_POD_INFRA_CONTAINER_ID=${name};K8S_POD_UID=uid-${name}`;
    const result = (await crio.add(name, `/run/netns/${ns}`, 'eth0', args)) as { ips: Array<{ address: string }> };
    pods[name] = { ns, ip: result.ips[0]!.address.split('/')[0]! };
  }
  expect((await hostLocalAllocations(s.dataDir, network)).sort()).toEqual([agentIp, ...Object.values(pods).map((p) => p.ip)].sort());
  const ip = (name: string) => pods[name]!.ip;
  const allocated = async () => (await hostLocalAllocations(s.dataDir, network)).sort();
  return { node, network, crio, owner, agentIp, pods, ip, allocated };
}

describe.skipIf(!root || skipRuntime('libcni'))('CRI-O-shaped start-up GC through the real libcni', () => {
  it('releases the leaked addresses once each (libcni DELs the cached, the shim GCs the uncached), keeps live pods and the agent', async () => {
    const { network, crio, owner, agentIp, pods, ip } = await crioNode(['live-a', 'live-b', 'live-uncached', 'dead-cached', 'dead-uncached']);
    expect((await hostLocalAllocations(s.dataDir, network)).sort()).toEqual([agentIp, ...Object.values(pods).map((p) => p.ip)].sort());

    // The restart: two result caches lost; two sandboxes gone (one of them still cached).
    await unlink(crio.cacheFilePath('live-uncached'));
    await unlink(crio.cacheFilePath('dead-uncached'));
    for (const dead of ['dead-cached', 'dead-uncached']) await execa('ip', ['netns', 'del', pods[dead]!.ns]);
    crio.invocations.length = 0;
    const dels = await logged(s.logFile, 'DEL');

    // CRI-O's one GC: the pods it still runs.
    const valid = ['live-a', 'live-b', 'live-uncached'].map((containerID) => ({ containerID, ifname: 'eth0' }));
    const report = await crio.gc(valid);

    // libcni DELed exactly the cached attachment not in the list (both plugins, reverse order, with its cached
    // netns, CNI_ARGS and prevResult), then sent GC to both plugins with the list.
    expect(report.deleted).toEqual([{ containerID: 'dead-cached', ifname: 'eth0' }]);
    expect(crio.invocations.map((i) => `${i.command}:${i.plugin}:${i.env.CNI_CONTAINERID}`)).toEqual([
      'DEL:ipam-shim:dead-cached',
      'DEL:cilium-cni:dead-cached',
      'GC:cilium-cni:',
      'GC:ipam-shim:',
    ]);
    const shimDel = crio.invocations[0]!;
    expect(shimDel.env.CNI_NETNS).toBe(`/run/netns/${pods['dead-cached']!.ns}`);
    expect(shimDel.env.CNI_ARGS).toContain('K8S_POD_NAME=dead-cached');
    expect((shimDel.stdin.prevResult as { ips: Array<{ address: string }> }).ips[0]!.address).toMatch(new RegExp(`^${ip('dead-cached')}/`));
    expect(crio.invocations[3]!.stdin['cni.dev/valid-attachments']).toEqual(valid);

    // Kept: the live pods (also the one whose cache was lost) and the agent; released: both leaks.
    expect((await hostLocalAllocations(s.dataDir, network)).sort()).toEqual([agentIp, ip('live-a'), ip('live-b'), ip('live-uncached')].sort());
    const records = await readLedger(s.stateDir, network);
    expect([...records.records.keys()].sort()).toEqual([`cilium-agent-${owner}:eth0`, 'live-a:eth0', 'live-b:eth0', 'live-uncached:eth0']);
    expect(disagreements(records, await hostLocalStore(s.dataDir, network))).toEqual([]);
    expect(existsSync(crio.cacheFilePath('dead-cached'))).toBe(false);
    expect(existsSync(crio.cacheFilePath('live-a'))).toBe(true);

    // Each leaked address released once, by one path: the DEL for the cached leak, the shim's GC for the other.
    const newDels = (await logged(s.logFile, 'DEL')).slice(dels.length);
    expect(newDels.map((l) => l.ips)).toEqual([[ip('dead-cached')]]);
    const gcReleased = await logged(s.logFile, 'GC released');
    expect(gcReleased.map((l) => [l.containerID, l.ips])).toEqual([['dead-uncached', [ip('dead-uncached')]]]);
    expect((await logged(s.logFile, 'GC')).at(-1)).toMatchObject({ released: 1, errors: 0 });

    // A second start: nothing more to do.
    crio.invocations.length = 0;
    expect((await crio.gc(valid)).deleted).toEqual([]);
    expect(crio.invocations.map((i) => i.command)).toEqual(['GC', 'GC']);
    expect(await logged(s.logFile, 'GC released')).toHaveLength(1);
    expect((await hostLocalAllocations(s.dataDir, network)).sort()).toEqual([agentIp, ip('live-a'), ip('live-b'), ip('live-uncached')].sort());

    for (const live of ['live-a', 'live-b']) await crio.del(live, `/run/netns/${pods[live]!.ns}`);
  });
  // Issue 36: CRI-O's GC with no surviving pod sends null (ocicni's nil slice); the shim read it as "no list" and
  // refused (7), so a dead pod whose cache entry was lost stayed allocated. Null and an absent key now mean "no
  // attachment valid", as typed Go plugins read them; the liveness guard keeps the living and the agent's.
  const scenarios = [
    {
      what: 'after a reboot, a nil list (null): every sandbox gone, one cache entry lost',
      pods: ['dead-a', 'dead-b', 'dead-uncached'],
      gone: ['dead-a', 'dead-b', 'dead-uncached'],
      uncached: ['dead-uncached'],
      valid: null,
      form: 'null',
      kept: [],
    },
    {
      what: 'a list naming the one surviving pod',
      pods: ['live', 'dead-cached', 'dead-uncached'],
      gone: ['dead-cached', 'dead-uncached'],
      uncached: ['dead-uncached'],
      valid: [{ containerID: 'live', ifname: 'eth0' }],
      form: 'list of 1',
      kept: ['live'],
    },
    {
      // libcni with no GCArgs (upstream `cnitool gc`): the keys are absent and every cached attachment is DELed.
      what: 'no GCArgs (the key absent): a live pod whose cache entry was lost is kept by its sandbox',
      pods: ['dead-cached', 'dead-uncached', 'live-uncached'],
      gone: ['dead-cached', 'dead-uncached'],
      uncached: ['dead-uncached', 'live-uncached'],
      valid: undefined,
      form: 'absent',
      kept: ['live-uncached'],
    },
  ] as const;
  for (const c of scenarios)
    it(`${c.what}: libcni DELs the cached dead, the shim GCs the uncached dead, keeps the living and the agent`, async () => {
      const { network, crio, owner, agentIp, pods, ip, allocated } = await crioNode([...c.pods]);
      for (const name of c.uncached) await unlink(crio.cacheFilePath(name));
      for (const name of c.gone) await execa('ip', ['netns', 'del', pods[name]!.ns]);
      crio.invocations.length = 0;

      const report = await crio.gc(c.valid === null ? null : c.valid === undefined ? undefined : [...c.valid]);

      const cachedDead = c.gone.filter((n) => !(c.uncached as readonly string[]).includes(n));
      expect(report.deleted.map((a) => a.containerID).sort()).toEqual([...cachedDead].sort());
      const gcs = crio.invocations.filter((i) => i.command === 'GC');
      expect(gcs.map((i) => i.plugin)).toEqual(['cilium-cni', 'ipam-shim']);
      // What libcni sent: null for the nil slice, no key without GCArgs.
      if (c.valid === undefined) expect(gcs[1]!.stdin).not.toHaveProperty('cni.dev/valid-attachments');
      else expect(gcs[1]!.stdin['cni.dev/valid-attachments']).toEqual(c.valid);
      expect((await logged(s.logFile, 'GC')).at(-1)).toMatchObject({ validList: c.form, errors: 0 });

      // Released: every dead pod, once each (the cached by libcni's DELs, the uncached by the shim's GC).
      expect(await allocated()).toEqual([agentIp, ...c.kept.map(ip)].sort());
      const gcReleased = await logged(s.logFile, 'GC released');
      expect(gcReleased.map((l) => l.containerID).sort()).toEqual(c.gone.filter((n) => (c.uncached as readonly string[]).includes(n)).sort());
      const records = await readLedger(s.stateDir, network);
      expect([...records.records.keys()].sort()).toEqual([`cilium-agent-${owner}:eth0`, ...c.kept.map((n) => `${n}:eth0`)].sort());
      expect(disagreements(records, await hostLocalStore(s.dataDir, network))).toEqual([]);

      // A second start: nothing more to do.
      await crio.gc(c.valid === null ? null : c.valid === undefined ? undefined : [...c.valid]);
      expect(await allocated()).toEqual([agentIp, ...c.kept.map(ip)].sort());
      for (const live of c.kept) if (!(c.uncached as readonly string[]).includes(live)) await crio.del(live, `/run/netns/${pods[live]!.ns}`);
    });
});

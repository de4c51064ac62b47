// The DEL order of a chain [cilium-cni, ipam-shim] through the real libcni: the shim's DEL runs first (reverse
// order), then cilium-cni's, which fails with 999 while the agent is down (the 1.17 stand-in, docs/testing.md) and
// leaves the address allocated in its delegated IPAM (host-local). The shim's ledger, the agent's GC (ipam-shim gc
// over the runtime's result cache) and host-local must not disagree: the address is released once, by whoever gets
// there, never while the pod still holds it, and also when the runtime lost its cache entry and never retries.
import { execa } from 'execa';
import { unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { CnitoolRuntime } from '../support/runtimes/cnitool.js';
import { skipRuntime } from '../support/runtimes/runtimes.js';
import { rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';
import { shimKeys } from '../support/shim/conf.js';
import { PLUGIN_DIR, deletedRecords, gcApplyOnNode, hostLocalAllocations, ledgerRecords, shimBinDir } from '../support/shim/cni.js';
import { hostLocalStore } from '../support/shim/robust.js';

const root = rootOrSkip();
const { s, net } = useScratchNet();
const a = useCiliumAgent();

/** A node with [cilium-cni (1.17) → host-local, ipam-shim chained] at 1.0.0; host-local over `range`. */
async function chainedNode(range: { subnet: string; rangeStart: string; rangeEnd: string }) {
  const node = await net.netns('node');
  const network = `do${uid()}`;
  const ipam = { type: 'host-local', dataDir: s.dataDir, ranges: [[range]] };
  const confList = {
    cniVersion: '1.0.0',
    name: network,
    plugins: [ciliumCni(ipam), shimKeys({ dirs: s, keys: { residue: { ebtables: false, neigh: false } }, delegate: ipam })],
  };
  const conflist = join(s.dir, 'net.conflist');
  await writeFile(conflist, JSON.stringify(confList));
  const cniPath = [ciliumCniDir('1.17'), await shimBinDir(s.dir), PLUGIN_DIR];
  const cacheDir = join(s.dir, 'cache');
  const runtime = new CnitoolRuntime({ confList, pluginDirs: cniPath, cacheDir, netns: node, env: a.agent.env({ del: 1 }) });
  /** The node agent's GC, once, in apply mode, from the runtime's cache (what `ipam-shim agent --gc apply` runs). */
  const agentGc = () => gcApplyOnNode({ node, conflist, cacheDir, cniPath });
  return { node, network, runtime, agentGc };
}

(root && !skipRuntime('libcni') ? describe : describe.skip)('DEL of [cilium-cni, ipam-shim] while the agent is down', () => {
  it('cilium-cni fails 999 after the shim DELed; the runtime then loses its cache entry and the pod goes: the agent GC releases the address', async () => {
    const { network, runtime, agentGc } = await chainedNode({ subnet: '10.93.0.0/24', rangeStart: '10.93.0.10', rangeEnd: '10.93.0.20' });
    // Another pod stays up all along: the runtime's cache is not empty, so GC may act on it.
    const other = await net.netns('pod');
    await runtime.add('c0', `/run/netns/${other}`);
    const pod = await net.netns('pod');
    await runtime.add('c1', `/run/netns/${pod}`);
    const held = await hostLocalAllocations(s.dataDir, network);
    expect(held).toHaveLength(2);

    await a.agent.down();
    await expect(runtime.del('c1', `/run/netns/${pod}`)).rejects.toMatchObject({ code: 999 });
    // The shim's DEL ran first; cilium-cni's failed before its delegate: the address is still allocated.
    expect(runtime.invocations.filter((i) => i.command === 'DEL').map((i) => i.plugin)).toEqual(['ipam-shim', 'cilium-cni']);
    expect(await hostLocalAllocations(s.dataDir, network)).toEqual(held);
    // The shim's record stays, marked DELed: the only evidence left if the runtime never retries.
    expect(await deletedRecords(s.stateDir, network)).toEqual(['c1:eth0.json']);

    // While the pod still holds the address, no GC releases it (the cache entry is still the runtime's, too).
    await a.agent.up();
    await agentGc();
    expect(await hostLocalAllocations(s.dataDir, network)).toEqual(held);

    // The runtime loses its cache entry (a crash) and never retries; the sandbox goes.
    await unlink(runtime.cacheFilePath('c1'));
    await execa('ip', ['netns', 'del', pod]);
    await agentGc();
    expect([...(await hostLocalStore(s.dataDir, network)).values()]).toEqual(['c0:eth0']);
    expect(await ledgerRecords(s.stateDir, network)).toEqual(['c0:eth0.json']);
    expect(await deletedRecords(s.stateDir, network)).toEqual([]);
  });

  it('the retried DEL releases the address once; a new pod given it keeps it through the next GC', async () => {
    // One address: the next pod gets the same one.
    const { network, runtime, agentGc } = await chainedNode({ subnet: '10.94.0.0/24', rangeStart: '10.94.0.10', rangeEnd: '10.94.0.10' });
    const pod1 = await net.netns('pod');
    await runtime.add('c1', `/run/netns/${pod1}`);
    await a.agent.down();
    await expect(runtime.del('c1', `/run/netns/${pod1}`)).rejects.toMatchObject({ code: 999 });
    expect([...(await hostLocalStore(s.dataDir, network)).values()]).toEqual(['c1:eth0']);

    await a.agent.up();
    await runtime.del('c1', `/run/netns/${pod1}`); // the runtime's retry
    expect(await hostLocalAllocations(s.dataDir, network)).toEqual([]);

    const pod2 = await net.netns('pod');
    const r2: any = await runtime.add('c2', `/run/netns/${pod2}`);
    expect(r2.ips[0].address).toBe('10.94.0.10/32');
    await agentGc();
    await agentGc();
    expect(await deletedRecords(s.stateDir, network)).toEqual([]);
    expect([...(await hostLocalStore(s.dataDir, network)).entries()]).toEqual([['10.94.0.10', 'c2:eth0']]);
    expect(await ledgerRecords(s.stateDir, network)).toEqual(['c2:eth0.json']);
    await runtime.del('c2', `/run/netns/${pod2}`);
    expect(await hostLocalAllocations(s.dataDir, network)).toEqual([]);
  });
});

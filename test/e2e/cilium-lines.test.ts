// Which verbs reach the shim chained after cilium-cni, per Cilium line, through the real libcni (the cnitool
// harness) and the cilium-cni stand-in (docs/testing.md): on 1.17 the list is at 1.0.0, and libcni sends no GC and
// no STATUS to a 1.0.0 list, so the node agent's GC (`ipam-shim gc` over the runtime's cache) is the only GC; with a
// newer cilium-cni the list can be 1.1.0 and both verbs reach the shim (cilium-cni answers GC without a handler).
import { execa } from 'execa';
import { unlink, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { CnitoolRuntime } from '../support/runtimes/cnitool.js';
import { PLUGINS_110, skipPlugins110, skipRuntime } from '../support/runtimes/runtimes.js';
import { rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { type CiliumLine, ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';
import { shimKeys } from '../support/shim/conf.js';
import { PLUGIN_DIR, gcApplyOnNode, shimBinDir } from '../support/shim/cni.js';
import { hostLocalStore } from '../support/shim/robust.js';

const root = rootOrSkip();
const { s, net } = useScratchNet();
const a = useCiliumAgent();

async function node(line: CiliumLine, cniVersion: string) {
  const nodeNs = await net.netns('node');
  const network = `cl${uid()}`;
  const ipam = { type: 'host-local', dataDir: s.dataDir, ranges: [[{ subnet: '10.95.0.0/24' }]] };
  const confList = {
    cniVersion,
    name: network,
    plugins: [ciliumCni(ipam), shimKeys({ dirs: s, keys: { residue: { ebtables: false, neigh: false } }, delegate: ipam })],
  };
  const conflist = join(s.dir, 'net.conflist');
  await writeFile(conflist, JSON.stringify(confList));
  const cniPath = [ciliumCniDir(line), await shimBinDir(s.dir), cniVersion === '1.1.0' ? PLUGINS_110 : PLUGIN_DIR];
  const cacheDir = join(s.dir, 'cache');
  const runtime = new CnitoolRuntime({ confList, pluginDirs: cniPath, cacheDir, netns: nodeNs, env: a.agent.env() });
  const pod = async (cid: string) => {
    const ns = await net.netns('pod');
    await runtime.add(cid, `/run/netns/${ns}`);
    return ns;
  };
  const agentGc = () => gcApplyOnNode({ node: nodeNs, conflist, cacheDir, cniPath });
  return { network, runtime, pod, agentGc };
}

(root && !skipRuntime('libcni') && !skipPlugins110() ? describe : describe.skip)('verbs that reach the shim per Cilium line', () => {
  it('1.17 (a 1.0.0 list): no STATUS, no GC verb; a leak the runtime forgot is released only by the agent GC', async () => {
    const n = await node('1.17', '1.0.0');
    await n.pod('live');
    const leakNs = await n.pod('leak');
    // The leak: its sandbox gone, the runtime's cache entry lost (no DEL will ever come).
    await unlink(n.runtime.cacheFilePath('leak'));
    await execa('ip', ['netns', 'del', leakNs]);
    n.runtime.invocations.length = 0;

    await n.runtime.status();
    const gc = await n.runtime.gc([{ containerID: 'live', ifname: 'eth0' }]);
    expect(gc.gcSent).toBe(false);
    expect(n.runtime.invocations).toEqual([]); // libcni sent nothing at all: no STATUS, no GC, no DEL
    expect([...(await hostLocalStore(s.dataDir, n.network)).values()].sort()).toEqual(['leak:eth0', 'live:eth0']);

    await n.agentGc();
    expect([...(await hostLocalStore(s.dataDir, n.network)).values()]).toEqual(['live:eth0']);
  });

  it('newer (a 1.1.0 list): STATUS and GC reach cilium-cni and the shim; cilium-cni passes GC to nobody, the shim releases the leak', async () => {
    const n = await node('newer', '1.1.0');
    await n.pod('live');
    const leakNs = await n.pod('leak');
    await unlink(n.runtime.cacheFilePath('leak'));
    await execa('ip', ['netns', 'del', leakNs]);
    n.runtime.invocations.length = 0;

    await n.runtime.status();
    const gc = await n.runtime.gc([{ containerID: 'live', ifname: 'eth0' }]);
    expect(gc.gcSent).toBe(true);
    expect(n.runtime.invocations.map((i) => `${i.command}:${i.plugin}`)).toEqual([
      'STATUS:cilium-cni',
      'STATUS:ipam-shim',
      'GC:cilium-cni',
      'GC:ipam-shim',
    ]);
    expect([...(await hostLocalStore(s.dataDir, n.network)).values()]).toEqual(['live:eth0']);
  });
});

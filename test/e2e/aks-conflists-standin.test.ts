// The shipped lists that name azure-ipam (conflist/aks-*.conflist, and the newer line's 1.1.0 list) over the
// azure-ipam and CNS stand-ins, in both of CNS's key schemes, through the runner and the real libcni: in cilium-cni's
// place the cilium-cni stand-in of the list's Cilium line (test/fixtures/cilium-cni/: 1.17 for the AKS lists at
// 0.3.1 and 1.0.0, newer for 1.1.0) with its agent API stand-in; everything else is the file as shipped, its paths
// moved into a scratch directory. A pod's address is held under the key CNS uses for it, cilium-cni's datapath makes
// it answer the node's ping, the chained shim records it, and the pod's DEL releases exactly that key.
import { describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RUNTIMES, newRuntime, skipRuntime } from '../support/runtimes/runtimes.js';
import { inNs, rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { FIXTURE_BIN, PLUGIN_DIR, ROOT, ledgerRecords, shimBinDir } from '../support/shim/cni.js';
import { CNS_SCHEMES, CnsStandin, withAzureIpamStandin } from '../support/doubles/cns.js';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { ciliumCniDir, ciliumLineFor } from '../support/shim/cilium.js';

const root = rootOrSkip();
/** An AKS pod subnet beside the list's reserved 10.224.0.0/24. */
const POOL = { subnet: '10.224.0.0/16', first: '10.224.1.10', last: '10.224.1.20', gateway: '10.224.0.1' };
/** Every shipped list whose IPAM is azure-ipam (conflist/README.md: the first two are AKS's, on the 1.17 line). */
const LISTS = ['aks-cilium-0.3.1.conflist', 'aks-cilium-1.0.0.conflist', 'cilium-newer-than-1.17-1.1.0.conflist'] as const;

const { s, net } = useScratchNet();
const a = useCiliumAgent();

for (const kind of RUNTIMES)
  for (const scheme of CNS_SCHEMES)
    describe.skipIf(!root || skipRuntime(kind))(`shipped azure-ipam lists over azure-ipam/CNS and cilium-cni (${scheme} key scheme, ${kind})`, () => {
      it.each(LISTS)('%s: ADD → ping → (CHECK) → DEL; CNS holds the pod under its key, the shim records it', async (file) => {
        const node = await net.netns('node');
        const pod = await net.netns('pod');
        const cns = await CnsStandin.start({ scheme, pools: [POOL], dir: s.dir, netns: node, onCleanup: (stop) => net.defer(stop) });
        const shipped = JSON.parse(await readFile(join(ROOT, 'conflist', file), 'utf8'));
        const list = withAzureIpamStandin(shipped, cns);
        for (const p of list.plugins) {
          if (p.type === 'cilium-cni') p['log-file'] = join(s.dir, 'cilium-cni.log');
          if (p.type === 'ipam-shim') Object.assign(p, { stateDir: s.stateDir, logFile: s.logFile, metricsFile: join(s.dir, 'ipam-shim.prom') });
        }
        const line = ciliumLineFor(list.cniVersion);
        const rt = newRuntime(kind, {
          confList: list,
          pluginDirs: [await shimBinDir(s.dir), ciliumCniDir(line), FIXTURE_BIN, PLUGIN_DIR],
          cacheDir: join(s.dir, 'cache'),
          netns: node,
          env: a.agent.env(),
        });
        const cid = `aks-${uid()}`;
        const args = `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1;K8S_POD_INFRA_CONTAINER_ID=${cid}`;
        const result: any = await rt.add(cid, `/run/netns/${pod}`, 'eth0', args);
        expect(result.cniVersion).toBe(list.cniVersion);
        // cilium-cni's datapath: CNS's address as a /32 in the pod, reached through the host-side lxc route.
        expect(result.ips.map((x: any) => x.address)).toEqual(['10.224.1.10/32']);
        expect((await inNs(node, 'ping', ['-c', '1', '-W', '2', '10.224.1.10'])).exitCode).toBe(0);
        const key = scheme === 'pod' ? 'web-1:default' : cid;
        expect(await cns.holdings()).toEqual({ [key]: ['10.224.1.10'] });
        expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual([`${cid}:eth0.json`]);
        if (list.cniVersion !== '0.3.1') await rt.check(cid, `/run/netns/${pod}`, 'eth0', args);
        await rt.del(cid, `/run/netns/${pod}`, 'eth0', args);
        expect(await cns.holdings()).toEqual({});
        expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual([]);
        // Every request named the pod: cilium-cni's DelegateDel too (it passes the runtime's CNI_ARGS on).
        expect((await cns.requests()).map((r) => [r.path.split('/').pop(), r.key])).toEqual([
          ['requestipconfigs', key],
          ['releaseipconfigs', key],
        ]);
      });
    });

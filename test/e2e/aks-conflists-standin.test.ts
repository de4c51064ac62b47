// The shipped AKS lists (conflist/aks-*.conflist) over the azure-ipam and CNS stand-ins, in both of CNS's key schemes,
// through the runner and the real libcni: ptp stands for cilium-cni (ptp-1.1 for the 1.1.0 list); everything else is
// the file as shipped, its paths moved into a scratch directory. A pod's address is held under the key CNS uses for
// it, the chained shim records it, and the pod's DEL releases exactly that key.
import { describe, expect, it } from 'vitest';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { RUNTIMES, newRuntime, skipRuntime } from '../support/runtimes/runtimes.js';
import { rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { FIXTURE_BIN, PLUGIN_DIR, ROOT, ledgerRecords, shimBinDir } from '../support/shim/cni.js';
import { CNS_SCHEMES, CnsStandin, withAzureIpamStandin } from '../support/doubles/cns.js';

const root = rootOrSkip();
/** An AKS pod subnet beside the list's reserved 10.224.0.0/24. */
const POOL = { subnet: '10.224.0.0/16', first: '10.224.1.10', last: '10.224.1.20', gateway: '10.224.0.1' };
const LISTS = [
  ['aks-cilium-0.3.1.conflist', 'ptp'],
  ['aks-cilium-1.1.0.conflist', 'ptp-1.1'],
] as const;

const { s, net } = useScratchNet();

for (const kind of RUNTIMES)
  for (const scheme of CNS_SCHEMES)
    describe.skipIf(!root || skipRuntime(kind))(`shipped AKS lists over azure-ipam/CNS (${scheme} key scheme, ${kind})`, () => {
      it.each(LISTS)('%s: ADD → (CHECK) → DEL; CNS holds the pod under its key, the shim records it', async (file, mainPlugin) => {
        const node = await net.netns('node');
        const pod = await net.netns('pod');
        const cns = await CnsStandin.start({ scheme, pools: [POOL], dir: s.dir, netns: node, onCleanup: (stop) => net.defer(stop) });
        const shipped = JSON.parse(await readFile(join(ROOT, 'conflist', file), 'utf8'));
        const list = withAzureIpamStandin(shipped, cns);
        for (const p of list.plugins) {
          if (p.type === 'cilium-cni') p.type = mainPlugin;
          if (p.type === 'ipam-shim') Object.assign(p, { stateDir: s.stateDir, logFile: s.logFile, metricsFile: join(s.dir, 'ipam-shim.prom') });
        }
        const rt = newRuntime(kind, {
          confList: list,
          pluginDirs: [await shimBinDir(s.dir), FIXTURE_BIN, PLUGIN_DIR],
          cacheDir: join(s.dir, 'cache'),
          netns: node,
        });
        const cid = `aks-${uid()}`;
        const args = `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=web-1;K8S_POD_INFRA_CONTAINER_ID=${cid}`;
        const result: any = await rt.add(cid, `/run/netns/${pod}`, 'eth0', args);
        expect(result.cniVersion).toBe(list.cniVersion);
        expect(result.ips[0].address).toBe('10.224.1.10/16');
        const key = scheme === 'pod' ? 'web-1:default' : cid;
        expect(await cns.holdings()).toEqual({ [key]: ['10.224.1.10'] });
        expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual([`${cid}:eth0.json`]);
        if (list.cniVersion !== '0.3.1') await rt.check(cid, `/run/netns/${pod}`, 'eth0', args);
        await rt.del(cid, `/run/netns/${pod}`, 'eth0', args);
        expect(await cns.holdings()).toEqual({});
        expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual([]);
        // Every request named the pod: the DEL too (the runtime passes its CNI_ARGS on).
        expect((await cns.requests()).map((r) => [r.path.split('/').pop(), r.key])).toEqual([
          ['requestipconfigs', key],
          ['releaseipconfigs', key],
        ]);
      });
    });

// Both placements through a real runtime: the project's libcni-like runner and the real libcni 1.3 (the cnitool
// harness), ADD → CHECK → DEL at 0.3.1, 0.4.0, 1.0.0, and podman 4.3 (ADD on start, DEL on rm), with the
// cilium-cni stand-in in cilium-cni's place (the 1.17 line; newer for 1.1.0: docs/testing.md) and Debian's
// host-local.
import { afterEach, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PLUGINS_110, RUNTIMES, newRuntime, skipPlugins110, skipRuntime } from '../support/runtimes/runtimes.js';
import { PodmanBed } from '../support/runtimes/podman.js';
import { shimKeys } from '../support/shim/conf.js';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';
import { inNs, rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { FIXTURE_BIN, PLUGIN_DIR, hostLocalAllocations, ledgerRecords, shimBinDir } from '../support/shim/cni.js';

const root = rootOrSkip();
const d = root ? describe : describe.skip;

type Placement = 'chained' | 'ipam';

/** A conflist with the shim in `placement`, host-local storing under dataDir. */
function confList(placement: Placement, cniVersion: string, name: string, s: { stateDir: string; logFile: string; dataDir: string }, subnet: string) {
  const hostLocal = { type: 'host-local', dataDir: s.dataDir, ranges: [[{ subnet }]] };
  const plugins =
    placement === 'chained'
      ? [ciliumCni(hostLocal), shimKeys({ dirs: s, delegate: hostLocal })]
      : [ciliumCni(shimKeys({ dirs: s, delegate: hostLocal }))];
  return { cniVersion, name, plugins };
}

const { s, net } = useScratchNet();
const a = useCiliumAgent();

for (const kind of RUNTIMES)
  (root && !skipRuntime(kind) ? describe : describe.skip).each(['chained', 'ipam'] as const)(`${kind}, shim %s`, (placement) => {
    it.each(['0.3.1', '0.4.0', '1.0.0'])('ADD → CHECK → DEL at %s leaves nothing behind', async (v) => {
      const node = await net.netns('node');
      const pod = await net.netns('pod');
      const name = `pl${uid()}`;
      const bin = await shimBinDir(s.dir);
      const runner = newRuntime(kind, {
        confList: confList(placement, v, name, s, '10.66.0.0/24'),
        pluginDirs: [ciliumCniDir('1.17'), bin, FIXTURE_BIN, PLUGIN_DIR],
        cacheDir: join(s.dir, 'cache'),
        netns: node,
        env: a.agent.env(),
      });
      const result: any = await runner.add('c1', `/run/netns/${pod}`);
      expect(result.cniVersion).toBe(v);
      const ip = String(result.ips[0].address).split('/')[0]!;
      expect(ip).toMatch(/^10\.66\.0\./);
      // The pod really has the address and reaches the node through the router address cilium-cni routes it to.
      expect((await inNs(pod, 'ip', ['-j', 'addr', 'show', 'eth0'])).stdout).toContain(ip);
      expect((await inNs(pod, 'ping', ['-c', '1', '-W', '2', result.ips[0].gateway])).exitCode).toBe(0);
      expect(await ledgerRecords(s.stateDir, name)).toEqual(['c1:eth0.json']);
      if (v !== '0.3.1') await runner.check('c1', `/run/netns/${pod}`);
      await runner.del('c1', `/run/netns/${pod}`);
      expect(await hostLocalAllocations(s.dataDir, name)).toEqual([]);
      expect(await ledgerRecords(s.stateDir, name)).toEqual([]);
      expect(existsSync(runner.cacheFilePath('c1'))).toBe(false);
    });
  });

d.each(['chained', 'ipam'] as const)('podman, shim %s', (placement) => {
  let bed: PodmanBed | undefined;
  afterEach(async () => {
    await bed?.cleanup();
    bed = undefined;
  });
  it('a real container gets its address from the shim; rm leaves no allocation and no record', async () => {
    const bin = await shimBinDir(s.dir);
    const node = await net.netns('node'); // podman's plugins run here, so the host's network is never touched
    let names = { network: '', dataDir: '' };
    bed = await PodmanBed.create({
      netns: node,
      pluginDirs: [ciliumCniDir('1.17'), bin, PLUGIN_DIR],
      env: a.agent.env(),
      confList: (dirs) => {
        names = { network: dirs.network, dataDir: dirs.dataDir };
        return confList(placement, '1.0.0', dirs.network, { ...s, dataDir: dirs.dataDir }, '10.67.0.0/24');
      },
    });
    await bed.startContainer('web');
    const ips = await bed.containerIPs('web');
    expect(ips).toHaveLength(1);
    expect(ips[0]).toMatch(/^10\.67\.0\./);
    const [record] = await ledgerRecords(s.stateDir, names.network);
    expect(record).toMatch(/:eth0\.json$/);
    expect(await hostLocalAllocations(names.dataDir, names.network)).toEqual(ips);
    await bed.rm('web', { force: true });
    expect(await hostLocalAllocations(names.dataDir, names.network)).toEqual([]);
    expect(await ledgerRecords(s.stateDir, names.network)).toEqual([]);
  });
});

// A 1.1.0 list needs a cilium-cni newer than 1.17 (the newer stand-in) and a host-local that speaks it (1.9, from
// Debian unstable): the verbs a 1.1.0 runtime adds (STATUS, GC with the list, GC's DELs of stale cached
// attachments), in both placements, through both runtimes. The 1.17 line refuses that list on every ADD.
for (const kind of RUNTIMES) {
  (root && !skipRuntime(kind) && !skipPlugins110() ? describe : describe.skip).each(['chained', 'ipam'] as const)(
    `${kind}, shim %s, 1.1.0 with plugins 1.9`,
    (placement) => {
      it('ADD → CHECK → STATUS → GC keeping the listed pod → GC without it releases it', async () => {
        expect(existsSync(join(PLUGINS_110, 'host-local')), `${PLUGINS_110}/host-local is missing: run scripts/install-deps.sh`).toBe(true);
        const node = await net.netns('node');
        const pod = await net.netns('pod');
        const name = `pm${uid()}`;
        const bin = await shimBinDir(s.dir);
        const rt = newRuntime(kind, {
          confList: confList(placement, '1.1.0', name, s, '10.68.0.0/24'),
          pluginDirs: [ciliumCniDir('newer'), bin, PLUGINS_110],
          cacheDir: join(s.dir, 'cache'),
          netns: node,
          env: a.agent.env(),
        });
        const result: any = await rt.add('c1', `/run/netns/${pod}`);
        expect(result.cniVersion).toBe('1.1.0');
        const ip = String(result.ips[0].address).split('/')[0]!;
        expect((await inNs(pod, 'ping', ['-c', '1', '-W', '2', result.ips[0].gateway])).exitCode).toBe(0);
        await rt.check('c1', `/run/netns/${pod}`);
        await rt.status();
        expect(rt.invocations.filter((i) => i.command === 'STATUS').map((i) => i.plugin)).toEqual(
          placement === 'chained' ? ['cilium-cni', 'ipam-shim'] : ['cilium-cni'],
        );
        // GC with the pod listed: nothing released, GC sent to every plugin of the list.
        expect(await rt.gc([{ containerID: 'c1', ifname: 'eth0' }])).toMatchObject({ deleted: [], gcSent: true });
        expect(await hostLocalAllocations(s.dataDir, name)).toEqual([ip]);
        expect(await ledgerRecords(s.stateDir, name)).toEqual(['c1:eth0.json']);
        // GC without it: the runtime DELs the cached attachment (its sandbox is still there: libcni does not look).
        expect(await rt.gc([])).toMatchObject({ deleted: [{ containerID: 'c1', ifname: 'eth0' }], gcSent: true });
        expect(await hostLocalAllocations(s.dataDir, name)).toEqual([]);
        expect(await ledgerRecords(s.stateDir, name)).toEqual([]);
        expect(existsSync(rt.cacheFilePath('c1'))).toBe(false);
        expect((await inNs(pod, 'ip', ['-o', 'link'])).stdout).not.toContain('eth0');
      });

      it('the 1.17 line refuses the list on ADD with the real text; nothing is allocated or recorded', async () => {
        const node = await net.netns('node');
        const pod = await net.netns('pod');
        const name = `pr${uid()}`;
        const rt = newRuntime(kind, {
          confList: confList(placement, '1.1.0', name, s, '10.69.0.0/24'),
          pluginDirs: [ciliumCniDir('1.17'), await shimBinDir(s.dir), PLUGINS_110],
          cacheDir: join(s.dir, 'cache'),
          netns: node,
          env: a.agent.env(),
        });
        const err: any = await rt.add('c1', `/run/netns/${pod}`).catch((e) => e);
        expect(err).toMatchObject({
          code: 1,
          msg: 'incompatible CNI versions',
          details: 'config is "1.1.0", plugin supports ["0.1.0" "0.2.0" "0.3.0" "0.3.1" "0.4.0" "1.0.0"]',
        });
        if (kind === 'libcni') expect(err.error).toMatch(/^plugin type="cilium-cni" failed \(add\): incompatible CNI versions; /);
        expect(await hostLocalAllocations(s.dataDir, name)).toEqual([]);
        expect(await ledgerRecords(s.stateDir, name)).toEqual([]);
      });
    },
  );
}

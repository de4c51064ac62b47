// Every example in conflist/ parses through src/conflist.ts (the way the plugin and the CLI read a node's
// conflists) and runs for real: the project's libcni-like runner and the real libcni (the cnitool harness) each
// drive it inside a throwaway "node" namespace against a pod namespace, with the built shim on CNI_PATH.
//
// Substitutions (said here because they matter): temp dirs replace stateDir, logFile, metricsFile and
// host-local's dataDir. cilium-cni and azure-ipam do not exist on this machine, so the AKS examples run with
// Debian's ptp standing in for cilium-cni and test/fixtures/bin/fake-ipam for azure-ipam; everything else
// (names, versions, the shim's entry, its position) is the file as shipped. Debian's ptp speaks ≤ 1.0.0, so the
// 1.1.0 AKS list is driven at 1.0.0 for ADD/CHECK/DEL and the 1.1.0 verbs a runtime sends to a chained
// plugin (GC, STATUS) go to the shim's entry directly, at 1.1.0.
import { describe, expect, it } from 'vitest';
import { readdir, readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { readShimConflist, listVersion } from '../../src/conflist.js';
import { parseMetrics } from '../../src/metrics.js';
import type { JsonObject } from '../support/runtimes/runner.js';
import { RUNTIMES, newRuntime, skipRuntime, type RuntimeKind } from '../support/runtimes/runtimes.js';
import { inNs, rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { FIXTURE_BIN, PLUGIN_DIR, ROOT, hostLocalAllocations, invoke, ledgerRecords, shimBinDir } from '../support/shim/cni.js';

const DIR = join(ROOT, 'conflist');
const EXAMPLES = ['aks-cilium-0.3.1.conflist', 'aks-cilium-1.1.0.conflist', 'generic-host-local.conflist', 'generic-host-local-chained.conflist'];
const root = rootOrSkip();

const load = async (file: string): Promise<JsonObject> => JSON.parse(await readFile(join(DIR, file), 'utf8'));

describe('conflist/ examples parse like the plugin reads them', () => {
  it('the directory holds exactly the examples this file exercises', async () => {
    expect((await readdir(DIR)).sort()).toEqual([...EXAMPLES].sort());
  });

  it.each([
    ['aks-cilium-0.3.1.conflist', 'chained', '0.3.1', 'azure-ipam'],
    ['aks-cilium-1.1.0.conflist', 'chained', '1.1.0', 'azure-ipam'],
    ['generic-host-local.conflist', 'ipam', '1.0.0', 'host-local'],
    ['generic-host-local-chained.conflist', 'chained', '1.0.0', 'host-local'],
  ])('%s: shim %s at %s wrapping %s', async (file, placement, version, delegate) => {
    const found = await readShimConflist(join(DIR, file));
    expect(found).toBeDefined();
    expect(found!.conf.placement).toBe(placement);
    expect(listVersion(found!.list)).toBe(version);
    expect(found!.conf.settings.delegate?.type).toBe(delegate);
    const plugins = found!.list.plugins as JsonObject[];
    if (placement === 'chained') {
      // Right after the allocating plugin, with the delegate equal to that plugin's IPAM config.
      expect(found!.index).toBe(1);
      expect(found!.conf.settings.delegate).toEqual(plugins[0]!.ipam);
    }
  });
});

const { s, net } = useScratchNet();

/** The temp-dir substitutions (and, for AKS, the stand-ins) applied to an example. */
function localise(list: JsonObject, opts: { standIns?: boolean; metricsFile?: string } = {}): JsonObject {
  const out = structuredClone(list);
  const fixIpam = (ipam: JsonObject | undefined) => {
    if (!ipam) return;
    if (ipam.type === 'host-local') ipam.dataDir = s.dataDir;
    if (opts.standIns && ipam.type === 'azure-ipam') ipam.type = 'fake-ipam';
  };
  for (const p of out.plugins as JsonObject[]) {
    if (opts.standIns && p.type === 'cilium-cni') p.type = 'ptp';
    const shim = p.type === 'ipam-shim' ? p : (p.ipam as JsonObject | undefined)?.type === 'ipam-shim' ? (p.ipam as JsonObject) : undefined;
    if (shim) {
      Object.assign(shim, { stateDir: s.stateDir, logFile: s.logFile });
      if (shim.metricsFile) shim.metricsFile = opts.metricsFile;
      fixIpam(shim.delegate as JsonObject);
    } else fixIpam(p.ipam as JsonObject | undefined);
  }
  return out;
}

async function bed(list: JsonObject, kind: RuntimeKind) {
  const node = await net.netns('node');
  const pod = await net.netns('pod');
  const bin = await shimBinDir(s.dir);
  const fakeLog = join(s.dir, 'fake-ipam.log');
  const runner = newRuntime(kind, {
    confList: list,
    pluginDirs: [bin, FIXTURE_BIN, PLUGIN_DIR],
    cacheDir: join(s.dir, 'cache'),
    netns: node,
    env: { FAKE_IPAM_LOG: fakeLog },
  });
  return { node, pod, netnsPath: `/run/netns/${pod}`, bin, runner, fakeLog };
}

const firstIp = (r: any): string => String(r.ips[0].address).split('/')[0]!;

for (const kind of RUNTIMES)
  (root && !skipRuntime(kind) ? describe : describe.skip)(`conflist/ examples run for real (${kind})`, () => {
    it.each(['generic-host-local.conflist', 'generic-host-local-chained.conflist'])('%s: ADD → CHECK → DEL with ptp + host-local', async (file) => {
      const list = localise(await load(file));
      const name = String(list.name);
      const b = await bed(list, kind);
      const result: any = await b.runner.add(`ctr-${uid()}`, b.netnsPath);
      const cid = b.runner.invocations.at(-1)!.env.CNI_CONTAINERID;
      const ip = firstIp(result);
      expect(ip).toMatch(name === 'generic' ? /^10\.85\.0\./ : /^10\.86\.0\./);
      expect((await inNs(b.pod, 'ip', ['-j', 'addr', 'show', 'eth0'])).stdout).toContain(ip);
      // The node reaches the pod over ptp's host route.
      expect((await inNs(b.node, 'ping', ['-c', '1', '-W', '2', ip])).exitCode).toBe(0);
      expect(await hostLocalAllocations(s.dataDir, name)).toEqual([ip]);
      expect(await ledgerRecords(s.stateDir, name)).toEqual([`${cid}:eth0.json`]);
      await b.runner.check(cid, b.netnsPath);
      await b.runner.del(cid, b.netnsPath);
      expect(await hostLocalAllocations(s.dataDir, name)).toEqual([]);
      expect(await ledgerRecords(s.stateDir, name)).toEqual([]);
    });

    it('aks-cilium-0.3.1.conflist (ptp for cilium-cni, fake-ipam for azure-ipam): ADD → DEL; no CHECK at 0.3.1', async () => {
      const list = localise(await load('aks-cilium-0.3.1.conflist'), { standIns: true });
      const b = await bed(list, kind);
      const result: any = await b.runner.add('aks-pod-1', b.netnsPath);
      expect(result.cniVersion).toBe('0.3.1');
      expect(result.ips[0]).toMatchObject({ address: '10.99.0.7/24', version: '4' });
      // The chained shim saw ptp's result and recorded it; it answered with that result unchanged.
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual(['aks-pod-1:eth0.json']);
      const shimAdd = b.runner.invocations.filter((i) => i.plugin === 'ipam-shim' && i.command === 'ADD');
      expect(shimAdd).toHaveLength(1);
      expect(JSON.parse(shimAdd[0]!.stdout)).toEqual(result);
      expect((await inNs(b.node, 'ping', ['-c', '1', '-W', '2', '10.99.0.7'])).exitCode).toBe(0);
      await expect(b.runner.check('aks-pod-1', b.netnsPath)).rejects.toThrow(/does not support the CHECK command/);
      await b.runner.del('aks-pod-1', b.netnsPath);
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual([]);
      // cilium-cni's stand-in released through its IPAM plugin; the shim itself never called it on ADD/DEL.
      const calls = (await readFile(b.fakeLog, 'utf8'))
        .trim()
        .split('\n')
        .map((l) => l.split(' ').slice(0, 2).join(' '));
      expect(calls).toEqual(['ADD aks-pod-1', 'DEL aks-pod-1']);
    });

    it('aks-cilium-1.1.0.conflist (same stand-ins): ADD → CHECK → DEL, GC and STATUS at 1.1.0 to the shim, metrics written', async () => {
      const metricsFile = join(s.dir, 'textfile', 'ipam-shim.prom');
      const shipped = await load('aks-cilium-1.1.0.conflist');
      const list = localise(shipped, { standIns: true, metricsFile });
      // Debian's ptp stops at 1.0.0: drive the list at 1.0.0 (a runtime would pick it from cniVersions if capped there).
      const driven = { ...list, cniVersion: '1.0.0', cniVersions: ['0.3.1', '1.0.0'] };
      const b = await bed(driven, kind);
      const result: any = await b.runner.add('aks-pod-2', b.netnsPath);
      expect(result.cniVersion).toBe('1.0.0');
      await b.runner.check('aks-pod-2', b.netnsPath);

      const shimEntry = (list.plugins as JsonObject[])[1]!;
      const at110 = { ...shimEntry, name: list.name, cniVersion: '1.1.0' };
      const path = [b.bin, FIXTURE_BIN, PLUGIN_DIR];
      const status = await invoke(at110, { command: 'STATUS', path, inNetns: b.node });
      expect(status.exitCode, status.stdout).toBe(0);
      // GC with an empty valid list: the attachment's netns still holds the address, so it is provably alive and kept.
      const gc = await invoke(
        { ...at110, 'cni.dev/valid-attachments': [] },
        { command: 'GC', path, inNetns: b.node, env: { FAKE_IPAM_LOG: b.fakeLog } },
      );
      expect(gc.exitCode, gc.stdout).toBe(0);
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual(['aks-pod-2:eth0.json']);
      expect((await readFile(b.fakeLog, 'utf8')).split('\n').filter((l) => l.startsWith('DEL'))).toEqual([]);

      await b.runner.del('aks-pod-2', b.netnsPath);
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual([]);
      expect(existsSync(metricsFile)).toBe(true);
      const m = parseMetrics(await readFile(metricsFile, 'utf8'));
      const v = (name: string, labels: string) => m.get(`${name}{${labels}}`)?.value;
      expect(v('ipam_shim_invocations_total', 'network="cilium",verb="ADD"')).toBe(1);
      expect(v('ipam_shim_invocations_total', 'network="cilium",verb="CHECK"')).toBe(1);
      expect(v('ipam_shim_invocations_total', 'network="cilium",verb="DEL"')).toBe(1);
      expect(v('ipam_shim_invocations_total', 'network="cilium",verb="GC"')).toBe(1);
      expect(v('ipam_shim_invocations_total', 'network="cilium",verb="STATUS"')).toBe(1);
      expect(v('ipam_shim_gc_released_total', 'network="cilium"')).toBe(0);
      expect(v('ipam_shim_ledger_attachments', 'network="cilium"')).toBe(0);
      // Each call's wall time in the histogram, by verb: one observation each, inside (0, 30 s].
      for (const verb of ['ADD', 'CHECK', 'DEL', 'GC', 'STATUS']) {
        const h = `network="cilium",verb="${verb}"`;
        expect(v('ipam_shim_cni_call_duration_seconds_count', h), verb).toBe(1);
        expect(v('ipam_shim_cni_call_duration_seconds_bucket', `le="+Inf",${h}`), verb).toBe(1);
        expect(v('ipam_shim_cni_call_duration_seconds_bucket', `le="30",${h}`), verb).toBe(1);
        expect(v('ipam_shim_cni_call_duration_seconds_sum', h), verb).toBeGreaterThan(0);
      }
    });
  });

// Keep the shipped examples free of test paths (a copy-paste must work on a node).
describe('examples use the node defaults', () => {
  it.each(EXAMPLES)('%s names no temp dirs', async (file) => {
    const text = await readFile(join(DIR, file), 'utf8');
    expect(text).not.toMatch(/\/tmp\//);
    expect(text).not.toMatch(/"stateDir"|"logFile"|"dataDir"/);
  });
});

// Every example in conflist/ and the README's chained list parse through src/conflist.ts (the way the plugin and the
// CLI read a node's conflists) and run for real: the project's libcni-like runner and the real libcni (the cnitool
// harness) each drive them inside a throwaway "node" namespace against a pod namespace, with the built shim on
// CNI_PATH.
//
// Substitutions (said here because they matter): temp dirs replace stateDir, logFile, metricsFile and
// host-local's dataDir. cilium-cni and azure-ipam do not exist on this machine: cilium-cni is the stand-in of the
// Cilium line the list is for (test/fixtures/cilium-cni/: 1.17 takes up to 1.0.0, newer takes 1.1.0; with
// cilium-agent's API stood in by test/support/doubles/cilium-agent.ts), azure-ipam is test/fixtures/bin/fake-ipam.
// Everything else (names, versions, the shim's entry, its position) is the file as shipped. The README's old 1.1.0
// list, and the newer line's list, fail under the 1.17 stand-in with the real cilium-cni's text.
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
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { type CiliumLine, ciliumCniDir } from '../support/shim/cilium.js';
import { FIXTURE_BIN, PLUGIN_DIR, ROOT, hostLocalAllocations, ledgerRecords, shimBinDir } from '../support/shim/cni.js';

const DIR = join(ROOT, 'conflist');
/** Every list shipped, and the Cilium line whose cilium-cni takes it (conflist/README.md says the same). */
const EXAMPLES: Record<string, CiliumLine | 'none'> = {
  'aks-cilium-0.3.1.conflist': '1.17',
  'aks-cilium-1.0.0.conflist': '1.17',
  'cilium-newer-than-1.17-1.1.0.conflist': 'newer',
  'generic-host-local.conflist': 'none',
  'generic-host-local-chained.conflist': 'none',
};
const root = rootOrSkip();

/** cilium-cni 1.17's refusal of a 1.1.0 config (the real 1.17.5's text, issue 41; libcni's skel). */
const REFUSED_110 = {
  code: 1,
  msg: 'incompatible CNI versions',
  details: 'config is "1.1.0", plugin supports ["0.1.0" "0.2.0" "0.3.0" "0.3.1" "0.4.0" "1.0.0"]',
};
/** The list the README showed until issue 41: 1.1.0, which cilium-cni 1.17 refuses on every ADD. */
const README_OLD_LIST = {
  cniVersion: '1.1.0',
  cniVersions: ['0.3.1', '1.0.0', '1.1.0'],
  name: 'cilium',
  plugins: [
    { type: 'cilium-cni', ipam: { type: 'azure-ipam' } },
    { type: 'ipam-shim', delegate: { type: 'azure-ipam' }, reservedCIDRs: ['10.224.0.0/24'] },
  ],
};

const load = async (file: string): Promise<JsonObject> => JSON.parse(await readFile(join(DIR, file), 'utf8'));

/** The README's chained list (the first ```json block after its "**Chained**" paragraph). */
async function readmeList(): Promise<JsonObject> {
  const md = await readFile(join(ROOT, 'README.md'), 'utf8');
  const block = /```json\n([\s\S]*?)```/.exec(md.slice(md.indexOf('**Chained**')));
  return JSON.parse(block![1]!);
}

describe('conflist/ examples parse like the plugin reads them', () => {
  it('the directory holds exactly the examples this file exercises, and the README naming their Cilium lines', async () => {
    expect((await readdir(DIR)).sort()).toEqual([...Object.keys(EXAMPLES), 'README.md'].sort());
    const readme = await readFile(join(DIR, 'README.md'), 'utf8');
    for (const file of Object.keys(EXAMPLES)) expect(readme).toContain(`[\`${file}\`](${file})`);
  });

  it.each([
    ['aks-cilium-0.3.1.conflist', 'chained', '0.3.1', 'azure-ipam'],
    ['aks-cilium-1.0.0.conflist', 'chained', '1.0.0', 'azure-ipam'],
    ['cilium-newer-than-1.17-1.1.0.conflist', 'chained', '1.1.0', 'azure-ipam'],
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
const a = useCiliumAgent();

/** The temp-dir substitutions and fake-ipam for azure-ipam applied to a list. */
function localise(list: JsonObject, opts: { metricsFile?: string } = {}): JsonObject {
  const out = structuredClone(list);
  const fixIpam = (ipam: JsonObject | undefined) => {
    if (!ipam) return;
    if (ipam.type === 'host-local') ipam.dataDir = s.dataDir;
    if (ipam.type === 'azure-ipam') ipam.type = 'fake-ipam';
  };
  for (const p of out.plugins as JsonObject[]) {
    const shim = p.type === 'ipam-shim' ? p : (p.ipam as JsonObject | undefined)?.type === 'ipam-shim' ? (p.ipam as JsonObject) : undefined;
    if (shim) {
      Object.assign(shim, { stateDir: s.stateDir, logFile: s.logFile });
      if (shim.metricsFile) shim.metricsFile = opts.metricsFile;
      fixIpam(shim.delegate as JsonObject);
    } else fixIpam(p.ipam as JsonObject | undefined);
  }
  return out;
}

/** A node running `list` through `kind`, with the stand-in of `line` first on CNI_PATH (where cilium-cni would be). */
async function bed(list: JsonObject, kind: RuntimeKind, line: CiliumLine = '1.17') {
  const node = await net.netns('node');
  const pod = await net.netns('pod');
  const bin = await shimBinDir(s.dir);
  const fakeLog = join(s.dir, `fake-ipam-${uid()}.log`);
  const runner = newRuntime(kind, {
    confList: list,
    pluginDirs: [bin, ciliumCniDir(line), FIXTURE_BIN, PLUGIN_DIR],
    cacheDir: join(s.dir, 'cache'),
    netns: node,
    env: { FAKE_IPAM_LOG: fakeLog, FAKE_IPAM_SPEAKS: '1.1.0', ...a.agent.env({ connect: 1 }) },
  });
  return { node, pod, netnsPath: `/run/netns/${pod}`, bin, runner, fakeLog };
}

const firstIp = (r: any): string => String(r.ips[0].address).split('/')[0]!;
/** The commands fake-ipam (azure-ipam's place) was called with, and for which container. */
const fakeCalls = async (file: string): Promise<string[]> =>
  existsSync(file)
    ? (await readFile(file, 'utf8'))
        .trim()
        .split('\n')
        .filter((l) => !l.startsWith('VERSION'))
        .map((l) => l.split(' ').slice(0, 2).join(' '))
    : [];

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

    it('aks-cilium-0.3.1.conflist (the 1.17 stand-in for cilium-cni, fake-ipam for azure-ipam): ADD → DEL; no CHECK at 0.3.1', async () => {
      const list = localise(await load('aks-cilium-0.3.1.conflist'));
      const b = await bed(list, kind, '1.17');
      const result: any = await b.runner.add('aks-pod-1', b.netnsPath);
      expect(result.cniVersion).toBe('0.3.1');
      // cilium-cni's datapath: the delegate's address as a /32 in the pod.
      expect(result.ips.map((x: any) => x.address)).toEqual(['10.99.0.7/32']);
      // The chained shim saw cilium-cni's result and recorded it; it answered with that result unchanged.
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual(['aks-pod-1:eth0.json']);
      const shimAdd = b.runner.invocations.filter((i) => i.plugin === 'ipam-shim' && i.command === 'ADD');
      expect(shimAdd).toHaveLength(1);
      expect(JSON.parse(shimAdd[0]!.stdout)).toEqual(result);
      expect((await inNs(b.node, 'ping', ['-c', '1', '-W', '2', '10.99.0.7'])).exitCode).toBe(0);
      await expect(b.runner.check('aks-pod-1', b.netnsPath)).rejects.toThrow(/does not support the CHECK command|CHECK/);
      await b.runner.del('aks-pod-1', b.netnsPath);
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual([]);
      // cilium-cni released through its IPAM plugin (DelegateDel); the shim itself never called it on ADD/DEL.
      expect(await fakeCalls(b.fakeLog)).toEqual(['ADD aks-pod-1', 'DEL aks-pod-1']);
    });

    it('aks-cilium-1.0.0.conflist (the 1.17 stand-in): ADD → CHECK → DEL, metrics written; no GC or STATUS at 1.0.0', async () => {
      const metricsFile = join(s.dir, 'textfile', 'ipam-shim.prom');
      const list = localise(await load('aks-cilium-1.0.0.conflist'), { metricsFile });
      const b = await bed(list, kind, '1.17');
      const result: any = await b.runner.add('aks-pod-2', b.netnsPath);
      expect(result.cniVersion).toBe('1.0.0');
      expect((await inNs(b.node, 'ping', ['-c', '1', '-W', '2', firstIp(result)])).exitCode).toBe(0);
      await b.runner.check('aks-pod-2', b.netnsPath);
      // At 1.0.0 a runtime sends neither: libcni's STATUS and GC skip every plugin of a list below 1.1.0 (its GC
      // still DELs cached attachments outside the valid list; this one is in it).
      await b.runner.status();
      await b.runner.gc([{ containerID: 'aks-pod-2', ifname: 'eth0' }]);
      expect(b.runner.invocations.filter((i) => i.command === 'STATUS' || i.command === 'GC')).toEqual([]);
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual(['aks-pod-2:eth0.json']);
      await b.runner.del('aks-pod-2', b.netnsPath);
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual([]);
      const m = parseMetrics(await readFile(metricsFile, 'utf8'));
      const v = (name: string, labels: string) => m.get(`${name}{${labels}}`)?.value;
      for (const verb of ['ADD', 'CHECK', 'DEL']) expect(v('ipam_shim_invocations_total', `network="cilium",verb="${verb}"`), verb).toBe(1);
      for (const verb of ['GC', 'STATUS']) expect(v('ipam_shim_invocations_total', `network="cilium",verb="${verb}"`) ?? 0, verb).toBe(0);
    });

    it('cilium-newer-than-1.17-1.1.0.conflist (the newer stand-in): ADD → CHECK → STATUS → GC → DEL through the runtime, metrics written', async () => {
      const metricsFile = join(s.dir, 'textfile', 'ipam-shim.prom');
      const list = localise(await load('cilium-newer-than-1.17-1.1.0.conflist'), { metricsFile });
      const b = await bed(list, kind, 'newer');
      const result: any = await b.runner.add('aks-pod-3', b.netnsPath);
      expect(result.cniVersion).toBe('1.1.0');
      await b.runner.check('aks-pod-3', b.netnsPath);
      await b.runner.status();
      // GC keeping the pod: cilium-cni answers it (skel) and passes nothing on; the chained shim gets it and keeps the pod.
      await b.runner.gc([{ containerID: 'aks-pod-3', ifname: 'eth0' }]);
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual(['aks-pod-3:eth0.json']);
      await b.runner.del('aks-pod-3', b.netnsPath);
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual([]);
      const m = parseMetrics(await readFile(metricsFile, 'utf8'));
      const v = (name: string, labels: string) => m.get(`${name}{${labels}}`)?.value;
      for (const verb of ['ADD', 'CHECK', 'DEL', 'GC', 'STATUS'])
        expect(v('ipam_shim_invocations_total', `network="cilium",verb="${verb}"`), verb).toBe(1);
      expect(v('ipam_shim_gc_released_total', 'network="cilium"')).toBe(0);
      for (const verb of ['ADD', 'CHECK', 'DEL', 'GC', 'STATUS']) {
        const h = `network="cilium",verb="${verb}"`;
        expect(v('ipam_shim_cni_call_duration_seconds_count', h), verb).toBe(1);
        expect(v('ipam_shim_cni_call_duration_seconds_bucket', `le="30",${h}`), verb).toBe(1);
      }
    });

    it("the README's list (the 1.17 stand-in): ADD → CHECK → DEL, the pod reachable", async () => {
      const list = localise(await readmeList());
      const b = await bed(list, kind, '1.17');
      const result: any = await b.runner.add('readme-pod', b.netnsPath);
      expect(result.cniVersion).toBe(list.cniVersion);
      expect((await inNs(b.node, 'ping', ['-c', '1', '-W', '2', firstIp(result)])).exitCode).toBe(0);
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual(['readme-pod:eth0.json']);
      await b.runner.check('readme-pod', b.netnsPath);
      await b.runner.del('readme-pod', b.netnsPath);
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual([]);
    });

    it.each([
      ["the README's old 1.1.0 list", async () => README_OLD_LIST],
      ['cilium-newer-than-1.17-1.1.0.conflist', () => load('cilium-newer-than-1.17-1.1.0.conflist')],
    ])('%s under the 1.17 stand-in: ADD fails in cilium-cni with the real text, the shim and IPAM never called', async (_name, get) => {
      const list = localise((await get()) as JsonObject);
      const b = await bed(list, kind, '1.17');
      await expect(b.runner.add('old-pod', b.netnsPath)).rejects.toMatchObject(REFUSED_110);
      expect(b.runner.invocations.filter((i) => i.plugin === 'ipam-shim' && i.command === 'ADD')).toEqual([]);
      expect(await fakeCalls(b.fakeLog)).toEqual([]);
      expect(await ledgerRecords(s.stateDir, 'cilium')).toEqual([]);
      expect(a.agent.requests).toEqual([]);
    });
  });

// Keep the shipped examples free of test paths (a copy-paste must work on a node).
describe('examples use the node defaults', () => {
  it.each(Object.keys(EXAMPLES))('%s names no temp dirs', async (file) => {
    const text = await readFile(join(DIR, file), 'utf8');
    expect(text).not.toMatch(/\/tmp\//);
    expect(text).not.toMatch(/"stateDir"|"logFile"|"dataDir"/);
  });
});

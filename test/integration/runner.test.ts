// The libcni-like runner and the real libcni (the cnitool harness, test/support/runtimes/cnitool.ts) against the real reference
// plugins (Debian's containernetworking-plugins 1.1.1: ptp + host-local), in throwaway network namespaces: every
// runtime test runs through both, and the two must agree. GC/STATUS at 1.1.0 are shown twice: with the real
// plugins (which only speak ≤ 1.0.0, so everything fails, as documented below) and with a tiny recording
// plugin written by this file that does speak 1.1.0.
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { chmod, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { TestNet, inNs, rootOrSkip, uid } from '../support/net/netns.js';
import {
  GcError,
  PluginError,
  RunnerError,
  convertResult,
  normalizeResult,
  pickConfigVersion,
  type Invocation,
  type JsonObject,
} from '../support/runtimes/runner.js';
import { cnitoolContainerID } from '../support/runtimes/cnirun.js';
import { HarnessError } from '../support/runtimes/cnitool.js';
import { RUNTIMES, newRuntime, skipRuntime, type CniRuntime, type RuntimeKind } from '../support/runtimes/runtimes.js';

/** Reference plugins; CNI_PLUGIN_DIR (as in test/support/shim/cni.ts) points the suite at newer upstream builds. */
const PLUGIN_DIR = process.env.CNI_PLUGIN_DIR ?? '/usr/lib/cni';
const haveRoot = rootOrSkip();

/** A CNI plugin (Node script) that records every call as one JSON line and speaks 0.3.0–1.1.0. */
const RECORDER = `#!${process.execPath}
const fs = require('node:fs');
const input = fs.readFileSync(0, 'utf8');
const conf = input ? JSON.parse(input) : {};
const env = {};
for (const k of ['CNI_COMMAND', 'CNI_CONTAINERID', 'CNI_NETNS', 'CNI_IFNAME', 'CNI_ARGS', 'CNI_PATH']) env[k] = process.env[k];
fs.appendFileSync(process.env.RECORDER_LOG, JSON.stringify({ tag: conf.tag, env, stdin: conf }) + '\\n');
const cmd = process.env.CNI_COMMAND;
const out = (o) => process.stdout.write(JSON.stringify(o));
if (cmd === 'VERSION') { out({ cniVersion: conf.cniVersion, supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] }); process.exit(0); }
if (cmd === 'STATUS' && conf.failStatus) { out({ cniVersion: conf.cniVersion, code: 50, msg: 'not ready', details: conf.tag }); process.exit(1); }
if (cmd === 'ADD') out(conf.prevResult || (conf.result ? { cniVersion: conf.cniVersion, ...conf.result } : { cniVersion: conf.cniVersion, ips: [{ address: '192.0.2.' + (conf.octet || 7) + '/32' }] }));
process.exit(0);
`;

interface Ctx {
  net: TestNet;
  dir: string;
  cacheDir: string;
  dataDir: string;
  pluginDir: string;
  recorderLog: string;
}

let ctx: Ctx;
let subnetCounter = 0;

/** A fresh /24 for each test (several test files may run at once: keep clear of the podman test's range). */
function subnet(): { cidr: string; prefix: string } {
  const third = (process.pid % 50) * 4 + (subnetCounter++ % 4) + 20;
  return { cidr: `10.231.${third}.0/24`, prefix: `10.231.${third}.` };
}

function ptpList(version: string, name: string, cidr: string, extra: JsonObject[] = [], top: JsonObject = {}): JsonObject {
  return {
    cniVersion: version,
    name,
    ...top,
    plugins: [{ type: 'ptp', ipMasq: false, ipam: { type: 'host-local', ranges: [[{ subnet: cidr }]], dataDir: ctx.dataDir } }, ...extra],
  };
}

let kind: RuntimeKind = 'runner';

function runner(confList: JsonObject): CniRuntime {
  return newRuntime(kind, {
    confList,
    pluginDirs: [ctx.pluginDir, PLUGIN_DIR],
    cacheDir: ctx.cacheDir,
    env: { RECORDER_LOG: ctx.recorderLog },
  });
}

async function recorded(): Promise<Array<{ tag?: string; env: Invocation['env']; stdin: JsonObject }>> {
  if (!existsSync(ctx.recorderLog)) return [];
  return (await readFile(ctx.recorderLog, 'utf8'))
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/** host-local's reservation files (one per IP) for a network. */
async function allocations(network: string): Promise<Record<string, string>> {
  const d = path.join(ctx.dataDir, network);
  if (!existsSync(d)) return {};
  const out: Record<string, string> = {};
  for (const f of await readdir(d))
    if (/^[0-9a-f.:]+$/.test(f) && f.includes('.') && !f.startsWith('last_')) out[f] = await readFile(path.join(d, f), 'utf8');
  return out;
}

const firstIP = (result: JsonObject): string => String((result.ips as Array<{ address: string }>)[0]!.address).split('/')[0]!;

describe('version selection and result conversion (no root needed)', () => {
  it('picks the highest of cniVersion ∪ cniVersions the runtime supports (≤ 1.1.0)', () => {
    expect(pickConfigVersion({ cniVersion: '0.4.0', cniVersions: ['0.3.1', '1.0.0', '1.1.0', '2.0.0'] })).toBe('1.1.0');
    expect(pickConfigVersion({ cniVersion: '0.3.1', cniVersions: ['0.4.0', '1.0.0'] })).toBe('1.0.0');
    expect(pickConfigVersion({ cniVersion: '1.0.0', cniVersions: ['0.3.1'] })).toBe('1.0.0');
    expect(pickConfigVersion({ cniVersion: '9.9.9', cniVersions: ['0.4.0'] })).toBe('0.4.0');
    expect(pickConfigVersion({ cniVersion: '0.3.1' })).toBe('0.3.1');
    expect(() => pickConfigVersion({ cniVersions: ['x'] })).toThrow(RunnerError);
  });

  it('converts cached results between 0.x and 1.x shapes', () => {
    const r100 = {
      cniVersion: '1.1.0',
      interfaces: [{ name: 'eth0', mac: 'aa', mtu: 1400 }],
      ips: [{ address: '10.0.0.2/24', interface: 0 }, { address: 'fd00::2/64' }],
    };
    const r040 = convertResult(r100, '0.4.0');
    // libcni's types040 has no marshaller of its own: an empty dns is printed as {} (types100 omits it)
    expect(r040).toEqual({
      cniVersion: '0.4.0',
      interfaces: [{ name: 'eth0', mac: 'aa' }],
      ips: [
        { address: '10.0.0.2/24', interface: 0, version: '4' },
        { address: 'fd00::2/64', version: '6' },
      ],
      dns: {},
    });
    expect(convertResult(r040, '1.0.0')).toEqual({
      cniVersion: '1.0.0',
      interfaces: [{ name: 'eth0', mac: 'aa' }],
      ips: [{ address: '10.0.0.2/24', interface: 0 }, { address: 'fd00::2/64' }],
    });
  });

  it('derives container IDs like cnitool', () => {
    expect(cnitoolContainerID('/run/netns/x')).toMatch(/^cnitool-[0-9a-f]{20}$/);
  });
});

/** A fresh ctx for each test (runtime `k`), removed afterwards. */
function useCtx(k: RuntimeKind): void {
  beforeEach(async () => {
    kind = k;
    const dir = await mkdtemp(path.join(os.tmpdir(), 'cni-runner-'));
    ctx = {
      net: new TestNet(),
      dir,
      cacheDir: path.join(dir, 'cache'),
      dataDir: path.join(dir, 'data'),
      pluginDir: path.join(dir, 'bin'),
      recorderLog: path.join(dir, 'recorder.jsonl'),
    };
    await execa('mkdir', ['-p', ctx.pluginDir, ctx.dataDir]);
    await writeFile(path.join(ctx.pluginDir, 'recorder'), RECORDER);
    await chmod(path.join(ctx.pluginDir, 'recorder'), 0o755);
  });

  afterEach(async () => {
    await ctx.net.cleanup();
    await rm(ctx.dir, { recursive: true, force: true });
  });
}

for (const k of RUNTIMES)
  describe.skipIf(!haveRoot || skipRuntime(k))(`${k === 'runner' ? 'CniRunner' : 'libcni (cnitool harness)'} against ptp + host-local`, () => {
    useCtx(k);

    for (const version of ['0.3.1', '0.4.0', '1.0.0']) {
      it(`ADD/CHECK/DEL at ${version}: cache file, prevResult, host-local store`, async () => {
        const ns = await ctx.net.netns('rn');
        const netns = `/run/netns/${ns}`;
        const name = `rt-${uid()}`;
        const sn = subnet();
        const r = runner(ptpList(version, name, sn.cidr));
        const cid = `ctr-${uid(10)}`;

        // ADD
        const result = await r.add(cid, netns, 'eth0', 'IgnoreUnknown=1;K8S_POD_NAME=p1');
        expect(result.cniVersion).toBe(version);
        const ip = firstIP(result);
        expect(ip.startsWith(sn.prefix)).toBe(true);
        const ips = result.ips as Array<JsonObject>;
        if (version === '1.0.0') expect(ips[0]).not.toHaveProperty('version');
        else expect(ips[0]!.version).toBe('4');
        const addInv = r.invocations.at(-1)!;
        expect(addInv.env).toEqual({
          CNI_COMMAND: 'ADD',
          CNI_CONTAINERID: cid,
          CNI_NETNS: netns,
          CNI_IFNAME: 'eth0',
          CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAME=p1',
          CNI_PATH: `${ctx.pluginDir}:${PLUGIN_DIR}`,
        });
        expect(addInv.stdin).toMatchObject({ name, cniVersion: version, type: 'ptp' });
        expect(addInv.stdin).not.toHaveProperty('prevResult');

        // the address is really there and reachable from the host (ptp's host route)
        expect(String((await inNs(ns, 'ip', ['-4', '-o', 'addr', 'show', 'eth0'])).stdout)).toContain(`${ip}/24`);
        await execa('ping', ['-c', '1', '-W', '2', ip]);

        // libcni's cache file
        const cacheFile = path.join(ctx.cacheDir, 'results', `${name}-${cid}-eth0`);
        expect(r.cacheFilePath(cid)).toBe(cacheFile);
        const cache = JSON.parse(await readFile(cacheFile, 'utf8'));
        expect(cache).toMatchObject({
          kind: 'cniCacheV1',
          containerId: cid,
          ifName: 'eth0',
          networkName: name,
          netns,
          cniArgs: [
            ['IgnoreUnknown', '1'],
            ['K8S_POD_NAME', 'p1'],
          ],
        });
        expect(JSON.parse(Buffer.from(cache.config, 'base64').toString('utf8'))).toMatchObject({ name, cniVersion: version });
        expect(cache.result).toEqual(result);
        expect(Object.keys(cache).slice(0, 5)).toEqual(['kind', 'containerId', 'config', 'ifName', 'networkName']);

        // host-local's reservation: <dataDir>/<network>/<ip> = "<cid>\r\n<ifname>"
        expect(await allocations(name)).toEqual({ [ip]: `${cid}\r\neth0` });

        // CHECK
        if (version === '0.3.1') {
          const before = r.invocations.length;
          await expect(r.check(cid, netns)).rejects.toThrow(/does not support the CHECK command/);
          expect(r.invocations.length).toBe(before); // no plugin was run
        } else {
          await r.check(cid, netns, 'eth0', 'IgnoreUnknown=1;K8S_POD_NAME=p1');
          const checkInv = r.invocations.at(-1)!;
          expect(checkInv.command).toBe('CHECK');
          expect(checkInv.stdin.prevResult).toEqual(result); // ptp's CHECK needs it and passed
        }

        // DEL
        await r.del(cid, netns, 'eth0', 'IgnoreUnknown=1;K8S_POD_NAME=p1');
        const delInv = r.invocations.at(-1)!;
        expect(delInv.command).toBe('DEL');
        if (version === '0.3.1')
          expect(delInv.stdin).not.toHaveProperty('prevResult'); // libcni: prevResult on DEL from 0.4.0
        else expect(delInv.stdin.prevResult).toEqual(result);
        expect(existsSync(cacheFile)).toBe(false);
        expect(await allocations(name)).toEqual({});
        expect(String((await inNs(ns, 'ip', ['-o', 'link'])).stdout)).not.toContain('eth0');

        // DEL again: idempotent, no cache → no prevResult
        await r.del(cid, netns);
        expect(r.invocations.at(-1)!.stdin).not.toHaveProperty('prevResult');
      });
    }

    it('chains: the second plugin gets the first one’s result as prevResult on ADD; DEL runs in reverse', async () => {
      const ns = await ctx.net.netns('rn');
      const netns = `/run/netns/${ns}`;
      const name = `rt-${uid()}`;
      const sn = subnet();
      const r = runner(ptpList('1.0.0', name, sn.cidr, [{ type: 'recorder', tag: 'after-ptp' }]));
      const cid = `ctr-${uid(10)}`;
      const result = await r.add(cid, netns);
      const ptpOut = JSON.parse(r.invocations[0]!.stdout);
      const rec = await recorded();
      // libcni passes ptp's result on through its typed Result: an empty "dns": {} (ptp 1.1.1 prints one; 1.9.1 leaves it
      // out) is dropped at 1.0.0, so the next plugin never sees one.
      if ('dns' in ptpOut) expect(ptpOut.dns).toEqual({});
      expect(rec[0]!.stdin.prevResult).not.toHaveProperty('dns');
      expect(rec[0]!.stdin.prevResult).toEqual(normalizeResult(ptpOut));
      expect(result).toEqual(normalizeResult(ptpOut)); // the recorder passes prevResult through
      await r.del(cid, netns);
      expect(r.invocations.map((i) => `${i.command}:${i.plugin}`)).toEqual(['ADD:ptp', 'ADD:recorder', 'DEL:recorder', 'DEL:ptp']);
      expect((await recorded())[1]!.stdin.prevResult).toEqual(result);
    });

    /** The Debian 1.1.1 plugins stop at spec 1.0.0; upstream ≥ 1.6.0 speak 1.1.0 (then the failure tests skip). */
    async function pluginsSpeak110(t: { skip: (note?: string) => void }): Promise<void> {
      const v = await runner({ cniVersion: '1.0.0', name: 'probe', plugins: [{ type: 'ptp' }] }).version('ptp');
      if (v.supportedVersions.includes('1.1.0')) t.skip('these plugins speak 1.1.0: nothing fails');
    }

    it('reports a plugin error as PluginError (ADD at 1.1.0: the Debian plugins stop at 1.0.0)', async (t) => {
      await pluginsSpeak110(t);
      const ns = await ctx.net.netns('rn');
      const r = runner(ptpList('1.1.0', `rt-${uid()}`, subnet().cidr));
      const err = await r.add(`ctr-${uid(10)}`, `/run/netns/${ns}`).catch((e: unknown) => e);
      if (kind === 'runner') {
        expect(err).toBeInstanceOf(PluginError);
        expect(err).toMatchObject({ plugin: 'ptp', command: 'ADD', exitCode: 1 });
      } else {
        expect(err).toBeInstanceOf(HarnessError);
        expect((err as HarnessError).error).toMatch(/^plugin type="ptp" failed \(add\): incompatible CNI versions/);
      }
      expect(err).toMatchObject({ code: 1, msg: 'incompatible CNI versions' });
      expect((err as PluginError).details).toContain('"1.1.0"');
      await expect(runner(ptpList('1.0.0', 'x', subnet().cidr)).add('bad/id', `/run/netns/${ns}`)).rejects.toMatchObject({
        name: kind === 'runner' ? 'RunnerError' : 'HarnessError',
        code: 4,
      });
    });

    it('GC at 1.0.0: DELs cached attachments not in the valid list (host-local files released); no GC verb sent', async () => {
      const name = `rt-${uid()}`;
      const sn = subnet();
      const r = runner(ptpList('1.0.0', name, sn.cidr));
      const other = runner(ptpList('1.0.0', `rt-${uid()}`, subnet().cidr)); // another network, same cache dir
      const atts: Array<{ cid: string; netns: string; ip: string }> = [];
      for (let i = 0; i < 3; i++) {
        const ns = await ctx.net.netns('rn');
        const cid = `ctr-${i}-${uid(8)}`;
        atts.push({ cid, netns: `/run/netns/${ns}`, ip: firstIP(await r.add(cid, `/run/netns/${ns}`)) });
      }
      const otherNs = await ctx.net.netns('rn');
      await other.add('other-ctr', `/run/netns/${otherNs}`);
      const [a, b, c] = atts as [(typeof atts)[0], (typeof atts)[0], (typeof atts)[0]];
      expect(Object.keys(await allocations(name)).sort()).toEqual([a.ip, b.ip, c.ip].sort());

      r.invocations.length = 0;
      const report = await r.gc([
        { containerID: a.cid, ifname: 'eth0' },
        { containerID: 'not-cached', ifname: 'eth0' },
      ]);
      expect(report).toEqual({
        deleted: expect.arrayContaining([
          { containerID: b.cid, ifname: 'eth0' },
          { containerID: c.cid, ifname: 'eth0' },
        ]),
        gcSent: false,
        disabled: false,
      });
      expect(report.deleted).toHaveLength(2);
      // the synthesised DELs carry the cached netns and prevResult; nothing else was run (1.0.0: no GC verb)
      expect(r.invocations.map((i) => i.command)).toEqual(['DEL', 'DEL']);
      for (const inv of r.invocations) {
        const att = atts.find((x) => x.cid === inv.env.CNI_CONTAINERID)!;
        expect(inv.env.CNI_NETNS).toBe(att.netns);
        expect(firstIP(inv.stdin.prevResult as JsonObject)).toBe(att.ip);
      }
      expect(await allocations(name)).toEqual({ [a.ip]: `${a.cid}\r\neth0` });
      expect(existsSync(r.cacheFilePath(a.cid))).toBe(true);
      expect(existsSync(r.cacheFilePath(b.cid))).toBe(false);
      expect(existsSync(r.cacheFilePath(c.cid))).toBe(false);
      expect(existsSync(other.cacheFilePath('other-ctr'))).toBe(true); // other network untouched

      // no list (upstream cnitool): everything of this network goes
      expect((await r.gc(undefined)).deleted).toEqual([{ containerID: a.cid, ifname: 'eth0' }]);
      expect(await allocations(name)).toEqual({});
      expect(existsSync(other.cacheFilePath('other-ctr'))).toBe(true);
      await other.del('other-ctr', `/run/netns/${otherNs}`);

      // disableGC: nothing at all, even with a stale attachment cached
      const disabled = runner(ptpList('1.0.0', name, sn.cidr, [], { disableGC: true }));
      const ns = await ctx.net.netns('rn');
      const ip = firstIP(await disabled.add('stale-but-kept', `/run/netns/${ns}`));
      const seen = disabled.invocations.length;
      expect(await disabled.gc([])).toMatchObject({ deleted: [], gcSent: false });
      expect(disabled.invocations.length).toBe(seen);
      expect(await allocations(name)).toEqual({ [ip]: `stale-but-kept\r\neth0` });
      await disabled.del('stale-but-kept', `/run/netns/${ns}`);
    });

    it('GC/STATUS at 1.1.0 with Debian 1.1.1 ptp: DEL synthesis fails with code 1, GC and STATUS with code 3', async (t) => {
      await pluginsSpeak110(t);
      // Attachments made at 1.0.0 (what the plugins speak), then the same network is "upgraded" to 1.1.0.
      const name = `rt-${uid()}`;
      const sn = subnet();
      const r100 = runner(ptpList('1.0.0', name, sn.cidr));
      const ns = await ctx.net.netns('rn');
      const cid = `ctr-${uid(10)}`;
      const ip = firstIP(await r100.add(cid, `/run/netns/${ns}`));

      const r110 = runner(ptpList('1.0.0', name, sn.cidr, [], { cniVersions: ['1.0.0', '1.1.0'] }));
      expect(r110.cniVersion).toBe('1.1.0');
      const err = await r110.gc([]).catch((e: unknown) => e);
      // 1. the synthesised DEL: ptp refuses the 1.1.0 config before doing anything
      // 2. GC to ptp: its 1.1.1 skel does not know GC; it fails on the (deliberately) empty CNI_CONTAINERID first
      if (kind === 'runner') {
        expect(err).toBeInstanceOf(GcError);
        const errs = (err as GcError).errors as Error[];
        expect(errs).toHaveLength(2);
        expect(errs[0]!.message).toMatch(new RegExp(`failed to delete stale attachment ${cid} eth0`));
        expect(errs[0]!.cause).toMatchObject({ plugin: 'ptp', command: 'DEL', code: 1, msg: 'incompatible CNI versions' });
        expect(errs[1]!.cause).toMatchObject({ plugin: 'ptp', command: 'GC', code: 3, msg: 'missing containerID' });
      } else {
        expect(err).toBeInstanceOf(HarnessError);
        const errs = (err as HarnessError).errors;
        expect(errs).toHaveLength(2);
        expect(errs[0]).toMatch(
          new RegExp(`^failed to delete stale attachment ${cid} eth0: plugin type="ptp" failed \\(delete\\): incompatible CNI versions`),
        );
        expect(errs[1]).toMatch(/^failed to GC plugin ptp: missing containerID/);
        expect(err).toMatchObject({ code: 1, msg: 'incompatible CNI versions' }); // the first CNI error of the join
      }
      expect(r110.invocations.filter((i) => i.command === 'DEL' || i.command === 'GC').map((i) => i.command)).toEqual(['DEL', 'GC']);
      const gcInv = r110.invocations.find((i) => i.command === 'GC')!;
      expect(gcInv.env).toMatchObject({
        CNI_CONTAINERID: '',
        CNI_NETNS: '',
        CNI_IFNAME: '',
        CNI_ARGS: '',
        CNI_PATH: `${ctx.pluginDir}:${PLUGIN_DIR}`,
      });
      expect(gcInv.stdin).toMatchObject({ 'cni.dev/valid-attachments': [], 'cni.dev/attachments': [], cniVersion: '1.1.0', name });
      // nothing was released, and the failed DEL kept the cache for a retry
      expect(await allocations(name)).toEqual({ [ip]: `${cid}\r\neth0` });
      expect(existsSync(r100.cacheFilePath(cid))).toBe(true);
      // STATUS stops at the first plugin and fails the same way
      await expect(r110.status()).rejects.toMatchObject({ code: 3 });
      expect(r110.invocations.at(-1)).toMatchObject({ plugin: 'ptp', command: 'STATUS' });
      // back at 1.0.0, GC (DEL synthesis) releases it
      expect((await r100.gc([])).deleted).toEqual([{ containerID: cid, ifname: 'eth0' }]);
      expect(await allocations(name)).toEqual({});
    });

    it('GC/STATUS at 1.1.0 with a 1.1.0 plugin: DEL synthesis, then GC in order with empty IDs and both keys', async () => {
      const name = `rt-${uid()}`;
      const list = {
        cniVersion: '1.1.0',
        name,
        plugins: [
          { type: 'recorder', tag: 'a' },
          { type: 'recorder', tag: 'b', octet: 9 },
        ],
      };
      const r = runner(list);
      const nsA = await ctx.net.netns('rn');
      const nsB = await ctx.net.netns('rn');
      await r.add('keep-me', `/run/netns/${nsA}`, 'eth0');
      await r.add('stale', `/run/netns/${nsB}`, 'net1', { args: 'K=V', capabilityArgs: { portMappings: [] } });
      await expect(r.cacheEntry('stale', 'net1')).resolves.toMatchObject({ cniArgs: [['K', 'V']], capabilityArgs: { portMappings: [] } });
      await writeFile(ctx.recorderLog, '');

      const report = await r.gc([{ containerID: 'keep-me', ifname: 'eth0' }]);
      expect(report).toEqual({ deleted: [{ containerID: 'stale', ifname: 'net1' }], gcSent: true, disabled: false });
      const rec = await recorded();
      expect(rec.map((x) => `${x.env.CNI_COMMAND}:${x.tag}`)).toEqual(['DEL:b', 'DEL:a', 'GC:a', 'GC:b']);
      expect(rec[0]!.env).toMatchObject({ CNI_CONTAINERID: 'stale', CNI_IFNAME: 'net1', CNI_NETNS: `/run/netns/${nsB}`, CNI_ARGS: 'K=V' });
      expect(rec[0]!.stdin.prevResult).toMatchObject({ cniVersion: '1.1.0', ips: [{ address: '192.0.2.7/32' }] });
      for (const g of rec.slice(2)) {
        expect(g.env).toEqual({
          CNI_COMMAND: 'GC',
          CNI_CONTAINERID: '',
          CNI_NETNS: '',
          CNI_IFNAME: '',
          CNI_ARGS: '',
          CNI_PATH: `${ctx.pluginDir}:${PLUGIN_DIR}`,
        });
        expect(g.stdin['cni.dev/valid-attachments']).toEqual([{ containerID: 'keep-me', ifname: 'eth0' }]);
        expect(g.stdin['cni.dev/attachments']).toEqual([{ containerID: 'keep-me', ifname: 'eth0' }]);
        expect(g.stdin).not.toHaveProperty('prevResult');
      }

      // undefined list: keys absent, every cached attachment DELed
      await writeFile(ctx.recorderLog, '');
      expect((await r.gc()).deleted).toEqual([{ containerID: 'keep-me', ifname: 'eth0' }]);
      const rec2 = await recorded();
      expect(rec2.map((x) => `${x.env.CNI_COMMAND}:${x.tag}`)).toEqual(['DEL:b', 'DEL:a', 'GC:a', 'GC:b']);
      expect(rec2[2]!.stdin).not.toHaveProperty('cni.dev/valid-attachments');
      expect(rec2[2]!.stdin).not.toHaveProperty('cni.dev/attachments');

      // STATUS: every plugin in order; the first failure stops it
      await writeFile(ctx.recorderLog, '');
      await r.status();
      expect((await recorded()).map((x) => `${x.env.CNI_COMMAND}:${x.tag}`)).toEqual(['STATUS:a', 'STATUS:b']);
      await writeFile(ctx.recorderLog, '');
      const failing = runner({
        ...list,
        plugins: [
          { type: 'recorder', tag: 'a', failStatus: true },
          { type: 'recorder', tag: 'b' },
        ],
      });
      await expect(failing.status()).rejects.toMatchObject({
        name: kind === 'runner' ? 'PluginError' : 'HarnessError',
        code: 50,
        msg: 'not ready',
        details: 'a',
      });
      expect((await recorded()).map((x) => x.tag)).toEqual(['a']);
      // below 1.1.0 STATUS is a no-op
      await writeFile(ctx.recorderLog, '');
      await runner({ ...list, cniVersion: '1.0.0' }).status();
      expect(await recorded()).toEqual([]);
    });

    it.runIf(k === 'runner')('cnirun (cnitool shape) drives the same flow from the command line', async () => {
      const ns = await ctx.net.netns('rn');
      const name = `rt-${uid()}`;
      const netDir = path.join(ctx.dir, 'net.d');
      await execa('mkdir', ['-p', netDir]);
      await writeFile(path.join(netDir, '10-test.conflist'), JSON.stringify(ptpList('0.4.0', name, subnet().cidr)));
      const env = { NETCONFPATH: netDir, CNI_PATH: PLUGIN_DIR, CNI_CACHE_DIR: ctx.cacheDir };
      const root = path.resolve(import.meta.dirname, '../..');
      const cli = (args: string[]) =>
        execa(path.join(root, 'node_modules/.bin/tsx'), [path.join(root, 'test/support/runtimes/cnirun.ts'), ...args], { env, reject: false });
      const add = await cli(['add', name, ns]);
      expect(add.exitCode, String(add.stderr)).toBe(0);
      const result = JSON.parse(String(add.stdout));
      const cid = cnitoolContainerID(`/run/netns/${ns}`);
      expect(existsSync(path.join(ctx.cacheDir, 'results', `${name}-${cid}-eth0`))).toBe(true);
      expect(Object.values(await allocations(name))).toEqual([`${cid}\r\neth0`]);
      expect((await cli(['check', name, ns])).exitCode).toBe(0);
      const dup = await cli(['add', name, ns]);
      expect(dup.exitCode).toBe(1);
      expect(String(dup.stderr)).toMatch(/duplicate allocation/);
      expect((await cli(['gc', name, '--valid', `${cid}:eth0`])).exitCode).toBe(0);
      expect(Object.keys(await allocations(name))).toEqual([firstIP(result)]);
      expect((await cli(['gc', name, '--valid', ''])).exitCode).toBe(0);
      expect(await allocations(name)).toEqual({});
    });
  });

// The drift detector: the same calls through the runner and through libcni must reach the plugins identically
// (environment and stdin of every execution, in order), return the same result and leave the same cache file.
// The recorder plugins are deterministic, and the first one returns a result with what libcni re-shapes: an
// unknown key, an empty dns, 1.1.0-only interface and route fields.
describe.skipIf(!haveRoot || skipRuntime('libcni'))('the runner and libcni agree, call for call', () => {
  useCtx('runner');

  const result = {
    interfaces: [{ name: 'eth0', mac: '02:00:00:00:00:05', mtu: 1400, sandbox: '/run/netns/x', socketPath: '' }],
    ips: [
      { interface: 0, address: '192.0.2.5/24', gateway: '192.0.2.1' },
      { interface: 0, address: 'fd00:5::5/64' },
    ],
    routes: [{ dst: '0.0.0.0/0', gw: '192.0.2.1', mtu: 1300, table: 0 }],
    dns: {},
    'x-unknown': { kept: false },
  };

  it.each(['0.3.1', '0.4.0', '1.0.0', '1.1.0'])('at %s: ADD, CHECK, DEL, GC (stale cached DELs, GC verb), STATUS', async (version) => {
    const ns = await ctx.net.netns('rn');
    const netns = `/run/netns/${ns}`;
    const list = {
      cniVersion: version,
      name: `agree-${uid()}`,
      plugins: [
        { type: 'recorder', tag: 'a', capabilities: { portMappings: true }, result },
        { type: 'recorder', tag: 'b' },
      ],
    };
    const seen: Record<string, { calls: unknown[]; add: JsonObject; cache: unknown }> = {};
    for (const k of RUNTIMES) {
      kind = k;
      const cacheDir = path.join(ctx.dir, `cache-${k}`);
      const r = newRuntime(k, { confList: list, pluginDirs: [ctx.pluginDir], cacheDir, env: { RECORDER_LOG: ctx.recorderLog } });
      await writeFile(ctx.recorderLog, '');
      const opts = {
        args: 'IgnoreUnknown=1;K8S_POD_NAME=p',
        capabilityArgs: { portMappings: [{ hostPort: 80, containerPort: 8080 }], bandwidth: { rate: 1 } },
      };
      const add = await r.add('c1', netns, 'eth0', opts);
      const cacheFile = r.cacheFilePath('c1');
      const cache = JSON.parse(await readFile(cacheFile, 'utf8'));
      if (version !== '0.3.1') await r.check('c1', netns, 'eth0', opts);
      await r.add('c2', netns, 'net1', opts);
      await r.del('c1', netns, 'eth0', opts);
      await r.gc([{ containerID: 'c9', ifname: 'eth0' }]); // c2 is stale: DELed from the cache
      await r.status();
      seen[k] = {
        calls: (await recorded()).map((c) => ({ ...c, env: { ...c.env, CNI_PATH: undefined } })),
        add,
        cache: { ...cache, config: undefined },
      };
    }
    expect(seen.runner!.calls).toEqual(seen.libcni!.calls);
    expect(seen.runner!.add).toEqual(seen.libcni!.add);
    expect(seen.runner!.cache).toEqual(seen.libcni!.cache);
    expect(seen.libcni!.add).not.toHaveProperty('x-unknown');
  });
});

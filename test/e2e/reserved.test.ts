// Reserved CIDRs through real ADDs of the BUILT plugin over Debian's host-local: a range that straddles a reserved
// CIDR is allocated until it is exhausted, in the IPAM slot (the shim invoked directly as the IPAM plugin, and
// in cilium-cni's IPAM slot through the libcni-like runner) and chained after cilium-cni (the 1.17 stand-in,
// docs/testing.md). Every address inside the reserved CIDR is refused with code 100 naming the address, the CIDR
// and the network; nothing leaks (host-local's store and the ledger are read after every refusal, before and after
// the runtime's DEL); addresses outside work. Then CHECK for an attachment whose address became reserved (it
// reaches the shim only when invoked directly or chained: cilium-cni does not forward CHECK to IPAM), STATUS at
// 1.1.0, IPv6 and dual-stack.
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { beforeEach, describe, expect, it } from 'vitest';
import { deletedRecords, hostLocalAllocations, invoke, ledgerRecords, PLUGIN_DIR, pluginOutput, SHIM, shimBinDir } from '../support/shim/cni.js';
import { shimConf, shimKeys } from '../support/shim/conf.js';
import { inNs, rootOrSkip, uid } from '../support/net/netns.js';
import { useScratchNet } from '../support/net/scratch-net.js';
import { CniRunner, PluginError, type JsonObject } from '../support/runtimes/runner.js';
import { ErrorCode } from '../../src/cni/errors.js';
import { useCiliumAgent } from '../support/doubles/cilium-agent.js';
import { ciliumCni, ciliumCniDir } from '../support/shim/cilium.js';

const root = rootOrSkip();

// Before the scratch net: hooks run as a stack, so the agent stops after the namespaces' cleanup.
const a = useCiliumAgent();
const { s, net } = useScratchNet();

/** One family's straddling range: 19 addresses, 8 of them (the middle /29 or /125) reserved. */
interface Case {
  family: string;
  subnet: string;
  rangeStart: string;
  rangeEnd: string;
  reserved: string;
  /** Addresses host-local hands out, in its order (computed here by hand, not with the code under test). */
  outside: string[];
  inside: string[];
}

function v4Case(third: number, base = '10.96'): Case {
  const a = (i: number) => `${base}.${third}.${i}`;
  return {
    family: 'IPv4',
    subnet: `${base}.${third}.0/24`,
    rangeStart: a(2),
    rangeEnd: a(20),
    reserved: `${base}.${third}.8/29`,
    outside: [2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20].map(a),
    inside: [8, 9, 10, 11, 12, 13, 14, 15].map(a),
  };
}

function v6Case(): Case {
  const a = (i: number) => `fd00:96::${i.toString(16)}`;
  return {
    family: 'IPv6',
    subnet: 'fd00:96::/120',
    rangeStart: a(2),
    rangeEnd: a(0x14),
    reserved: 'fd00:96::8/125',
    outside: [2, 3, 4, 5, 6, 7, 0x10, 0x11, 0x12, 0x13, 0x14].map(a),
    inside: [8, 9, 10, 11, 12, 13, 14, 15].map(a),
  };
}

const hostLocal = (c: Case) => ({
  type: 'host-local',
  dataDir: s.dataDir,
  ranges: [[{ subnet: c.subnet, rangeStart: c.rangeStart, rangeEnd: c.rangeEnd }]],
});

/** The shim invoked as an IPAM plugin: temp dirs only, no IPv6 probe rewrite on the machine. */
const slotConf = (cniVersion: string, name: string, reserved: string[], delegate: Record<string, unknown>) =>
  shimConf({ cniVersion, name, dirs: s, probeRewrite: false, delegate, keys: { reservedCIDRs: reserved } });
/** The same keys as a conflist's plugin entry. */
const shimEntry = (reserved: string[], delegate: Record<string, unknown>) =>
  shimKeys({ dirs: s, probeRewrite: false, delegate, keys: { reservedCIDRs: reserved } });

const bare = (address: string) => address.split('/')[0]!;
const sorted = (xs: string[]) => [...xs].sort();

/** Every address the ledger knows: from the records and from its per-IP index. */
async function ledgerAddresses(network: string): Promise<{ records: string[]; index: string[] }> {
  const dir = join(s.stateDir, network);
  const records: string[] = [];
  for (const f of await ledgerRecords(s.stateDir, network)) {
    const rec = JSON.parse(await readFile(join(dir, 'records', f), 'utf8')) as { ips: string[] };
    records.push(...rec.ips.map(bare));
  }
  const index = (await readdir(join(dir, 'ips')).catch(() => [] as string[])).filter((f) => !f.startsWith('.')).map((f) => f.replaceAll('_', ':'));
  return { records: sorted(records), index: sorted(index) };
}

/**
 * host-local's store holds exactly `hostLocalHeld` (address → container ID), the ledger's live records `recorded`,
 * its per-IP index `indexed` (default: `recorded`; chained DEL keeps a marked record's entries until GC).
 */
async function expectStores(network: string, hostLocalHeld: Map<string, string>, recorded: Map<string, string>, indexed?: Map<string, string>) {
  const files = await hostLocalAllocations(s.dataDir, network);
  expect(sorted(files)).toEqual(sorted([...hostLocalHeld.keys()]));
  for (const [ip, cid] of hostLocalHeld) {
    expect((await readFile(join(s.dataDir, network, ip), 'utf8')).split('\r\n')[0]).toBe(cid);
  }
  const l = await ledgerAddresses(network);
  expect(l.records).toEqual(sorted([...recorded.keys()]));
  expect(l.index).toEqual(sorted([...(indexed ?? recorded).keys()]));
  expect(await ledgerRecords(s.stateDir, network)).toEqual(sorted([...new Set(recorded.values())].map((cid) => `${cid}:eth0.json`)));
}

/** The refusal names the address, the reserved CIDR and the network. */
function expectRefusal(err: { code?: unknown; msg?: unknown; details?: unknown }, ip: string, cidr: string, network: string) {
  expect(err.code).toBe(ErrorCode.ReservedAddress);
  const msg = String(err.msg);
  expect(msg).toContain(ip);
  expect(msg).toContain(cidr);
  expect(msg).toContain(network);
  expect(String(err.details)).toContain(ip);
  expect(String(err.details)).toContain(cidr);
}

const refusedIp = (msg: string): string => /address (\S+) is inside reserved/.exec(msg)?.[1] ?? '';

describe.skipIf(!root)('reserved CIDRs in the IPAM slot (the shim invoked as the IPAM plugin)', () => {
  let node: string;
  /** The pods' netns: not the one the plugins run in, as with a runtime (newer reference plugins refuse that). */
  let pod: string;
  beforeEach(async () => {
    node = await net.netns('rsv');
    pod = await net.netns('rsvpod');
  });

  for (const make of [() => v4Case(0), v6Case]) {
    const c = make();
    it(`${c.family}: allocating ${c.rangeStart}-${c.rangeEnd} to exhaustion refuses exactly ${c.reserved}, leaks nothing, and hands out the rest`, async () => {
      const network = `rsv${uid(4)}`;
      const conf = slotConf('1.0.0', network, [c.reserved], hostLocal(c));
      const inv = (command: string, containerID: string) => ({ command, containerID, netns: `/run/netns/${pod}`, ifname: 'eth0', inNetns: node });
      const held = new Map<string, string>();
      const okOrder: string[] = [];
      const refusedOrder: string[] = [];
      // 19 addresses: 11 handed out, 8 refused; then host-local wraps around and offers only reserved ones.
      for (let i = 0; i < 27; i++) {
        const cid = `rsv-${i}`;
        const out = await invoke(conf, inv('ADD', cid));
        if (out.exitCode === 0) {
          const ip = bare(out.json.ips[0].address);
          expect(c.outside).toContain(ip);
          held.set(ip, cid);
          okOrder.push(ip);
          await expectStores(network, held, held);
          continue;
        }
        expect(out.stdout.trim().split('\n'), out.stderr).toHaveLength(1);
        const ip = refusedIp(out.json.msg);
        expect(c.inside, out.stdout).toContain(ip);
        expectRefusal(out.json, ip, c.reserved, network);
        refusedOrder.push(ip);
        // The shim released it (delegate DEL) and forgot it before answering …
        await expectStores(network, held, held);
        // … and the runtime's DEL after the failed ADD succeeds and touches nobody else's address.
        const del = await invoke(conf, inv('DEL', cid));
        expect(del.exitCode, del.stdout).toBe(0);
        await expectStores(network, held, held);
      }
      expect(okOrder).toEqual(c.outside);
      expect(refusedOrder).toEqual([...c.inside, ...c.inside]);
      const log = await readFile(s.logFile, 'utf8');
      // One error-level line per refusal carries the address and the CIDR as fields.
      const refusals = log
        .split('\n')
        .filter((l) => l.includes(`"reservedCIDR":"${c.reserved}"`))
        .map((l) => JSON.parse(l));
      expect(refusals.map((l) => [l.level, l.ip])).toEqual(refusedOrder.map((ip) => ['error', ip]));

      // The pods outside go away normally.
      for (const [ip, cid] of held) {
        expect((await invoke(conf, inv('DEL', cid))).exitCode).toBe(0);
        held.delete(ip);
      }
      await expectStores(network, held, held);
    });
  }

  it('dual-stack: an IPv6 address in a reserved CIDR refuses the ADD and releases its good IPv4 address too', async () => {
    const network = `rsv${uid(4)}`;
    const delegate = {
      type: 'host-local',
      dataDir: s.dataDir,
      ranges: [[{ subnet: '10.96.1.0/24', rangeStart: '10.96.1.2', rangeEnd: '10.96.1.20' }], [{ subnet: 'fd00:96:1::/120' }]],
    };
    const conf = slotConf('1.0.0', network, ['fd00:96:1::/64'], delegate);
    for (let i = 0; i < 3; i++) {
      const out = await invoke(conf, { command: 'ADD', containerID: `ds-${i}`, netns: `/run/netns/${pod}`, ifname: 'eth0', inNetns: node });
      expect(out.exitCode).not.toBe(0);
      expectRefusal(out.json, `fd00:96:1::${(i + 2).toString(16)}`, 'fd00:96:1::/64', network);
      await expectStores(network, new Map(), new Map());
    }
    // STATUS at 1.1.0: the IPv6 range set is wholly reserved, so every ADD is refused.
    const st = await invoke({ ...conf, cniVersion: '1.1.0' }, { command: 'STATUS', path: [PLUGIN_DIR], inNetns: node });
    expect(st.exitCode).not.toBe(0);
    expect(st.json).toMatchObject({ code: ErrorCode.PluginNotAvailable });
  });

  it("CHECK fails with 100 once the attachment's address is made reserved (config changed after ADD)", async () => {
    const c = v4Case(2);
    const network = `rsv${uid(4)}`;
    const conf = (reserved: string[]) => slotConf('1.0.0', network, reserved, hostLocal(c));
    const inv = (command: string) => ({ command, containerID: 'chk', netns: `/run/netns/${pod}`, ifname: 'eth0', inNetns: node });
    const added = await invoke(conf([c.reserved]), inv('ADD'));
    expect(added.exitCode, added.stdout).toBe(0);
    const ip = bare(added.json.ips[0].address);
    expect(ip).toBe(c.rangeStart);
    const ok = await invoke({ ...conf([c.reserved]), prevResult: added.json }, inv('CHECK'));
    expect(ok.exitCode, ok.stdout).toBe(0);

    const later = conf([c.reserved, `${c.subnet.split('.').slice(0, 3).join('.')}.0/30`]);
    const bad = await invoke({ ...later, prevResult: added.json }, inv('CHECK'));
    expect(bad.exitCode).not.toBe(0);
    expectRefusal(bad.json, ip, `${c.subnet.split('.').slice(0, 3).join('.')}.0/30`, network);
    // CHECK is read-only: the attachment is still held until the runtime DELs it.
    await expectStores(network, new Map([[ip, 'chk']]), new Map([[ip, 'chk']]));
    expect((await invoke({ ...later, prevResult: added.json }, inv('DEL'))).exitCode).toBe(0);
    await expectStores(network, new Map(), new Map());
  });

  it('STATUS at 1.1.0: 0 while some addresses are usable, 50 when every range is reserved (also by several CIDRs together)', async () => {
    const v4 = v4Case(3);
    const v6 = v6Case();
    const status = async (c: Case, reserved: string[]) => {
      const conf = slotConf('1.1.0', `st${uid(4)}`, reserved, hostLocal(c));
      return invoke(conf, { command: 'STATUS', path: [PLUGIN_DIR], inNetns: node });
    };
    for (const [c, partly, wholly, together] of [
      [v4, [v4.reserved], ['10.96.3.0/24'], ['10.96.3.0/28', '10.96.3.16/28']],
      [v6, [v6.reserved], ['fd00:96::/64'], ['fd00:96::/124', 'fd00:96::10/124']],
    ] as const) {
      const none = await status(c, []);
      expect(none.exitCode, none.stdout).toBe(0);
      expect(none.stdout).toBe('');
      const some = await status(c, [...partly]);
      expect(some.exitCode, some.stdout).toBe(0);
      for (const reserved of [wholly, together]) {
        const all = await status(c, [...reserved]);
        expect(all.exitCode, `${c.family} ${reserved.join(',')}`).not.toBe(0);
        expect(all.json).toMatchObject({ code: ErrorCode.PluginNotAvailable });
        expect(all.json.msg).toContain(`${c.rangeStart}-${c.rangeEnd}`);
      }
    }
  });
});

/** A third octet for the runner tests' subnets, so parallel runs of this file do not share one. */
const third = 100 + (process.pid % 100);
/** cilium-cni's place on the runtime's CNI_PATH: the 1.17 line (AKS's), first. */
const CILIUM_DIR = ciliumCniDir('1.17');

/** How many CNI calls of `command` the shim logged (one "CNI call …" line per call). */
async function shimCalls(command: string): Promise<number> {
  const text = await readFile(s.logFile, 'utf8').catch(() => '');
  return text
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as { command?: string; msg?: string })
    .filter((l) => l.command === command && String(l.msg).startsWith('CNI call ')).length;
}

async function errorOf(p: Promise<unknown>): Promise<PluginError> {
  const e = await p.then(
    () => undefined,
    (x: unknown) => x,
  );
  expect(e).toBeInstanceOf(PluginError);
  return e as PluginError;
}

async function eth0Addresses(ns: string): Promise<string[] | undefined> {
  const r = await inNs(ns, 'ip', ['-j', '-4', 'addr', 'show', 'dev', 'eth0'], { reject: false });
  if (r.exitCode !== 0) return undefined;
  return (JSON.parse(String(r.stdout)) as Array<{ addr_info: Array<{ local: string }> }>).flatMap((l) => l.addr_info.map((a) => a.local));
}

describe.skipIf(!root)('reserved CIDRs with cilium-cni (the 1.17 stand-in), through the libcni-like runner', () => {
  it("cilium-cni's IPAM slot: the 100 comes back through it, nothing is created or kept, the runtime DEL is clean; CHECK does not reach the shim, doctor names the address made reserved", async () => {
    const c = v4Case(third, '10.196');
    const network = `rsp${uid(4)}`;
    const node = await net.netns('rsnode');
    const list = (reserved: string[]): JsonObject => ({
      cniVersion: '1.0.0',
      name: network,
      plugins: [ciliumCni(shimEntry(reserved, hostLocal(c)))],
    });
    const bin = await shimBinDir(s.dir);
    const runner = (reserved = [c.reserved]) =>
      new CniRunner({
        confList: list(reserved),
        pluginDirs: [CILIUM_DIR, bin, PLUGIN_DIR],
        cacheDir: join(s.dir, 'cache'),
        netns: node,
        env: a.agent.env(),
      });
    const r = runner();
    const held = new Map<string, string>();
    const pods = new Map<string, string>(); // cid → netns path
    const refused: string[] = [];
    for (let i = 0; i < 20; i++) {
      const cid = `ptp-${i}`;
      const ns = await net.netns('rp');
      const netns = `/run/netns/${ns}`;
      try {
        const result = await r.add(cid, netns);
        const ip = bare((result.ips as Array<{ address: string }>)[0]!.address);
        expect(c.outside).toContain(ip);
        expect(await eth0Addresses(ns)).toEqual([ip]);
        held.set(ip, cid);
        pods.set(cid, netns);
        await expectStores(network, held, held);
        continue;
      } catch (e) {
        expect(e).toBeInstanceOf(PluginError);
        const err = e as PluginError;
        // cilium-cni returns its delegate's CNI error unchanged.
        expect(err.plugin).toBe('cilium-cni');
        const ip = refusedIp(err.msg);
        expect(c.inside).toContain(ip);
        expectRefusal(err, ip, c.reserved, network);
        refused.push(ip);
      }
      // Before the runtime's DEL: no interface, no allocation, no record, no cached result.
      expect(await eth0Addresses(ns)).toBeUndefined();
      await expectStores(network, held, held);
      expect(await r.cacheEntry(cid)).toBeUndefined();
      await r.del(cid, netns);
      await expectStores(network, held, held);
    }
    expect(sorted([...held.keys()])).toEqual(sorted(c.outside));
    expect(refused).toEqual([...c.inside, c.inside[0]!]);

    // The first pod's address is made reserved too. CHECK goes to cilium-cni, which checks its own endpoint and
    // interface and does not forward CHECK to its IPAM plugin (docs/testing.md): it passes, the shim never asked.
    // doctor's reserved-ledger finding is what names the address there (and the agent's pass, reservedPods).
    const [firstIp, firstCid] = [...held.entries()][0]!;
    await r.check(firstCid, pods.get(firstCid)!);
    const later = runner([c.reserved, `${firstIp}/32`]);
    await later.check(firstCid, pods.get(firstCid)!);
    expect(later.invocations.filter((i) => i.command === 'CHECK').map((i) => i.plugin)).toEqual(['cilium-cni']);
    expect(await shimCalls('CHECK')).toBe(0);
    const conflist = join(s.dir, `${network}.conflist`);
    await writeFile(conflist, JSON.stringify(list([c.reserved, `${firstIp}/32`])));
    const doctor = pluginOutput(
      await inNs(node, SHIM, ['doctor', '--conflist', conflist, '--cni-path', [CILIUM_DIR, bin, PLUGIN_DIR].join(':'), '--json'], {
        reject: false,
      }),
    );
    const finding = doctor.json.findings.find((f: any) => f.check === 'reserved-ledger');
    expect(finding, doctor.stdout).toMatchObject({ verdict: 'problem' });
    expect(finding.summary).toContain(firstIp);

    for (const [cid, netns] of pods) await r.del(cid, netns);
    await expectStores(network, new Map(), new Map());
  });

  it("chained after cilium-cni: the shim refuses with 100, and the runtime DEL releases the address through cilium-cni's delegate", async () => {
    const c = v4Case(third, '10.197');
    const network = `rsc${uid(4)}`;
    const node = await net.netns('rsnode');
    const list = (reserved: string[]): JsonObject => ({
      cniVersion: '1.0.0',
      name: network,
      plugins: [ciliumCni(hostLocal(c)), shimEntry(reserved, hostLocal(c))],
    });
    const bin = await shimBinDir(s.dir);
    const runner = (reserved = [c.reserved]) =>
      new CniRunner({
        confList: list(reserved),
        pluginDirs: [CILIUM_DIR, bin, PLUGIN_DIR],
        cacheDir: join(s.dir, 'cache'),
        netns: node,
        env: a.agent.env(),
      });
    const r = runner();
    const held = new Map<string, string>();
    const pods = new Map<string, string>();
    const refused: string[] = [];
    for (let i = 0; i < 20; i++) {
      const cid = `chn-${i}`;
      const ns = await net.netns('rc');
      const netns = `/run/netns/${ns}`;
      const out = await r.add(cid, netns).then(
        (result) => ({ result }),
        (e: unknown) => ({ e }),
      );
      if ('result' in out) {
        const ip = bare((out.result.ips as Array<{ address: string }>)[0]!.address);
        expect(c.outside).toContain(ip);
        held.set(ip, cid);
        pods.set(cid, netns);
        await expectStores(network, held, held);
        continue;
      }
      expect(out.e).toBeInstanceOf(PluginError);
      const err = out.e as PluginError;
      expect(err.plugin).toBe('ipam-shim');
      const ip = refusedIp(err.msg);
      expect(c.inside).toContain(ip);
      expectRefusal(err, ip, c.reserved, network);
      refused.push(ip);
      // Before the runtime's DEL: cilium-cni's allocation and interface are still there (it made them), but the
      // shim recorded nothing.
      expect(await eth0Addresses(ns)).toEqual([ip]);
      await expectStores(network, new Map([...held, [ip, cid]]), held);
      // The runtime's DEL (plugins in reverse: shim, then cilium-cni) releases it through cilium-cni's delegate.
      await r.del(cid, netns);
      expect(await eth0Addresses(ns)).toBeUndefined();
      await expectStores(network, held, held);
    }
    expect(sorted([...held.keys()])).toEqual(sorted(c.outside));
    expect(refused).toEqual([...c.inside, c.inside[0]!]);

    // Chained, the runtime's CHECK reaches the shim after cilium-cni's own.
    const [firstIp, firstCid] = [...held.entries()][0]!;
    await r.check(firstCid, pods.get(firstCid)!);
    const err = await errorOf(runner([c.reserved, `${firstIp}/32`]).check(firstCid, pods.get(firstCid)!));
    expect(err.plugin).toBe('ipam-shim');
    expectRefusal(err, firstIp, `${firstIp}/32`, network);

    // Chained, the shim's DEL runs before cilium-cni's and marks its record DELed instead of forgetting it (the
    // evidence GC releases through if cilium-cni's DEL fails and the runtime never retries; GC settles it once the
    // pod is gone: test/e2e/del-order.test.ts). So every address is back in host-local, and the ledger holds the
    // held pods' records only as marked, with their index entries.
    for (const [cid, netns] of pods) await r.del(cid, netns);
    await expectStores(network, new Map(), new Map(), held);
    expect(await deletedRecords(s.stateDir, network)).toEqual(sorted([...pods.keys()].map((cid) => `${cid}:eth0.json`)));
  });
});

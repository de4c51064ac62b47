// A dead pod's record must not wedge its address: the BUILT plugin, chained, with a ledger record for an address
// the runtime's IPAM hands out again (what a lowest-free allocator does after a pod vanished without a DEL, e.g.
// across a power loss). GC's rule decides (src/gc/stale.ts): a holder whose netns is gone, or exists and holds none
// of its addresses, gives the address up (its record forgotten, or kept for its other addresses) and the ADD
// succeeds, logged and counted; a holder whose netns holds the address, or cannot be looked into, keeps it (11).
// A path that now names another namespace (deleted and re-created, a /proc/<pid> of a process that exited) or none
// (a regular file, a directory) is gone too: the record keeps the namespace's identity from its ADD.
import { execa } from 'execa';
import { statSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { invoke, ledgerRecords } from '../support/shim/cni.js';
import { type Scratch, useScratchNet } from '../support/net/scratch-net.js';
import { shimConf } from '../support/shim/conf.js';
import { inNs, rootOrSkip } from '../support/net/netns.js';
import { parseMetrics, seriesKey } from '../../src/metrics.js';
import { ErrorCode } from '../../src/cni/errors.js';

const NET = 'stale';

/** The shim chained after a plugin that handed out `addresses` (its prevResult), in the host's netns. */
const chained = (s: Scratch, addresses: string[], o: { cniVersion?: string; keys?: Record<string, unknown> } = {}) =>
  shimConf({
    placement: 'chained',
    cniVersion: o.cniVersion,
    name: NET,
    dirs: s,
    probeRewrite: false,
    keys: { residue: { ebtables: false, neigh: false }, ...o.keys },
    top: { prevResult: { cniVersion: '1.0.0', ips: addresses.map((address) => ({ address })) } },
  });
/** A container's ledger record (eth0) as the shim wrote it. */
const ledgerRecord = async <R>(s: Scratch, cid: string) =>
  JSON.parse(await readFile(join(s.stateDir, NET, 'records', `${cid}:eth0.json`), 'utf8')) as R;

describe.skipIf(!rootOrSkip())("a provably dead pod's record never wedges its address", () => {
  const { s, net } = useScratchNet();

  const metricsFile = () => join(s.dir, 'shim.prom');
  const conf = (...addresses: string[]) => chained(s, addresses, { keys: { metricsFile: metricsFile() } });
  const add = (cid: string, netns: string, ...addresses: string[]) =>
    invoke(conf(...addresses), { command: 'ADD', containerID: cid, netns, ifname: 'eth0' });
  const record = (cid: string) => ledgerRecord<{ ips: string[]; note?: string }>(s, cid);
  const taken = async () =>
    parseMetrics(await readFile(metricsFile(), 'utf8')).get(seriesKey('ipam_shim_stale_records_taken_total', { network: NET }))?.value;

  it('netns gone: the next pod given the address is attached and the dead record forgotten (logged, counted)', async () => {
    const dead = await net.netns('dead');
    expect((await add('pod-dead', `/run/netns/${dead}`, '10.77.0.5/24')).exitCode).toBe(0);
    await execa('ip', ['netns', 'del', dead]); // the sandbox went without a DEL
    const fresh = await net.netns('fresh');
    const out = await add('pod-new', `/run/netns/${fresh}`, '10.77.0.5/24');
    expect(out.exitCode, out.stdout).toBe(0);
    expect(await ledgerRecords(s.stateDir, NET)).toEqual(['pod-new:eth0.json']);
    expect((await record('pod-new')).ips).toEqual(['10.77.0.5']);
    const log = (await readFile(s.logFile, 'utf8'))
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l));
    expect(log.find((l) => /provably gone/.test(l.msg))).toMatchObject({
      ip: '10.77.0.5',
      outcome: 'forgotten',
      holder: { containerID: 'pod-dead' },
    });
    expect(await taken()).toBe(1);
  });

  it('netns there but holding none of its addresses: dead too; a dual-stack holder keeps its other address for GC', async () => {
    const empty = await net.netns('empty');
    expect((await add('pod-old', `/run/netns/${empty}`, '10.77.0.6/24', 'fd00:77::6/64')).exitCode).toBe(0);
    const out = await add('pod-new', '/run/netns/whatever', '10.77.0.6/24');
    expect(out.exitCode, out.stdout).toBe(0);
    const old = await record('pod-old');
    expect(old.ips).toEqual(['fd00:77::6']);
    expect(old.note).toContain('pod-new');
    expect((await record('pod-new')).ips).toEqual(['10.77.0.6']);
  });

  it('a live holder (its netns holds the address) keeps it: 11, both records as they were; so does one that cannot be looked into', async () => {
    const live = await net.netns('live');
    await inNs(live, 'ip', ['addr', 'add', '10.77.0.7/24', 'dev', 'lo']);
    expect((await add('pod-live', `/run/netns/${live}`, '10.77.0.7/24')).exitCode).toBe(0);
    const out = await add('pod-new', '/run/netns/whatever', '10.77.0.7/24');
    expect(out.json, out.stdout).toMatchObject({ code: ErrorCode.TryAgainLater });
    expect(await ledgerRecords(s.stateDir, NET)).toEqual(['pod-live:eth0.json']);

    // A netns path whose directory this process cannot see proves nothing: kept.
    expect((await add('pod-unseen', '/run/ipam-shim-no-such-dir/ns', '10.77.0.8/24')).exitCode).toBe(0);
    expect((await add('pod-new', '/run/netns/whatever', '10.77.0.8/24')).json).toMatchObject({ code: ErrorCode.TryAgainLater });
    expect(await ledgerRecords(s.stateDir, NET)).toEqual(['pod-live:eth0.json', 'pod-unseen:eth0.json']);
    expect(await taken()).toBe(0);
  });
});

describe.skipIf(!rootOrSkip())('a netns path that now names another namespace or none is gone (the identity kept at ADD)', () => {
  const { s, net } = useScratchNet();

  const conf = (cniVersion: string, ...addresses: string[]) => chained(s, addresses, { cniVersion });
  const add = (cid: string, netns: string, address: string) =>
    invoke(conf('1.0.0', address), { command: 'ADD', containerID: cid, netns, ifname: 'eth0' });
  const record = (cid: string) => ledgerRecord<{ netnsId?: Record<string, number> }>(s, cid);
  /** The runtime's GC (1.1.0) with no attachment valid: what it releases is what the shim proves unused. */
  const gc = () => invoke({ ...conf('1.1.0'), 'cni.dev/valid-attachments': [] }, { command: 'GC' });

  /** A pod's namespace at /run/netns/<name>, holding `address` (as cilium-cni leaves it before the shim runs). */
  async function podNetns(address: string): Promise<string> {
    const name = await net.netns('pod');
    await inNs(name, 'ip', ['addr', 'add', address, 'dev', 'lo']);
    net.defer(() => rm(`/run/netns/${name}`, { recursive: true, force: true }));
    return name;
  }

  for (const what of ['a regular file', 'a directory'] as const) {
    it(`a path now ${what}: the next pod given the address is attached, and GC releases a record like it`, async () => {
      const old = await podNetns('10.77.1.5/24');
      expect((await add('pod-old', `/run/netns/${old}`, '10.77.1.5/24')).exitCode).toBe(0);
      // The namespace unmounted without a DEL: the mount-point file stays (containerd left it on an unlink failure).
      await execa('umount', [`/run/netns/${old}`]);
      if (what === 'a directory') {
        await rm(`/run/netns/${old}`);
        await mkdir(`/run/netns/${old}`);
      } else await writeFile(`/run/netns/${old}`, 'not a namespace');
      const out = await add('pod-new', '/run/netns/whatever', '10.77.1.5/24');
      expect(out.exitCode, out.stdout).toBe(0);
      expect(await ledgerRecords(s.stateDir, NET)).toEqual(['pod-new:eth0.json']);

      const other = await podNetns('10.77.1.6/24');
      expect((await add('pod-gc', `/run/netns/${other}`, '10.77.1.6/24')).exitCode).toBe(0);
      await execa('umount', [`/run/netns/${other}`]);
      const g = await gc();
      expect(g.exitCode, g.stdout + g.stderr).toBe(0);
      // pod-new's path never named a namespace: no identity, and a missing path in sight is gone by the old rule.
      expect(await ledgerRecords(s.stateDir, NET)).toEqual([]);
    });
  }

  it("/proc/<pid>/ns/net (cri-dockerd's paths): alive while the process runs, gone once it exited", async () => {
    const sleeper = execa('unshare', ['-n', 'sleep', '600'], { reject: false });
    net.defer(async () => {
      sleeper.kill('SIGKILL');
      await sleeper;
    });
    const pid = sleeper.pid!;
    const netns = `/proc/${pid}/ns/net`;
    // unshare execs sleep: wait until the pid runs in a namespace of its own.
    const host = (await execa('readlink', ['/proc/self/ns/net'])).stdout;
    for (let i = 0; i < 100 && (await execa('readlink', [netns], { reject: false })).stdout === host; i++)
      await new Promise((r) => setTimeout(r, 20));
    await execa('nsenter', [`--net=${netns}`, 'ip', 'addr', 'add', '10.77.1.7/24', 'dev', 'lo']);
    expect((await add('pod-old', netns, '10.77.1.7/24')).exitCode).toBe(0);
    // The guard holds: a live holder keeps its address.
    expect((await add('pod-new', '/run/netns/whatever', '10.77.1.7/24')).json).toMatchObject({ code: ErrorCode.TryAgainLater });

    sleeper.kill('SIGKILL');
    await sleeper;
    const out = await add('pod-new', '/run/netns/whatever', '10.77.1.7/24');
    expect(out.exitCode, out.stdout).toBe(0);
    expect(await ledgerRecords(s.stateDir, NET)).toEqual(['pod-new:eth0.json']);
  });

  it('a path deleted and re-created as another namespace (a new pod at the same path, holding the address): gone', async () => {
    const name = await podNetns('10.77.1.8/24');
    const path = `/run/netns/${name}`;
    expect((await add('pod-old', path, '10.77.1.8/24')).exitCode).toBe(0);
    // The record keeps the namespace's identity (an optional field: docs/upgrade.md) and the ADD's mount namespace.
    const st = statSync(path);
    expect((await record('pod-old')).netnsId).toMatchObject({ dev: st.dev, ino: st.ino, mntns: statSync('/proc/self/ns/mnt').ino });
    // A process keeps the old namespace alive, so the new one cannot be given its number.
    const holder = execa('ip', ['netns', 'exec', name, 'sleep', '600'], { reject: false });
    net.defer(async () => {
      holder.kill('SIGKILL');
      await holder;
    });
    await execa('ip', ['netns', 'del', name]);
    await execa('ip', ['netns', 'add', name]);
    await inNs(name, 'ip', ['addr', 'add', '10.77.1.8/24', 'dev', 'lo']);
    const out = await add('pod-new', path, '10.77.1.8/24');
    expect(out.exitCode, out.stdout).toBe(0);
    expect(await ledgerRecords(s.stateDir, NET)).toEqual(['pod-new:eth0.json']);

    // The guard holds for the new one: its namespace is the recorded one and holds the address (GC keeps it).
    const g = await gc();
    expect(g.exitCode, g.stdout + g.stderr).toBe(0);
    expect(await ledgerRecords(s.stateDir, NET)).toEqual(['pod-new:eth0.json']);
    expect((await add('pod-third', '/run/netns/whatever', '10.77.1.8/24')).json).toMatchObject({ code: ErrorCode.TryAgainLater });
  });
});
